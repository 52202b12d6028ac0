"""What a test leaves behind: processes it started that outlive it, and files in its TMPDIR (issue 31).

:class:`Leftovers` marks the test's environment with a unique ``HANGDBG_TEST_MARK`` (children
inherit it through fork and exec, setsid() included) and points ``TMPDIR`` at an empty folder of
its own; :meth:`Leftovers.processes` lists the live processes that carry the mark (or that the
``extra`` callable names, e.g. :meth:`infra.sshd.LocalSshd.session_pids` for what runs on a
"remote" node), :meth:`Leftovers.assert_none` waits a grace for them to end and fails with their
command lines, and :meth:`Leftovers.temp_files` lists what is left in the TMPDIR.

Used through the ``leftovers`` fixture of ``tests/conftest.py``: every fault-injection test of
issue 31 lists the processes before and after and asserts that none of its own is left.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

import psutil

__all__ = ["Leftovers", "MARK"]

MARK = "HANGDBG_TEST_MARK"
"""The environment variable that marks a test's processes."""


class Leftovers:
    """A test's own processes and temporary files.

    Args:
        tmp: an empty folder made the test's ``TMPDIR``.
        extra: returns more pids that count as the test's own (remote sessions of the test's sshd).
    """

    def __init__(self, tmp: Path, extra: Callable[[], Iterable[int]] | None = None) -> None:
        self.mark = uuid.uuid4().hex
        self.tmp = tmp
        self.extra = extra
        self.before = self._all()

    def env(self) -> dict[str, str]:
        """The variables to set for the test: the mark and the TMPDIR."""
        return {MARK: self.mark, "TMPDIR": str(self.tmp)}

    @staticmethod
    def _all() -> set[tuple[int, float]]:
        out = set()
        for p in psutil.process_iter(["create_time"]):
            out.add((p.pid, p.info["create_time"] or 0.0))
        return out

    def processes(self) -> list[psutil.Process]:
        """Live (not zombie) processes started since the start that carry the mark or that ``extra`` names."""
        named = set(self.extra()) if self.extra else set()
        me = os.getpid()
        found = []
        for p in psutil.process_iter(["create_time", "status"]):
            if p.pid == me or (p.pid, p.info["create_time"] or 0.0) in self.before:
                continue
            if p.info["status"] in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                continue
            try:
                ours = p.pid in named or p.environ().get(MARK) == self.mark
            except psutil.Error:
                continue
            if ours:
                found.append(p)
        return found

    def assert_none(self, grace: float = 10.0) -> None:
        """Wait up to ``grace`` seconds for the test's processes to end; fail naming those left.

        Raises:
            AssertionError: with each left process's pid and command line.
        """
        deadline = time.monotonic() + grace
        left = self.processes()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.processes()
        if left:
            lines = []
            for p in left:
                try:
                    lines.append(f"{p.pid}: {' '.join(p.cmdline())[:200]}")
                except psutil.Error:
                    continue
            if lines:
                raise AssertionError("processes left behind:\n" + "\n".join(lines))

    def kill(self) -> None:
        """SIGKILL whatever is left (after the assertion, so a failing test does not leak into the next)."""
        for p in self.processes():
            try:
                p.kill()
            except psutil.Error:
                pass

    def temp_files(self) -> list[str]:
        """What is left in the test's TMPDIR (paths relative to it)."""
        return sorted(str(p.relative_to(self.tmp)) for p in self.tmp.rglob("*"))
