"""What ``hangdbg watch`` reads while a job runs, and its loop (the decision is
:class:`hangdbg.watch.stall.StallDetector`).

Probes, each cheap and never raising for a missing or unreadable file:

* :class:`LogProbe`: the training logs' progress: their total size, or with a pattern the number
  of lines matching it (only the bytes appended since the last read are read, through the bounded
  line reader; a file that shrank was rotated or truncated and is read again from its start);
* :class:`HeartbeatProbe`: the contents of ``DIR/heartbeat.*`` (:mod:`hangdbg.hooks.heartbeat`);
* stack samples are taken by the caller (:func:`hangdbg.collect.local.collect` with non-blocking
  py-spy, or one fan-out per sample).

:func:`watch_loop` calls the probes every ``interval`` seconds until the job ends, hands each
observation to the detector and calls ``on_stall`` for each stall it declares.
"""

from __future__ import annotations

import glob
import io
import os
import re
import time
from dataclasses import dataclass, field
from typing import Literal, Callable, Hashable

import psutil

from .stall import Observation, Stall, StallDetector
from .straggler import StepMark, parse_heartbeat
from ..text.lines import iter_lines_from, open_input

__all__ = ["HeartbeatProbe", "LogProbe", "WatchEnd", "pids_alive", "watch_loop"]

LOG_READ_CAP = 64 << 20
"""Bytes of a log read at one observation: a log that grew more (or a large log seen for the first
time) is read from its last 64 MiB; progress only has to move, not to count every line."""

_HEARTBEAT_CAP = 256
"""Bytes of each heartbeat file read (one short line)."""
_RING_CAP = 16 << 10
"""Bytes of each heartbeat file read for its step ring (64 lines of ~40 bytes)."""
_RANK_FILE = re.compile(r"heartbeat\.rank(\d{1,9})")


@dataclass
class _Tail:
    offset: int = 0
    count: int = 0
    size: int = 0


@dataclass
class LogProbe:
    """Progress of the training logs.

    Args:
        patterns: log files or glob patterns (a file that does not exist yet counts as empty:
            it may appear later).
        match: with a regular expression, progress is the number of complete lines that match it
            (``re.search``); without, the total size in bytes.
    """

    patterns: list[str]
    match: re.Pattern[str] | None = None
    _tails: dict[str, _Tail] = field(default_factory=dict)

    def files(self) -> list[str]:
        out: list[str] = []
        for p in self.patterns:
            hits = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
            out += [h for h in hits if os.path.isfile(h)]
        return list(dict.fromkeys(out))

    def progress(self) -> int | None:
        """The progress count, or None when no log file exists (yet)."""
        files = self.files()
        if not files:
            return None
        return sum(self._read(f) for f in files)

    def _read(self, path: str) -> int:
        t = self._tails.setdefault(path, _Tail())
        try:
            size = os.stat(path).st_size
        except OSError:
            return t.count if self.match is not None else t.size
        if self.match is None:
            t.size = size
            return size
        if size < t.offset:  # rotated or truncated: read it again
            t.offset, t.count = 0, 0
        if size == t.offset:
            return t.count
        start = max(t.offset, size - LOG_READ_CAP)  # a huge first read or burst: only its newest lines
        try:
            with open_input(path) as f:
                f.seek(start)
                data = f.read(size - start)
        except OSError:
            return t.count
        if start > t.offset:
            first = data.find(b"\n") + 1  # the skipped part ends inside a line
            data, t.offset = data[first:], start + first
        end = data.rfind(b"\n")  # only complete lines: a half-written line is read next time
        if end < 0:
            return t.count
        for _n, line in iter_lines_from(io.BytesIO(data[:end + 1])):
            if self.match.search(line):
                t.count += 1
        t.offset += end + 1
        return t.count


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


@dataclass(frozen=True, slots=True)
class WatchEnd:
    """Why :func:`watch_loop` returned: ``job-ended`` or ``once``; ``observations`` made."""

    reason: Literal["job-ended", "once"]
    observations: int


def watch_loop(detector: StallDetector, observe: Callable[[float], Observation], alive: Callable[[], bool],
               on_stall: Callable[[Stall], None], interval: float, once: bool = False,
               log: Callable[[str], None] = lambda _m: None,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> WatchEnd:
    """Observe every ``interval`` seconds until ``alive()`` is false (``job-ended``) or, with
    ``once``, until the first stall has been handled (``once``).

    Args:
        observe: called with the current monotonic time; returns what was seen.
        alive: whether the job still runs (checked before every observation).
        on_stall: handles a stall (dump, hook, action); the time it takes is not counted as
            quiet time of the next stall (the detector re-arms only on progress anyway).
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
            on_stall(stall)
            if once:
                return WatchEnd("once", n)
        sleep(max(0.0, interval - (clock() - start)))


def _describe(obs: Observation, d: StallDetector, now: float) -> str:
    parts = []
    for name, value in (("log", obs.log), ("heartbeat", obs.heartbeat), ("stacks", obs.stacks)):
        if value is None:
            continue
        quiet = d.quiet_for(name, now) or 0.0
        shown = f"={value}" if name == "log" else ""
        parts.append(f"{name}{shown} quiet {quiet:.0f}s" + (" (waiting)" if name == "stacks" and obs.waiting else ""))
    return "observed: " + (", ".join(parts) or "nothing yet")
