"""The ranks that only wait: grouped by what they wait for (:func:`waiting_groups`), the chain of
who waits for whom as text (:func:`chain_text`), and one ``waiting`` finding per group once a
suspect is named (:func:`waiting_findings`). Pure computation on the wait-for graph
(:mod:`hangdbg.stacks.waitfor`)."""

from __future__ import annotations

from typing import Mapping

from ..model import Finding, Kind, Severity
from ..rankset import ranks_text
from .waitfor import WaitGraph

__all__ = ["Groups", "waiting_groups", "select", "chain_text", "waiting_findings"]


Groups = list[tuple[tuple[int, ...], tuple[int, ...]]]


def waiting_groups(graph: WaitGraph) -> Groups:
    """The waiting ranks as ``(ranks, waits_for)`` groups: the ranks that wait by the same edges
    of the graph (one place, mostly), largest first; waiting ranks whose target is unknown form
    groups of their own (``waits_for`` empty). Computed once per analysis (:func:`select`
    narrows it with set operations); the per-rank work is a list comprehension per edge."""
    out: Groups = []
    edges_of = graph.out
    several: dict[tuple[int, ...], list[int]] = {}
    for e in graph.edges:
        mine = edges_of.get(e.waiters[0]) if e.waiters else None
        if mine is not None and len(mine) == 1:
            alone = [r for r in e.waiters if edges_of[r] is mine]
        else:
            alone = [r for r in e.waiters if len(edges_of[r]) == 1]
        if alone:
            out.append((tuple(alone), e.targets))
        if len(alone) < len(e.waiters):
            taken = set(alone)
            for r in e.waiters:
                if r not in taken:
                    several.setdefault(edges_of[r], []).append(r)
    for rs in several.values():
        out.append((tuple(sorted(set(rs))), graph.targets(rs[0])))
    unknown: dict[int, list[int]] = {}
    for r in graph.unresolved:
        if r not in edges_of:
            unknown.setdefault(id(graph.waits[r]), []).append(r)
    out.extend((tuple(rs), ()) for rs in unknown.values())
    out.sort(key=lambda g: (-len(g[0]), g[0][0]))
    return out


def select(groups: Groups, skip: set[int], within: set[int] | Mapping[int, int] | None = None) -> Groups:
    """``groups`` without the ``skip`` ranks and, when given, only the ``within`` ranks."""
    out = []
    for ranks, targets in groups:
        keep = set(ranks).difference(skip)
        if within is not None:
            keep.intersection_update(within)
        if keep:
            out.append((ranks if len(keep) == len(ranks) else tuple(sorted(keep)), targets))
    return out


def chain_text(graph: WaitGraph, groups: list[tuple[tuple[int, ...], tuple[int, ...]]], root: int | None = None) -> str:
    """``ranks 4,6-7 wait for it in all_reduce at x.py:40; ranks 0-3 wait for ranks 4-7 in ...``."""
    parts = []
    for ranks, targets in groups:
        verb = "waits" if len(ranks) == 1 else "wait"
        whom = "it" if root is not None and targets == (root,) else ranks_text(targets) if targets else "others"
        parts.append(f"{ranks_text(ranks)} {verb} for {whom} {graph.waits[ranks[0]].describe()}")
    return "; ".join(parts)


def waiting_findings(graph: WaitGraph, suspects: list[Finding], groups: Groups | None = None) -> list[Finding]:
    """The ranks that wait while suspects were named: one ``waiting`` finding per place and set of
    ranks waited for (``waits_for``: the ranks they wait for directly, else the suspects). Empty
    when no suspect was named.

    Args:
        graph: the wait-for graph of the analysis.
        suspects: the findings of :func:`find_suspects`.
        groups: :func:`waiting_groups` of the graph (computed when not given).
    """
    blamed = sorted({r for f in suspects if f.is_suspect for r in f.ranks})
    if not blamed:
        return []
    out = []
    for ranks, targets in select(waiting_groups(graph) if groups is None else groups, set(blamed)):
        waits_for = targets or tuple(blamed)
        out.append(Finding(Kind.WAITING, chain_text(graph, [(ranks, waits_for)]), ranks, severity=Severity.WAITING,
                           waits_for=waits_for))
    return out
