"""The console view of ``hangdbg schema --kinds``: the finding kinds (with the level each is about),
the severities and the evidence kinds, each member with its description (the JSON Schema, the
other view of the same enums, is :func:`hangdbg.report.schema.schema_text`)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from ..model import Kind, Severity, SourceKind

__all__ = ["render_kinds"]


def render_kinds() -> RenderableType:
    """One table per enum: value, (for a finding kind) its level, meaning."""
    tables = []
    for enum, title in ((Kind, "finding kinds"), (Severity, "severities (most important first)"),
                        (SourceKind, "evidence kinds")):
        t = Table(title=title, title_justify="left", expand=True)
        t.add_column("value", no_wrap=True, style="bold")
        if enum is Kind:
            t.add_column("level", no_wrap=True)  # what a finding of the kind is about
        t.add_column("meaning", ratio=1)
        for m in enum:
            t.add_row(m.value, *((m.level.value,) if isinstance(m, Kind) else ()), m.doc)
        tables.append(t)
    return Group(*tables)
