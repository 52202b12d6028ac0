"""Errors of hangdbg, each carrying the remedy a user needs (as pystack's errors do).

A collector failure on one rank is not raised: it is turned into a message and a
:class:`~hangdbg.enums.DumpState` by :func:`diagnose_pyspy_failure` and stored in
``RankDump.error`` and ``RankDump.state`` so that the other ranks are kept.
The exceptions below are for failures that stop a whole command.
"""

from __future__ import annotations

from pathlib import Path

from .enums import DumpState

__all__ = [
    "HangdbgError",
    "UsageError",
    "NoRanksFound",
    "RanksUnreadable",
    "diagnose_pyspy_failure",
    "gone_message",
    "ptrace_remedy",
    "process_state",
]


class HangdbgError(Exception):
    """Base class: a failure of the tool itself (the CLI exits 1) with ``help`` text."""

    help: str = ""

    def __init__(self, message: str, help: str | None = None) -> None:
        super().__init__(message)
        if help is not None:
            self.help = help


class UsageError(HangdbgError):
    """The command line or the request cannot be carried out as asked (the CLI exits 2)."""


class NoRanksFound(HangdbgError):
    """No training process was found to dump."""

    help = (
        "hangdbg looks for Python processes whose environment has RANK, SLURM_PROCID, "
        "OMPI_COMM_WORLD_RANK, PMI_RANK or PMIX_RANK. Pass the launcher or the ranks "
        "explicitly with --pid PID (torchrun, deepspeed, accelerate, mp.spawn parents)."
    )


class RanksUnreadable(NoRanksFound):
    """No rank was found, but Python processes of other users could not be read (EACCES on
    ``/proc/PID/environ``): their rank variables are unknown, so they may be the job's ranks."""

    def __init__(self, message: str) -> None:
        super().__init__(message, help=(
            "permission denied; use sudo: run hangdbg as the job's user or with sudo (reading another "
            "user's /proc/PID/environ and attaching py-spy need root or CAP_SYS_PTRACE); if that is "
            "not allowed: " + ptrace_remedy()))


def _ptrace_scope() -> str | None:
    try:
        return Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return None


def ptrace_remedy() -> str:
    """How to allow py-spy/gdb to attach, given this machine's ``kernel.yama.ptrace_scope``."""
    scope = _ptrace_scope()
    parts = []
    if scope is None:
        parts.append("as root, check that CAP_SYS_PTRACE is not dropped (setpriv/capsh, seccomp)")
    elif scope != "0":
        parts.append(
            f"kernel.yama.ptrace_scope is {scope}: run `sudo sysctl kernel.yama.ptrace_scope=0`"
            + (" (3 forbids ptrace until reboot)" if scope == "3" else "")
        )
    parts.append("run hangdbg as the job's user or with sudo")
    parts.append("in a container, grant CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE)")
    return "; or ".join(parts)


def diagnose_pyspy_failure(output: str, pid: int | None, returncode: int | None) -> tuple[DumpState, str]:
    """Turn a failed ``py-spy dump`` into the rank's state and one message that names the fix.

    Args:
        output: py-spy's combined stdout and stderr (text).
        pid: the target process id, used to check whether it still exists.
        returncode: py-spy's exit status.

    Returns:
        ``(state, message)``: ``gone`` with :func:`gone_message` when the process no longer runs
        (or py-spy says ``No such process``), else ``unreadable`` with a message such as
        ``"permission denied: ... ; fix: ..."``. Heuristics follow py-spy 0.3/0.4 error texts
        (``Permission Denied``, ``Failed to get process executable name``, ``Failed to find
        python version``).
    """
    text = output.strip()
    low = text.lower()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), f"exit status {returncode}")
    if process_gone(pid) or "no such process" in low:
        return DumpState.GONE, gone_message(pid, first)
    if "permission denied" in low or "operation not permitted" in low or "os error 1)" in low:
        return DumpState.UNREADABLE, f"permission denied attaching to pid {pid}: {first}; fix: {ptrace_remedy()}"
    if "failed to suspend process" in low or process_state(pid) == "T":
        return DumpState.UNREADABLE, (
            f"pid {pid} is stopped (SIGSTOP or a debugger holds it) and py-spy cannot pause it: {first}; "
            f"fix: retry with --nonblocking, or resume it with `kill -CONT {pid}`"
        )
    if "failed to find python version" in low or "failed to find python interpreter" in low:
        return DumpState.UNREADABLE, (
            f"pid {pid} does not look like a Python process py-spy understands: {first}; "
            "fix: point --pid at the Python rank, or upgrade py-spy (`pip install -U py-spy`)"
        )
    return DumpState.UNREADABLE, f"py-spy failed on pid {pid} (exit status {returncode}): {first}"


def gone_message(pid: int | None, detail: str) -> str:
    """The one message of a rank whose process exited (or is a zombie) while hangdbg looked:
    ``process PID is gone (it exited while hangdbg was looking): DETAIL`` (its state is
    :attr:`~hangdbg.enums.DumpState.GONE`)."""
    return f"process {pid} is gone (it exited while hangdbg was looking): {detail}"


def process_gone(pid: int | None) -> bool:
    """True when ``pid`` no longer runs: no ``/proc/PID``, or a zombie (state ``Z``/``X``: it
    exited and its parent, e.g. a stopped launcher, has not reaped it yet)."""
    if pid is None:
        return False
    return not Path(f"/proc/{pid}").exists() or process_state(pid) in ("Z", "X")


def process_state(pid: int | None) -> str | None:
    """The state letter of ``/proc/PID/stat`` (``R``, ``S``, ``D``, ``T``, ``Z``), or None."""
    if pid is None:
        return None
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return None
