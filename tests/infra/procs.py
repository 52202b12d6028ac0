"""Process-tree helpers shared by the test daemons (psutil)."""

from __future__ import annotations

import psutil

__all__ = ["descendants", "alive", "ppid_map"]


def descendants(pid: int) -> list[int]:
    """PIDs of all live descendants of ``pid`` (children that setsid() included)."""
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (killed but not yet reaped counts as dead)."""
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def ppid_map() -> dict[int, int]:
    """``{pid: parent pid}`` of every process."""
    return {p.pid: p.info["ppid"] for p in psutil.process_iter(["ppid"]) if p.info["ppid"] is not None}
