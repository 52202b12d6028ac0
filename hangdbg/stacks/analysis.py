"""The analysis layer: pure computation on :mod:`hangdbg.model` objects.

:func:`analyze` turns per-rank stacks into equivalence classes, a merged tree and findings; the
modules beside it analyze one kind of post-mortem evidence each (``nccl``, ``torch_log``,
``flight_recorder``, ``xid``), cross-check the flight recorder with the stacks
(``fr_crosscheck``), merge every source into one verdict (``verdict``) and make every headline
(``headline``). Reading files is the readers' job (:mod:`hangdbg.evidence`), not this layer's (the
only I/O here is reading a source line of a local file to recognise ``with lock:`` waits).

Cost of :func:`analyze` grows with the number of ranks times the number of threads, plus the
number of distinct stacks times their depth.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..model import Analysis, EquivalenceClass, Evidence, Finding, Kind, Place, RankDump, Severity, SourceKind
from ..enums import DumpState, PlaceKind
from ..rankset import ranks_text
from ..waits import RankWait, WaitKind
from .classes import classify_ranks, group_ranks
from .headline import stacks_headline
from .places import place_of
from .suspects import who_text, expected_ranks, find_suspects, not_dumped, only_one, place_buckets, progressing_ranks
from .waiting import waiting_findings, waiting_groups
from .threads_gil import gil_findings, gil_waiters, merge_held, within_window
from .tree import build_tree
from .op_record import CurrentOp
from .wait_state import wait_of, with_record
from .store_answer import with_store_answer
from .waitfor import build_graph
from .blocker_facts import BLOCKED_KINDS, refine
from .node_health import d_state_nodes
from .window import Timing, Window

__all__ = ["analyze", "place_of", "build_tree"]

_EVIDENCE_RANKS = 3


def analyze(dumps: list[RankDump] | tuple[RankDump, ...], whole_job: bool = False, live: bool = True,
            store_keys: Mapping[str, bool] | None = None, ops: Mapping[int, CurrentOp] | None = None,
            window: Window | None = None) -> Analysis:
    """Analyze the dumps of one job.

    Args:
        dumps: one :class:`RankDump` per rank (any order; duplicates of a rank keep the first).
        whole_job: every node of the job was read (``dump --jobid/--hosts`` with every node
            answering): any rank of ``range(world_size)`` without a dump is missing.
        live: the stacks are of live processes (py-spy). For stacks that processes left behind
            (core files, saved backtraces) a rank without one only left none: no rank is then
            missing, and nobody waits for one.
        store_keys: store keys the ranks wait for and whether the job's store holds them (asked by
            ``dump``): a missing key names the rank that never set it, unless the answer lacks the
            waiter's own key too (:mod:`hangdbg.stacks.store_answer`: then it is not used).
        ops: rank -> the op its in-job recorder (``hangdbg.hooks.record_collectives``) says it is
            in: exact process groups, sequence numbers and peers for the jobs that opt in.
        window: progress before blame (:mod:`hangdbg.stacks.window`): a rank on CPU outside any
            collective that others wait for is a suspect only once it was seen there for the
            window's seconds (else an ``undecided`` "still observing" warning). None (saved files,
            the default): two samples decide as before; the reasons still say how long a rank was
            seen when the samples carry times (:attr:`RankDump.sample_times`).

    Returns:
        An :class:`Analysis` with no ``suspect`` finding when no rank stands out.
    """
    seen: dict[int, RankDump] = {}
    for d in dumps:
        seen.setdefault(d.rank, d)
    dumps = sorted(seen.values(), key=lambda d: d.rank)
    views = classify_ranks(dumps)
    by_rank = {v.rank: v for v in views}
    gone = [d.rank for d in dumps if d.state == DumpState.GONE]
    unreadable = tuple(d.rank for d in dumps if not d.threads and d.rank not in gone)
    expected, elsewhere = expected_ranks(dumps, whole_job) if live else ({d.rank for d in dumps}, 0)
    if live and dumps and len(gone) == len(dumps) and not any(d.samples for d in dumps):
        return _job_ended(dumps, tuple(gone))  # read before it went, a rank is "dying" (find_suspects)
    missing = sorted((expected - set(seen)) | set(gone))
    progressing = progressing_ranks(dumps, by_rank)

    classes = tuple(EquivalenceClass(ranks, frames, place, thread) for frames, place, ranks, thread in group_ranks(views))
    tree = build_tree([(c.frames, frozenset(c.ranks)) for c in classes])

    waits = _waits(views, seen, missing, store_keys or {}, ops or {})
    views = [_placed(v, waits[v.rank]) for v in views]
    graph = build_graph(waits, {v.rank: v.thread for v in views}, expected | set(seen))
    all_progress = bool(views) and not missing and (len(progressing) == len(views) or _waiter_moved(dumps, progressing))
    buckets = place_buckets(views)
    sampled = any(len(d.samples) > 1 for d in dumps)
    waiting = waiting_groups(graph)
    unknown = frozenset(d.rank for d in dumps if d.rank_source == "order")
    size_unknown = not any(d.world_size for d in dumps)
    timed = window is not None or any(d.sample_times for d in dumps)
    timing = Timing(seen, {v.rank: v.thread.name for v in views}, window) if timed else None
    suspects = [] if all_progress else find_suspects(views, missing, progressing, buckets, graph, sampled, waiting,
                                                     unknown, size_unknown,
                                                     frozenset(r for r in gone if seen[r].samples), timing)
    if not all_progress and not missing and not graph.roots:  # every rank waits: do other threads tell?
        held = within_window(gil_findings(dumps, {v.rank: v.thread for v in views}, waits, progressing), timing)
        suspects = merge_held(held, suspects)
    findings = suspects + waiting_findings(graph, suspects, waiting)
    findings += gil_waiters(waits, findings)
    if not findings and not all_progress and size_unknown:
        lone = not_dumped(graph, views, unknown) or only_one(graph, views, unknown)  # the others may not be dumped
        findings += [lone] if lone is not None else []
    host_of = {d.rank: d.host for d in dumps if d.host}
    places = {v.rank: v.place for v in views}
    findings = [_with_hosts_and_evidence(f, host_of, places) for f in findings]
    findings = d_state_nodes(findings, waits, host_of, seen)  # a rank in D state: its node is the suspect
    named = {r for f in findings if f.kind is Kind.UNREADABLE for r in f.ranks}
    if unreadable and not named >= set(unreadable):
        findings.append(_unreadable(tuple(r for r in unreadable if r not in named), seen, host_of, unknown))
    multi_node = len(set(host_of.values())) > 1
    return Analysis(
        ranks=tuple(dumps),
        classes=classes,
        tree=tree,
        findings=tuple(findings),
        missing_ranks=tuple(missing),
        headline=stacks_headline(classes, findings, all_progress, unreadable, elsewhere, multi_node),
        places=places,
        progressing=tuple(sorted(progressing)),
        unreadable=unreadable,
        waits=waits,
        edges=graph.edges,
    )


def _waits(views, seen: dict[int, RankDump], missing: list[int], store_keys: Mapping[str, bool],
           ops: Mapping[int, CurrentOp]) -> dict[int, RankWait]:
    """What every rank waits on: the readable ones from their chosen thread (and op record), the
    others unknown or gone; store waits get the keys the store does not hold."""
    out: dict[int, RankWait] = {}
    made: dict[tuple, RankWait] = {}  # ranks of one class share their thread's facts (v.key): classify once
    for v in views:
        key = (id(v.key), v.thread.name, v.thread.status, v.lock_wait, id(v.place.call_site))
        w = made.get(key)
        if w is None:
            w = made[key] = wait_of(v.thread, v.place, v.lock_wait)
        op = ops.get(v.rank)
        if op is not None:
            w = with_record(w, op)
        if w.kind is WaitKind.STORE and w.keys and store_keys:
            w = with_store_answer(w, v.rank, store_keys)
        if w.kind in BLOCKED_KINDS:  # what blocks it: the rank's other threads, its /proc facts
            w = refine(w, v.thread, seen[v.rank])
        out[v.rank] = w
    _extend_native(out, views)
    for r, d in seen.items():
        if r not in out:
            gone = d.state == DumpState.GONE
            out[r] = RankWait(WaitKind.GONE if gone else WaitKind.UNKNOWN, detail=d.error or "no stack", evidence=())
    for r in missing:
        if r not in out:
            out[r] = RankWait(WaitKind.GONE, detail="no process", evidence=())
    return out


def _placed(v, w: RankWait):
    """The view of a rank whose wait was learned from the native frames of its class: placed in
    that collective or p2p op (so it is grouped with the ranks that have the frames)."""
    if v.place.kind == PlaceKind.COLLECTIVE or w.kind not in (WaitKind.COLLECTIVE, WaitKind.P2P) \
            or not any(e.startswith("native of rank") or e == "record" for e in w.evidence):
        return v
    return replace(v, place=Place(PlaceKind.COLLECTIVE, w.op, w.site, v.place.thread))


def _extend_native(waits: dict[int, RankWait], views) -> None:
    """Ranks inside a C/C++ call without native frames take the wait of the ranks with the same
    Python stack that have them, when those all agree (adaptive dumps sample large classes)."""
    known: dict[tuple, list[tuple[int, RankWait]]] = {}
    for v in views:
        w = waits[v.rank]
        if "native" in w.evidence:
            known.setdefault(v.thread.stack_key, []).append((v.rank, w))
    if not known:
        return
    for v in views:
        w = waits[v.rank]
        refs = known.get(v.thread.stack_key)
        if refs and "native" not in w.evidence and (w.detail.startswith("inside") or w.op == "wait"):
            if len({(x.kind, x.op, x.direction) for _, x in refs}) == 1:
                first, ref = refs[0]
                waits[v.rank] = replace(ref, peer=None, evidence=(*w.evidence, f"native of rank {first}"))


def _waiter_moved(dumps: list[RankDump], progressing: set[int]) -> bool:
    """True when most ranks sampled more than once and seen in torch.distributed in some sample
    changed their stack (or loop counters) between samples: their collectives complete, so the
    job is making progress and a rank seen computing is a slow step, not a hang."""
    seen_waiting = [d for d in dumps if len(d.samples) > 1
                    and any(place_of(s[0]).kind == PlaceKind.COLLECTIVE for s in d.samples if s)]
    moved = [d for d in seen_waiting if d.rank in progressing]
    return bool(moved) and 2 * len(moved) > len(seen_waiting)


def _with_hosts_and_evidence(f: Finding, host_of: dict[int, str], places: dict) -> Finding:
    """``f`` with the nodes of its ranks and, as evidence, where its first ranks are."""
    hosts = tuple(sorted({host_of[r] for r in f.ranks if r in host_of}))
    ev = tuple(Evidence("stacks", None, f"rank {r}: {places[r].describe()}") for r in f.ranks[:_EVIDENCE_RANKS] if r in places)
    return replace(f, hosts=hosts, evidence=ev, source=SourceKind.STACKS)


def _job_ended(dumps: list[RankDump], gone: tuple[int, ...]) -> Analysis:
    """Every rank found alive was gone when py-spy first came to it (:attr:`DumpState.GONE`, py-spy's
    "Failed to open process" for a pid that no longer exists; none was read even once: a rank read
    and then gone is "dying", named by :func:`find_suspects`): the job ended, or was killed, while
    hangdbg was dumping. No rank is missing from a hang, and none is a suspect (issue 31, item 8)."""
    summary = f"the job ended while hangdbg was dumping: {ranks_text(gone)}, found alive, exited before hangdbg was done"
    ev = tuple(Evidence("stacks", None, f"rank {d.rank}: {d.error or 'gone'}") for d in dumps[:_EVIDENCE_RANKS])
    hosts = tuple(sorted({d.host for d in dumps if d.host}))
    finding = Finding(Kind.JOB_ENDED, summary, gone, hosts, severity=Severity.WARNING, evidence=ev, source=SourceKind.STACKS,
                      action="nothing is hung now: read what the job left for why it ended (hangdbg report on its log "
                             "directory, the launcher's exit status); dump again if it was restarted")
    return Analysis(ranks=tuple(dumps), classes=(), tree=build_tree([]), findings=(finding,), missing_ranks=(),
                    headline=summary, unreadable=gone)


def _unreadable(ranks: tuple[int, ...], seen: dict[int, RankDump], host_of: dict[int, str],
                unknown: frozenset[int] = frozenset()) -> Finding:
    """One ``unreadable`` warning for the ranks whose stack could not be taken, with their errors."""
    ev = tuple(Evidence("stacks", None, f"rank {r}: {seen[r].error or 'no stack'}") for r in ranks[:_EVIDENCE_RANKS])
    first = seen[ranks[0]].error or "no stack"
    return Finding(Kind.UNREADABLE, f"could not read the stacks of {who_text(ranks, unknown)}: {first}", ranks,
                   tuple(sorted({host_of[r] for r in ranks if r in host_of})), severity=Severity.WARNING, evidence=ev,
                   source=SourceKind.STACKS)

