"""Progress before blame: how long the samples watched a rank on CPU, the job's own step time, and
whether the observation window covers it.

A rank on CPU outside any collective (:attr:`~hangdbg.waits.WaitKind.COMPUTE`: computing in Python,
or inside a C/C++ call on CPU such as ``torch.mm``) that the others wait for is either the cause
of a hang or in the middle of a long step: samples a second apart cannot tell the two (a job whose
ranks compute 8 s per step, staggered, shows the same stacks as a rank that never returns). Such a
rank is therefore a suspect only once the observation window covers the job's own step time:

* **seen**: how long the rank was seen outside any collective without its step counter moving:
  the trailing run of its samples in which no thread is in a ``torch.distributed`` call or a
  rendezvous (:func:`hangdbg.stacks.places.place_of`), and whose step-like loop counters
  (:data:`STEP_VARIABLES`, samples taken with ``--locals``) equal those of the last sample; from
  the first sample of the run to the last (:attr:`~hangdbg.model.RankDump.sample_times`), plus
  :attr:`Window.observed` (a stall ``hangdbg watch`` already saw).
* **step time** (:func:`step_estimate`): the job's age at the first timed sample with ``--locals``
  (the sample's time minus the process's start, :attr:`~hangdbg.model.RankDump.started`) divided
  by the step counter that sample shows (the outermost frame's :data:`STEP_VARIABLES` local):
  ``age = start-up + step x mean step + time already hung``, so this bounds the mean step from
  above; the largest bound over the ranks is taken. Taken at the first sample, it does not grow
  while the dump watches. A counter below :data:`MIN_STEPS` gives none (start-up and time already
  hung dominate it: it would hold back every hang of the first steps, naming nobody). A
  job whose waiters move between samples, or whose counters change, is progressing, which ends
  the observation without an estimate (:func:`hangdbg.stacks.analysis.analyze`'s
  ``all_progress``). When the bound exceeds what the dump may watch (``--timeout``), the verdict
  stays ``undecided`` and says which ``--min-window`` would cover it: an upper bound is never
  taken for proof that a rank is stuck.
* **required**: ``max(min_seconds, step time x margin)`` (:class:`Window`).

Until the window is covered the rank gets an ``undecided`` warning that starts with
:data:`OBSERVING` (never a suspect), saying what was seen and how to watch longer; ``hangdbg dump``
keeps sampling while that finding stands (:mod:`hangdbg.collect.adaptive`). At least two samples are
needed in any case. Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..enums import PlaceKind
from ..model import Finding, Kind, RankDump, Severity, Thread
from ..rankset import ranks_text
from ..waits import RankWait
from .places import place_of

__all__ = ["Window", "Seen", "StepEstimate", "Timing", "STEP_VARIABLES", "OBSERVING", "DEFAULT_MIN_WINDOW",
           "STEP_MARGIN", "MIN_STEPS", "step_estimate", "seen_outside", "wants_samples"]

DEFAULT_MIN_WINDOW = 10.0
"""Seconds a rank on CPU must be watched before it is blamed (``dump --min-window``). Longer than
the 8 s steps of the reported false alarm (issue 28: every rank computing ``torch.mm`` for ~8 s per
step, staggered, blamed after a 1 s window); measured with ``bench/long_step_control.py`` (0 of 10
dumps blamed anyone at 10 s, see bench/README.md). Longer steps are covered by the step-time
estimate (up to ``--timeout``), or by a larger ``--min-window``. A real compute hang is named
after this many seconds of sampling."""

STEP_MARGIN = 1.5
"""The window covers the estimated step time times this (steps vary: the slowest rank rotates, data
loading jitters)."""

STEP_VARIABLES = ("global_step", "completed_steps", "step", "iteration", "iter", "itr", "it", "batch_idx",
                  "batch_num", "micro_step")
"""Locals that count training steps (:data:`hangdbg.stacks.suspects.LOOP_VARIABLES` without
``epoch``, which counts many steps, and ``i``/``j``/``k``/``n``/``idx``, which count inner loops
that move within one step)."""

MIN_STEPS = 5
"""The least step counter :func:`step_estimate` trusts. ``age / step`` counts start-up (imports,
rendezvous, loading a checkpoint: tens of seconds to minutes) and the time a job already hung before
the dump into every step: at step 2 a job that started 60 s ago bounds its step at 30 s whatever
it is. From step 5 on they add at most a fifth of their length to it; before, only ``--min-window``
applies. (A job that hung long before the dump still gets a loose bound: then the verdict is
``undecided`` with the ``--min-window`` that covers it, never a suspect.)"""

OBSERVING = "still observing:"
"""How the summary of the window's ``undecided`` finding starts (the adaptive collection keeps sampling while
one stands)."""

ONE_SAMPLE = "one sample cannot tell"
"""Words of the ``undecided`` finding for ranks on CPU seen once with no window (saved files)."""


@dataclass(frozen=True, slots=True)
class Window:
    """The progress-before-blame rule's settings (``hangdbg dump``'s options).

    Attributes:
        min_seconds: the least a rank on CPU is watched before it is blamed (``--min-window``);
            0 keeps only the two-sample rule.
        limit: the most the dump watches (seconds: ``max(--timeout, --min-window)``), or None; a
            window longer than that ends as ``undecided`` with the option to watch longer.
        observed: seconds the job was already seen without progress before this dump (the stall
            ``hangdbg watch`` detected), counted into every rank's window.
        margin: the estimated step time is multiplied by this.
    """

    min_seconds: float = DEFAULT_MIN_WINDOW
    limit: float | None = None
    observed: float = 0.0
    margin: float = STEP_MARGIN


@dataclass(frozen=True, slots=True)
class Seen:
    """How long one rank was seen outside any collective, its step counter unchanged.

    Attributes:
        seconds: from the first to the last sample of that run (plus :attr:`Window.observed`);
            None when the sample times are unknown.
        samples: how many samples the run holds.
    """

    seconds: float | None
    samples: int

    def text(self) -> str:
        """``for 12.4 s over 6 samples`` (``in 2 samples`` when the times are unknown)."""
        n = f"{self.samples} sample{'s' if self.samples != 1 else ''}"
        return f"for {self.seconds:.1f} s over {n}" if self.seconds is not None else f"in {n}"


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """An upper bound of the job's mean step time (:func:`step_estimate`).

    Attributes:
        seconds: the bound.
        rank: the rank whose counter gave it.
        variable: the counter's name (``step``).
        value: its value.
        age: the process's age at that sample, seconds.
    """

    seconds: float
    rank: int
    variable: str
    value: int
    age: float

    def text(self) -> str:
        return (f"the job's step time, at most {self.seconds:.1f} s (rank {self.rank}'s {self.variable}={self.value} "
                f"after {self.age:.0f} s)")


def _step_counter(thread: Thread) -> tuple[str, int] | None:
    """The outermost frame's step-like local (name, value) of ``thread`` (``--locals``), else None."""
    for f in reversed(thread.python_frames):
        for name, value in f.locals:
            if name in STEP_VARIABLES:
                try:
                    return name, int(value)
                except ValueError:
                    continue
    return None


def _counters(thread: Thread) -> tuple | None:
    """Every step-like local of ``thread`` by frame (None for a thread without ``--locals``)."""
    if not any(f.locals for f in thread.frames):
        return None
    return tuple((d, n, v) for d, f in enumerate(reversed(thread.python_frames)) for n, v in f.locals
                 if n in STEP_VARIABLES)


def _thread(sample: tuple[Thread, ...], name: str | None) -> Thread | None:
    return next((t for t in sample if t.name == name), sample[0] if sample else None)


def step_estimate(dumps: Sequence[RankDump], names: Mapping[int, str | None]) -> StepEstimate | None:
    """The largest ``age / step`` over the ranks (module docstring), from each rank's first sample that
    carries ``--locals`` and a time; None when no rank has a start time, a timed sample with locals
    and a step counter of at least :data:`MIN_STEPS`.

    Args:
        dumps: the ranks' dumps.
        names: rank -> the name of the thread that speaks for it (others: its first thread).
    """
    best: StepEstimate | None = None
    for d in dumps:
        if d.started is None or len(d.sample_times) != len(d.samples):
            continue
        for sample, at in zip(d.samples, d.sample_times):
            t = _thread(sample, names.get(d.rank))
            if t is None or not any(f.locals for f in t.frames):
                continue
            got = _step_counter(t)
            age = at - d.started
            if got is not None and got[1] >= MIN_STEPS and age > 0 and (best is None or age / got[1] > best.seconds):
                best = StepEstimate(age / got[1], d.rank, got[0], got[1], age)
            break
    return best


def seen_outside(d: RankDump, name: str | None) -> Seen:
    """How long rank ``d`` was seen outside any collective with the same step counters, through its last
    sample (module docstring); ``name``: the thread whose counters count."""
    samples = d.samples
    n = len(samples)
    first, ref = n, None
    for k in range(n - 1, -1, -1):
        sample = samples[k]
        if not sample or any(place_of(t).kind in (PlaceKind.COLLECTIVE, PlaceKind.INIT) for t in sample):
            break
        t = _thread(sample, name)
        c = _counters(t) if t is not None else None
        if c is not None:
            if ref is None:
                ref = c
            elif c != ref:
                break
        first = k
    count = n - first
    times = d.sample_times
    if count == 0 or len(times) != n:
        return Seen(None, count)
    return Seen(times[-1] - times[first], count)


class Timing:
    """The time facts of one analysis: what :func:`hangdbg.stacks.suspects.find_suspects` asks.

    Args:
        dumps: rank -> dump.
        names: rank -> the name of the thread that speaks for it.
        window: the rule's settings, or None: no window (saved files), times are only reported.
    """

    def __init__(self, dumps: Mapping[int, RankDump], names: Mapping[int, str | None], window: Window | None) -> None:
        self.dumps = dumps
        self.names = names
        self.window = window
        self._seen: dict[int, Seen] = {}
        self._estimate: tuple[StepEstimate | None] | None = None

    def seen(self, rank: int) -> Seen:
        """:func:`seen_outside` of ``rank`` (plus the window's ``observed`` seconds when known)."""
        got = self._seen.get(rank)
        if got is None:
            d = self.dumps.get(rank)
            got = seen_outside(d, self.names.get(rank)) if d is not None else Seen(None, 0)
            if self.window is not None and self.window.observed and got.seconds is not None:
                got = Seen(got.seconds + self.window.observed, got.samples)
            self._seen[rank] = got
        return got

    @property
    def estimate(self) -> StepEstimate | None:
        """:func:`step_estimate` of the dumps (computed once, when first asked)."""
        if self._estimate is None:
            self._estimate = (step_estimate(list(self.dumps.values()), self.names),)
        return self._estimate[0]

    @property
    def required(self) -> float:
        """Seconds the window must cover: ``max(min_seconds, estimate x margin)`` (0 without a window)."""
        w = self.window
        if w is None:
            return 0.0
        est = self.estimate
        return max(w.min_seconds, est.seconds * w.margin if est is not None else 0.0)

    def covered(self, rank: int) -> bool:
        """The window covers ``rank``: no window, or two samples or more seen for ``required`` seconds."""
        if self.window is None:
            return True
        s = self.seen(rank)
        if s.samples < 2 and not self.window.observed:
            return False
        return s.seconds is not None and s.seconds >= self.required

    def span(self, rank: int) -> float | None:
        """Seconds from ``rank``'s first sample to its last (plus the window's ``observed``), None when
        its samples carry no times: how long a state seen in every sample was watched."""
        d = self.dumps.get(rank)
        times = d.sample_times if d is not None else ()
        if d is None or len(times) != len(d.samples) or not times:
            return None
        return times[-1] - times[0] + (self.window.observed if self.window is not None else 0.0)

    def seen_text(self, rank: int) -> str:
        """``, seen there for 12.4 s over 6 samples`` when the times are known, else ''."""
        s = self.seen(rank)
        return f", seen there {s.text()}" if s.seconds is not None and s.samples > 1 else ""

    def observing(self, ranks: Sequence[int], waits: Mapping[int, RankWait], others: str) -> Finding:
        """The ``undecided`` warning for root ranks on CPU the window does not cover yet.

        Args:
            ranks: those ranks.
            waits: what every rank waits on.
            others: who waits for them (``ranks 0-2 wait in all_reduce at x.py:4``).
        """
        w = self.window or Window()
        need = self.required
        parts = []
        for r in ranks[:3]:
            parts.append(f"rank {r} {waits[r].describe()} {self.seen(r).text()}")
        more = f" (+{len(ranks) - 3} more)" if len(ranks) > 3 else ""
        est = self.estimate
        floor = f"--min-window {w.min_seconds:g}"
        why = (f"{est.text()} x {w.margin:g}" if est is not None and est.seconds * w.margin > w.min_seconds
               else f"{floor}; {est.text()}" if est is not None else floor)
        verb = "is" if len(ranks) == 1 else "are"
        summary = (f"{OBSERVING} {ranks_text(ranks)} {verb} on CPU in no collective while {others}: "
                   f"{'; '.join(parts)}{more}; the window is {need:.1f} s ({why}): a long step or a hang?")
        action = (f"watch longer: hangdbg dump --min-window {max(1, math.ceil(need))} (it keeps sampling until a rank moves or "
                  "the window has passed; not with --no-adapt); a rank still in the same place then is the lead")
        return Finding(Kind.UNDECIDED, summary, tuple(ranks), severity=Severity.WARNING, action=action)


def wants_samples(findings: Sequence[Finding]) -> bool:
    """A finding asks for more samples: the window's :data:`OBSERVING` warning, or ranks on CPU seen once."""
    return any(f.kind is Kind.UNDECIDED and (f.summary.startswith(OBSERVING) or ONE_SAMPLE in f.summary)
               for f in findings)

