"""Child processes that must never hang hangdbg: started in their own session, killed as a group.

gdb, gcore, pystack, py-spy and the ssh/srun transports all run this way: a child stuck in the
kernel or waiting on a stopped process is killed with its whole process group when its time is up.
"""

from __future__ import annotations

import os
import signal
import subprocess

__all__ = ["kill_group", "communicate_or_kill"]


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
