"""The console view of ``hangdbg core``: a panel per core file (who, the signal, the crashing
thread's frames), the findings, and the joint stack analysis of several cores; the JSON twin is
:func:`hangdbg.report.build.core_document` of the same readings."""

from __future__ import annotations

from typing import Sequence

from rich.console import Group as RGroup
from rich.console import RenderableType
from rich.panel import Panel

from ..evidence.core.reader import CoreReading
from ..model import Analysis
from .console import render_analysis
from .safetext import escape
from .source_view import findings_table, headline_panel

__all__ = ["render_cores"]

_SHOWN_FRAMES = 12


def render_cores(readings: Sequence[CoreReading], analysis: Analysis, doc: object, tree: bool = True,
                 evidence: bool = True) -> RenderableType:
    """The report of ``hangdbg core``: ``doc`` is its document (headline and findings)."""
    findings = doc.findings  # type: ignore[attr-defined]
    parts: list[RenderableType] = [headline_panel(doc.headline, "core files", doc.found)]  # type: ignore[attr-defined]
    parts += [_core_panel(c) for c in readings]
    if findings:
        parts.append(findings_table(findings, evidence=evidence))
    if len([d for d in analysis.ranks if d.threads]) > 1:
        parts.append(render_analysis(analysis, tree=tree, evidence=evidence))
    return RGroup(*parts)


def _core_panel(c: CoreReading) -> Panel:
    d = c.dump
    lines = []
    who = f"rank {d.rank}" + (f" (from {d.rank_source})" if d.rank_source else "")
    if d.host:
        who += f" on {d.host}"
    lines.append(f"[bold]{escape(who)}[/bold], pid {d.pid}" + (f", world size {d.world_size}" if d.world_size else ""))
    if c.signal:
        how = {"crash": "a fault, raised by the kernel", "self": "raised by the process itself, e.g. abort()", "killed": "sent by another process"}.get(c.how, c.how)
        lines.append(f"signal [bold red]{c.signal}[/bold red] ({how}), crashing thread {c.crashing_tid}")
    elif c.info is not None:
        lines.append("no signal: a core taken on demand (gcore)")
    if d.cmdline:
        lines.append(f"command: {escape(d.cmdline)}")
    if c.executable:
        lines.append(f"[dim]executable {escape(c.executable)} (from {c.exe_source}); {len(d.threads)} threads[/dim]")
    t = c.crash_thread or (d.threads[0] if d.threads else None)
    if t is not None:
        label = "crashing thread" if c.crash_thread is not None else "first thread"
        lines.append(f"{label} {t.thread_id}{' ' + escape(t.name) if t.name else ''}:")
        first_py = next((i for i, f in enumerate(t.frames) if not f.native), len(t.frames))
        top = t.frames[:min(first_py, 4)]
        python = [f for f in t.frames if not f.native][:_SHOWN_FRAMES]
        for f in top:
            lines.append(f"  [dim]{escape(str(f))}[/dim]")
        if first_py > len(top) and python:
            lines.append(f"  [dim]... {first_py - len(top)} native frames[/dim]")
        for f in python:
            lines.append(f"  [bold]{escape(str(f))}[/bold]")
        if len(t.frames) > len(top) + len(python):
            lines.append(f"  [dim]({len(t.frames)} frames in all; --json shows them)[/dim]")
    for msg in c.diagnoses:
        lines.append(f"[yellow]! {escape(msg)}[/yellow]")
    style = "red" if c.signal else ("yellow" if c.info is None else "green")
    return Panel("\n".join(lines), title=escape(f"core {c.path}"), title_align="left", border_style=style)
