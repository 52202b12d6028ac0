"""The joint verdict of the stacks and the flight recorder (pure: no I/O).

The seam: :func:`fr_join` takes the stack :class:`~hangdbg.model.Analysis` of a job and the
flight-recorder dumps of the same job (:class:`~hangdbg.evidence.flight_recorder.grammar.FrDump`,
one per rank, however they were fetched: ``OUT/fr/`` files, the debug server's ``fr_trace_json``,
the NCCL pipe) and returns the joint findings; :func:`joined_analysis` returns the analysis with
them and its headline remade (what ``dump`` shows); ``report``/``analyze`` over a folder with both
call it from :mod:`hangdbg.evidence.read`.

Rules (ours), on top of the flight recorder's own wait-for graph and blame
(:mod:`hangdbg.evidence.flight_recorder.waits`, whose docstring cites torch's format):

1. Stacks that name no suspect (every rank in the same place, or undecided): the flight recorder
   decides. The finding says so (source ``flight-recorder``) and whether the named rank's stack
   is the same as theirs. Not blamed (undecided) is a named rank whose stack is outside
   torch.distributed where the ranks that wait for it are not (the stacks' own slow-step
   question), that the stacks show waiting for given ranks, or that moved between samples; and a
   rank behind whose records cannot be one moment of a hung job (:func:`_stale`: the dumps and
   stacks of a live job are taken one after the other), as when a rank is pending in a gloo
   collective while its stack is outside any (:func:`_busy_waiters`).
2. Stacks that name suspects: the flight recorder confirms them when it names the same ranks,
   or ranks that the stacks show waiting for them (the flight recorder sees the lag, the stacks
   its cause). Otherwise the two contradict: the stack suspects become warnings and the verdict
   is undecided (never a waiter blamed on one source's word).
3. The flight recorder names nobody (every rank at the same seq, nothing pending, or a cycle
   without a majority order): the stack verdict stands; a cycle without majority is said.
4. Stacks that changed between samples on every rank (the job moves): the flight recorder's
   snapshot of a moving job always shows some ranks a collective behind, so it names nobody, and
   its own ``fr-missing-rank`` / ``fr-stuck`` suspects become warnings (:func:`settle_fr_source`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..enums import PlaceKind
from ..model import Analysis, Evidence, Finding, Kind, Severity, SourceKind, suspects_of
from ..rankset import ranks_text
from ..stacks.headline import stacks_headline
from .flight_recorder.grammar import FrDump
from .flight_recorder.waits import FrBlame, FrWaits, fr_blame, fr_waits

__all__ = ["fr_join", "joined_analysis", "moving", "settle_fr_source"]

FR = SourceKind.FLIGHT_RECORDER
_COLLECT = ("take a second dump (stacks and flight recorder) a minute later, and native stacks "
            "(py-spy dump --native) of the ranks named")


def fr_join(stacks: Analysis | None, dumps: Sequence[FrDump]) -> tuple[Finding, ...]:
    """The joint findings of the stacks and the flight recorder of one job.

    Args:
        stacks: the stack analysis (``None``: no stack was read; the flight recorder decides alone).
        dumps: one flight-recorder dump per rank (a rank given twice keeps its first).

    Returns:
        The stacks' findings (their suspects demoted to warnings where the flight recorder
        contradicts them) followed by the flight recorder's decision: ``fr-missing-rank`` (a rank
        behind) or ``fr-mismatch`` (a rank that took the groups in another order) suspects with
        the ranks that wait for them (``waiting``), ``fr-agrees`` (info) when it confirms the
        stacks, or ``undecided`` (warning). Only the stacks' findings when the dumps name nobody.
    """
    base = tuple(stacks.findings) if stacks is not None else ()
    if stacks is not None and moving(stacks):
        return base  # rule 4: a snapshot of a moving job lags by nature
    w = fr_waits(dumps)
    blame = fr_blame(w)
    if blame.how == "tie":
        return base + (_tie(w, blame),) if not suspects_of(base) else base
    if not blame.ranks:
        return base
    named = set(blame.ranks)
    decided = _decided(w, blame, stacks)
    suspect_ranks = {r for f in suspects_of(base) for r in f.ranks}
    if suspect_ranks:
        if named <= suspect_ranks | _waiting_for(base, suspect_ranks):
            return base + (_confirms(decided[0], suspect_ranks),)
        demoted = tuple(replace(f, severity=Severity.WARNING, summary=f"contradicted by the flight recorder: {f.summary}")
                        if f.is_suspect else f for f in base)
        return demoted + (_undecided(decided[0], f"the stacks name {ranks_text(sorted(suspect_ranks))}, but "),)
    why_not = _why_not(stacks, base, w, blame)
    if why_not:
        return base + (_undecided(decided[0], "", why_not),)
    return base + decided


def joined_analysis(stacks: Analysis, dumps: Sequence[FrDump]) -> Analysis:
    """``stacks`` with :func:`fr_join`'s findings and its headline remade from them (what ``dump``
    prints and writes when it collected the flight recorder too)."""
    findings = fr_join(stacks, dumps)
    if findings == tuple(stacks.findings):
        return stacks
    text = stacks_headline(stacks.classes, findings, moving(stacks), stacks.unreadable, 0)
    return replace(stacks, findings=findings, headline=text)


def moving(stacks: Analysis) -> bool:
    """Whether every rank read moved between samples (``progressing``; the stacks' "no hang")."""
    return bool(stacks.progressing) and set(stacks.progressing) >= set(stacks.places)


def settle_fr_source(findings: Sequence[Finding], stacks: Analysis | None) -> tuple[Finding, ...]:
    """The flight-recorder reader's ``findings`` (``report``), its ``fr-missing-rank`` and ``fr-stuck``
    suspects made warnings when the stacks of the same job show every rank moving (rule 4)."""
    if stacks is None or not moving(stacks):
        return tuple(findings)
    note = " (the stacks show every rank moving: a snapshot of a running job, not a hang)"
    return tuple(replace(f, severity=Severity.WARNING, summary=f.summary + note)
                 if f.is_suspect and f.kind in (Kind.FR_MISSING_RANK, Kind.FR_STUCK) else f for f in findings)


def _waiting_for(findings: Sequence[Finding], targets: set[int]) -> set[int]:
    """The ranks that the ``waiting`` findings show waiting for ``targets``, directly or through others."""
    edges = [(set(f.ranks), set(f.waits_for)) for f in findings if f.severity is Severity.WAITING and f.waits_for]
    found: set[int] = set()
    reached = set(targets)
    changed = True
    while changed:
        changed = False
        for waiters, wanted in edges:
            if wanted & reached and not waiters <= found:
                found |= waiters
                reached |= waiters
                changed = True
    return found


def _why_not(stacks: Analysis | None, base: Sequence[Finding], w: FrWaits, blame: FrBlame) -> str:
    """Why the stacks, or the dumps' own consistency, forbid blaming the flight recorder's ranks
    (rule 1), ``""`` when nothing does."""
    stale = _stale(w, blame, stacks)
    if stale or stacks is None:
        return stale
    moved = (set(blame.ranks) | set(blame.others)) & set(stacks.progressing)
    if moved:
        return f"the stacks of {ranks_text(sorted(moved))} changed between samples (the job may be moving)"
    busy = _busy_waiters(w, blame, stacks)
    if busy:
        return busy
    waiting = {r: f.waits_for for f in base if f.severity is Severity.WAITING and f.waits_for for r in f.ranks}
    cls = {r: i for i, c in enumerate(stacks.classes) for r in c.ranks}
    theirs = {cls.get(r) for r in blame.others}
    for r in blame.ranks:
        if r in waiting:
            return f"the stacks show rank {r} waiting for {ranks_text(waiting[r])}"
        place = stacks.places.get(r)
        if (place is not None and place.kind not in (PlaceKind.COLLECTIVE, PlaceKind.UNKNOWN)
                and cls.get(r) not in theirs):
            return (f"rank {r}'s stack is {place.describe()}, not blocked in a collective like theirs (a slow "
                    "step, or a hang outside torch.distributed)")
    return ""


def _busy_waiters(w: FrWaits, blame: FrBlame, stacks: Analysis) -> str:
    """Ranks that the flight recorder shows blocked in a gloo collective while their stacks show them
    outside any collective (``PlaceKind.OUTSIDE``: computing, reading...), ``""`` when none.

    A gloo collective runs on CPU and the caller's ``work.wait()`` returns only when it completes
    (torch ``ProcessGroupGloo``; ``FlightRecorder::record`` at the call, the entry retired at
    completion), so a rank cannot be pending in one and elsewhere at the same moment: the records and
    the stacks were taken at different moments of a job that moves (a snapshot of a healthy job finds
    a rank a collective behind). NCCL is not judged so: its kernel runs on the GPU while the Python
    thread goes on, so a pending NCCL record with the stack elsewhere is one moment of a hung job."""
    busy = [r for r in sorted(set(blame.ranks) | set(blame.others))
            if r in w.blocked and w.blocked[r].entry.backend == "gloo"
            and (place := stacks.places.get(r)) is not None and place.kind is PlaceKind.OUTSIDE]
    if not busy:
        return ""
    return (f"the flight recorder shows {ranks_text(busy)} blocked in a gloo collective, whose call returns only when "
            f"it completes, but the stacks show {'it' if len(busy) == 1 else 'them'} "
            f"{stacks.places[busy[0]].describe()}: the records and the stacks are of different moments of a job "
            "that moves")


def _stale(w: FrWaits, blame: FrBlame, stacks: Analysis | None) -> str:
    """A rank behind (rule 3 of :mod:`~hangdbg.evidence.flight_recorder.waits`) whose records cannot
    be one moment of a hung job: the collective it is blocked in was completed by a member rank
    (one collective completes on all its ranks, ``build_collectives``), or it has none pending
    while its stack is inside a collective (torch records a collective when it is called,
    ``FlightRecorder::record``): the dumps (or the stacks) were taken at different moments of a
    job that moved, so the lag may be an artifact."""
    if blame.how != "behind":
        return ""
    for q in blame.ranks:
        b = w.blocked.get(q)
        if b is not None:
            past = [r for r in w.members.get(b.group, ()) if r != q and w.last_seq.get((r, b.group), 0) > b.seq]
            if past:
                return (f"rank {q}'s seq {b.seq} on pg {b.group} is pending while {ranks_text(past)} went past it: "
                        "the records are of different moments")
            continue
        place = stacks.places.get(q) if stacks is not None else None
        if place is not None and place.kind is PlaceKind.COLLECTIVE:
            return (f"rank {q}'s stack is {place.describe()} but its flight recorder has no collective pending: the "
                    "stacks and the records are of different moments")
    return ""


def _stack_note(stacks: Analysis | None, ranks: Sequence[int], others: Sequence[int]) -> str:
    """``its stack is the same as theirs (in all_reduce at x.py:3)``, or where its stack differs."""
    if stacks is None or not any(r in stacks.places for r in ranks):
        return "no stack was read for it" if len(ranks) == 1 else "no stack was read for them"
    cls = {r: i for i, c in enumerate(stacks.classes) for r in c.ranks}
    own = {cls.get(r) for r in ranks}
    theirs = {cls.get(r) for r in others}
    place = stacks.places[ranks[0]]
    if len(own) == 1 and own <= theirs and None not in own:
        pron = "its stack is" if len(ranks) == 1 else "their stacks are"
        return f"{pron} the same as {'theirs' if others else 'the others'} ({place.describe()})"
    return f"{'its stack' if len(ranks) == 1 else 'the stack of ' + ranks_text(ranks)}: {place.describe()}"


def _decided(w: FrWaits, blame: FrBlame, stacks: Analysis | None) -> tuple[Finding, ...]:
    """The flight recorder's suspects and the ranks that wait for them (rules 3 and 4 of
    :mod:`~hangdbg.evidence.flight_recorder.waits`), worded with what the stacks say."""
    named, others = list(blame.ranks), list(blame.others)
    note = _stack_note(stacks, named, others)
    ev = [Evidence(w.blocked[r].path, None, f"rank {r}: {w.blocked[r].entry.render()}")
          for r in (named[:2] + others[:1]) if r in w.blocked]
    if blame.how == "behind":
        text, kind = _behind_text(w, named, others), Kind.FR_MISSING_RANK
        action = "see why it did not call the next collective (its native stack, its GPU, its data loader)"
    else:
        text, kind = _order_text(w, blame), Kind.FR_MISMATCH
        action = ("every rank must call the collectives of the groups it shares in one order: look for a loop over "
                  "a set or dict of groups or buckets, or a rank-dependent branch, at the call site")
    lead = Finding(kind, f"{text} - {note}; the flight recorder decided", ranks=tuple(named), evidence=tuple(ev),
                   action=action, source=FR)
    if not others:
        return (lead,)
    waits = Finding(Kind.WAITING, f"{ranks_text(others)} wait for {ranks_text(named)} (flight recorder: blocked in "
                    "a collective those ranks have not called)", ranks=tuple(others), severity=Severity.WAITING,
                    waits_for=tuple(named), source=FR)
    return (lead, waits)


def _behind_text(w: FrWaits, named: list[int], others: list[int]) -> str:
    """``rank 17: FR seq 4411 on pg 3, the others at 4412``."""
    parts = []
    for q in named:
        waiter = next((r for r in others if q in w.waits_for.get(r, ())), None)
        if waiter is None:
            waiter = next(r for r, qs in w.waits_for.items() if q in qs)
        b = w.blocked[waiter]
        mine = w.last_seq.get((q, b.group), 0)
        at = sorted(r for r in w.waits_for if w.blocked[r].group == b.group and w.blocked[r].seq == b.seq and r != q)
        parts.append(f"rank {q}: FR seq {mine} on pg {b.group}, {ranks_text(at)} at {b.seq} "
                     f"(blocked in {b.entry.op}, which rank {q} has not called)")
    return "; ".join(parts)


def _order_text(w: FrWaits, blame: FrBlame) -> str:
    """``rank 3 took pg 2 before pg 1, unlike ranks {0-2}: ...``."""
    named = set(blame.ranks)
    major = next(g for g, rs in blame.cycle.items() if not named & set(rs))
    mine = [g for g, rs in blame.cycle.items() if g != major]
    rs_major = list(blame.cycle[major])
    bits = []
    for g in mine:
        rs = list(blame.cycle[g])
        b, bm = w.blocked[rs[0]], w.blocked[rs_major[0]]
        bits.append(f"{ranks_text(rs)} {'waits' if len(rs) == 1 else 'wait'} in pg {g} seq {b.seq} ({b.entry.op}), "
                    f"which {ranks_text(rs_major)} have not called (at seq {w.last_seq.get((rs_major[0], g), 0)}), "
                    f"while {'they wait' if len(rs_major) > 1 else 'it waits'} in pg {major} seq {bm.seq} "
                    f"({bm.entry.op}) for {ranks_text(rs)} (at seq {w.last_seq.get((rs[0], major), 0)})")
    who = ranks_text(sorted(named))
    return (f"{who} called the collectives of pg {' and pg '.join(mine)} and pg {major} in another order than "
            f"{ranks_text(rs_major)}: {'; '.join(bits)}")


def _confirms(lead: Finding, suspects: set[int]) -> Finding:
    """Rule 2, agreeing."""
    return Finding(Kind.FR_AGREES, f"the flight recorder confirms the stacks' suspect {ranks_text(sorted(suspects))}: "
                   f"{lead.summary}", ranks=lead.ranks, severity=Severity.INFO, evidence=lead.evidence, source=FR)


def _undecided(lead: Finding, prefix: str, why: str = "") -> Finding:
    """Rule 1 or 2 refusing to blame: what each source says, what to collect."""
    text = f"{prefix}the flight recorder names {ranks_text(lead.ranks)}: {lead.summary}"
    if why:
        text += f"; not blamed: {why}"
    return Finding(Kind.UNDECIDED, text, ranks=lead.ranks, severity=Severity.WARNING, evidence=lead.evidence,
                   action=_COLLECT, source=FR)


def _tie(w: FrWaits, blame: FrBlame) -> Finding:
    """Rule 3: ranks blocked in different groups, waiting for each other, no majority order."""
    sides = "; ".join(f"{ranks_text(rs)} in pg {g} seq {w.blocked[rs[0]].seq}" for g, rs in blame.cycle.items())
    return Finding(Kind.UNDECIDED, f"the flight recorder shows ranks blocked in different process groups, each waiting "
                   f"for the others ({sides}): they called the groups' collectives in different orders, and no order "
                   "is the majority's", ranks=blame.others, severity=Severity.WARNING,
                   action="compare the call sites of these collectives on each side (py-spy dump --locals shows the "
                   "group each rank is in)", source=FR)
