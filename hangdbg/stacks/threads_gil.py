"""Every thread counts: a rank whose other thread holds the GIL (or spins) while its main thread waits.

The rule (``gil-holder``), after CPython's GIL (``Python/ceval_gil.h``, 3.2-3.13): a thread that
released the GIL around a C call (a collective's ``work.wait()``: pybind11's
``gil_scoped_release`` in torch's c10d bindings) must take it back before it returns to Python.
A thread that keeps the GIL (C code that never releases it: ``re`` backtracking, a C extension; a
runaway loop that gets it back at every switch interval) keeps the main thread inside the call,
on the same line as the ranks that wait for it: the main threads alone cannot tell it from a
rank that waits with the others. Only the other threads can. py-spy prints each thread's state
in its header (``Thread 1984 (active+gil): "log filter"``; ``idle``, ``active``,
``active+gil``: py-spy ``src/dump.rs``, :class:`hangdbg.enums.ThreadStatus`).

A rank is named when, on the evidence of at least :data:`MIN_SAMPLES` samples:

* its chosen thread (:func:`hangdbg.stacks.places.primary_thread`) waits in a collective or p2p
  op, its stack did not change between samples, and other ranks wait too;
* another of its threads, with Python frames, is ``active+gil`` in every sample (``active`` in
  every sample when py-spy saw no thread of the rank hold the GIL: its GIL use is unknown);
* the thread of the same name (thread names compared with their numbers dropped:
  ``threading._newname`` numbers ``Thread-N (target)`` process-wide) is busy on fewer than half
  of the ranks: a thread busy on most ranks is the job's own background work (a data loader's
  pin-memory thread, a tokenizer pool), never a suspect.

With one sample the rank is ``undecided`` (a logging thread may hold the GIL for a moment): the
finding says so, and :func:`resample_ranks` tells ``dump``'s adaptive step to sample it again.
Progress before blame holds here too (:func:`within_window`, :mod:`hangdbg.stacks.window`): a thread
that pickles a checkpoint or builds a large batch holds the GIL for seconds in a healthy job, so a
live dump names the rank only once its samples span the observation window; until then the rank is
``undecided: still observing`` and ``dump`` keeps sampling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from ..enums import ThreadStatus
from ..frames import Frame, is_library_file
from ..model import Finding, Kind, RankDump, Severity, Thread
from ..rankset import ranks_text
from ..waits import RankWait, WaitKind
from .places import read_source
from .window import OBSERVING, Timing

__all__ = ["BusyThread", "busy_thread", "thread_key", "gil_findings", "merge_held", "gil_waiters", "resample_ranks", "within_window", "MIN_SAMPLES", "RESAMPLE_ACTION"]

MIN_SAMPLES = 2
"""Samples in which a thread must be busy in every one before its rank is named."""

RESAMPLE_ACTION = ("sample again (hangdbg dump --samples 3; a plain dump does it itself): a thread that keeps the GIL "
                   "is busy in every sample, one that had it for a moment is not")
"""The action of the ``undecided`` finding of a thread seen busy in one sample (:func:`resample_ranks` reads it)."""

_DIGITS = re.compile(r"\d+")
_WAITING = (WaitKind.COLLECTIVE, WaitKind.P2P)


@dataclass(frozen=True, slots=True)
class BusyThread:
    """A thread of a rank, other than the one that speaks for it, busy in every sample.

    Attributes:
        rank: the rank.
        name: the thread's name (``None`` when py-spy printed none).
        key: the name with its numbers dropped (:func:`thread_key`).
        samples: the samples it was seen busy in (all of the rank's samples).
        gil: ``active+gil`` in every one of them (else ``active``, GIL unknown).
        frame: its innermost Python frame in the last sample.
        caller: the innermost frame of the program's own code (not the standard library's nor
            an installed package's), when it is not ``frame``.
    """

    rank: int
    name: str | None
    key: str
    samples: int
    gil: bool
    frame: Frame
    caller: Frame | None = None

    def where(self) -> str:
        """``filter_logs (demo/x.py:64)`` with the source line when readable, and the program's own caller."""
        code = read_source(self.frame)
        text = f"{self.frame}" + (f" `{code}`" if code else "")
        return text + (f", called from {self.caller}" if self.caller is not None else "")


def thread_key(thread: Thread) -> str:
    """The name threads are compared by across ranks: py-spy's name with every number dropped
    (``Thread-3 (worker)`` -> ``Thread-# (worker)``; CPython ``threading._newname``), or the
    outermost function of the thread's own code when it has no name."""
    if thread.name:
        return _DIGITS.sub("#", thread.name)
    own = [f for f in thread.python_frames if not is_library_file(f.file)]
    return f"<{own[-1].function}>" if own else "<unnamed>"


def _busy(t: Thread, sample: Sequence[Thread]) -> bool | None:
    """``True`` when ``t`` holds the GIL in ``sample``, ``False`` when it is active without it while another
    thread holds it or when it is idle, ``None`` when it is active and py-spy saw no GIL holder (unknown)."""
    if not t.python_frames or t.status in (ThreadStatus.IDLE, ThreadStatus.UNKNOWN):
        return False
    if t.status == ThreadStatus.ACTIVE_GIL:
        return True
    return None if not any(o.status == ThreadStatus.ACTIVE_GIL for o in sample) else False


def busy_thread(d: RankDump, speaker: Thread) -> BusyThread | None:
    """The thread of ``d`` other than ``speaker`` (the one that speaks for the rank) that is busy in
    every sample (threads matched by id across samples), preferring one that holds the GIL."""
    samples = d.samples or ((d.threads,) if d.threads else ())
    if not samples:
        return None
    found: list[BusyThread] = []
    for t in samples[-1]:
        if t.thread_id == speaker.thread_id or t.name == speaker.name and t.name is not None:
            continue
        states = []
        for sample in samples:
            same = next((o for o in sample if o.thread_id == t.thread_id), None)
            states.append(_busy(same, sample) if same is not None else False)
        if not all(s is not False for s in states):
            continue
        frame = t.python_frames[0]
        caller = next((f for f in t.python_frames if not is_library_file(f.file)), None)
        found.append(BusyThread(d.rank, t.name, thread_key(t), len(samples), all(states), frame,
                                caller if caller is not None and caller is not frame else None))
    return max(found, key=lambda b: b.gil) if found else None


def _busy_keys(d: RankDump, speaker: Thread) -> set[str]:
    """The keys of the threads of ``d`` (other than ``speaker``) busy in some sample."""
    return {thread_key(t) for sample in (d.samples or (d.threads,)) for t in sample
            if t.thread_id != speaker.thread_id and _busy(t, sample) is not False}


def gil_findings(dumps: Sequence[RankDump], speakers: Mapping[int, Thread], waits: Mapping[int, RankWait],
                 progressing: Iterable[int]) -> list[Finding]:
    """The ``gil-holder`` suspects (or ``undecided`` warnings, seen in one sample) and the ranks that wait
    for them (module docstring). The caller applies it when no other rule named a rank and no rank
    waits on something outside the job (no root of the wait-for graph, no missing rank).

    Args:
        dumps: the readable ranks' dumps (every sample).
        speakers: rank -> the thread that speaks for it.
        waits: rank -> what its speaking thread waits on.
        progressing: ranks whose speaking thread moved between samples.
    """
    moved = set(progressing)
    live = [d for d in dumps if d.rank in speakers]
    if len(live) < 2:
        return []
    waiting = {r for r, w in waits.items() if w.waiting}
    busy_on: dict[str, set[int]] = {}
    for d in live:
        for key in _busy_keys(d, speakers[d.rank]):
            busy_on.setdefault(key, set()).add(d.rank)
    held: list[BusyThread] = []
    for d in live:
        w = waits.get(d.rank)
        if w is None or w.kind not in _WAITING or d.rank in moved or len(waiting) <= (d.rank in waiting):  # nobody else waits
            continue
        b = busy_thread(d, speakers[d.rank])
        if b is not None and 2 * len(busy_on[b.key]) < len(live):
            held.append(b)
    if not held:
        return []
    culprits = tuple(sorted(b.rank for b in held if b.samples >= MIN_SAMPLES))
    return [_finding(b, waits, live, busy_on[b.key], culprits) for b in held]


def merge_held(held: list[Finding], findings: list[Finding]) -> list[Finding]:
    """``findings`` of the other rules with :func:`gil_findings`' ``held``: the ``gil-holder`` suspects
    first when the other rules named no rank or only these (a rank whose main thread cannot return
    from a collective is also *behind* the others, or in the previous collective: said after its
    reason); the other rules' suspects alone when they name other ranks. An ``undecided`` warning of
    ``held`` is kept only when no rule named a rank, or (still observing: :func:`within_window`) when
    the other rules named only its ranks."""
    named = {r for f in findings if f.is_suspect for r in f.ranks}
    culprits = {r for f in held if f.kind is Kind.GIL_HOLDER for r in f.ranks}
    observing = {r for f in held if f.kind is Kind.UNDECIDED and f.summary.startswith(OBSERVING) for r in f.ranks}
    if named and named <= observing:  # the window first: the other rule's reason follows once it is covered
        return held + [f for f in findings if not f.is_suspect]
    if not culprits:
        return findings if named else held + findings
    if not named <= culprits:
        return findings
    out = []
    for f in held:
        also = [o.summary for o in findings if o.is_suspect and set(o.ranks) & set(f.ranks)]
        out.append(replace(f, summary=f"{f.summary}; also {'; '.join(also)}") if also and f.is_suspect else f)
    return out + [f for f in findings if not f.is_suspect]


def gil_waiters(waits: Mapping[int, RankWait], findings: Sequence[Finding]) -> list[Finding]:
    """``waiting`` findings for the ranks that wait (in a collective, a p2p op, a store, a rendezvous)
    while ``gil-holder`` suspects were named, and that no ``waiting`` finding of ``findings`` covers yet."""
    culprits = tuple(sorted({r for f in findings if f.kind is Kind.GIL_HOLDER for r in f.ranks}))
    if not culprits:
        return []
    covered = {r for f in findings if f.kind is Kind.WAITING for r in f.ranks} | set(culprits)
    return _waiters(waits, {r for r, w in waits.items() if w.waiting and r not in covered}, culprits)


def _finding(b: BusyThread, waits: Mapping[int, RankWait], live: Sequence[RankDump], busy_on: set[int],
             culprits: tuple[int, ...]) -> Finding:
    """The suspect (or, seen once, the undecided warning) of one busy thread."""
    name = f'"{b.name}"' if b.name else "an unnamed thread"
    does = "holds the GIL" if b.gil else "is on CPU (active; py-spy saw no thread hold the GIL)"
    main = waits[b.rank].describe()
    others = [d for d in live if d.rank != b.rank]
    has = {d.rank for d in others if any(thread_key(t) == b.key for t in d.threads)}
    idle = sorted(has - busy_on)
    busy = sorted(busy_on - {b.rank})
    absent = sorted(d.rank for d in others if d.rank not in has)
    compare = "; ".join(p for p in (f"the same thread is idle on {ranks_text(idle)}" if idle else "",
                                   f"busy on {ranks_text(busy)} too" if busy else "",
                                   f"{ranks_text(absent)} {'has' if len(absent) == 1 else 'have'} no such thread"
                                   if absent else "") if p)
    if b.samples < MIN_SAMPLES:
        return Finding(Kind.UNDECIDED, f"{ranks_text((b.rank,))}: thread {name} {does} in {b.where()} in the one sample "
                       f"taken, while its main thread sits {main} like the others ({compare}): one sample cannot tell a "
                       "thread that keeps the GIL from one that had it for a moment", (b.rank,),
                       severity=Severity.WARNING, action=RESAMPLE_ACTION)
    why = ("its main thread released the GIL in that call and cannot take it back to return"
           if b.gil else "it may keep the main thread from running")
    waiters = sorted(r for r, w in waits.items() if w.waiting and r not in culprits)
    verb = "waits" if len(waiters) == 1 else "wait"
    tail = f"; {ranks_text(waiters)} {verb} for it {waits[waiters[0]].describe()}" if waiters else ""
    return Finding(Kind.GIL_HOLDER, f"thread {name} {does} in {b.where()} in all {b.samples} samples while its main "
                   f"thread sits {main}: {why} ({compare}){tail}", (b.rank,), severity=Severity.SUSPECT,
                   action=f"see what thread {name} runs: py-spy dump --native --pid PID (the C call that keeps the GIL)")


def _waiters(waits: Mapping[int, RankWait], ranks: set[int], culprits: tuple[int, ...]) -> list[Finding]:
    """One ``waiting`` finding per place of the ranks that wait for the culprits."""
    by: dict[str, list[int]] = {}
    for r in sorted(ranks):
        by.setdefault(waits[r].describe(), []).append(r)
    out = []
    for where, rs in by.items():
        whom = "it" if len(culprits) == 1 else ranks_text(culprits)
        out.append(Finding(Kind.WAITING, f"{ranks_text(rs)} {'waits' if len(rs) == 1 else 'wait'} for {whom} {where}",
                           tuple(rs), severity=Severity.WAITING, waits_for=culprits))
    return out


def resample_ranks(findings: Iterable[Finding]) -> set[int]:
    """The ranks of the ``undecided`` findings of threads seen busy in one sample: ``dump`` samples them again."""
    return {r for f in findings if f.kind is Kind.UNDECIDED and f.action == RESAMPLE_ACTION for r in f.ranks}


def within_window(held: list[Finding], timing: Timing | None) -> list[Finding]:
    """``held`` (:func:`gil_findings`) with each ``gil-holder`` suspect whose samples span less than the
    observation window (:attr:`hangdbg.stacks.window.Timing.required` seconds) made an ``undecided``
    warning that starts with :data:`~hangdbg.stacks.window.OBSERVING` (``dump`` samples on while one
    stands). Unchanged without a window (saved files, ``--min-window 0``: the two samples decide)."""
    if timing is None or timing.window is None or not timing.window.min_seconds and timing.estimate is None:
        return held
    need = timing.required
    out = []
    for f in held:
        span = timing.span(f.ranks[0]) if f.kind is Kind.GIL_HOLDER else None
        if f.kind is not Kind.GIL_HOLDER or span is not None and span >= need:
            out.append(f)
            continue
        watched = f"{span:.1f} s" if span is not None else "an unknown time"
        out.append(Finding(Kind.UNDECIDED, f"{OBSERVING} {ranks_text(f.ranks)}: {f.summary}; watched for {watched} of "
                           f"the {need:.1f} s window: a thread that holds the GIL for a while (a checkpoint pickled, a "
                           "batch built) or for ever?", f.ranks, severity=Severity.WARNING,
                           action=f"watch longer: hangdbg dump --min-window {max(1, int(need + 0.999))}"))
    return out
