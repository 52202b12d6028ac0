"""What a process's exit status says about how it ended (no I/O).

Conventions (sources):

* Python's ``subprocess`` and torchelastic report a process killed by signal N as ``-N``
  (``Popen.returncode``: "A negative value -N indicates that the child was terminated by signal N");
  DeepSpeed's launcher prints that ``returncode`` (``exits with return code = -9``).
* POSIX shells, Slurm's ``srun`` and container runtimes report it as ``128 + N`` (bash manual,
  "Exit Status": "the return status is 128+N"), so ``137`` is SIGKILL and ``139`` SIGSEGV.
* What each signal usually means for a training process: signal(7) for the signal, and for who sends
  it the Linux OOM killer (mm/oom_kill.c sends SIGKILL), Slurm (SIGTERM then SIGKILL at the time limit,
  ``KillWait``) and torchelastic (SIGTERM to the other workers when one fails).
"""

from __future__ import annotations

import re
import signal as _signal

__all__ = ["signal_of", "describe", "exit_code_in", "SIGNAL_MEANING"]

SIGNAL_MEANING: dict[str, str] = {
    "SIGKILL": "killed from outside: the kernel's OOM killer when host memory ran out, the scheduler, or a user",
    "SIGSEGV": "a segmentation fault in native code (a library, a C++/CUDA extension or the driver)",
    "SIGBUS": "a bus error: usually shared memory (/dev/shm) ran out, or a file under a memory map shrank",
    "SIGABRT": "aborted by native code: an uncaught C++ exception or a failed assertion (NCCL, PyTorch, a library)",
    "SIGTERM": "asked to stop: by the launcher after another process failed, or by the scheduler (time limit, "
               "preemption, scancel)",
    "SIGINT": "interrupted (Ctrl-C, or a launcher passing it on)",
    "SIGHUP": "its terminal or ssh session went away",
    "SIGFPE": "an arithmetic exception in native code (an integer division by zero)",
    "SIGILL": "an illegal instruction: a binary built for another CPU, or corrupted code",
    "SIGPIPE": "it wrote to a pipe or socket whose reader had gone",
    "SIGXCPU": "it ran past its CPU time limit",
    "SIGXFSZ": "it wrote past its file size limit",
}
"""Signal name -> how a training process usually gets it (see the module docstring)."""

_EXIT = re.compile(r"\b(?:exit|return)[ _]?(?:code|status|value)s?\b\s*(?:[:=]|is|of|was)?\s*\(?(-?\d{1,3})\b"
                   r"|\bexit(?:ed|s)? with (?:code |status )?(-?\d{1,3})\b"
                   r"|\bsignal (\d{1,2}) \(SIG[A-Z]{2,8}\)"  # torchelastic: Signal 7 (SIGBUS)
                   r"|\bexited on signal (\d{1,2})\b", re.IGNORECASE)  # Open MPI orterun: exited on signal 4 (Illegal ...)


def signal_of(code: int) -> str:
    """The name of the signal an exit status ``code`` reports (``-9`` or ``137`` -> ``"SIGKILL"``), else ""."""
    n = -code if code < 0 else code - 128 if 128 < code < 160 else 0
    if not n:
        return ""
    try:
        return _signal.Signals(n).name
    except ValueError:
        return ""


def describe(code: int) -> str:
    """``"-9 = SIGKILL: killed from outside: ..."`` for an exit status that reports a signal, else ""."""
    name = signal_of(code)
    if not name:
        return ""
    meaning = SIGNAL_MEANING.get(name)
    return f"{code} = {name}" + (f": {meaning}" if meaning else "")


def exit_code_in(text: str) -> int | None:
    """The exit status a log message reports (``exits with return code = -9``, ``exitcode: -6``,
    ``Exited with exit code 137``; torchelastic's ``Signal 7 (SIGBUS)`` as ``-7``), None when it names none."""
    m = _EXIT.search(text)
    if m is None:
        return None
    sig = m.group(3) or m.group(4)
    return -int(sig) if sig else int(m.group(1) or m.group(2))
