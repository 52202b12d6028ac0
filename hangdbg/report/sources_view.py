"""The short console lines of a ``dump``'s sources: per source, how many ranks gave what, and which
source gave the stacks of the ranks py-spy could not read (:class:`hangdbg.sources.RankSource`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from ..rankset import rank_set
from ..sources import SOURCES, RankSource

__all__ = ["source_lines"]

_LABEL = {"py-spy": "py-spy stacks", "debug-server-stacks": "debug server stacks",
          "debug-server-fr": "debug server flight recorder", "fr-pipe": "flight recorder pipe"}


def source_lines(sources: Sequence[RankSource]) -> list[str]:
    """One line per source that has a status (``py-spy stacks: ok 0-3``; ``debug server stacks: ok 0-3,
    gave the stacks of 0-3``; an absent source with its one reason), in :data:`SOURCES` order."""
    by: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    why: dict[tuple[str, str], str] = {}
    used: dict[str, list[int]] = defaultdict(list)
    for s in sources:
        by[s.source][s.status].append(s.rank)
        why.setdefault((s.source, s.status), s.detail)
        if s.used and s.source != "py-spy":
            used[s.source].append(s.rank)
    lines = []
    for src in SOURCES:
        if src not in by:
            continue
        parts = []
        for status, ranks in sorted(by[src].items(), key=lambda kv: kv[0] != "ok"):
            text = f"{status} {rank_set(sorted(set(ranks)), limit=8)}"
            if status != "ok" and why.get((src, status)):
                text += f" ({why[(src, status)][:160]})"
            parts.append(text)
        line = f"{_LABEL.get(src, src)}: " + "; ".join(parts)
        if used.get(src):
            line += f"; gave the stacks of rank(s) {rank_set(sorted(set(used[src])), limit=8)}"
        lines.append(line)
    return lines
