"""``hangdbg run``'s default stall threshold: from the job's own step time (pure: no I/O).

The production recipe this follows (``watch``'s module :mod:`hangdbg.watch.stall`): a job is
stalled when it has made no progress for much longer than its steps take. Before the job's
heartbeats show a step time, the threshold is ``watch``'s default, :data:`BEFORE` (300 s: start-up,
data loading and compilation come before the first steps). Once the heartbeat rings
(:mod:`hangdbg.hooks.heartbeat`, ``s STEP ARRIVE COMPUTE`` lines) show two steps of one rank, it is
``max(FLOOR, FACTOR x the longest step interval seen so far)``: the interval between two
consecutive ring entries of one rank (their ``ARRIVE`` times, one clock: no cross-node comparison),
the longest over every rank and every observation of this run (it never shrinks, so a checkpoint
or evaluation pause the job once took raises it for good).

Limits: a pause longer than the threshold that the job has not taken before (the first checkpoint
of a job with 1 s steps takes 2 minutes) is declared a stall; its dump then shows a rank
working, not waiting, and ``--stall S`` (fixed) or ``--grace S`` avoids it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from .straggler import StepMark

__all__ = ["AutoStall", "BEFORE", "FLOOR", "FACTOR"]

BEFORE = 300.0
"""Seconds: the threshold before any step time is known (``watch --stall``'s default)."""
FLOOR = 30.0
"""Seconds: the threshold never goes below this (a job of millisecond steps, a scheduler hiccup)."""
FACTOR = 10.0
"""The threshold is this many times the longest step interval seen."""


@dataclass
class AutoStall:
    """The running threshold; feed it each observation's rings with :meth:`update`.

    Attributes:
        longest: the longest step interval seen (seconds), None before two steps of one rank.
    """

    floor: float = FLOOR
    factor: float = FACTOR
    before: float = BEFORE
    longest: float | None = None

    def update(self, rings: Mapping[int, Sequence[StepMark]]) -> float:
        """Take the step rings ``{rank: marks}`` of one observation; the threshold now (seconds)."""
        for marks in rings.values():
            times = [m.arrive for m in marks]
            for a, b in zip(times, times[1:]):
                gap = b - a
                if gap >= 0 and (self.longest is None or gap > self.longest):
                    self.longest = gap
        return self.threshold

    @property
    def threshold(self) -> float:
        """Seconds without progress that make a stall now."""
        if self.longest is None:
            return self.before
        return max(self.floor, self.factor * self.longest)
