"""Who waits for whom in the flight recorder, and whom that names (pure: no I/O).

Semantics (torch 2.13; ``torch/csrc/distributed/c10d/FlightRecorder.hpp`` / ``FlightRecorder.cpp``,
and ``torch/distributed/flight_recorder/components/builder.py``, what ``torchfrtrace`` runs):

- Every process group numbers its collectives ``collective_seq_id`` 1, 2, ... on each member rank,
  and a collective is the entries of one group with one seq on *all* its member ranks
  (``build_collectives``: "within a group, the first collective must be the same on all ranks in
  the group"; ``found_ranks == expected_ranks`` or the ranks missing are reported).
- ``record_id`` is one counter per rank over all its groups (``FlightRecorder::record``,
  ``id_++``): the order in which the rank issued its ops.
- ``pg_status[pg_id]``: ``last_enqueued_collective`` (the last seq the rank called) and
  ``last_completed_collective``; an entry is done when completed (:func:`~.analysis.effective_state`:
  gloo records no start/end events, its done entries are ``retired``).

Rules (ours, from those semantics):

1. A rank is *blocked* in its earliest recorded collective (by ``record_id``) that is not done.
2. A rank blocked in seq ``s`` of group ``P`` waits for the member ranks of ``P`` whose last called
   seq in ``P`` is below ``s``: they have not called that collective yet.
3. A rank that others wait for and that waits for nobody is behind: the flight recorder names it
   (the ranks it stopped before are only waiting).
4. When every rank waited for waits itself, the waits form cycles: ranks blocked in different
   groups, each waiting for the other group's ranks. Every rank must call the collectives of the
   groups it shares in one order (``torch.distributed`` docs: collectives must be called in the
   same order on all ranks), so within a cycle the ranks blocked in the group fewer ranks are
   blocked in took the groups in another order than the rest: they are named; with no majority
   (a tie) the flight recorder cannot say which order was meant (undecided).
5. Ranks all blocked at the same seq, waiting for nobody: the flight recorder names no rank.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Sequence

from ...model import Finding, Kind, Severity
from ...rankset import ranks_text
from .analysis import _groups, _world, effective_state
from .grammar import FrDump, FrEntry, pg_label

__all__ = ["Blocked", "FrWaits", "FrBlame", "fr_waits", "fr_blame", "settle_lagging"]


@dataclass(frozen=True, slots=True)
class Blocked:
    """The collective one rank is blocked in (rule 1).

    Attributes:
        rank: global rank.
        group: the process group's label (``1``, ``0:default_pg``).
        seq: its ``collective_seq_id`` in that group.
        entry: the recorded entry.
        path: the dump file it came from.
    """

    rank: int
    group: str
    seq: int
    entry: FrEntry
    path: str


@dataclass(frozen=True, slots=True)
class FrWaits:
    """The flight recorder's wait-for graph.

    Attributes:
        blocked: rank -> the collective it is blocked in (ranks with every collective done absent).
        waits_for: rank -> the ranks it waits for (rule 2); only blocked ranks are keys.
        last_seq: (rank, group label) -> the last collective seq the rank called in that group.
        members: group label -> its member ranks.
        ranks: the ranks with a dump.
    """

    blocked: dict[int, Blocked] = field(default_factory=dict)
    waits_for: dict[int, tuple[int, ...]] = field(default_factory=dict)
    last_seq: dict[tuple[int, str], int] = field(default_factory=dict)
    members: dict[str, tuple[int, ...]] = field(default_factory=dict)
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FrBlame:
    """Whom the flight recorder names.

    Attributes:
        how: ``behind`` (rule 3), ``order`` (rule 4), ``tie`` (rule 4 without a majority: nobody
            named), or ``""`` (rule 5, or nobody waits: nobody named).
        ranks: the ranks named (empty unless ``how`` is ``behind`` or ``order``).
        others: the ranks that wait for them (directly or through others).
        cycle: for ``order``/``tie``: the ranks of the cycle, by the group they are blocked in.
    """

    how: str = ""
    ranks: tuple[int, ...] = ()
    others: tuple[int, ...] = ()
    cycle: dict[str, tuple[int, ...]] = field(default_factory=dict)


def _last_called(dump: FrDump, entries: list[FrEntry]) -> int:
    """The last collective seq the rank called in a group: its last entry's seq, or the group's
    ``pg_status`` ``last_enqueued_collective`` when higher (a wrapped ring, a dump of active entries)."""
    seq = entries[-1].collective_seq_id or 0 if entries else 0
    for pid in {e.pg_id for e in entries if e.pg_id is not None}:
        st = dump.pg_status.get(pid)
        if st and st[0] is not None and st[0] > seq:
            seq = st[0]
    return seq


def fr_waits(dumps: Sequence[FrDump]) -> FrWaits:
    """Build the wait-for graph of rules 1 and 2 from one dump per rank (a rank given twice keeps
    its first dump). Entries without a seq, and p2p ops, are left out (they are matched by peer,
    :func:`~.analysis.analyze`)."""
    by_rank: dict[int, FrDump] = {}
    for d in dumps:
        by_rank.setdefault(d.rank, d)
    groups = _groups(list(by_rank.values()), _world(list(by_rank.values()), set()))
    last_seq: dict[tuple[int, str], int] = {}
    members: dict[str, tuple[int, ...]] = {}
    blocked: dict[int, Blocked] = {}
    for g in groups.values():
        label = pg_label(g.name, g.desc)
        members[label] = tuple(sorted(g.members))
        for r, ents in g.entries.items():
            last_seq[(r, label)] = _last_called(by_rank[r], ents)
            for e in ents:
                if effective_state(e, by_rank[r]) == "completed" or e.collective_seq_id is None:
                    continue
                cur = blocked.get(r)
                if cur is None or _order(e) < _order(cur.entry):
                    blocked[r] = Blocked(r, label, e.collective_seq_id, e, by_rank[r].path)
                break
    waits_for: dict[int, tuple[int, ...]] = {}
    for r, b in blocked.items():
        waits_for[r] = tuple(q for q in members[b.group]
                             if q != r and q in by_rank and last_seq.get((q, b.group), 0) < b.seq)
    return FrWaits(blocked, waits_for, last_seq, members, tuple(sorted(by_rank)))


def _order(e: FrEntry) -> tuple[int, int]:
    """The rank-wide issue order of an entry: ``record_id``, else its place in the dump."""
    return (e.record_id if e.record_id is not None else e.index, e.index)


def _reach(start: int, graph: dict[int, tuple[int, ...]]) -> set[int]:
    """The ranks reachable from ``start`` along the wait edges (``start`` itself excluded unless on a cycle)."""
    seen: set[int] = set()
    todo = list(graph.get(start, ()))
    while todo:
        q = todo.pop()
        if q not in seen:
            seen.add(q)
            todo.extend(graph.get(q, ()))
    return seen


def fr_blame(w: FrWaits) -> FrBlame:
    """Apply rules 3 to 5 to a wait-for graph (:func:`fr_waits`)."""
    waited = {q for qs in w.waits_for.values() for q in qs}
    if not waited:
        return FrBlame()
    sinks = sorted(q for q in waited if not w.waits_for.get(q))
    if sinks:
        others = sorted(r for r in w.waits_for if r not in sinks and _reach(r, w.waits_for) & set(sinks))
        return FrBlame("behind", tuple(sinks), tuple(others))
    # every waited-for rank waits: the ranks on a cycle, by the group each is blocked in
    cyclic = sorted(r for r in w.waits_for if r in _reach(r, w.waits_for))
    by_group: dict[str, list[int]] = defaultdict(list)
    for r in cyclic:
        by_group[w.blocked[r].group].append(r)
    cycle = {g: tuple(rs) for g, rs in sorted(by_group.items())}
    sizes = sorted((len(rs) for rs in cycle.values()), reverse=True)
    if len(cycle) < 2 or sizes[0] == sizes[1]:
        return FrBlame("tie", (), tuple(cyclic), cycle)
    major = max(cycle, key=lambda g: len(cycle[g]))
    named = sorted(r for g, rs in cycle.items() if g != major for r in rs)
    others = sorted(r for r in w.waits_for if r not in named)
    return FrBlame("order", tuple(named), tuple(others), cycle)


def settle_lagging(findings: Sequence[Finding], w: FrWaits) -> tuple[Finding, ...]:
    """``findings`` of :func:`~.analysis.analyze` with each ``fr-missing-rank`` suspect whose ranks
    the wait-for graph shows blocked in a collective of another group, waiting for others (rule 2),
    and not named by :func:`fr_blame`, made ``waiting`` (with ``waits_for``): such ranks are behind
    in one group only because they wait in another (ranks 0-2 "behind" in group B while blocked in
    group A for rank 3, which took B first). A finding that names a rank without a dump, or one
    that waits for nobody, is kept as it is."""
    named = set(fr_blame(w).ranks)
    out = []
    for f in findings:
        rs = set(f.ranks)
        if (f.kind is Kind.FR_MISSING_RANK and f.is_suspect and rs and not rs & named
                and all(w.waits_for.get(r) for r in rs)):
            wanted = tuple(sorted({q for r in rs for q in w.waits_for[r]} - rs))
            groups = sorted({w.blocked[r].group for r in rs})
            f = replace(f, severity=Severity.WAITING, waits_for=wanted,
                        summary=f"{f.summary} - but {ranks_text(sorted(rs))} {'is' if len(rs) == 1 else 'are'} blocked "
                                f"in pg {', '.join(groups)} waiting for {ranks_text(wanted)}: waiting, not the cause")
        out.append(f)
    return tuple(out)
