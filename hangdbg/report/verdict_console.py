"""The terminal view of ``hangdbg report``: verdict, suspects with their evidence, per-rank table,
the stack analysis (when stacks were read) and the files that could not be used."""

from __future__ import annotations

from rich.console import Group as RGroup
from rich.console import RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..model import Finding, Severity, Verdict
from ..rankset import compress
from .console import render_analysis

__all__ = ["render_verdict"]

_MAX_RANK_ROWS = 64


def _findings(title: str, findings: tuple[Finding, ...], style: str, evidence: bool = True) -> Table:
    t = Table(title=title, title_justify="left", expand=True)
    t.add_column("who", style=style, no_wrap=True)
    t.add_column("what", ratio=2)
    if evidence:
        t.add_column("evidence", ratio=2)
    t.add_column("kind", style="dim", no_wrap=True)
    for f in findings:
        who = []
        if f.ranks:
            who.append("rank " + compress(f.ranks))
        if f.hosts:
            who.append(", ".join(f.hosts[:3]) + (" ..." if len(f.hosts) > 3 else ""))
        if f.gpus:
            who.append(", ".join(f.gpus[:2]))
        what = escape(f.summary) + (f"\n[bold]action:[/bold] {escape(f.action)}" if f.action else "")
        cells = [escape("\n".join(who)), what]
        if evidence:
            cells.append("\n".join(escape(f"{_loc(e.source, e.line)} {e.text[:160]}") for e in f.evidence[:3]))
        t.add_row(*cells, f"{f.kind}\n{f.source}" if f.source else str(f.kind))
    return t


def _loc(source: str, line: int | None) -> str:
    name = source.rsplit("/", 1)[-1]
    return f"{name}:{line}" if line is not None else name


def _ranks(v: Verdict) -> Table:
    t = Table(title="Per rank: last collective and state, by source", title_justify="left", expand=True)
    t.add_column("rank", justify="right", no_wrap=True)
    t.add_column("host", no_wrap=True)
    t.add_column("source", style="dim", no_wrap=True)
    t.add_column("last collective", no_wrap=True)
    t.add_column("seq", justify="right", no_wrap=True)
    t.add_column("state", ratio=1)
    suspects = {r for f in v.suspects for r in f.ranks}
    ranks = sorted({s.rank for s in v.rank_states})
    shown = set(ranks[:_MAX_RANK_ROWS])
    for s in v.rank_states:
        if s.rank not in shown:
            continue
        grp = f" [{s.group}]" if s.group else ""
        t.add_row(str(s.rank), escape(s.host), str(s.source), escape((s.last_collective or "") + grp),
                  "" if s.seq is None else str(s.seq), escape(s.state), style="red" if s.rank in suspects else "")
    if len(ranks) > _MAX_RANK_ROWS:
        t.add_row("...", "", "", f"{len(ranks) - _MAX_RANK_ROWS} more ranks (see --json / --html)", "", "")
    return t


def render_verdict(v: Verdict, tree: bool = True, evidence: bool = True) -> RenderableType:
    """All parts of the report as one renderable."""
    style = "bold red" if v.found else ("bold green" if v.recognised else "bold yellow")
    title = "failure found" if v.found else ("no suspect" if v.recognised else "nothing could be read")
    parts: list[RenderableType] = [Panel(Text(v.headline), title=title, border_style=style, expand=True)]
    if v.suspects:
        parts.append(_findings("Suspects (most likely cause first)", v.suspects, "bold red", evidence))
    others = tuple(f for f in v.findings if f.severity is not Severity.SUSPECT)
    if others:
        parts.append(_findings("Other findings (warnings, waiting ranks, notes)", others, "yellow", evidence))
    if v.rank_states:
        parts.append(_ranks(v))
    if v.analysis is not None:
        parts.append(Text("Stacks", style="bold"))
        parts.append(render_analysis(v.analysis, tree=tree, evidence=evidence))
    counts = ", ".join(f"{s.kind}: {len(s.files)} files, {s.records} records"
                       + (f" ({s.lines_skipped} lines skipped)" if s.lines_skipped else "") for s in v.sources)
    if counts:
        parts.append(Text(f"Read: {counts}", style="dim"))
    if v.unparsed:
        t = Table(title="Files not used", title_justify="left", expand=True)
        t.add_column("file", no_wrap=True)
        t.add_column("why", ratio=1)
        for e in v.unparsed:
            t.add_row(escape(e.file), escape(e.reason))
        parts.append(t)
    return RGroup(*parts)
