"""Act only on what was identified: the processes ``watch --then kill`` may signal.

A pid names a process only while it lives: after the job ends, the kernel hands the number to the
next process (proc(5): ``/proc/PID/stat`` field 22 ``starttime`` tells two holders of one pid
apart). So a process is identified by ``(pid, start time)`` (psutil ``create_time``, Unix seconds),
taken when the run identified it (the launcher at the watch's start, the ranks by the stall's dump),
and re-checked right before each signal: a process whose start time differs is another process,
never signalled.

Never a target: pid 1 (init, or the container's or pid namespace's first process: signalling its
tree stops everything), hangdbg itself and its ancestors (the shell, the sbatch script, the
terminal).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Iterable

import psutil

__all__ = ["Identity", "identify", "refused_target", "kill_identified", "children_of", "launchers_of", "START_TOLERANCE"]

START_TOLERANCE = 0.5
"""Seconds two start times of one pid may differ and still be one process (``create_time`` is
boot time + ``starttime`` clock ticks: the same process reads the same value to within a tick)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """One process as the run identified it: ``pid`` and ``started`` (Unix seconds), and ``what``
    (``launcher``, ``rank 3``) for the messages."""

    pid: int
    started: float
    what: str = "process"


def identify(pid: int, what: str = "process") -> Identity | None:
    """``pid``'s :class:`Identity` now; None when it is gone or cannot be read."""
    try:
        return Identity(pid, psutil.Process(pid).create_time(), what)
    except (psutil.Error, OSError):
        return None


def refused_target(pid: int) -> str | None:
    """Why ``pid`` may never be signalled by ``--then kill`` (pid 1, hangdbg itself or one of its
    ancestors), or None."""
    if pid == 1:
        return "pid 1 is init (or the first process of this container or pid namespace): killing its tree stops everything"
    if pid == os.getpid():
        return f"pid {pid} is hangdbg itself"
    try:
        ancestors = {p.pid for p in psutil.Process().parents()}
    except (psutil.Error, OSError):
        ancestors = {os.getppid()}
    if pid in ancestors:
        return f"pid {pid} is an ancestor of hangdbg (its shell, script or terminal)"
    return None


def _same(ident: Identity) -> psutil.Process | None:
    try:
        p = psutil.Process(ident.pid)
        return p if abs(p.create_time() - ident.started) <= START_TOLERANCE else None
    except (psutil.Error, OSError):
        return None


def kill_identified(idents: Iterable[Identity], grace: float = 10.0) -> str:
    """SIGTERM each identified process that is still the same process (its start time re-checked
    right before the signal), SIGKILL those left after ``grace`` seconds (re-checked again); one line
    saying what was done and what was skipped (gone, or the pid now held by another process)."""
    idents = list({i.pid: i for i in idents if refused_target(i.pid) is None}.values())
    live, skipped = [], []
    for ident in idents:
        p = _same(ident)
        if p is None:
            skipped.append(ident)
            continue
        try:
            p.send_signal(signal.SIGTERM)
            live.append((ident, p))
        except psutil.Error:
            skipped.append(ident)
    _gone, alive = psutil.wait_procs([p for _i, p in live], timeout=grace)
    killed = 0
    for p in alive:
        ident = next(i for i, q in live if q is p)
        if _same(ident) is not None:
            try:
                p.kill()
                killed += 1
            except psutil.Error:
                pass
    said = f"kill: SIGTERM to {len(live)} identified process(es) ({', '.join(i.what for i, _p in live) or 'none'})"
    if killed:
        said += f", SIGKILL to {killed} after {grace:g} s"
    if skipped:
        said += f"; skipped {len(skipped)} gone or no longer the same process (pid reused): " + \
            ", ".join(f"{i.what} pid {i.pid}" for i in skipped)
    return said


def children_of(idents: Iterable[Identity]) -> list[Identity]:
    """The live descendants of each identified process that is still the same process, as
    :class:`Identity` (``what``: ``child of rank 0``), identified now.

    A rank's children (its data-loader workers, the debug-server frontend that torch's
    ``torch.distributed.debug.start_debug_server`` forks) are the job's: a rank killed alone leaves
    them running, reparented to init. ``--then kill`` signals them with the ranks."""
    out = []
    for ident in idents:
        p = _same(ident)
        if p is None:
            continue
        try:
            kids = p.children(recursive=True)
        except (psutil.Error, OSError):
            continue
        for k in kids:
            child = identify(k.pid, f"child of {ident.what}")
            if child is not None and refused_target(child.pid) is None:
                out.append(child)
    return out


def launchers_of(launchers: Iterable[Identity], ranks: Iterable[Identity]) -> list[Identity]:
    """The ``launchers`` (still the same processes) whose tree holds one of the identified ``ranks``
    (or that are ranks themselves): a pid given to ``watch --pid`` that turned out to hold no rank
    is no launcher of the job, and is not signalled."""
    rank_pids = {r.pid for r in ranks}
    out = []
    for ident in launchers:
        p = _same(ident)
        if p is None:
            continue
        try:
            tree = {p.pid} | {c.pid for c in p.children(recursive=True)}
        except (psutil.Error, OSError):
            continue
        if tree & rank_pids:
            out.append(ident)
    return out
