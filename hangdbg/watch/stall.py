"""When a running job has stalled: the decision of ``hangdbg watch``, from observations only (no I/O).

The recipes this follows (production "is-job-hanging" watchdogs): training logs every few minutes,
so a log that stops growing means a hang, whatever the hang is (a read with no timeout fires no
NCCL or gloo timeout). Three progress signals are used, any of which can declare a stall:

* **log**: the progress of the training logs (their size, or where their last line matching
  ``--log-pattern`` ends: :mod:`hangdbg.watch.logtail`); a stall when it has not moved for
  ``stall`` seconds;
* **heartbeat**: the content of the per-rank heartbeat files (:mod:`hangdbg.hooks.heartbeat`); a
  stall when none of them changed for ``stall`` seconds. Changes are timed by the watcher's own
  clock, so clock skew between nodes does not matter;
* **stacks**: a signature of every rank's stacks (non-blocking py-spy samples); a stall when the
  signature has not changed for ``stall`` seconds *and* the last sample shows at least one rank
  waiting in torch.distributed (a collective, a point-to-point op, init) or every rank idle. A rank
  computing in the same function keeps its signature (same frames) but is neither idle nor in a
  collective, so a long forward pass is no stall.

No decision before ``grace`` seconds from the start (data loading, compilation). After a stall is
declared the detector is *fired*: it declares nothing more until progress resumes (a signal moves
again), then re-arms. With ``min_gap``, no stall is declared less than ``min_gap`` seconds after
the previous one (the rate limit of the stall dumps; the quiet time keeps counting meanwhile).

**Time is the job's own** (issue 31). ``Observation.time`` comes from a clock that does not advance
while the watcher itself is stopped (:class:`hangdbg.watch.clock.WatchClock`: SIGSTOP, cgroup
freezer, SLURM suspend or ``docker pause`` of the job and the watcher together); and the time
between two observations of which one saw the job stopped (``Observation.stopped``: every process
of the job stopped or frozen, or its SLURM job suspended) is not counted as quiet time. While the
job is seen stopped no stall is declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from ..model import RankDump
from ..enums import PlaceKind
from ..stacks.places import place_of, primary_thread

__all__ = ["Observation", "Stall", "StallDetector", "stacks_signature", "waiting_or_idle"]

SIGNALS = ("log", "heartbeat", "stacks")


@dataclass(frozen=True, slots=True)
class Observation:
    """What the watcher saw at one moment.

    Attributes:
        time: seconds, monotonic clock of the watcher.
        log: the progress of the logs (:meth:`hangdbg.watch.logtail.LogProbe.progress`), or None
            (not watched, or no log can be trusted now).
        heartbeat: a hashable picture of the heartbeat files (their contents), or None.
        stacks: :func:`stacks_signature` of a sample, or None (no sample this time).
        waiting: with ``stacks``: :func:`waiting_or_idle` of the same sample.
        stopped: the job was seen stopped (not running, not dead): this moment and the time since
            the previous observation are no quiet time.
    """

    time: float
    log: Hashable | None = None
    heartbeat: Hashable | None = None
    stacks: Hashable | None = None
    waiting: bool = False
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class Stall:
    """A stall: which signal declared it, and for how many seconds it had not moved."""

    signal: str
    seconds: float
    reason: str


@dataclass
class _Track:
    value: Hashable | None = None
    since: float | None = None  # when the value was first seen (monotonic seconds)


@dataclass
class StallDetector:
    """Feed :class:`Observation` s in time order to :meth:`observe`; it returns a :class:`Stall`
    once per stall (see the module docstring).

    Args:
        stall: seconds without progress that make a stall (> 0).
        grace: seconds after ``start`` during which no stall is declared.
        start: the watch clock's time when the watch started.
        min_gap: seconds that must pass between two stalls (0: none).
    """

    stall: float
    grace: float = 0.0
    start: float = 0.0
    fired: bool = False
    min_gap: float = 0.0
    _tracks: dict[str, _Track] = field(default_factory=lambda: {s: _Track() for s in SIGNALS})
    _paused: float = 0.0  # seconds not counted: the job was seen stopped
    _last: tuple[float, bool] | None = None  # the previous observation's time and ``stopped``
    _last_stall: float | None = None  # job time of the previous stall

    @property
    def paused(self) -> float:
        """Seconds not counted so far because the job was seen stopped."""
        return self._paused

    def observe(self, obs: Observation) -> Stall | None:
        """Record ``obs``; the stall it completes, or None."""
        if self._last is not None and (obs.stopped or self._last[1]):
            self._paused += max(0.0, obs.time - self._last[0])  # the job's time stood still
        self._last = (obs.time, obs.stopped)
        now = obs.time - self._paused
        moved = False
        for name in SIGNALS:
            value = getattr(obs, name)
            if value is None:
                continue
            t = self._tracks[name]
            if t.since is None or value != t.value:
                moved = moved or t.since is not None
                t.value, t.since = value, now
        if moved and self.fired:
            self.fired = False  # progress resumed: re-armed
        if self.fired or obs.stopped or now - self.start < self.grace:
            return None
        if self._last_stall is not None and now - self._last_stall < self.min_gap:
            return None  # rate limit: the quiet time goes on counting
        stall = self._stalled(obs)
        if stall is not None:
            self.fired = True
            self._last_stall = now
        return stall

    def forget(self, name: str) -> None:
        """Start signal ``name`` afresh (its sampling starts again after a pause: its old value
        and time say nothing about now)."""
        self._tracks[name] = _Track()

    def quiet_for(self, name: str, now: float) -> float | None:
        """Seconds signal ``name`` has not moved at ``now`` (the watch clock's time, as
        ``Observation.time``; None: never observed)."""
        t = self._tracks[name]
        return None if t.since is None else now - self._paused - t.since

    def _stalled(self, obs: Observation) -> Stall | None:
        for name in ("log", "heartbeat"):
            quiet = self.quiet_for(name, obs.time)
            if getattr(obs, name) is not None and quiet is not None and quiet >= self.stall:
                what = "the training log has not grown" if name == "log" else "no heartbeat file has changed"
                return Stall(name, quiet, f"{what} for {quiet:.0f} s")
        quiet = self.quiet_for("stacks", obs.time)
        if obs.stacks is not None and obs.waiting and quiet is not None and quiet >= self.stall:
            return Stall("stacks", quiet, f"the ranks' stacks have not changed for {quiet:.0f} s "
                                          "while ranks wait in torch.distributed or all are idle")
        return None


def stacks_signature(dumps: list[RankDump]) -> Hashable:
    """What must change when a job makes progress: per rank, the frames (function, file, line) of
    every thread. Ranks whose dump failed contribute their error (a rank that keeps failing the
    same way does not move)."""
    out: list[tuple[int, object]] = []
    for d in sorted(dumps, key=lambda d: d.rank):
        if d.threads:
            out.append((d.rank, tuple(sorted((th.thread_id, th.stack_key) for th in d.threads))))
        else:
            out.append((d.rank, d.error or ""))
    return tuple(out)


def waiting_or_idle(dumps: list[RankDump]) -> bool:
    """True when at least one rank's main thread waits in torch.distributed (a collective, a
    point-to-point op, init or a store: :func:`hangdbg.stacks.places.place_of`), or when every
    dumped rank's main thread is idle. False when nothing was dumped."""
    read = [d for d in dumps if d.threads]
    if not read:
        return False
    idle = True
    for d in read:
        places = [place_of(th) for th in d.threads]
        i = primary_thread(d.threads, places)
        if places[i].kind in (PlaceKind.COLLECTIVE, PlaceKind.INIT):
            return True
        idle = idle and d.threads[i].idle
    return idle
