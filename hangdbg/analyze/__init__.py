"""The analyzer: from per-rank stacks to equivalence classes, a merged tree and suspects.

Pure computation on :mod:`hangdbg.model` objects (the only I/O is reading a source line of a
local file to recognise ``with lock:`` waits). Cost grows with the number of ranks times the
number of threads, plus the number of distinct stacks times their depth.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..model import Analysis, Group, RankDump
from .classes import classify_ranks, group_ranks
from .places import place_of
from .rankset import compress, expand
from .suspects import expected_ranks, find_suspects, progressing_ranks
from .tree import build_tree

__all__ = ["analyze", "compress", "expand", "place_of", "build_tree"]

_GONE = re.compile(r"^process \d+ is gone")


def analyze(dumps: list[RankDump] | tuple[RankDump, ...], whole_job: bool = False) -> Analysis:
    """Analyze the dumps of one job.

    Args:
        dumps: one :class:`RankDump` per rank (any order; duplicates of a rank keep the first).
        whole_job: every node of the job was asked (``dump --jobid/--hosts``): any rank of
            ``range(world_size)`` without a dump is missing, including those of nodes that
            never answered.

    Returns:
        An :class:`Analysis` whose ``suspects`` is empty when no rank stands out.
    """
    seen: dict[int, RankDump] = {}
    for d in dumps:
        seen.setdefault(d.rank, d)
    dumps = sorted(seen.values(), key=lambda d: d.rank)
    views = classify_ranks(dumps)
    by_rank = {v.rank: v for v in views}
    gone = [d.rank for d in dumps if d.error and _GONE.match(d.error)]
    unreadable = tuple(d.rank for d in dumps if not d.threads and d.rank not in gone)
    expected, elsewhere = expected_ranks(dumps, whole_job)
    missing = sorted((expected - set(seen)) | set(gone))
    progressing = progressing_ranks(dumps, by_rank)

    raw_groups = group_ranks(views)
    groups = tuple(Group(ranks, frames, place, thread) for frames, place, ranks, thread in raw_groups)
    tree = build_tree([(g.frames, frozenset(g.ranks)) for g in groups])

    all_progress = bool(views) and len(progressing) == len(views) and not missing
    suspects = [] if all_progress else find_suspects(views, missing, progressing)
    host_of = {d.rank: d.host for d in dumps if d.host}
    suspects = [replace(s, hosts=tuple(sorted({host_of[r] for r in s.ranks if r in host_of}))) for s in suspects]
    multi_node = len(set(host_of.values())) > 1
    verdict = _verdict(groups, suspects, missing, progressing, all_progress, unreadable, elsewhere, multi_node)
    return Analysis(
        ranks=tuple(dumps),
        groups=groups,
        tree=tree,
        suspects=tuple(suspects),
        missing_ranks=tuple(missing),
        verdict=verdict,
        places={v.rank: v.place for v in views},
        progressing=tuple(sorted(progressing)),
        unreadable=unreadable,
    )


def _verdict(groups, suspects, missing, progressing, all_progress, unreadable, elsewhere, multi_node=False) -> str:
    notes = []
    if unreadable:
        notes.append(f"could not read the stacks of ranks {compress(unreadable)}")
    if elsewhere:
        notes.append(f"{elsewhere} ranks live on nodes not examined")
    tail = (" (" + "; ".join(notes) + ")") if notes else ""
    if all_progress:
        return f"no hang: every rank's stack changed between samples, the job is making progress{tail}"
    if suspects and len({s.reason for s in suspects}) == 1 and len(suspects) > 1:
        # one finding that names several groups (a collective split with no majority)
        return f"suspect ranks {compress(r for s in suspects for r in s.ranks)}: {suspects[0].reason}{tail}"
    if suspects:
        first = suspects[0]
        who = f"rank {first.ranks[0]}" if len(first.ranks) == 1 else f"ranks {compress(first.ranks)}"
        if multi_node and first.hosts:
            who += f" on {', '.join(first.hosts[:4])}{' ...' if len(first.hosts) > 4 else ''}"
        more = f" (+{len(suspects) - 1} more suspect group{'s' if len(suspects) > 2 else ''})" if len(suspects) > 1 else ""
        return f"suspect {who}: {first.reason}{more}{tail}"
    if not groups:
        return f"no stack could be read{tail}"
    if len(groups) == 1:
        g = groups[0]
        return f"all {len(g.ranks)} ranks are in the same place ({g.place.describe()}); no single rank stands out{tail}"
    kinds = {g.place.kind for g in groups}
    if kinds <= {"init"}:
        return f"all ranks wait in rendezvous/init; no single rank stands out{tail}"
    return f"no rank waits in a collective; the ranks are in {len(groups)} places{tail}"
