"""The console view of ``hangdbg collect``: a row per node (status, files sent, why it failed);
the JSON twin is :func:`hangdbg.report.build.collect_document` of the same result."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from ..collect.result import CollectResult
from .safetext import escape

__all__ = ["render_collect"]


def render_collect(result: CollectResult) -> RenderableType:
    """The nodes' table and where the evidence is."""
    t = Table(title="Evidence per node", title_justify="left", expand=True)
    t.add_column("node", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("files", justify="right")
    t.add_column("notes", ratio=1)
    for n in result.nodes:
        style = "red" if n.status.failed else ""
        t.add_row(escape(n.host), n.status, str(len(n.files)), escape(n.reason or ""), style=style)
    out = escape(result.out_dir)
    return Group(t, f"evidence in {out}: run [bold]hangdbg report {out}[/bold]")
