"""Saved stacks as post-mortem evidence: py-spy dump texts and ``hangdbg dump -o DIR`` outputs.

The reader behind ``hangdbg report`` for stacks: the files go through :func:`load_dumps` and the
same analyzer as a live ``hangdbg dump``; the analyzer's suspects become :class:`Finding` objects.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..analyze import analyze
from ..model import Analysis, Evidence, Finding, RankDump, RankState, SourceReport
from .saved import load_dumps

__all__ = ["sniff", "read", "read_dumps", "with_analysis", "suspect_findings"]

_PYSPY = re.compile(rb"^(?:# hangdbg rank=|Process \d+: |Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:idle|active))", re.M)


def sniff(head: bytes) -> bool:
    """True for py-spy ``dump`` text (py-spy 0.3/0.4: ``Process N: cmd`` / ``Thread 0x..
    (idle)`` lines) and hangdbg's raw files (``# hangdbg rank=`` header)."""
    return b"\x00" not in head and _PYSPY.search(head) is not None


def suspect_findings(a: Analysis) -> list[Finding]:
    """The stack analyzer's suspects as findings, each with the suspect ranks' top frames as
    evidence (``source`` is ``"stacks"``: they come from several files)."""
    out = []
    for s in a.suspects:
        ev = []
        for r in s.ranks[:3]:
            place = a.places.get(r)
            if place is not None:
                ev.append(Evidence("stacks", None, f"rank {r}: {place.describe()}"))
        out.append(Finding(kind=s.kind, summary=s.reason, ranks=tuple(s.ranks), hosts=s.hosts,
                           severity="suspect", evidence=tuple(ev)))
    return out


def read_dumps(paths: list[str]) -> tuple[SourceReport, list[RankDump]]:
    """Read py-spy dump texts into rank dumps (the caller analyzes them with other stacks).

    Args:
        paths: files (or directories) of py-spy dump text.

    Returns:
        ``(report, dumps)``: the report has the files, skipped lines and unreadable files but no
        findings yet (see :func:`with_analysis`).
    """
    try:
        dumps, stats = load_dumps(paths)
    except FileNotFoundError as exc:
        return SourceReport(kind="stacks", files=tuple(paths), errors=((str(exc.filename), "no such file"),)), []
    return SourceReport(kind="stacks", files=tuple(paths), lines_skipped=stats.garbled_lines, errors=stats.unreadable), dumps


def with_analysis(report: SourceReport, a: Analysis, live: bool = True) -> SourceReport:
    """``report`` with the analysis' suspects as findings and one RankState per rank.

    Args:
        report: the stacks report (files, skipped lines).
        a: the joint analysis of every stack source.
        live: the stacks include dumps of live processes (py-spy): a rank without a process is
            then missing. For core files and saved stack texts alone a rank without one only
            left no stack, which is not a finding.
    """
    states = []
    known = set()
    for d in a.ranks:
        known.add(d.rank)
        place = a.places.get(d.rank)
        if d.rank in a.missing_ranks:
            state = "gone"
        elif d.rank in a.unreadable:
            state = "unreadable"
        else:
            state = place.describe() if place else ""
        coll = place.collective if place is not None and place.kind == "collective" else None
        states.append(RankState(rank=d.rank, host=d.host, pid=d.pid, last_collective=coll, state=state, source="stacks"))
    states += [RankState(rank=r, state="missing", source="stacks") for r in a.missing_ranks if r not in known]
    findings = [f for f in suspect_findings(a) if live or f.kind != "missing"]
    return replace(report, findings=tuple(findings), ranks=tuple(sorted(states, key=lambda s: s.rank)),
                   facts={"ranks": len(a.ranks), "groups": len(a.groups), "verdict": a.verdict})


def read(paths: list[str]) -> SourceReport:
    """Read and analyze py-spy dump texts on their own."""
    report, dumps = read_dumps(paths)
    return with_analysis(report, analyze(dumps)) if dumps else report
