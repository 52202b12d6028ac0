"""Run ``py-spy dump`` on one process, safely: argv list, hard timeout, diagnosed failures.

py-spy reads the target's memory through ptrace / ``process_vm_readv``; it can hang on a process
in uninterruptible sleep (D state) or on a stopped process, so every call has a timeout after
which py-spy is killed and the rank is reported, never waited on forever.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..enums import DumpState
from ..errors import diagnose_pyspy_failure, gone_message, process_state
from ..redact import scrub_pyspy_output
from ..text.lines import MAX_LINE, HeadTail, capped_lines
from .subproc import Popen, kill_group, wait_or_kill

__all__ = ["PySpyOptions", "PySpyResult", "find_pyspy", "run_pyspy", "kill_running", "OUTPUT_CAP"]

OUTPUT_CAP = 8 << 20
"""Bytes of one py-spy run's stdout kept per rank (whole lines, each at most
:data:`~hangdbg.text.lines.MAX_LINE`): the output is read line by line from the pipe and the rest
is read, dropped and counted, never held. A real rank's dump is a few hundred KiB (``--locals``: a
few MiB); a runaway output once took minutes and gigabytes to parse (300 MB of one-frame threads:
4.2 GB). Its stderr keeps :data:`ERR_HEAD` + :data:`ERR_TAIL` bytes."""
ERR_HEAD = 1 << 20
"""Bytes kept of the start of py-spy's stderr (its error message)."""
ERR_TAIL = 64 << 10
"""Bytes kept of the end of py-spy's stderr."""


@dataclass(frozen=True, slots=True)
class PySpyOptions:
    """What to pass to ``py-spy dump``.

    Attributes:
        native: ``--native`` (C/C++ frames; slower, needs symbols).
        locals: ``--locals`` (arguments and local variables of each frame).
        nonblocking: ``--nonblocking`` (do not pause the target; stacks may be inconsistent).
        timeout: seconds before py-spy is killed and the rank reported as timed out.
        executable: the py-spy program (path or name on PATH); ``None`` finds it.
        redact: mask secret-named locals and command-line secrets in the text before anyone
            sees it (:func:`hangdbg.redact.scrub_pyspy_output`); ``--no-redact`` sets False.
        cmdline: keep the ``Process PID: COMMAND LINE`` header's command line (``--no-cmdline``: dropped).
    """

    native: bool = False
    locals: bool = False
    nonblocking: bool = False
    timeout: float = 20.0
    executable: str | None = None
    redact: bool = True
    cmdline: bool = True


@dataclass(frozen=True, slots=True)
class PySpyResult:
    """One py-spy run: its text (stdout, plus stderr on failure), a diagnosis if it failed, and
    the rank's state it found (``gone``: the process exited; ``unreadable``: any other failure)."""

    pid: int
    text: str
    error: str | None
    seconds: float
    dropped: int = 0
    """Bytes of output beyond :data:`OUTPUT_CAP`, dropped (the text ends with a ``#`` note)."""
    state: DumpState = DumpState.OK
    """``ok`` when ``error`` is None; set to ``unreadable`` for an ``error`` given without a state."""

    def __post_init__(self) -> None:
        if self.error is not None and self.state == DumpState.OK:
            object.__setattr__(self, "state", DumpState.UNREADABLE)


_RUNNING: set[subprocess.Popen] = set()
_LOCK = threading.Lock()


def kill_running() -> None:
    """Kill every py-spy run still going (on Ctrl-C, so that the worker threads end)."""
    with _LOCK:
        for proc in _RUNNING:
            kill_group(proc)


def find_pyspy(executable: str | None = None) -> str | None:
    """Path of py-spy: ``executable``, else on PATH, else next to this Python (venv ``bin/``)."""
    if executable:
        return shutil.which(executable) or (executable if os.path.exists(executable) else None)
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else None


def pyspy_argv(exe: str, pid: int, opts: PySpyOptions) -> list[str]:
    argv = [exe, "dump", "--pid", str(pid), "--full-filenames"]
    if opts.native:
        argv.append("--native")
    if opts.locals:
        argv.append("--locals")
    if opts.nonblocking:
        argv.append("--nonblocking")
    return argv


def _read_capped(proc: subprocess.Popen, timeout: float) -> tuple[str, str, int, bool]:
    """Read ``proc``'s stdout line by line as it comes, keeping whole lines up to :data:`OUTPUT_CAP`
    bytes (then the rest is drained in blocks and counted), and its stderr (:data:`ERR_HEAD` +
    :data:`ERR_TAIL`), each in a thread; the process group is killed after ``timeout`` seconds.

    Returns:
        ``(stdout, stderr, dropped, timed_out)``: the texts kept (UTF-8, replaced), the bytes left
        out (both streams), and whether the timeout killed it.
    """
    assert proc.stdout is not None and proc.stderr is not None  # started with PIPE for both
    err = HeadTail(ERR_HEAD, ERR_TAIL)
    out = _Lines()
    readers = [threading.Thread(target=err.drain, args=(proc.stderr,), daemon=True, name="py-spy-stderr"),
               threading.Thread(target=out.drain, args=(proc.stdout,), daemon=True, name="py-spy-stdout")]
    for t in readers:
        t.start()
    timed_out = wait_or_kill(proc, timeout)
    for t in readers:
        t.join(timeout=5)
    if not any(t.is_alive() for t in readers):  # a reader still blocked (a child kept the pipe) keeps its stream
        proc.stdout.close()
        proc.stderr.close()
    return out.text(), err.text(), out.dropped + err.dropped, timed_out


class _Lines:
    """py-spy's stdout as :func:`_read_capped` keeps it: whole lines up to :data:`OUTPUT_CAP` bytes."""

    def __init__(self) -> None:
        self.kept: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def drain(self, stream: BinaryIO) -> None:
        try:
            for line, lost in capped_lines(stream, MAX_LINE):
                self.dropped += lost
                if self.size + len(line) + 1 > OUTPUT_CAP:
                    self.dropped += len(line) + 1
                    while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]  # past the cap: counted only
                        self.dropped += len(chunk)
                    return
                self.kept.append(line)
                self.size += len(line) + 1
        except (OSError, ValueError):  # the pipe closed under it
            return

    def text(self) -> str:
        return b"".join(line + b"\n" for line in self.kept).decode("utf-8", "replace")


def run_pyspy(pid: int, opts: PySpyOptions) -> PySpyResult:
    """Dump the stacks of ``pid`` with py-spy; never raises for a per-process failure.

    Returns a result whose ``error`` names the cause and the fix (py-spy missing, permission
    denied, process gone, timeout with the process state).
    """
    start = time.monotonic()
    exe = find_pyspy(opts.executable)
    if exe is None:
        return PySpyResult(pid, "", "py-spy not found; fix: `pip install py-spy` (or pass --py-spy PATH)", 0.0)
    try:
        proc = Popen(
            pyspy_argv(exe, pid, opts),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills wrappers' children too
        )
    except OSError as exc:
        return PySpyResult(pid, "", f"cannot run {exe}: {exc}; fix: `pip install py-spy`", 0.0)
    with _LOCK:
        _RUNNING.add(proc)
    try:
        out, err, dropped, timed_out = _read_capped(proc, opts.timeout)
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
    if opts.redact or not opts.cmdline:  # the earliest point where the text enters hangdbg: nothing unmasked is kept
        out = scrub_pyspy_output(out, opts.redact, opts.cmdline)
    if dropped:
        note = (f"# truncated by hangdbg: py-spy printed more than {OUTPUT_CAP >> 20} MiB (or a line over "
                f"{MAX_LINE >> 20} MiB), {dropped} bytes dropped\n")
        out += note
    if timed_out:
        state = process_state(pid)
        if state in (None, "Z", "X"):
            msg = gone_message(pid, f"py-spy timed out after {opts.timeout:g} s and the process has exited")
            return PySpyResult(pid, (out or "") + (err or ""), msg, time.monotonic() - start, dropped, DumpState.GONE)
        hint = {
            "D": "the process is in uninterruptible sleep (D state: I/O, a hung filesystem or driver)",
            "T": "the process is stopped (T state: SIGSTOP or a debugger holds it)",
            None: "the process is gone",
        }.get(state, f"process state {state}")
        msg = (
            f"py-spy timed out after {opts.timeout:g} s on pid {pid}: {hint}; "
            "fix: retry with --nonblocking or a longer --timeout, or take a core file (gcore)"
        )
        return PySpyResult(pid, (out or "") + (err or ""), msg, time.monotonic() - start, dropped)
    seconds = time.monotonic() - start
    if proc.returncode != 0 or not out.strip():
        text = (out or "") + (err or "")
        state, msg = diagnose_pyspy_failure(text, pid, proc.returncode)
        return PySpyResult(pid, text, msg, seconds, dropped, state)
    return PySpyResult(pid, out, None, seconds, dropped)
