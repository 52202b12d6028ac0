"""Terminal views of findings and of a post-mortem :class:`~hangdbg.model.SourceReport` (findings
with their evidence, per-rank rows), shared by the commands that read one kind of evidence.

Builds rich renderables only; never prints. Every string from a log is escaped (``rich.markup``)
or passed as :class:`rich.text.Text`.
"""

from __future__ import annotations

from typing import Sequence

from rich.console import Group as RGroup
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table

from ..model import Finding, RankState, Severity, SourceReport
from ..rankset import ranks_text
from .safetext import escape, safe_text, visible

__all__ = ["SEVERITY_STYLE", "findings_table", "ranks_table", "render_source_report", "headline_panel", "who_text"]

SEVERITY_STYLE = {Severity.SUSPECT: "bold red", Severity.WARNING: "yellow", Severity.WAITING: "cyan", Severity.INFO: "dim"}


def headline_panel(headline: str, title: str, found: bool, read: bool = True) -> Panel:
    """The headline in a panel: red when a suspect was named, yellow when nothing could be read."""
    style = "bold red" if found else ("bold green" if read else "bold yellow")
    return Panel(safe_text(headline), title=escape(title), border_style=style, expand=True)


def who_text(f: Finding) -> str:
    """Ranks, hosts and GPUs of a finding, one per line (plain text)."""
    who = []
    if f.ranks:
        who.append(ranks_text(f.ranks))
    if f.hosts:
        who.append(", ".join(f.hosts[:3]) + (" ..." if len(f.hosts) > 3 else ""))
    if f.gpus:
        who.append(", ".join(f.gpus[:2]))
    return "\n".join(who)


def findings_table(findings: Sequence[Finding], evidence: bool = True, title: str = "Findings") -> Table:
    """Severity, kind, who, what (with the action and, unless ``evidence`` is False, a few raw lines)."""
    t = Table(title=title, title_justify="left", expand=True, show_lines=evidence)
    t.add_column("severity", no_wrap=True)
    t.add_column("kind", style="dim", no_wrap=True)
    t.add_column("who", ratio=1, overflow="fold")
    t.add_column("what", ratio=3, overflow="fold")
    for f in findings:
        body = safe_text(f.summary)
        if f.action:
            body.append(visible(f"\naction: {f.action}"), style="bold")
        if evidence:  # raw lines of files (the stack analysis' own "stacks" lines repeat the summary)
            for e in [e for e in f.evidence if e.source != "stacks"][:3]:
                where = f"{e.source}:{e.line}" if e.line is not None else e.source
                body.append(visible(f"\n  {where}: {e.text[:240]}"), style="dim")
        t.add_row(safe_text(str(f.severity), style=SEVERITY_STYLE.get(f.severity, "")), str(f.kind), safe_text(who_text(f)), body)
    return t


def ranks_table(rows: Sequence[RankState], title: str = "Ranks", max_ranks: int | None = None,
                suspects: frozenset[int] = frozenset()) -> Table:
    """One row per rank, source and group: host, pid, group, last collective, seq, state; the rows
    of the first ``max_ranks`` ranks (all when None), the suspects' in red."""
    t = Table(title=title, title_justify="left", expand=True)
    for col in ("rank", "host", "pid", "source", "group", "last collective", "seq"):
        t.add_column(col, no_wrap=True)
    t.add_column("state", ratio=1, overflow="fold")
    ranks = sorted({r.rank for r in rows})
    shown = set(ranks if max_ranks is None else ranks[:max_ranks])
    for r in rows:
        if r.rank in shown:
            t.add_row(str(r.rank), safe_text(r.host), "" if r.pid is None else str(r.pid), str(r.source),
                      safe_text(r.group or "-"), safe_text(r.last_collective or ""), "" if r.seq is None else str(r.seq),
                      safe_text(r.state), style="red" if r.rank in suspects else "")
    if len(ranks) > len(shown):
        t.add_row("...", "", "", "", "", f"{len(ranks) - len(shown)} more ranks (see --json)", "", "")
    return t


def render_source_report(rep: SourceReport, headline: str, title: str, extra: list[RenderableType] | None = None,
                         evidence: bool = True, rank_rows: int | None = None) -> RenderableType:
    """Headline panel, ``extra`` views, per-rank table (the rows of at most ``rank_rows`` ranks,
    none for 0), findings, and a footer with counts/errors."""
    parts: list[RenderableType] = [headline_panel(headline, title, rep.found, rep.records > 0)]
    parts += extra or []
    if rep.ranks and rank_rows != 0:
        parts.append(ranks_table(rep.ranks, max_ranks=rank_rows, suspects=frozenset(r for f in rep.suspects for r in f.ranks)))
    if rep.findings:
        parts.append(findings_table(rep.findings, evidence))
    foot = (f"{len(rep.files)} file(s), {rep.records} {rep.kind} record(s), {rep.lines_read} lines read, "
            f"{rep.lines_skipped} garbled line(s) skipped")
    parts.append(safe_text(foot, style="dim"))
    for e in rep.errors:
        parts.append(safe_text(f"could not read {e.file}: {e.reason}", style="yellow"))
    return RGroup(*parts)
