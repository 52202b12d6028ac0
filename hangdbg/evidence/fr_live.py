"""The flight recorder a ``dump`` collected, beside its stacks: the FR findings that add to the
stack analysis (pure, no I/O).

Rules (the developers' guide: blame only the cause, one suspect per cause):

* the findings are :func:`.flight_recorder.analysis.analyze`'s on the dumps, ``source`` ``flight-recorder``,
  settled as ``report`` settles them: a rank "behind" in one group only because it waits in another
  is waiting (:func:`.flight_recorder.waits.settle_lagging`), and the lag suspects of a job whose stacks show every
  rank moving are warnings (:func:`hangdbg.evidence.fr_join.settle_fr_source`);
* an FR suspect whose ranks the stacks already name as suspects is dropped (one suspect: the
  stacks' finding stays, and says more of where the rank is);
* an FR suspect that names a rank the stacks show waiting (severity ``waiting``) is not a suspect:
  it becomes a ``warning`` that says so (a waiting rank is never blamed);
* an FR lag suspect (``fr-missing-rank``, ``fr-stuck``) the joint verdict did not make its own is a
  warning: with the stacks at hand, :func:`hangdbg.evidence.fr_join.fr_join` decides who is behind
  (a snapshot of a running job finds some rank a collective behind);
* the other FR findings (a mismatch of op, size or dtype) are kept as they are.

The joint stacks+FR verdict (identical stacks, one rank behind in the FR) takes the same dumps from
:attr:`hangdbg.collect.result.StacksResult.fr_dumps`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..model import Analysis, Finding, Kind, Severity, SourceKind
from .fr_join import settle_fr_source
from .flight_recorder.analysis import analyze
from .flight_recorder.grammar import FrDump
from .flight_recorder.waits import fr_waits, settle_lagging

__all__ = ["fr_findings"]

_LAG = (Kind.FR_MISSING_RANK, Kind.FR_STUCK)
"""The flight recorder's own lag findings (a rank a collective behind, a collective not done): in a
``dump`` the stacks are there, so :func:`hangdbg.evidence.fr_join.fr_join` (which sees both) alone
may make them a suspect; a mismatch of op, size or dtype (``fr-mismatch``) stays the recorder's."""


def fr_findings(dumps: Sequence[FrDump], stacks: Analysis) -> list[Finding]:
    """The FR findings to add to a dump's stack findings (module docstring).

    Args:
        dumps: one per rank (the first of a rank kept).
        stacks: the stack analysis of the same moment (joined with the dumps by
            :func:`hangdbg.evidence.fr_join.joined_analysis` when the dump collected them).

    Returns:
        The findings, ``source`` ``flight-recorder``; empty without dumps.
    """
    if not dumps:
        return []
    raw, _rows, _facts = analyze(list(dumps))
    findings = settle_fr_source(settle_lagging(raw, fr_waits(list(dumps))), stacks)
    stack_findings = stacks.findings
    blamed = {r for f in stack_findings if f.severity is Severity.SUSPECT for r in f.ranks}
    waiting = {r for f in stack_findings if f.severity is Severity.WAITING for r in f.ranks} - blamed
    out = []
    for f in findings:
        f = f if f.source is not None else replace(f, source=SourceKind.FLIGHT_RECORDER)
        if f.severity is Severity.SUSPECT and f.ranks:
            if set(f.ranks) <= blamed:
                continue
            held = sorted(set(f.ranks) & waiting)
            if f.kind in _LAG and not held:  # who is behind is the joint verdict's to say (fr_join)
                f = replace(f, severity=Severity.WARNING,
                            summary=f"{f.summary} (not a suspect on its own: the joint verdict with the stacks decides "
                                    "who is behind)")
            elif held:
                f = replace(f, severity=Severity.WARNING,
                            summary=f"{f.summary} (not a suspect: the stacks show rank(s) {', '.join(map(str, held))} waiting)")
        out.append(f)
    return out
