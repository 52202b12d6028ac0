"""The terminal report of a stack analysis: headline first, then the findings, the ranks that
could not be read, equivalence classes, the merged tree.

Renders with rich onto any :class:`rich.console.Console` (tests use a fixed-width in-memory one);
builds renderables only, never prints on its own.
"""

from __future__ import annotations

from typing import Iterator

from rich.console import Group as RGroup
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.tree import Tree

from ..model import Analysis, TreeNode
from ..rankset import compress
from .evidence import findings_table
from .safetext import escape, safe_text

__all__ = ["render_analysis", "headline_title"]

_COLLAPSE = 3  # chains of single-child nodes with unchanged ranks longer than this are folded


def headline_title(a: Analysis) -> str:
    """``hang found`` / ``no single rank stands out`` / ``nothing could be read``."""
    if a.found:
        return "hang found"
    return "no single rank stands out" if a.readable else "nothing could be read"


def _headline(a: Analysis) -> Panel:
    style = "bold red" if a.found else ("bold green" if a.readable else "bold yellow")
    return Panel(safe_text(a.headline), title=headline_title(a), border_style=style, expand=True)


def _groups(a: Analysis) -> Table:
    t = Table(title="Equivalence classes (ranks with the same stack)", title_justify="left", expand=True)
    t.add_column("#", justify="right")
    t.add_column("ranks", no_wrap=True)
    t.add_column("n", justify="right")
    t.add_column("where", ratio=1)
    t.add_column("stack (innermost first)", ratio=2)
    suspects = {r for s in a.suspects for r in s.ranks}
    for i, g in enumerate(a.groups, 1):
        style = "red" if suspects.intersection(g.ranks) else ""
        frames = "\n".join(escape(str(f)) for f in g.frames) or "(no Python frames)"
        thread = f"\n[dim]thread {escape(g.thread)}[/dim]" if g.thread and g.thread != "MainThread" else ""
        t.add_row(str(i), compress(g.ranks), str(len(g.ranks)), escape(g.place.describe()) + thread, frames, style=style)
    return t


def _tree(node: TreeNode, total: int) -> Tree:
    root = Tree(f"[bold]merged call tree[/bold] ({total} ranks; ranks shown as [cyan]\\[set][/cyan])")
    todo: list[tuple[TreeNode, Tree]] = [(c, root) for c in reversed(node.children)]
    while todo:
        n, parent = todo.pop()
        chain = [n]
        while len(chain[-1].children) == 1 and chain[-1].children[0].ranks == n.ranks:
            chain.append(chain[-1].children[0])
        if len(chain) > _COLLAPSE:
            label = (
                f"[cyan]\\[{compress(n.ranks)}][/cyan] {escape(str(chain[0].frame))}\n"
                f"[dim]  ... {len(chain) - 2} frames ...[/dim]\n"
                f"[cyan]\\[{compress(n.ranks)}][/cyan] {escape(str(chain[-1].frame))}"
            )
        else:
            label = "\n".join(f"[cyan]\\[{compress(c.ranks)}][/cyan] {escape(str(c.frame))}" for c in chain)
        branch = parent.add(label)
        todo.extend((c, branch) for c in reversed(chain[-1].children))
    return root


def _errors(a: Analysis) -> Iterator[RenderableType]:
    failed = [d for d in a.ranks if d.error]
    if failed:
        t = Table(title="Ranks whose stack could not be taken", title_justify="left", expand=True)
        t.add_column("rank", no_wrap=True)
        t.add_column("pid", no_wrap=True)
        t.add_column("error", ratio=1)
        for d in failed:
            t.add_row(str(d.rank), str(d.pid or ""), escape(d.error or ""))
        yield t
    if a.missing_ranks:
        yield safe_text(f"Missing ranks (no process): {compress(a.missing_ranks)}", style="bold red")
    if a.progressing:
        yield safe_text(f"Progressing ranks (stack changed between samples): {compress(a.progressing)}", style="yellow")


def render_analysis(a: Analysis, tree: bool = True, evidence: bool = True) -> RenderableType:
    """All parts of the report as one renderable (headline, findings, problems, classes, tree)."""
    parts: list[RenderableType] = [_headline(a)]
    if a.findings:
        parts.append(findings_table(a.findings, evidence, title="Findings (suspects first)"))
    parts.extend(_errors(a))
    if a.groups:
        parts.append(_groups(a))
    if tree and a.tree.children:
        parts.append(_tree(a.tree, len(a.tree.ranks)))
    return RGroup(*parts)
