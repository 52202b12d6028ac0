"""The headline of a stack analysis (``dump``, ``analyze``, ``demo``, ``core``): the one sentence on top."""

from __future__ import annotations

from typing import Sequence

from ..model import EquivalenceClass, Finding, Kind, suspects_of
from ..enums import PlaceKind
from ..rankset import rank_set, ranks_text

__all__ = ["stacks_headline"]


def stacks_headline(classes: Sequence[EquivalenceClass], findings: Sequence[Finding], all_progress: bool,
                    unreadable: Sequence[int], elsewhere: int, multi_node: bool = False) -> str:
    """The sentence of a stack analysis.

    Args:
        classes: the equivalence classes.
        findings: the analysis' findings (suspects first).
        all_progress: every rank's stack changed between samples.
        unreadable: ranks whose stack could not be taken.
        elsewhere: ranks of the job on nodes that were not examined.
        multi_node: the ranks are on several nodes (name the suspects' hosts).
    """
    notes = []
    if unreadable:
        notes.append(f"could not read the stacks of {ranks_text(unreadable)}")
    if elsewhere:
        notes.append(f"{elsewhere} ranks live on nodes not examined")
    tail = (" (" + "; ".join(notes) + ")") if notes else ""
    suspects = suspects_of(findings)
    if all_progress:
        return f"no hang: every rank's stack changed between samples, the job is making progress{tail}"
    if suspects and len({s.summary for s in suspects}) == 1 and len(suspects) > 1:
        # one finding that names several groups (a collective split with no majority)
        return f"suspect ranks {rank_set(r for s in suspects for r in s.ranks)}: {suspects[0].summary}{tail}"
    if suspects and suspects[0].kind is Kind.NODE_UNHEALTHY:  # its summary names the node and says "drain the host"
        n = len(suspects) - 1
        more = f" (+{n} more suspect group{'s' if n > 1 else ''})" if n else ""
        return f"suspect {suspects[0].summary}{more}{tail}"
    if suspects:
        first = suspects[0]
        lead = ranks_text(first.ranks)
        if multi_node and first.hosts:
            lead += f" on {', '.join(first.hosts[:4])}{' ...' if len(first.hosts) > 4 else ''}"
        n = len(suspects) - 1
        more = f" (+{n} more suspect group{'s' if n > 1 else ''})" if n else ""
        return f"suspect {lead}: {first.summary}{more}{tail}"
    undecided = [f for f in findings if f.kind is Kind.UNDECIDED]
    if undecided:
        u = undecided[0]
        return f"undecided: {u.summary}; {u.action}{tail}"
    if not classes:
        return f"no stack could be read{tail}"
    if len(classes) == 1:
        g = classes[0]
        if len(g.ranks) == 1:
            return f"the one rank read is {g.place.describe()}; no other rank to compare it with{tail}"
        return f"all {len(g.ranks)} ranks are in the same place ({g.place.describe()}); no single rank stands out{tail}"
    if {c.place.kind for c in classes} <= {PlaceKind.INIT}:
        return f"all ranks wait in rendezvous/init; no single rank stands out{tail}"
    waiting = [c for c in classes if c.place.kind in (PlaceKind.COLLECTIVE, PlaceKind.INIT)]
    if waiting:  # never "no rank waits" while the classes (and the JSON's places) say some do
        ranks = [r for c in waiting for r in c.ranks]
        verb = "waits" if len(ranks) == 1 else "wait"
        where = waiting[0].place.describe() + (f" (+{len(waiting) - 1} more places)" if len(waiting) > 1 else "")
        return (f"{ranks_text(sorted(ranks))} {verb} {where}; the ranks are in {len(classes)} places and no single rank "
                f"stands out{tail}")
    return f"no rank waits in a collective; the ranks are in {len(classes)} places{tail}"
