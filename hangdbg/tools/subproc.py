"""Child processes that must never hang hangdbg: started in their own session, killed as a group,
and logged.

gdb, gcore, pystack, py-spy, scontrol and the ssh/pdsh/srun transports all run this way: a child
stuck in the kernel or waiting on a stopped process is killed with its whole process group when
its time is up. Every child is started through :class:`Popen` (or :func:`run`), which logs its
argv when it starts and its exit status and duration when it ends, on the ``hangdbg.commands``
logger: ``hangdbg -v`` shows those lines on stderr.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from typing import Any, Sequence

from . import children

__all__ = ["Popen", "run", "kill_group", "communicate_or_kill", "communicate_capped", "LOG"]

LOG = logging.getLogger("hangdbg.commands")
"""Where the external commands are logged (INFO: started; INFO: ended with status and seconds)."""


def _describe(status: int | None) -> str:
    if status is None:
        return "still running"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit {status}"


class Popen(subprocess.Popen):
    """:class:`subprocess.Popen` that logs its command line when started and its exit status and
    duration (seconds) when the status becomes known, however it is reaped (``wait``,
    ``communicate``, ``poll``): ``returncode`` is watched, not the reaping call. A child started
    in a process group of its own (``start_new_session=True``) is registered with
    :mod:`hangdbg.tools.children` until it is reaped, so that every exit of hangdbg stops it;
    ``die_with_parent=True`` also makes it die when hangdbg is SIGKILLed (``PR_SET_PDEATHSIG``,
    :func:`hangdbg.tools.children.pdeathsig_preexec`). In text mode
    (``text=True``), output that is not UTF-8 (a garbled ``scontrol``, a node's banner) is decoded
    with replacement characters unless ``errors`` says otherwise: never a ``UnicodeDecodeError``."""

    _hangdbg_argv: str  # set in ``__dict__`` before ``subprocess.Popen.__init__`` runs
    _hangdbg_start: float

    def __init__(self, args: Sequence[str], *, die_with_parent: bool = False, **kwargs: Any) -> None:
        self.__dict__["_hangdbg_argv"] = shlex.join(str(a) for a in args)
        self.__dict__["_hangdbg_start"] = time.monotonic()
        if kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding"):
            kwargs.setdefault("errors", "replace")
            kwargs.setdefault("encoding", "utf-8")
        if die_with_parent:
            kwargs["preexec_fn"] = children.pdeathsig_preexec()
        super().__init__(args, **kwargs)
        LOG.info("$ %s  [pid %d]", self._hangdbg_argv, self.pid)
        if kwargs.get("start_new_session") or kwargs.get("process_group") == 0:
            children.track(self)  # a group of its own: the teardown stops it (hangdbg.tools.children)

    @property
    def returncode(self) -> int | None:
        return self.__dict__.get("_hangdbg_rc")

    @returncode.setter
    def returncode(self, value: int | None) -> None:
        before = self.__dict__.get("_hangdbg_rc")
        self.__dict__["_hangdbg_rc"] = value
        if value is not None and before is None:
            children.untrack(self)
        if value is not None and before is None and "_hangdbg_start" in self.__dict__:
            LOG.info("%s after %.2f s: %s", _describe(value), time.monotonic() - self._hangdbg_start, self._hangdbg_argv)


def run(argv: Sequence[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess:
    """:func:`subprocess.run` with captured output, through :class:`Popen` (logged), in its own
    session; on timeout the process group is killed.

    Args:
        argv: the command (an argv list, never a shell string).
        timeout: seconds.
        kwargs: ``text``, ``errors``, ``env``... as for :class:`subprocess.Popen`.

    Raises:
        OSError: the program cannot be started.
        subprocess.TimeoutExpired: it ran longer than ``timeout`` (it was killed).
    """
    with Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
               start_new_session=True, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc, wait=True)
            raise
        assert proc.returncode is not None  # communicate() returned: the child was reaped
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen, wait: bool = False) -> None:
    """SIGKILL ``proc``'s process group (it was started with ``start_new_session=True``), or the
    process alone when the group is gone or not ours; optionally reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass
    if wait:
        proc.wait()


def communicate_or_kill(proc: subprocess.Popen, timeout: float) -> tuple[bytes, bytes] | None:
    """``proc.communicate(timeout)``; on timeout kill the process group, reap it, return None.

    Args:
        proc: a child started with ``start_new_session=True`` and piped output.
        timeout: seconds.
    """
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc, wait=True)
        return None
    return out or b"", err or b""


def _drain(fd: int, cap: int, chunks: list[bytes], dropped: list[int]) -> None:
    """Read ``fd`` to its end: keep the first ``cap`` bytes in ``chunks``, count the rest."""
    kept = 0
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            room = cap - kept
            if room > 0:
                chunks.append(chunk[:room])
                kept += min(room, len(chunk))
            if len(chunk) > room:
                dropped[0] += len(chunk) - max(room, 0)
    except OSError:
        return


def wait_or_kill(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait ``timeout`` seconds for ``proc``; past it, SIGKILL its process group and wait 5 s more
    (a process stuck in the kernel is abandoned). Ctrl-C or SIGTERM during the wait kills the group
    too, then goes on. Returns whether the timeout killed it."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # stuck in the kernel: abandon it
            pass
        return True
    except BaseException:  # Ctrl-C or SIGTERM while it runs: it does not outlive the wait
        kill_group(proc)
        raise
    return False


def communicate_capped(proc: subprocess.Popen, timeout: float, cap: int) -> tuple[bytes, bytes, int, bool]:
    """Wait for ``proc`` (started with ``start_new_session=True`` and binary pipes for stdout
    and stderr) at most ``timeout`` seconds, keeping at most ``cap`` bytes of each stream: the
    rest is read and dropped, so the child never blocks on a full pipe and memory stays bounded.

    Args:
        proc: the child.
        timeout: seconds; after it the process group is killed.
        cap: bytes kept per stream.

    Returns:
        ``(stdout, stderr, dropped, timed_out)``: what was kept, how many bytes were dropped
        (both streams), and whether the child was killed for the timeout.
    """
    dropped = [0]
    kept: dict[int, list[bytes]] = {}
    readers = []
    for stream in (proc.stdout, proc.stderr):
        if stream is None:
            continue
        chunks: list[bytes] = []
        kept[stream.fileno()] = chunks
        t = threading.Thread(target=_drain, args=(stream.fileno(), cap, chunks, dropped), daemon=True,
                             name="capped-read")
        t.start()
        readers.append(t)
    timed_out = wait_or_kill(proc, timeout)
    for t in readers:
        t.join(timeout=5)
    out = b"".join(kept.get(proc.stdout.fileno(), [])) if proc.stdout is not None else b""
    err = b"".join(kept.get(proc.stderr.fileno(), [])) if proc.stderr is not None else b""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None and not any(t.is_alive() for t in readers):
            stream.close()
    return out, err, dropped[0], timed_out
