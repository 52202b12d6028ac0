"""Stragglers from CPU time, for ``watch --stacks --straggler-every N`` (no heartbeat). No I/O.

Heuristic (ours): in a synchronous job a straggler *computes* while the others *wait* for it in the
step's collective. With gloo (and any backend whose wait blocks in the kernel: poll, futex, recv)
a waiting rank burns no CPU, so between two stack samples the straggler accumulates more CPU time
(``user + system`` of the whole process, psutil ``cpu_times``: ``utime``/``stime`` of
``/proc/PID/stat``, proc(5)) than the others. Each interval between two samples is one "step" of
:func:`hangdbg.watch.straggler.judge`, the figure being each rank's CPU seconds in it.

Kept conservative, since CPU time is indirect evidence: a rank is slow in an interval only when it
used at least :data:`CPU_MIN_REL` (20 %) more CPU than the median of the others and at least
:data:`CPU_MIN_ABS` seconds more, and the rank itself kept at least :data:`MIN_BUSY` of a core busy
(a rank that mostly sleeps straggles nowhere); a chronic straggler needs the persistence of
:mod:`hangdbg.watch.straggler`, in :data:`CPU_CHRONIC_SHARE` of the recent intervals. Where the wait spins (NCCL with a CUDA synchronize that spin-waits
keeps every rank at one core), the ranks look alike and nothing is reported: no report beats a
false one. Ranks on other nodes (``--jobid``/``--hosts``) are not measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

from .records import StragglerReport
from .straggler import PERSIST, judge, slow_steps

__all__ = ["CpuBook", "CPU_MIN_REL", "CPU_MIN_ABS", "MIN_BUSY", "CPU_CHRONIC_SHARE"]

CPU_MIN_REL = 0.20
"""An interval is slow for a rank that used this much more CPU than the others' median (fraction)."""
CPU_MIN_ABS = 0.05
"""...and at least this many CPU seconds more."""
MIN_BUSY = 0.3
"""...while it kept at least this share of one core busy (a loaded node gives a computing rank less than a core)."""
CPU_CHRONIC_SHARE = 0.6
"""The share of the recent intervals a chronic CPU-time straggler was slow in: one sample per interval sees
the scheduler's noise (a rank sharing a core for a while), so fewer than with step timings; the
20 % floor per interval is what keeps a healthy job silent."""


@dataclass
class CpuBook:
    """Each sample's cumulative CPU seconds per rank (``add``), turned into per-interval rows."""

    samples: list[tuple[float, dict[int, float]]] = field(default_factory=list)
    keep: int = 500

    def add(self, when: float, cpu: dict[int, float]) -> None:
        """One sample: ``when`` (monotonic seconds) and each rank's CPU seconds so far."""
        self.samples.append((when, dict(cpu)))
        del self.samples[:-self.keep]

    def report(self) -> StragglerReport | None:
        """The straggler report over the intervals where the same ranks (two or more) were measured at
        both ends; None when fewer than :data:`PERSIST` + 1 such intervals exist (thin evidence)."""
        rows = []
        ranks: set[int] = set()
        for i in range(1, len(self.samples)):
            (t0, a), (t1, b) = self.samples[i - 1], self.samples[i]
            common = set(a) & set(b)
            if len(common) < 2 or t1 <= t0 or any(b[r] < a[r] for r in common):  # a pid reused: not the same process
                continue
            used = {r: b[r] - a[r] for r in common}
            basis = median(used.values())
            lags = {r: lag for r, lag in slow_steps(used, basis, CPU_MIN_REL, CPU_MIN_ABS).items()
                    if used[r] >= MIN_BUSY * (t1 - t0)}
            rows.append((i, lags, basis))
            ranks |= common
        if len(rows) < PERSIST + 1:
            return None
        return judge("cpu-time", rows, len(ranks), CPU_CHRONIC_SHARE)
