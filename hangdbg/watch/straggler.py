"""Stragglers: ranks that are slow, not hung (``hangdbg watch --straggler-every N``). No I/O.

**Where a straggler shows.** In a synchronous job every rank's step *period* is the same: each
step's collective makes the fast ranks wait for the slowest. What differs is what a rank does before
the sync point: the straggler computes longer and arrives last, the others arrive earlier and wait.
So the ranks are compared, step by step, on what :mod:`hangdbg.hooks.heartbeat` records:

* ``compute``: the seconds from the end of the previous step's collective to the arrival at this
  one's (when every rank calls :func:`~hangdbg.hooks.heartbeat.synced`): no clock is compared
  across nodes;
* ``arrival``: else, the wall-clock time of the arrival (node clocks must agree to well under a
  step; NTP/PTP keep them to milliseconds).

**When a rank is slow in a step** (heuristic, ours): its figure exceeds the median of the *other*
ranks (leave-one-out, so that two ranks can be compared) by at least :data:`MIN_REL` of the basis
(the others' median compute time, or the median step period with ``arrival``), by at least
:data:`MIN_ABS` seconds, and by more than :data:`MODIFIED_Z` robust deviations of the others
(the modified z-score of Iglewicz & Hoaglin, *How to Detect and Handle Outliers*, 1993: ``0.6745 *
(x - median) / MAD > 3.5`` marks an outlier). Scheduling jitter moves a rank by a few percent
of a step, now this rank and now another; it passes none of these or not for long.

**Chronic against transient.** A rank is a *chronic* straggler when it was slow in at least
:data:`PERSIST` steps, in :data:`CHRONIC_SHARE` of the latest :data:`RECENT` compared steps; its
run starts at the earliest step from which on it was slow in at least that share of the steps
(``since_step``). Only a chronic straggler gets a ``straggler`` finding (warning): a healthy
job's jitter gets none; a few slow steps (a transient) are listed in the report's ranks only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Iterable, Mapping, Sequence

from ..model import Finding, Kind, Severity
from .records import StragglerBasis, StragglerRank, StragglerReport

__all__ = ["StepMark", "StepBook", "parse_heartbeat", "straggler_report", "slow_steps", "MIN_REL", "MIN_ABS",
           "MODIFIED_Z", "PERSIST", "RECENT", "CHRONIC_SHARE", "HISTORY"]

MIN_REL = 0.10
"""A slow step lags the others by at least this fraction of the basis (10 %: step times of a healthy
synchronous job vary by a few percent)."""
MIN_ABS = 0.005
"""...and by at least this many seconds (timer and scheduling resolution)."""
MODIFIED_Z = 3.5
"""...and its modified z-score among the others exceeds this (Iglewicz & Hoaglin 1993)."""
PERSIST = 5
"""A chronic straggler was slow in at least this many steps."""
RECENT = 20
"""The latest compared steps a chronic straggler must still be slow in (:data:`CHRONIC_SHARE` of them)."""
CHRONIC_SHARE = 0.8
"""The share of the recent steps (and of the steps since ``since_step``) it was slow in."""
HISTORY = 2000
"""Steps kept per rank by a :class:`StepBook`."""


@dataclass(frozen=True, slots=True)
class StepMark:
    """One step of one rank: ``arrive`` (Unix seconds) at its sync point, ``compute`` seconds before it (or None)."""

    step: int
    arrive: float
    compute: float | None = None


def parse_heartbeat(text: str) -> list[StepMark]:
    """The step ring of a heartbeat file (format ``hangdbg-heartbeat 2``, :mod:`hangdbg.hooks.heartbeat`):
    its ``s STEP ARRIVE COMPUTE`` lines; a file of the first format (one line) has none. Malformed
    lines are skipped; never raises."""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) != 4 or parts[0] != "s":
            continue
        try:
            compute = None if parts[3] == "-" else float(parts[3])
            out.append(StepMark(int(parts[1]), float(parts[2]), compute))
        except ValueError:
            continue
    return out


@dataclass
class StepBook:
    """The steps of every rank seen so far (the rings of successive reads merged; the newest
    :data:`HISTORY` steps per rank kept)."""

    ranks: dict[int, dict[int, StepMark]] = field(default_factory=dict)

    def add(self, rank: int, marks: Iterable[StepMark]) -> None:
        """Merge one read of ``rank``'s ring."""
        book = self.ranks.setdefault(rank, {})
        for m in marks:
            book[m.step] = m
        if len(book) > HISTORY:
            for s in sorted(book)[:len(book) - HISTORY]:
                del book[s]

    def common_steps(self) -> list[int]:
        """The steps every rank seen has recorded, in order."""
        if not self.ranks:
            return []
        steps = set.intersection(*(set(b) for b in self.ranks.values()))
        return sorted(steps)

    @property
    def latest(self) -> int | None:
        """The highest step every rank has reached (None: none yet)."""
        steps = self.common_steps()
        return steps[-1] if steps else None


def _mad(values: Sequence[float]) -> float:
    m = median(values)
    return median(abs(v - m) for v in values)


def slow_steps(figures: Mapping[int, float], basis: float, min_rel: float = MIN_REL, min_abs: float = MIN_ABS
               ) -> dict[int, float]:
    """The ranks slow in one step (see the module docstring) and their lag (seconds), from each
    rank's figure (seconds: compute time or arrival time) and the step's basis (seconds). Needs
    two ranks or more."""
    out: dict[int, float] = {}
    if len(figures) < 2 or basis <= 0:
        return out
    for rank, x in figures.items():
        others = [v for r, v in figures.items() if r != rank]
        ref = median(others)
        lag = x - ref
        if lag < max(min_rel * basis, min_abs):
            continue
        mad = _mad(others)
        if mad > 0 and 0.6745 * lag / mad <= MODIFIED_Z:
            continue
        out[rank] = lag
    return out


def _per_step(book: StepBook, steps: list[int]) -> tuple[StragglerBasis, list[tuple[int, dict[int, float], float]]]:
    """``(basis, [(step, {rank: lag}, basis seconds)])`` over ``steps``."""
    ranks = book.ranks
    timed = [s for s in steps if all(ranks[r][s].compute is not None for r in ranks)]
    use_compute = len(timed) > PERSIST and 2 * len(timed) >= len(steps)  # the first step has no synced() before it
    steps = timed if use_compute else steps
    rows = []
    for i, s in enumerate(steps):
        if use_compute:
            figures = {r: float(ranks[r][s].compute or 0.0) for r in ranks}
            basis = median(figures.values())
        else:
            if i == 0:
                continue
            prev = steps[i - 1]
            figures = {r: ranks[r][s].arrive for r in ranks}
            basis = median((ranks[r][s].arrive - ranks[r][prev].arrive) / (s - prev) for r in ranks)
        rows.append((s, slow_steps(figures, basis), basis))
    return ("compute" if use_compute else "arrival"), rows


def straggler_report(book: StepBook, window: int = 500) -> StragglerReport | None:
    """The straggler report over the latest ``window`` steps every rank recorded (see the module
    docstring); None when fewer than two ranks or than :data:`PERSIST` steps can be compared."""
    steps = book.common_steps()[-window:]
    if len(book.ranks) < 2 or len(steps) < PERSIST + 1:
        return None
    basis, rows = _per_step(book, steps)
    return judge(basis, rows, len(book.ranks))


def judge(basis: StragglerBasis, rows: list[tuple[int, dict[int, float], float]], n_ranks: int,
          share: float = CHRONIC_SHARE) -> StragglerReport:
    """The report from the per-step verdicts ``rows`` (``(step, {slow rank: lag seconds}, basis seconds)``,
    in step order) of ``n_ranks`` ranks (also used for the CPU-time samples of ``--stacks`` mode);
    ``share``: the share of recent steps a chronic straggler was slow in (:data:`CHRONIC_SHARE`)."""
    slow = sorted({r for _s, lags, _b in rows for r in lags})
    entries = [_rank_entry(r, rows, share) for r in slow]
    entries.sort(key=lambda e: (not e.chronic, -e.lag_percent, e.rank))
    what = {"compute": "compute time before each step's sync point", "arrival": "arrival at each step's sync point",
            "cpu-time": "CPU time between stack samples"}[basis]
    unit = "sample" if basis == "cpu-time" else "step"
    findings = tuple(_finding(e, what, unit, basis == "cpu-time") for e in entries if e.chronic)
    last = rows[-1][0] if rows else 0
    if findings:
        summary = "; ".join(f.summary for f in findings)
    else:
        transient = [e for e in entries if not e.chronic]
        summary = (f"no straggler in {len(rows)} {unit}s of {n_ranks} ranks (compared on {what})"
                   + (f"; transient: {', '.join(f'rank {e.rank} slow in {e.steps_slow}' for e in transient[:4])}"
                      if transient else ""))
    return StragglerReport(basis, last, len(rows), tuple(entries), findings, summary)


def _rank_entry(rank: int, rows: list[tuple[int, dict[int, float], float]], share: float) -> StragglerRank:
    flags = [rank in lags for _s, lags, _b in rows]
    recent = flags[-RECENT:]
    chronic = sum(flags) >= PERSIST and sum(recent) >= share * len(recent)
    start = None
    if chronic:  # the earliest step from which on it was slow in CHRONIC_SHARE of the steps
        hits = 0
        for i in range(len(flags) - 1, -1, -1):
            hits += flags[i]
            if flags[i] and hits >= share * (len(flags) - i):
                start = i
    first = start if start is not None else flags.index(True)
    lags = [rows[i][1][rank] for i in range(first, len(rows)) if flags[i]]
    bases = [rows[i][2] for i in range(first, len(rows)) if flags[i]]
    lag = median(lags)
    last = max(i for i, f in enumerate(flags) if f)
    return StragglerRank(rank, chronic, round(lag, 4), round(100 * lag / median(bases), 1), rows[first][0],
                         rows[last][0], sum(flags), len(flags))


def _finding(e: StragglerRank, what: str, unit: str, cpu: bool) -> Finding:
    how = (f"{e.lag_seconds:.3g} s ({e.lag_percent:.0f} %) more CPU per interval than the median of the other ranks "
           f"(it computes while they wait)" if cpu else
           f"{e.lag_seconds:.3g} s ({e.lag_percent:.0f} %) behind the median of the other ranks in {what}")
    return Finding(
        Kind.STRAGGLER,
        f"rank {e.rank} is a straggler: {how}, since {unit} {e.since_step} (slow in {e.steps_slow} of {e.steps_seen} "
        f"{unit}s)",
        ranks=(e.rank,), severity=Severity.WARNING,
        action="look at what differs on that rank: its node (CPU/GPU clocks, thermal throttling, other processes), its "
               "data (uneven batches, slow storage), its share of the model")
