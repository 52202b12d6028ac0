"""The terminal report: verdict first, then suspects, equivalence classes, the merged tree.

Renders with rich onto any :class:`rich.console.Console` (tests use a fixed-width in-memory one);
builds renderables only, never prints on its own.
"""

from __future__ import annotations

from typing import Iterator

from rich.console import Group as RGroup
from rich.console import RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..analyze.rankset import compress
from ..model import Analysis, TreeNode

__all__ = ["render_analysis"]

_COLLAPSE = 3  # chains of single-child nodes with unchanged ranks longer than this are folded


def _verdict(a: Analysis) -> Panel:
    style = "bold red" if a.suspects else "bold green"
    title = "hang found" if a.suspects else "no single rank stands out"
    return Panel(Text(a.verdict), title=title, border_style=style, expand=True)


def _suspects(a: Analysis) -> Table:
    t = Table(title="Suspects", title_justify="left", expand=True)
    multi_node = len({d.host for d in a.ranks if d.host}) > 1
    t.add_column("ranks", style="bold red", no_wrap=True)
    if multi_node:
        t.add_column("nodes", style="bold", no_wrap=True)
    t.add_column("why", ratio=1)
    t.add_column("kind", style="dim", no_wrap=True)
    for s in a.suspects:
        nodes = [", ".join(s.hosts)] if multi_node else []
        t.add_row(compress(s.ranks), *nodes, escape(s.reason), s.kind)
    return t


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
        yield Text(f"Missing ranks (no process): {compress(a.missing_ranks)}", style="bold red")
    if a.progressing:
        yield Text(f"Progressing ranks (stack changed between samples): {compress(a.progressing)}", style="yellow")


def render_analysis(a: Analysis, tree: bool = True) -> RenderableType:
    """All parts of the report as one renderable (verdict, suspects, problems, classes, tree)."""
    parts: list[RenderableType] = [_verdict(a)]
    if a.suspects:
        parts.append(_suspects(a))
    parts.extend(_errors(a))
    if a.groups:
        parts.append(_groups(a))
    if tree and a.tree.children:
        parts.append(_tree(a.tree, len(a.tree.ranks)))
    return RGroup(*parts)
