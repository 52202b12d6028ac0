"""The terminal view of ``hangdbg report``: verdict, suspects with their evidence, per-rank table,
the stack analysis (when stacks were read) and the files that could not be used."""

from __future__ import annotations

from rich.console import Group as RGroup
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table

from ..model import Finding, Severity, Verdict
from .console import render_analysis
from .source_view import ranks_table, who_text
from .safetext import escape, safe_text

__all__ = ["render_verdict"]

_MAX_RANKS = 64


def _findings(title: str, findings: tuple[Finding, ...], style: str, evidence: bool = True) -> Table:
    t = Table(title=title, title_justify="left", expand=True)
    t.add_column("who", style=style, ratio=1, overflow="fold")
    t.add_column("what", ratio=2, overflow="fold")
    if evidence:
        t.add_column("evidence", ratio=2, overflow="fold")
    t.add_column("kind", style="dim", no_wrap=True)
    for f in findings:
        what = escape(f.summary) + (f"\n[bold]action:[/bold] {escape(f.action)}" if f.action else "")
        cells = [escape(who_text(f)), what]
        if evidence:
            cells.append("\n".join(escape(f"{_loc(e.source, e.line)} {e.text[:160]}") for e in f.evidence[:3]))
        t.add_row(*cells, f"{f.kind}\n{f.source}" if f.source else str(f.kind))
    return t


def _loc(source: str, line: int | None) -> str:
    name = source.rsplit("/", 1)[-1]
    return f"{name}:{line}" if line is not None else name


def render_verdict(v: Verdict, tree: bool = True, evidence: bool = True) -> RenderableType:
    """All parts of the report as one renderable."""
    style = "bold red" if v.found else ("bold green" if v.recognised else "bold yellow")
    title = "failure found" if v.found else ("no suspect" if v.recognised else "nothing could be read")
    parts: list[RenderableType] = [Panel(safe_text(v.headline), title=title, border_style=style, expand=True)]
    if v.suspects:
        parts.append(_findings("Suspects (most likely cause first)", v.suspects, "bold red", evidence))
    others = tuple(f for f in v.findings if f.severity is not Severity.SUSPECT)
    if others:
        parts.append(_findings("Other findings (warnings, waiting ranks, notes)", others, "yellow", evidence))
    if v.rank_states:
        parts.append(ranks_table(v.rank_states, "Per rank: last collective and state, by source", _MAX_RANKS,
                                 frozenset(r for f in v.suspects for r in f.ranks)))
    if v.analysis is not None:
        parts.append(safe_text("Stacks", style="bold"))
        parts.append(render_analysis(v.analysis, tree=tree, evidence=evidence))
    counts = ", ".join(f"{s.kind}: {len(s.files)} files, {s.records} records"
                       + (f" ({s.lines_skipped} lines skipped)" if s.lines_skipped else "") for s in v.sources)
    if counts:
        parts.append(safe_text(f"Read: {counts}", style="dim"))
    if v.unparsed:
        t = Table(title="Files not used", title_justify="left", expand=True)
        t.add_column("file", ratio=1, overflow="fold")
        t.add_column("why", ratio=1, overflow="fold")
        for e in v.unparsed:
            t.add_row(escape(e.file), escape(e.reason))
        parts.append(t)
    return RGroup(*parts)
