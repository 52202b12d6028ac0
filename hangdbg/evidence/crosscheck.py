"""Cross-check of flight-recorder dumps with the stacks of the same job.

Both say where a rank is: the stack (``Analysis.places``: in which collective the chosen thread
waits) and the flight recorder (the collective it recorded last and that did not complete). When
they agree, the verdict stands on two independent sources; when they contradict (the stack in
``barrier`` while the recorder has ``all_reduce`` pending; an async op pending while the stack is
outside any collective) the user is told. Heuristic; collective names are compared after folding
the c10d aliases (``_allgather_base`` ~ ``all_gather_into_tensor``).
"""

from __future__ import annotations

from collections import defaultdict

from ..model import Analysis, Finding, Kind, RankState, Severity, SourceReport
from ..enums import PlaceKind
from ..rankset import ranks_text

__all__ = ["cross_check"]



def _norm(op: str | None) -> str:
    op = (op or "").lower().lstrip("_")
    for a, b in (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
                 ("_into_tensor", ""), ("_base", ""), ("_oop", ""), ("_coalesced", ""), ("_single", "")):
        op = op.replace(a, b)
    return op.replace("isend", "send").replace("irecv", "recv")


def cross_check(fr: SourceReport, stacks: Analysis) -> tuple[Finding, ...]:
    """Compare where the stacks say each rank is with the flight recorder's pending collective.

    Args:
        fr: a ``flight-recorder`` :class:`SourceReport` (its per-rank rows).
        stacks: the stack :class:`Analysis` of the same job (``places`` per rank).

    Returns:
        ``fr-agrees`` (info: ranks whose stack is in the collective the recorder has pending) and
        ``fr-contradicts`` findings (warning: the stack is in another collective, or in one while
        the recorder has nothing pending, or outside collectives while one is pending). Empty
        when no rank is in both.
    """
    pending: dict[int, list[RankState]] = defaultdict(list)
    known: set[int] = set()
    for row in fr.ranks:
        if row.last_collective is None:
            continue
        known.add(row.rank)
        if not row.state.startswith("completed"):
            pending[row.rank].append(row)
    agree: list[int] = []
    agree_what: set[str] = set()
    out: list[Finding] = []
    for rank, place in sorted(stacks.places.items()):
        if rank not in known:
            continue
        rows = pending.get(rank, [])
        fr_text = ", ".join(f"{r.last_collective} seq {r.seq} in pg {r.group} ({r.state.split(';')[0]})" for r in rows)
        if place.kind == PlaceKind.COLLECTIVE:
            if any(_norm(r.last_collective) == _norm(place.collective) for r in rows):
                agree.append(rank)
                agree_what.add(place.collective or "?")
            elif rows:
                out.append(Finding(Kind.FR_CONTRADICTS, f"rank {rank}: the stack is {place.describe()} but the flight "
                                   f"recorder's pending collective is {fr_text}", ranks=(rank,), severity=Severity.WARNING))
            else:
                out.append(Finding(Kind.FR_CONTRADICTS, f"rank {rank}: the stack is {place.describe()} but the flight "
                                   "recorder has every recorded collective completed (the call did not reach the "
                                   "process group, or the dump is older than the stack)", ranks=(rank,), severity=Severity.WARNING))
        elif place.kind == PlaceKind.OUTSIDE and rows:
            out.append(Finding(Kind.FR_CONTRADICTS, f"rank {rank}: the flight recorder has {fr_text} pending but the "
                               f"stack is outside any collective ({place.describe()}): an async op not waited for, "
                               "or the rank went on without it", ranks=(rank,), severity=Severity.WARNING))
    if agree:
        out.insert(0, Finding(Kind.FR_AGREES, f"stacks and flight recorder agree for {ranks_text(agree)}: in "
                              f"{', '.join(sorted(agree_what))}, which the recorder has pending", ranks=tuple(agree),
                              severity=Severity.INFO))
    return tuple(out)
