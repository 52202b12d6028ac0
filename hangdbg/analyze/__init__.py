"""The analysis layer: pure computation on :mod:`hangdbg.model` objects.

:func:`analyze` turns per-rank stacks into equivalence classes, a merged tree and findings; the
modules beside it analyze one kind of post-mortem evidence each (``nccl``, ``torch_log``,
``flight_recorder``, ``xid``), cross-check the flight recorder with the stacks
(``fr_crosscheck``), merge every source into one verdict (``verdict``) and make every headline
(``headline``). Reading files is the readers' job (:mod:`hangdbg.sources`), not this layer's (the
only I/O here is reading a source line of a local file to recognise ``with lock:`` waits).

Cost of :func:`analyze` grows with the number of ranks times the number of threads, plus the
number of distinct stacks times their depth.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..model import Analysis, Evidence, Finding, Group, Kind, RankDump, Severity, SourceKind
from ..rankset import ranks_text
from .classes import classify_ranks, group_ranks
from .headline import stacks_headline
from .places import place_of
from .suspects import expected_ranks, find_suspects, place_buckets, progressing_ranks, waiting_findings
from .tree import build_tree

__all__ = ["analyze", "place_of", "build_tree"]

_GONE = re.compile(r"^process \d+ is gone")
_EVIDENCE_RANKS = 3


def analyze(dumps: list[RankDump] | tuple[RankDump, ...], whole_job: bool = False, live: bool = True) -> Analysis:
    """Analyze the dumps of one job.

    Args:
        dumps: one :class:`RankDump` per rank (any order; duplicates of a rank keep the first).
        whole_job: every node of the job was read (``dump --jobid/--hosts`` with every node
            answering): any rank of ``range(world_size)`` without a dump is missing.
        live: the stacks are of live processes (py-spy). For stacks that processes left behind
            (core files, saved backtraces) a rank without one only left none: no rank is then
            missing, and nobody waits for one.

    Returns:
        An :class:`Analysis` with no ``suspect`` finding when no rank stands out.
    """
    seen: dict[int, RankDump] = {}
    for d in dumps:
        seen.setdefault(d.rank, d)
    dumps = sorted(seen.values(), key=lambda d: d.rank)
    views = classify_ranks(dumps)
    by_rank = {v.rank: v for v in views}
    gone = [d.rank for d in dumps if d.error and _GONE.match(d.error)]
    unreadable = tuple(d.rank for d in dumps if not d.threads and d.rank not in gone)
    expected, elsewhere = expected_ranks(dumps, whole_job) if live else ({d.rank for d in dumps}, 0)
    missing = sorted((expected - set(seen)) | set(gone))
    progressing = progressing_ranks(dumps, by_rank)

    raw_groups = group_ranks(views)
    groups = tuple(Group(ranks, frames, place, thread) for frames, place, ranks, thread in raw_groups)
    tree = build_tree([(g.frames, frozenset(g.ranks)) for g in groups])

    all_progress = bool(views) and len(progressing) == len(views) and not missing
    buckets = place_buckets(views)
    suspects = [] if all_progress else find_suspects(views, missing, progressing, buckets)
    findings = suspects + waiting_findings(buckets, suspects)
    host_of = {d.rank: d.host for d in dumps if d.host}
    places = {v.rank: v.place for v in views}
    findings = [_with_hosts_and_evidence(f, host_of, places) for f in findings]
    if unreadable:
        findings.append(_unreadable(unreadable, seen, host_of))
    multi_node = len(set(host_of.values())) > 1
    return Analysis(
        ranks=tuple(dumps),
        groups=groups,
        tree=tree,
        findings=tuple(findings),
        missing_ranks=tuple(missing),
        headline=stacks_headline(groups, findings, all_progress, unreadable, elsewhere, multi_node),
        places=places,
        progressing=tuple(sorted(progressing)),
        unreadable=unreadable,
    )


def _with_hosts_and_evidence(f: Finding, host_of: dict[int, str], places: dict) -> Finding:
    """``f`` with the nodes of its ranks and, as evidence, where its first ranks are."""
    hosts = tuple(sorted({host_of[r] for r in f.ranks if r in host_of}))
    ev = tuple(Evidence("stacks", None, f"rank {r}: {places[r].describe()}") for r in f.ranks[:_EVIDENCE_RANKS] if r in places)
    return replace(f, hosts=hosts, evidence=ev, source=SourceKind.STACKS)


def _unreadable(ranks: tuple[int, ...], seen: dict[int, RankDump], host_of: dict[int, str]) -> Finding:
    """One ``unreadable`` warning for the ranks whose stack could not be taken, with their errors."""
    ev = tuple(Evidence("stacks", None, f"rank {r}: {seen[r].error or 'no stack'}") for r in ranks[:_EVIDENCE_RANKS])
    first = seen[ranks[0]].error or "no stack"
    return Finding(Kind.UNREADABLE, f"could not read the stacks of {ranks_text(ranks)}: {first}", ranks,
                   tuple(sorted({host_of[r] for r in ranks if r in host_of})), severity=Severity.WARNING, evidence=ev,
                   source=SourceKind.STACKS)

