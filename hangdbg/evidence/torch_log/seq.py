"""Cross-rank reasoning over ProcessGroupNCCL watchdog timeouts and work-status lines.

Heuristics (formats in :mod:`hangdbg.evidence.torch_log.grammar`; PyTorch ``ProcessGroupNCCL.cpp``):

* **Group identity.** A group is its ``[PG ...]`` tag (id, and description when printed; a tag
  with the id only is the described group of that id when there is one).
  The ``[Rank N] Watchdog caught ...`` line carries no tag in most versions: it takes the tag of the
  same rank's status line at the same SeqNum, else joins the one known group whose SeqNums are within
  :data:`NEAR` of it; with several candidates it stays unknown (``""``). An unknown group is never
  compared with a known one.
* **Position.** A rank's position in a group is the first work that timed out there (the watchdog
  line's SeqNum, ``Timeout at NCCL work: N``); ``last enqueued work`` is the position only when no
  work timed out (a rank that received the dump signal). ``last enqueued`` is otherwise context:
  whether the rank entered the collective the others wait in.
* **Comparable SeqNums.** A group's SeqNums are compared only when every rank timed out at one
  SeqNum there and they lie within :data:`NEAR` of each other (:func:`comparable`): a collective
  completes on no rank before all entered it, so the first timed-out works of one group differ by
  one or two; a rank printing several SeqNums, or SeqNums far apart, means several groups mixed (the
  SeqNums of two groups are not comparable).
* **Op mismatch.** At one SeqNum of one group every rank runs the same collective with the same
  sizes (``NumelIn``/``NumelOut`` for the ops where they must agree). A minority that differs is
  the suspect; two ranks or a tie are undecided.
* **Stragglers.** Ranks ahead (higher SeqNum) are never blamed. A rank behind is a suspect when
  its ``last enqueued`` work is below the collective the others wait in (it never entered it), or,
  with no status line, when a clear majority of at least three ranks is ahead of it; otherwise it
  is only a candidate (warning).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from ...model import Evidence, Finding, Kind, Severity
from .grammar import Timeout, TorchLogEvents, WorkStatus
from ...rankset import rank_set, ranks_text

__all__ = ["Pos", "comparable", "lag_findings", "mismatch_findings", "pg", "positions", "resolve_groups"]

NEAR = 2
"""SeqNums within this distance can be one group's (the first timed-out works of one group differ by
one, two with a rank ahead); farther apart they are taken for different groups."""

SIZED = frozenset({"ALLREDUCE", "BROADCAST", "REDUCE", "ALLGATHER", "_ALLGATHER_BASE", "REDUCE_SCATTER",
                   "_REDUCE_SCATTER_BASE", "ALLREDUCE_COALESCED", "ALLGATHER_COALESCED"})
"""Ops whose NumelIn/NumelOut agree on every rank (gather/scatter/all-to-all sizes may differ by rank)."""


def pg(group: str) -> str:
    """``process group 0 (default_pg)``; ``the process group`` when unknown."""
    return f"process group {group}" if group else "the process group"


def _seqs(t: Timeout | WorkStatus) -> tuple[int, ...]:
    if isinstance(t, Timeout):
        return (t.seq,) if t.seq is not None else ()
    return tuple(x for x in (t.work, t.enqueued) if x is not None)


def resolve_groups(ev: TorchLogEvents) -> tuple[list[Timeout], list[WorkStatus]]:
    """Timeouts and statuses with the group each belongs to (see the module docstring), timeouts
    without duplicates (one message is printed up to three times: LOG(ERROR), the watchdog's
    exception, ``what():``)."""
    by_rank_seq: dict[tuple[int, int], set[str]] = defaultdict(set)
    group_seqs: dict[str, set[int]] = defaultdict(set)
    # "0" (a call site that prints the id only) is "0 (default_pg)" when that is the one described group 0
    raw: list[Timeout | WorkStatus] = [*ev.statuses, *ev.timeouts]
    described: dict[str, set[str]] = defaultdict(set)
    for x in raw:
        if " (" in x.group:
            described[x.group.split(" ", 1)[0]].add(x.group)
    alias = {pid: next(iter(gs)) for pid, gs in described.items() if len(gs) == 1}
    every = [replace(x, group=alias.get(x.group, x.group)) for x in raw]
    for x in every:
        if x.group:
            for seq in _seqs(x):
                by_rank_seq[(x.rank, seq)].add(x.group)
                group_seqs[x.group].add(seq)

    def group_of(x: Timeout | WorkStatus) -> str:
        if x.group:
            return x.group
        seqs = _seqs(x)
        for seq in seqs:
            same = by_rank_seq.get((x.rank, seq), set())
            if len(same) == 1:
                return next(iter(same))
        near = [g for g, gs in group_seqs.items()
                if seqs and any(min(abs(s - v) for v in gs) <= NEAR for s in seqs)]
        return near[0] if len(near) == 1 else ""

    out: dict[tuple, Timeout] = {}
    statuses: list[WorkStatus] = []
    for x in every:
        if isinstance(x, Timeout):
            t = replace(x, group=group_of(x))
            out.setdefault((t.rank, t.group, t.seq, t.op), t)
        else:
            statuses.append(replace(x, group=group_of(x)))
    return list(out.values()), statuses


@dataclass(frozen=True, slots=True)
class Pos:
    """A rank's position in one group: ``seq`` (the first work that timed out, else the last
    enqueued), whether a work timed out there, the highest ``last enqueued`` printed, the evidence."""

    seq: int
    timed_out: bool
    enqueued: int | None
    evidence: Evidence


def positions(timeouts: list[Timeout], statuses: list[WorkStatus]) -> dict[str, dict[int, Pos]]:
    """group -> rank -> :class:`Pos` (ranks with no SeqNum at all are left out)."""
    stuck: dict[tuple[str, int], list[tuple[int, Evidence]]] = defaultdict(list)
    enq: dict[tuple[str, int], tuple[int, Evidence]] = {}
    inside: dict[tuple[str, int], int] = {}  # the work a rank with no timeout is in: last completed + 1
    for t in timeouts:
        if t.seq is not None:
            stuck[(t.group, t.rank)].append((t.seq, t.evidence))
    for s in statuses:
        key = (s.group, s.rank)
        if s.work is not None:
            stuck[key].append((s.work, s.evidence))
        if s.enqueued is not None and (key not in enq or s.enqueued > enq[key][0]):
            enq[key] = (s.enqueued, s.evidence)
            if s.completed is not None and s.completed < s.enqueued:
                inside[key] = s.completed + 1
            else:
                inside.pop(key, None)
    pos: dict[str, dict[int, Pos]] = defaultdict(dict)
    for key in set(stuck) | set(enq):
        group, rank = key
        e = enq.get(key)
        if stuck.get(key):
            seq, evid = min(stuck[key], key=lambda x: x[0])
            pos[group][rank] = Pos(seq, True, e[0] if e else None, evid)
        elif e is not None:
            pos[group][rank] = Pos(inside.get(key, e[0]), False, e[0], e[1])
    return pos


def comparable(group: str, timeouts: list[Timeout], by_rank: dict[int, Pos]) -> bool:
    """Whether the SeqNums of ``group`` may be compared across ranks: every rank timed out at one
    SeqNum there and those lie within :data:`NEAR` of each other. A collective completes on no rank
    before every rank entered it, so one group's first timed-out works differ by one or two; a rank
    with several, or SeqNums far apart, means the lines belong to several groups (untagged lines of
    old versions, logs of several jobs read together) or p2p ops counted on some ranks only (PyTorch
    before 2.3 counted send/recv in the SeqNum of the two ranks involved)."""
    per_rank: dict[int, set[int]] = defaultdict(set)
    for t in timeouts:
        if t.group == group and t.seq is not None:
            per_rank[t.rank].add(t.seq)
    if any(len(v) > 1 for v in per_rank.values()):
        return False
    vals = [p.seq for p in by_rank.values() if p.timed_out]
    return not vals or max(vals) - min(vals) <= NEAR


def lag_findings(pos: dict[str, dict[int, Pos]], skip: set[str]) -> list[Finding]:
    """Ranks behind (or, when most are behind, the many) in each group; groups in ``skip`` are not
    compared."""
    out = []
    for group, by_rank in sorted(pos.items()):
        if len(by_rank) < 2 or group in skip:
            continue
        counts = Counter(p.seq for p in by_rank.values())
        if len(counts) == 1:
            continue
        norm = max(counts, key=lambda v: (counts[v], v))
        behind = sorted(r for r, p in by_rank.items() if p.seq < norm)
        ahead = sorted(r for r, p in by_rank.items() if p.seq > norm)
        at_norm = sorted(r for r, p in by_rank.items() if p.seq == norm)
        total = len(by_rank)
        if behind:
            out.extend(_behind(group, by_rank, behind, at_norm, norm, counts[norm] * 2 > total >= 3))
        if ahead:
            vals = sorted({by_rank[r].seq for r in ahead})
            ev = tuple(by_rank[r].evidence for r in ahead[:3]) + (by_rank[at_norm[0]].evidence,)
            out.append(Finding(
                kind=Kind.SEQ_LAGGING,
                summary=(f"most ranks ({len(at_norm)} of {total}: {rank_set(at_norm)}) are behind in {pg(group)} at "
                         f"SeqNum {norm} while {ranks_text(ahead)} {'is' if len(ahead) == 1 else 'are'} ahead at SeqNum "
                         f"{', '.join(map(str, vals))}: the many never called collective #{norm + 1} "
                         f"(or {ranks_text(ahead)} issued one the others did not)"),
                ranks=tuple(at_norm), evidence=ev, severity=Severity.SUSPECT,
                action=f"find why {ranks_text(at_norm)} did not call collective #{norm + 1} that "
                       f"{ranks_text(ahead)} wait{'s' if len(ahead) == 1 else ''} in (stacks of those ranks)"))
    return out


def _behind(group: str, by_rank: dict[int, Pos], behind: list[int], at_norm: list[int], norm: int,
            majority: bool) -> list[Finding]:
    """The ranks behind ``norm``: suspects when they never entered it (``last enqueued`` below it, or
    a clear majority ahead and no status line), else candidates."""
    never = [r for r in behind if (by_rank[r].enqueued or 0) < norm and by_rank[r].enqueued is not None]
    unknown = [r for r in behind if by_rank[r].enqueued is None]
    entered = [r for r in behind if r not in never and r not in unknown]
    sus = never + (unknown if majority else [])
    cand = entered + ([] if majority else unknown)
    ref = by_rank[at_norm[0]].evidence
    n = len(at_norm)
    out = []
    if sus:
        sus.sort()
        vals = sorted({by_rank[r].seq for r in sus})
        enq = {e for r in sus if (e := by_rank[r].enqueued) is not None}
        why = (f"last enqueued work {', '.join(map(str, sorted(enq)))}: {'it' if len(sus) == 1 else 'they'} never "
               f"entered collective #{norm}" if enq else
               f"{'it' if len(sus) == 1 else 'they'} never got past collective #{vals[-1]}")
        out.append(Finding(
            kind=Kind.SEQ_LAGGING,
            summary=(f"{ranks_text(sus)} lag{'s' if len(sus) == 1 else ''} in {pg(group)}: stuck at SeqNum "
                     f"{', '.join(map(str, vals))} while {n} other rank{'s' if n != 1 else ''} reached SeqNum {norm}; "
                     + why),
            ranks=tuple(sus), evidence=tuple(by_rank[r].evidence for r in sus[:3]) + (ref,), severity=Severity.SUSPECT,
            action=f"look at what {ranks_text(sus)} did instead of collective #{norm} (its stacks: py-spy dump / "
                   "hangdbg dump; its own log lines before the timeout)",
            waits_for=()))
    if cand:
        cand.sort()
        vals = sorted({by_rank[r].seq for r in cand})
        entered_txt = ("; it enqueued the next collective, so it is stuck inside an earlier one rather than missing"
                       if entered else "; the logs do not show whether it entered the next one")
        out.append(Finding(
            kind=Kind.SEQ_LAGGING,
            summary=(f"{ranks_text(cand)} {'is' if len(cand) == 1 else 'are'} behind in {pg(group)} at SeqNum "
                     f"{', '.join(map(str, vals))} while {ranks_text(at_norm)} reached SeqNum {norm}: a straggler "
                     f"candidate, undecided{entered_txt}"),
            ranks=tuple(cand), evidence=tuple(by_rank[r].evidence for r in cand[:3]) + (ref,),
            severity=Severity.WARNING,
            action=f"collect the stacks (py-spy dump / hangdbg dump) or flight recorder of {ranks_text(cand + at_norm)}"))
    return out


def _signature(t: Timeout) -> tuple[str, int | None, int | None]:
    if t.op in SIZED:
        return (t.op, t.numel_in, t.numel_out)
    return (t.op, None, None)


def _sig_text(sig: tuple[str, int | None, int | None]) -> str:
    op, nin, nout = sig
    if nin is None:
        return op
    return f"{op} (numel {nin})" if nin == nout else f"{op} (numel {nin} -> {nout})"


def mismatch_findings(timeouts: list[Timeout], skip: set[str]) -> list[Finding]:
    """Ranks that time out in another collective (or other sizes) at the same SeqNum of one group
    (a minority of 3 or more ranks: suspects). ``None`` SeqNums (PyTorch < 1.10) are compared as
    one position, and the odd ones are only a warning there: each rank timed out in its own first
    pending op, so a rank ahead by one op looks the same."""
    at: dict[tuple[str, int | None], dict[int, set[tuple]]] = defaultdict(lambda: defaultdict(set))
    evid: dict[tuple[str, int | None, int], Evidence] = {}
    for t in timeouts:
        if t.group in skip and t.seq is not None:
            continue
        at[(t.group, t.seq)][t.rank].add(_signature(t))
        evid.setdefault((t.group, t.seq, t.rank), t.evidence)
    out = []
    for (group, seq), by_rank in sorted(at.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        one = {r: next(iter(s)) for r, s in by_rank.items() if len(s) == 1}
        counts = Counter(one.values())
        if len(counts) < 2:
            continue
        ranked = counts.most_common()
        where = f"at SeqNum {seq} of {pg(group)}" if seq is not None else \
            f"in the collective that timed out ({pg(group)}; no SeqNum in this PyTorch version)"
        ev = tuple(evid[(group, seq, r)] for r in sorted(one)[:4])
        if len(one) >= 3 and ranked[0][1] > ranked[1][1]:
            norm = ranked[0][0]
            odd = sorted(r for r, s in one.items() if s != norm)
            many = sorted(r for r, s in one.items() if s == norm)
            odd_sigs = sorted({one[r] for r in odd}, key=str)
            verb = "runs" if len(odd) == 1 else "run"
            # without a SeqNum each rank times out in its own first pending op: a rank one op ahead (never
            # blamed) shows another collective too, so the odd one is only a candidate
            known = seq is not None
            out.append(Finding(
                kind=Kind.OP_MISMATCH,
                summary=(f"{ranks_text(odd)} {verb} {' / '.join(_sig_text(s) for s in odd_sigs)} while {ranks_text(many)} "
                         f"run {_sig_text(norm)} {where}: "
                         + ("a different collective at the same position" if known else
                            "a different collective, or one op ahead or behind the others (no SeqNum to tell)")),
                ranks=tuple(odd), evidence=ev, severity=Severity.SUSPECT if known else Severity.WARNING, waits_for=(),
                action=(f"find the code path where {ranks_text(odd)} call{'s' if len(odd) == 1 else ''} "
                        f"{odd_sigs[0][0]} instead of {norm[0]} (rank-dependent branch, skipped step); "
                        "TORCH_DISTRIBUTED_DEBUG=DETAIL names the mismatching call")))
        else:
            parts = [f"{ranks_text(sorted(r for r, s in one.items() if s == sig))} {_sig_text(sig)}" for sig, _ in ranked]
            out.append(Finding(
                kind=Kind.OP_MISMATCH,
                summary=(f"the ranks run different collectives {where}: {'; '.join(parts)}; undecided which is the "
                         f"odd one ({'only ' + str(len(one)) + ' ranks in these logs' if len(one) < 3 else 'a tie'})"),
                ranks=tuple(sorted(one)), evidence=ev, severity=Severity.WARNING,
                action="collect the other ranks' logs (or their stacks / flight recorder) to see which collective "
                       "most ranks run"))
    return out
