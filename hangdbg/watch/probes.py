"""What ``hangdbg watch`` reads while a job runs, and its loop (the decision is
:class:`hangdbg.watch.stall.StallDetector`).

Probes, each cheap and never raising for a missing or unreadable file:

* :class:`~hangdbg.watch.logtail.LogProbe`: the training logs' progress: their size, or with a
  pattern where their last matching line ends, and whether they can be trusted (missing, deleted,
  replaced or truncated logs are not);
* :class:`HeartbeatProbe`: the contents of ``DIR/heartbeat.*`` (:mod:`hangdbg.hooks.heartbeat`);
* :func:`job_stopped`: whether every process of the job is stopped or frozen (its time is not
  stall time);
* stack samples are taken by the caller (:func:`hangdbg.collect.local.collect` with non-blocking
  py-spy, or one fan-out per sample).

:func:`watch_loop` calls the probes every ``interval`` seconds until the job ends, hands each
observation to the detector and calls ``on_stall`` for each stall it declares.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Literal, Callable, Hashable

import psutil

from .stall import Observation, Stall, StallDetector
from .straggler import StepMark, parse_heartbeat
from ..text.lines import open_input
from .logtail import LogProbe

__all__ = ["HeartbeatProbe", "LogProbe", "WatchEnd", "job_stopped", "pids_alive", "watch_loop"]

_HEARTBEAT_CAP = 256
"""Bytes of each heartbeat file read (one short line)."""
_RING_CAP = 16 << 10
"""Bytes of each heartbeat file read for its step ring (64 lines of ~40 bytes)."""
_RANK_FILE = re.compile(r"heartbeat\.rank(\d{1,9})")


@dataclass
class HeartbeatProbe:
    """The heartbeat files of a directory (``heartbeat.rank*``/``heartbeat.pid*``)."""

    directory: str

    def picture(self) -> Hashable | None:
        """``((name, first bytes), ...)`` of the heartbeat files, or None when there is none."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.startswith("heartbeat.") and not n.endswith(".tmp"))
        except OSError:
            return None
        out = []
        for n in names:
            try:
                with open_input(os.path.join(self.directory, n)) as f:
                    out.append((n, f.read(_HEARTBEAT_CAP)))
            except OSError:
                continue
        return tuple(out) or None

    def rings(self) -> dict[int, list[StepMark]]:
        """Each rank's step ring (``heartbeat.rankR`` files; :func:`hangdbg.watch.straggler.parse_heartbeat`):
        ``{rank: marks}``, files that cannot be read or carry no ring left out."""
        out: dict[int, list[StepMark]] = {}
        try:
            names = os.listdir(self.directory)
        except OSError:
            return out
        for n in names:
            m = _RANK_FILE.fullmatch(n)
            if m is None:
                continue
            try:
                with open_input(os.path.join(self.directory, n)) as f:
                    marks = parse_heartbeat(f.read(_RING_CAP).decode("utf-8", "replace"))
            except OSError:
                continue
            if marks:
                out[int(m.group(1))] = marks
        return out


def pids_alive(pids: list[int]) -> bool:
    """True while at least one of ``pids`` runs (a zombie does not count)."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


_STOPPED = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)


def job_stopped(pids: list[int]) -> bool:
    """True when the job of ``pids`` (those processes and their descendants, zombies left out) has
    at least one process and every one of them is stopped: state ``T``/``t`` in ``/proc/PID/stat``
    (SIGSTOP, SLURM suspend) or in a frozen cgroup (v2 ``cgroup.events`` ``frozen 1``, v1
    ``freezer.state`` ``FROZEN`` or ``FREEZING``: ``docker pause``, systemd freeze; a v1-frozen
    process shows state ``D``). A job of which one process
    runs is not stopped (a rank stopped alone is a hang)."""
    procs: list[psutil.Process] = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            procs += [p, *p.children(recursive=True)]
        except psutil.Error:
            continue
    seen = 0
    for p in procs:
        try:
            status = p.status()
        except psutil.Error:
            continue
        if status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            continue
        seen += 1
        if status not in _STOPPED and not _cgroup_frozen(p.pid):
            return False
    return seen > 0


def _cgroup_frozen(pid: int) -> bool:
    """``pid``'s cgroup is frozen (v2 or the v1 freezer); False when it cannot be told."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
            lines = f.read(64 << 10).splitlines()
    except OSError:
        return False
    for line in lines:
        _id, _sep, rest = line.partition(":")
        controllers, _sep, path = rest.partition(":")
        if controllers == "" and path.startswith("/"):  # v2: unified, or mounted beside v1 (hybrid)
            if any("frozen 1" in _read_small(f"{root}{path}/cgroup.events").splitlines()
                   for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")):
                return True
        elif "freezer" in controllers.split(",") and path.startswith("/"):
            if _read_small(f"/sys/fs/cgroup/freezer{path}/freezer.state").strip() in ("FROZEN", "FREEZING"):
                return True
    return False


def _read_small(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(4096)
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class WatchEnd:
    """Why :func:`watch_loop` returned: ``job-ended``, ``once`` or ``max-stalls`` (``on_stall``
    said to stop); ``observations`` made."""

    reason: Literal["job-ended", "once", "max-stalls"]
    observations: int


def watch_loop(detector: StallDetector, observe: Callable[[float], Observation], alive: Callable[[], bool],
               on_stall: Callable[[Stall], bool | None], interval: float, once: bool = False,
               log: Callable[[str], None] = lambda _m: None,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> WatchEnd:
    """Observe every ``interval`` seconds until ``alive()`` is false (``job-ended``) or, with
    ``once``, until the first stall has been handled (``once``).

    Args:
        observe: called with the current monotonic time; returns what was seen.
        alive: whether the job still runs (checked before every observation).
        on_stall: handles a stall (dump, hook, action); the time it takes is not counted as
            quiet time of the next stall (the detector re-arms only on progress anyway); returns
            True to end the watch (``max-stalls``).
        clock: the watch clock (:meth:`hangdbg.watch.clock.WatchClock.now`: seconds that stand
            still while the watcher is stopped).
        log: one line per decision (``-v``).
    """
    n = 0
    while True:
        start = clock()
        if not alive():
            log("the job has ended")
            return WatchEnd("job-ended", n)
        obs = observe(start)
        n += 1
        stall = detector.observe(obs)
        log(_describe(obs, detector, start) + (f" -> STALL: {stall.reason}" if stall else ""))
        if stall is not None:
            stop = on_stall(stall)
            if once:
                return WatchEnd("once", n)
            if stop:
                return WatchEnd("max-stalls", n)
        sleep(max(0.0, interval - (clock() - start)))


def _describe(obs: Observation, d: StallDetector, now: float) -> str:
    parts = []
    for name, value in (("log", obs.log), ("heartbeat", obs.heartbeat), ("stacks", obs.stacks)):
        if value is None:
            continue
        quiet = d.quiet_for(name, now) or 0.0
        parts.append(f"{name} quiet {quiet:.0f}s" + (" (waiting)" if name == "stacks" and obs.waiting else ""))
    return "observed: " + (", ".join(parts) or "nothing yet") + (" (the job is stopped: no stall time)" if obs.stopped else "")
