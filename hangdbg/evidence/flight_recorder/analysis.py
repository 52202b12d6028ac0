"""Flight-recorder dumps of all ranks -> who is missing, the first mismatch, what is stuck.

Matching follows the flight recorder's own model (``torch/distributed/flight_recorder``,
``FlightRecorder.hpp``): every process group numbers its collectives (``collective_seq_id``, 1, 2,
...) identically on all its member ranks, so entries with the same group name and seq are the same
collective and must agree in type (``profiling_name``), input/output sizes and dtypes; send/recv
carry their own counter (``p2p_seq_id``) and are not matched across ranks here, only reported.
Unlike torch's ``torchfrtrace``, group membership does not depend on ``pg_config`` keys (torch 2.13
keys the default group ``''`` while entries name it ``("0", "default_pg")``, which makes
``torchfrtrace`` fail with ``KeyError: ('0', 0)``).

State: ``state`` as dumped, raised by the dump's ``pg_status`` (a collective whose seq is at or
below ``last_completed_collective`` of its ``pg_id`` counts as completed: gloo work never records
start/end events, so its entries stay ``scheduled`` after they finished).

Heuristics (not a format): a member rank whose last seq in a group is below the others' did not
call the next collective (the stragglers, however many); the signature that most ranks share at
the first differing seq is taken as the expected one and the other ranks are blamed.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from .facts import FrFacts, FrGroup, FrLast, FrOp, FrRow
from ...model import SEVERITY_ORDER, Evidence, Finding, Kind, RankState, Severity, SourceKind
from .grammar import FrDump, FrEntry, pg_label
from ...rankset import ranks_text

__all__ = ["analyze", "effective_state", "user_frames"]

KIND = SourceKind.FLIGHT_RECORDER

_NOT_USER = re.compile(
    r"(^|/)torch/(distributed|multiprocessing|nn/parallel|utils/_contextlib)|(^|/)multiprocessing/|"
    r"(^|/)(threading|runpy|concurrent/futures/\w+)\.py$|^<frozen |^<string>$"
)


def effective_state(e: FrEntry, dump: FrDump) -> str:
    """``completed``, ``started`` or ``scheduled``: the dumped ``state`` raised by ``pg_status``.

    For gloo dumps without ``pg_status``, a retired entry counts as completed (gloo records no
    start/end events, FlightRecorder.hpp); for NCCL a retired but not completed entry timed out.
    """
    if e.state == "completed":
        return "completed"
    st = dump.pg_status.get(e.pg_id) if e.pg_id is not None and not e.is_p2p else None
    seq = e.collective_seq_id
    if st is not None and seq is not None:
        _, started, completed = st
        if completed is not None and completed >= seq:
            return "completed"
        if started is not None and started >= seq:
            return "started"
    elif st is None and e.retired and e.backend == "gloo":
        return "completed"
    return e.state or "scheduled"


def user_frames(e: FrEntry, limit: int = 3) -> list[str]:
    """The innermost ``limit`` frames of the entry's stack outside torch.distributed and the
    multiprocessing/threading bootstrap: ``worker (/tmp/job.py:20)``."""
    out = [f"{f.function} ({f.file}:{f.line})" if f.line is not None else f"{f.function} ({f.file})"
           for f in e.frames if not _NOT_USER.search(f.file)]
    return out[:limit]


@dataclass
class _Group:
    name: str
    desc: str
    members: set
    members_known: bool
    entries: dict  # rank -> list[FrEntry] (collectives, by seq)
    p2p: dict      # rank -> list[FrEntry]


def _world(dumps: list[FrDump], missing_files: set[int]) -> set[int]:
    ranks = {d.rank for d in dumps} | set(missing_files)
    for d in dumps:
        for (_, members) in d.pg_config.values():
            ranks.update(members)
    if ranks:
        ranks |= set(range(max(ranks) + 1))
    return ranks


def _groups(dumps: list[FrDump], world: set[int]) -> dict[str, _Group]:
    configs: dict[str, tuple[str, tuple[int, ...]]] = {}
    for d in dumps:
        for name, cfg in d.pg_config.items():
            configs.setdefault(name, cfg)
    groups: dict[str, _Group] = {}
    for d in dumps:
        for e in d.entries:
            g = groups.get(e.pg_name)
            if g is None:
                cfg = configs.get(e.pg_name)
                if cfg is not None and not cfg[1]:
                    cfg = None  # torch 2.13 gloo: pg_config {'': {'ranks': '[]'}}
                if cfg is None and (e.pg_desc == "default_pg" or e.pg_name == "0"):
                    cfg = configs.get("")
                    if not cfg or not cfg[1]:
                        cfg = (e.pg_desc, tuple(sorted(world)))
                g = groups[e.pg_name] = _Group(e.pg_name, e.pg_desc, set(cfg[1]) if cfg else set(), cfg is not None, {}, {})
            if not g.desc and e.pg_desc:
                g.desc = e.pg_desc
            if e.is_p2p:
                g.p2p.setdefault(d.rank, []).append(e)
            elif e.collective_seq_id is not None:
                g.entries.setdefault(d.rank, []).append(e)
    for g in groups.values():
        if not g.members_known:
            g.members = set(g.entries) | set(g.p2p)
        for lst in (*g.entries.values(), *g.p2p.values()):
            lst.sort(key=lambda x: (x.seq if x.seq is not None else -1, x.index))
    return groups


def _label(g: _Group) -> str:
    return pg_label(g.name, g.desc)


def _short(e: FrEntry, state: str) -> str:
    return f"{e.describe()} ({state})"


def analyze(dumps: list[FrDump], unreadable: dict[int, tuple[str, str]] | None = None
            ) -> tuple[list[Finding], list[RankState], FrFacts]:
    """Match the ranks' records.

    Args:
        dumps: one :class:`FrDump` per rank (a rank given twice keeps its first dump).
        unreadable: rank -> (file, reason) for dump files that exist but could not be read.

    Returns:
        ``(findings, rank rows, facts)``: findings ``fr-missing-rank`` (no dump, or the record
        stops before the others'), ``fr-mismatch`` (first differing collective per group),
        ``fr-stuck`` (a collective not completed everywhere); rows per rank and process group;
        :class:`FrFacts` with the per-group table.
    """
    unreadable = dict(unreadable or {})
    seen: dict[int, FrDump] = {}
    for d in dumps:
        seen.setdefault(d.rank, d)
    by_rank = dict(sorted(seen.items()))
    world = _world(list(by_rank.values()), set(unreadable))
    groups = _groups(list(by_rank.values()), world)
    findings: list[Finding] = []
    rows: list[RankState] = []
    table: list[FrRow] = []

    # 1. ranks without a (readable) dump
    no_dump = sorted(world - set(by_rank))
    if no_dump and by_rank:
        findings.append(_no_dump(no_dump, len(world), by_rank, unreadable))
        for r in no_dump:
            rows.append(RankState(r, state="dump unreadable" if r in unreadable else "no dump", source=KIND))

    # 2. per process group: each rank's last collective, then the findings across its ranks
    for gname, g in sorted(groups.items(), key=lambda kv: (kv[0] != "0", kv[0])):
        label = _label(g)
        present = sorted(r for r in g.members if r in by_rank)
        last, last_seq = _group_rows(g, label, present, by_rank, table, rows)
        if not present:
            continue
        findings += _lagging(label, present, last, last_seq, by_rank)
        by_seq: dict[int, dict[int, FrEntry]] = defaultdict(dict)
        for r in present:
            for e in g.entries.get(r, []):
                by_seq[e.collective_seq_id].setdefault(r, e)
        findings += _first_mismatch(label, by_seq, by_rank)
        findings += _first_stuck(label, present, by_seq, by_rank)
        findings += _match_p2p(g, label, present, by_rank)
        findings += _stuck_p2p(g, label, present, by_rank)

    kinds = {Kind.FR_MISMATCH: 0, Kind.FR_MISSING_RANK: 1, Kind.FR_STUCK: 2}
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], kinds.get(f.kind, 3)))
    versions = sorted({d.version for d in by_rank.values() if d.version})
    facts = FrFacts(
        dumps=len(by_rank),
        world=tuple(sorted(world)),
        versions=tuple(versions),
        formats=dict(Counter(d.fmt for d in by_rank.values())),
        backends=tuple(sorted({e.backend for d in by_rank.values() for e in d.entries if e.backend})),
        groups={_label(g): FrGroup(tuple(sorted(g.members)), "pg_config" if g.members_known else "dumps")
                for g in groups.values()},
        table=tuple(table),
    )
    return findings, rows, facts


def _no_dump(no_dump: list[int], world: int, by_rank: dict[int, FrDump], unreadable: dict[int, tuple[str, str]]) -> Finding:
    """``fr-missing-rank`` for the ranks of the world without a (readable) dump, with how the world
    is known (the member ranks of ``pg_config``, or the numbering of the files)."""
    cfg_ranks = {r for d in by_rank.values() for _, (_, m) in d.pg_config.items() for r in m}
    how = ("from the member ranks in pg_config" if set(no_dump) <= cfg_ranks
           else f"from the numbering of the dump files: {ranks_text(sorted(set(by_rank) | set(unreadable)))} exist")
    bad = [r for r in no_dump if r in unreadable]
    absent = [r for r in no_dump if r not in unreadable]
    parts = []
    if absent:
        parts.append(f"{ranks_text(absent)} left no flight-recorder dump")
    if bad:
        parts.append(f"the dump of {ranks_text(bad)} could not be read")
    ev = []
    src = next((d for d in by_rank.values() if any(m for _, m in d.pg_config.values())), None)
    if src is not None:
        for name, (desc, members) in list(src.pg_config.items())[:3]:
            if members:
                ev.append(Evidence(src.path, None, f"pg_config {name!r} desc={desc!r} ranks={list(members)}"))
    ev += [Evidence(unreadable[r][0], None, f"rank {r} unreadable: {unreadable[r][1]}") for r in bad[:3]]
    return Finding(
        Kind.FR_MISSING_RANK,
        f"{'; '.join(parts)} (expected {how}, {len(by_rank)} of {world} dumps read): "
        "such a rank died, was killed before dumping, or its file was not collected",
        ranks=tuple(no_dump), evidence=tuple(ev),
        action="look for this rank's exit (core file, torchrun log) and for its dump on its node")


def _group_rows(g, label: str, present: list[int], by_rank: dict[int, FrDump], table: list[FrRow],
                rows: list[RankState]) -> tuple[dict[int, FrEntry | None], dict[int, int]]:
    """Each present rank's row of one process group (appended to ``table`` and ``rows``): its last
    recorded collective and its state, the last started and completed ones, its last p2p op.

    Returns:
        rank -> last collective entry, and rank -> last collective seq (``pg_status`` counts
        what a dump of active entries only, or a wrapped ring, leaves out).
    """
    last: dict[int, FrEntry | None] = {}
    last_seq: dict[int, int] = {}
    group_pg_ids = {e.pg_id for lst in g.entries.values() for e in lst if e.pg_id is not None}
    for r in present:
        ents = g.entries.get(r, [])
        last[r] = ents[-1] if ents else None
        seq = ents[-1].collective_seq_id if ents else 0
        for pid in {e.pg_id for e in ents if e.pg_id is not None} or group_pg_ids:
            st = by_rank[r].pg_status.get(pid)
            if st and st[0] is not None and st[0] > seq:
                seq = st[0]
        last_seq[r] = seq
        d = by_rank[r]
        states = [effective_state(e, d) for e in ents]
        done = [e for e, st in zip(ents, states) if st == "completed"]
        begun = [e for e, st in zip(ents, states) if st in ("started", "completed")]
        lc = done[-1] if done else None
        state = states[-1] if states else ""
        p2p = g.p2p.get(r, [])
        le = last[r]
        fr_last: FrLast | None = None
        if le is not None:
            assert le.collective_seq_id is not None  # g.entries holds collectives with a seq only
            fr_last = FrLast(le.collective_seq_id, le.op, le.describe(), state, le.state, le.retired)
        table.append(FrRow(
            rank=r, group=label, file=d.path, last=fr_last,
            last_started=None if not begun else FrOp(begun[-1].collective_seq_id, begun[-1].op),
            last_completed=None if lc is None else FrOp(lc.collective_seq_id, lc.op),
            last_p2p=None if not p2p else FrOp(p2p[-1].p2p_seq_id, p2p[-1].profiling_name.split(":", 1)[-1],
                                               effective_state(p2p[-1], d)),
        ))
        if le is not None:
            st_text = state + (f"; completed up to seq {lc.collective_seq_id} ({lc.op})" if lc and lc is not le
                               else "" if lc else "; none completed")
            rows.append(RankState(r, last_collective=le.op, seq=le.collective_seq_id, group=label,
                                  state=st_text, source=KIND))
        elif p2p:
            rows.append(RankState(r, last_collective=p2p[-1].op, seq=p2p[-1].p2p_seq_id, group=label + " (p2p)",
                                  state=effective_state(p2p[-1], d), source=KIND))
    return last, last_seq


def _lagging(label: str, present: list[int], last: dict, last_seq: dict[int, int],
             by_rank: dict[int, FrDump]) -> list[Finding]:
    """Member ranks whose last collective seq in the group is below the others' (all of them,
    with the direction: when most ranks are behind, the stragglers are the many)."""
    findings: list[Finding] = []
    top = max(last_seq.values())
    behind = sorted(r for r in present if last_seq[r] < top)
    if not behind:
        return findings
    ahead = sorted(r for r in present if last_seq[r] == top)
    levels = Counter(last_seq[r] for r in behind)
    lo = min(levels)
    lo_ranks = sorted(r for r in behind if last_seq[r] == lo)
    lo_last = last[lo_ranks[0]]
    ahead_e = last[ahead[0]]
    where = f"seq {lo}" + (f" ({lo_last.op})" if lo_last and lo_last.collective_seq_id == lo
                           else " (pg_status; no entry in the dump)" if lo else " (none recorded)")
    text = (f"pg {label}: {ranks_text(lo_ranks)} {'stops' if len(lo_ranks) == 1 else 'stop'} at collective {where} while "
            f"{ranks_text(ahead)} went on to seq {top} ({ahead_e.op if ahead_e else '?'})")
    if len(levels) > 1:
        text += "; " + ", ".join(f"{ranks_text([r for r in behind if last_seq[r] == s])} at seq {s}"
                                 for s in sorted(levels)[1:])
    if len(behind) > len(ahead):
        text += (f": most ranks ({len(behind)} of {len(present)}) are behind, so the stragglers are the "
                 f"many ({ranks_text(behind)}), not the {len(ahead)} that ran ahead")
    elif len(levels) == 1:
        text += f": {ranks_text(behind)} never called seq {lo + 1}"
    else:
        text += ": each rank behind stopped before the next collective the others called"
    ev = []
    for r in (lo_ranks[0], ahead[0]):
        e = last[r]
        if e is not None:
            ev.append(Evidence(by_rank[r].path, None, f"rank {r} last: {e.render()}"))
            ev += [Evidence(by_rank[r].path, None, f"rank {r} called from {f}") for f in user_frames(e, 2)]
    findings.append(Finding(Kind.FR_MISSING_RANK, text, ranks=tuple(behind), evidence=tuple(ev),
                            action="see where the ranks behind are (stacks): they did not reach the next collective"))
    return findings


def _first_mismatch(label: str, by_seq: dict[int, dict[int, FrEntry]], by_rank: dict[int, FrDump]) -> list[Finding]:
    """The first seq whose entries differ across ranks in type, sizes or dtypes; the ranks
    outside the largest agreeing set are blamed (all of them when there is no majority)."""
    findings: list[Finding] = []
    mismatches = 0
    first = None
    for seq in sorted(by_seq):
        ents = by_seq[seq]
        sigs = defaultdict(list)
        for r, e in ents.items():
            sigs[e.signature()].append(r)
        if len(sigs) > 1:
            mismatches += 1
            if first is None:
                first = (seq, ents, sigs)
    if first is not None:
        seq, ents, sigs = first
        classes = sorted(sigs.values(), key=lambda rs: (-len(rs), rs[0]))
        major = classes[0]
        tie = len(classes[1]) == len(major)
        blamed = sorted(r for rs in (classes if tie else classes[1:]) for r in rs)
        a, b = ents[major[0]], ents[classes[1][0]]
        what = [w for w, x, y in (("collective type", a.op, b.op), ("input sizes", a.input_sizes, b.input_sizes),
                                  ("output sizes", a.output_sizes, b.output_sizes),
                                  ("dtypes", (a.input_dtypes, a.output_dtypes), (b.input_dtypes, b.output_dtypes)))
                if x != y]
        sides = " vs ".join(f"{ranks_text(rs)} {_short(ents[rs[0]], effective_state(ents[rs[0]], by_rank[rs[0]]))}"
                            for rs in classes)
        text = f"pg {label} collective seq {seq}: {sides}: {' and '.join(what) or 'signature'} differ"
        text += "s" if len(what) <= 1 else ""
        text += " (no majority)" if tie else ""
        if mismatches > 1:
            text += f"; {mismatches - 1} later seq(s) differ too"
        ev = []
        for rs in classes:
            e = ents[rs[0]]
            ev.append(Evidence(by_rank[rs[0]].path, None, f"rank {rs[0]}: {e.render()}"))
            ev += [Evidence(by_rank[rs[0]].path, None, f"rank {rs[0]} called from {f}") for f in user_frames(e)]
        findings.append(Finding(Kind.FR_MISMATCH, text, ranks=tuple(blamed), evidence=tuple(ev),
                                action="the ranks must call the same collectives in the same order with the same "
                                       "shapes: look at the call sites in the evidence"))
    return findings


def _first_stuck(label: str, present: list[int], by_seq: dict[int, dict[int, FrEntry]],
                 by_rank: dict[int, FrDump]) -> list[Finding]:
    """The first collective of the group that is not completed on every rank that recorded it."""
    findings: list[Finding] = []
    for seq in sorted(by_seq):
        ents = by_seq[seq]
        states = {r: effective_state(e, by_rank[r]) for r, e in ents.items()}
        pending = sorted(r for r, s in states.items() if s != "completed")
        if not pending:
            continue
        done = sorted(r for r, s in states.items() if s == "completed")
        e = ents[pending[0]]
        by_state = defaultdict(list)
        for r in pending:
            by_state[states[r]].append(r)
        st = ", ".join(f"{s} on {ranks_text(rs)}" for s, rs in sorted(by_state.items()))
        if done:
            text = f"pg {label} collective seq {seq} ({e.op}) completed on {ranks_text(done)} but not on {ranks_text(pending)} ({st})"
        else:
            where = "everywhere" if set(pending) >= set(present) else "on every rank that recorded it"
            text = f"pg {label} collective seq {seq} ({e.op}) never completed {where}: {st}"
        timeouts = {x.timeout_ms for x in ents.values() if x.timeout_ms}
        if timeouts:
            text += f"; timeout {max(timeouts)} ms"
        ev = [Evidence(by_rank[r].path, None, f"rank {r}: {ents[r].render()}") for r in pending[:2]]
        ev += [Evidence(by_rank[pending[0]].path, None, f"rank {pending[0]} called from {f}") for f in user_frames(e, 2)]
        blocked = _gpu_blocked(label, seq, e.op, states, ents, by_rank, present)
        findings.append(Finding(Kind.FR_STUCK, text, ranks=tuple(pending), severity=Severity.WARNING, evidence=tuple(ev)))
        findings[:0] = blocked
        break
    return findings


def _tracks_start(dump: FrDump, e: FrEntry) -> bool:
    """True when this dump tells ``scheduled`` from ``started``: a NCCL entry of a group whose work
    records start events. The flight recorder's ``state`` is ``scheduled`` until the entry's start
    event has fired on the GPU, then ``started``, then ``completed`` at its end event
    (``torch/csrc/distributed/c10d/FlightRecorder.hpp``/``FlightRecorderDetail.hpp``, ``Entry`` and
    ``update_state``; ``TraceUtils.h`` before torch 2.6), but ``ProcessGroupNCCL`` creates a work's
    start event only with timing on (``ProcessGroupNCCL.cpp`` ``WorkNCCL``: ``ncclStartEvent_ =
    enableTiming ? ... : nullptr``; ``TORCH_NCCL_ENABLE_TIMING=1`` or desync debug). Without it an
    entry stays ``scheduled`` until it completes and ``pg_status`` keeps ``last_started_collective``
    at -1 (torch >= 2.5), so starts count as tracked when the group's ``last_started_collective`` is
    1 or more or some entry of the dump is ``started``; gloo records no start events."""
    if e.backend == "gloo" or e.pg_id is None:
        return False
    st = dump.pg_status.get(e.pg_id)
    if st is None or st[1] is None:
        return False
    return st[1] >= 1 or any(x.state == "started" for x in dump.entries)


def _earlier_completed(dump: FrDump, e: FrEntry) -> bool:
    """Every collective of ``e``'s group before it that this dump still holds completed (and one did)."""
    seq = e.collective_seq_id or 0
    earlier = [x for x in dump.entries if x.pg_id == e.pg_id and not x.is_p2p and (x.collective_seq_id or 0) < seq]
    return bool(earlier) and all(effective_state(x, dump) == "completed" for x in earlier)


def _last_completed(dump: FrDump, e: FrEntry) -> str:
    st = dump.pg_status.get(e.pg_id) if e.pg_id is not None else None
    done = st[2] if st is not None else None
    if done is None or done < 1:
        return "no collective of the group completed before it"
    op = next((x.op for x in dump.entries if x.pg_id == e.pg_id and x.collective_seq_id == done and not x.is_p2p), "")
    return f"its last completed collective is seq {done}" + (f" ({op})" if op else "")


def _gpu_blocked(label: str, seq: int, op: str, states: dict[int, str], ents: dict[int, FrEntry],
                 by_rank: dict[int, FrDump], present: list[int]) -> list[Finding]:
    """Ranks whose GPU never started collective ``seq`` (``scheduled``, with start tracking on).

    Heuristic (ours, from the flight recorder's states: ``scheduled`` = enqueued on the rank's
    NCCL stream, ``started`` = its start event fired on the GPU): where other ranks ``started``
    or completed it, the ``scheduled`` ranks' streams are still busy with earlier work (a kernel
    that does not end, a wait on another stream): they are the cause, the others wait for them.
    Where no rank started it, every GPU is busy before it: a single-rank group is its own cause
    (no peer is involved); with several ranks that is a different case, said as a warning. A dump
    that records no starts (:func:`_tracks_start`) only says that the collective did not complete:
    in a single-rank group whose earlier collectives completed that still points at the rank's own
    stream (a kernel before it, or the collective itself, does not end), said without claiming it
    never started; with several ranks it names nobody here.
    """
    sched = sorted(r for r, s in states.items() if s == "scheduled" and _tracks_start(by_rank[r], ents[r]))
    if not sched:
        return _untracked_alone(label, seq, op, states, ents, by_rank, present)
    moved = sorted(r for r, s in states.items() if s in ("started", "completed"))
    first = sched[0]
    why = f"{_last_completed(by_rank[first], ents[first])}"
    ev = tuple(Evidence(by_rank[r].path, None, f"rank {r}: {ents[r].render()}") for r in sched[:3])
    if moved:
        return [Finding(
            Kind.GPU_BLOCKED,
            f"pg {label} seq {seq} ({op}): {ranks_text(sched)} never started it on the GPU (scheduled) while "
            f"{ranks_text(moved)} started it: earlier work on {'its' if len(sched) == 1 else 'their'} own CUDA stream "
            f"blocks it ({why})", ranks=tuple(sched), evidence=ev,
            action="find the kernel or stream wait that does not end on these ranks: py-spy dump --native, "
                   "cuda-gdb, or nvidia-smi (100% utilisation); the other ranks only wait for them")]
    if len(set(present)) <= 1 and len(sched) == 1:
        return [Finding(
            Kind.GPU_BLOCKED,
            f"pg {label} seq {seq} ({op}): {ranks_text(sched)}'s GPU never started it (scheduled, not started): "
            f"earlier work on its own CUDA stream blocks it ({why}); the group has no other rank, so no peer is involved",
            ranks=tuple(sched), evidence=ev,
            action="find the kernel or stream wait that does not end on this rank: py-spy dump --native, cuda-gdb, "
                   "or nvidia-smi (100% utilisation)")]
    return [Finding(
        Kind.GPU_BLOCKED,
        f"pg {label} seq {seq} ({op}): no rank's GPU started it ({ranks_text(sched)} all scheduled): every GPU is "
        "still busy with earlier work on its stream - not a missing or late peer; which rank's work does not end "
        "is undecided", ranks=tuple(sched), severity=Severity.WARNING, evidence=ev,
        action="collect native stacks (py-spy dump --native) and nvidia-smi on every rank to see whose kernel runs")]


def _untracked_alone(label: str, seq: int, op: str, states: dict[int, str], ents: dict[int, FrEntry],
                     by_rank: dict[int, FrDump], present: list[int]) -> list[Finding]:
    """The one rank of a single-rank group whose collective ``seq`` is ``scheduled`` in a dump that
    records no starts, its earlier collectives completed: its GPU has not finished the work queued
    on its stream up to it (see :func:`_gpu_blocked`)."""
    if len(set(present)) > 1 or len(states) != 1:
        return []
    ((r, state),) = states.items()
    if state != "scheduled" or ents[r].backend == "gloo" or not _earlier_completed(by_rank[r], ents[r]):
        return []
    return [Finding(
        Kind.GPU_BLOCKED,
        f"pg {label} seq {seq} ({op}): {ranks_text([r])}'s GPU has not finished it (scheduled; this dump records no "
        f"start events, so whether it started is not known) while every earlier collective completed "
        f"({_last_completed(by_rank[r], ents[r])}): the work queued on its own CUDA stream up to it does not end (a "
        "kernel before it, or the collective itself); the group has no other rank, so no peer is involved",
        ranks=(r,), evidence=(Evidence(by_rank[r].path, None, f"rank {r}: {ents[r].render()}"),),
        action="find the kernel or stream wait that does not end on this rank: py-spy dump --native, cuda-gdb, or "
               "nvidia-smi (100% utilisation); TORCH_NCCL_ENABLE_TIMING=1 makes the flight recorder record when a "
               "collective starts on the GPU (scheduled -> started)")]


def _stuck_p2p(g: _Group, label: str, present: list[int], by_rank: dict[int, FrDump]) -> list[Finding]:
    """Per rank, the first send/recv still in the work list and not completed."""
    findings: list[Finding] = []
    for r in present:
        p2p = g.p2p.get(r, [])
        stuck = [e for e in p2p if effective_state(e, by_rank[r]) != "completed" and not e.retired]
        if stuck:
            e = stuck[0]
            findings.append(Finding(
                Kind.FR_STUCK, f"pg {label} rank {r}: {e.profiling_name.split(':', 1)[-1]} (p2p seq {e.p2p_seq_id}) "
                            f"{effective_state(e, by_rank[r])}, not completed",
                ranks=(r,), severity=Severity.WARNING, evidence=(Evidence(by_rank[r].path, None, f"rank {r}: {e.render()}"),)))
    return findings


_PEER = re.compile(r"^(send|recv)\s+(\d+)\s*(->|<-)\s*(\d+)")


def _peer(e: FrEntry, members: list[int]) -> tuple[str, int, int] | None:
    """(op, this side, other side) in global ranks from ``nccl:send 0->1`` / ``nccl:recv 1<-0``
    (group ranks, FlightRecorder profiling names; mapped through the sorted member list)."""
    m = _PEER.match(e.profiling_name.split(":", 1)[-1])
    if not m:
        return None
    op, a, b = m.group(1), int(m.group(2)), int(m.group(4))  # "send ME->PEER", "recv ME<-PEER"
    g2g = (lambda x: members[x] if x < len(members) else x)
    return op, g2g(a), g2g(b)


def _match_p2p(g: _Group, label: str, present: list[int], by_rank: dict[int, FrDump]) -> list[Finding]:
    """Match send/recv between each pair of ranks in order (the k-th send a->b with the k-th recv
    on b from a; ``p2p_seq_id`` counts all of a rank's p2p ops in the group, so it is shown, not
    compared). Reports the first pair whose ops are not complementary or differ in size/dtype, and
    sends whose peer (which left a dump) never posted the receive."""
    members = sorted(g.members)
    streams: dict[tuple[int, int], list[tuple[str, FrEntry]]] = defaultdict(list)
    for r in present:
        for e in g.p2p.get(r, []):
            pe = _peer(e, members)
            if pe is not None and pe[1] == r:
                streams[(r, pe[2])].append((pe[0], e))
    out: list[Finding] = []
    done: set[tuple[int, int]] = set()
    for (a, b), mine in sorted(streams.items()):
        if (b, a) in done or b not in by_rank:
            continue
        done.add((a, b))
        theirs = streams.get((b, a), [])
        for k, (op, e) in enumerate(mine):
            if k >= len(theirs):
                if op == "send" or len(theirs) < len(mine):
                    out.append(Finding(
                        Kind.FR_MISSING_RANK,
                        f"pg {label}: rank {a}'s {op} #{k + 1} with rank {b} (p2p seq {e.p2p_seq_id}, {e.describe()}) has no "
                        f"matching {'recv' if op == 'send' else 'send'} on rank {b}, which recorded {len(theirs)} p2p op(s) with rank {a}",
                        ranks=(b,), evidence=(Evidence(by_rank[a].path, None, f"rank {a}: {e.render()}"),),
                        action=f"see where rank {b} is: it did not reach this point-to-point exchange"))
                break
            op2, e2 = theirs[k]
            if {op, op2} != {"send", "recv"} or e.input_sizes != e2.input_sizes or e.input_dtypes != e2.input_dtypes:
                what = "both ranks " + op + " (neither receives)" if op == op2 else "sizes or dtypes differ"
                out.append(Finding(
                    Kind.FR_MISMATCH, f"pg {label} p2p #{k + 1} between ranks {a} and {b}: rank {a} {e.describe()} vs "
                                   f"rank {b} {e2.describe()}: {what}", ranks=tuple(sorted((a, b))),
                    evidence=(Evidence(by_rank[a].path, None, f"rank {a}: {e.render()}"), Evidence(by_rank[b].path, None, f"rank {b}: {e2.render()}"))))
                break
    return out
