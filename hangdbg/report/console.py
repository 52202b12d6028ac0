"""The terminal report of a stack analysis: headline first, then the findings, the ranks that
could not be read, equivalence classes, the merged tree.

Renders with rich onto any :class:`rich.console.Console` (tests use a fixed-width in-memory one);
builds renderables only, never prints on its own.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from rich.console import Group as RGroup
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.tree import Tree

from ..collect.result import StacksResult
from ..model import Analysis, Finding, TreeNode
from ..rankset import rank_class
from .source_view import findings_table
from .sources_view import source_lines
from .safetext import escape, safe_text

__all__ = ["render_analysis", "render_stacks", "headline_title"]

_CLASSES_SHOWN = 12  # largest classes listed (and every class holding a suspect); the rest summed up
_CLASS_FRAMES = 8  # innermost frames shown per class (the whole stack is in the tree)
_ERRORS_SHOWN = 20  # ranks listed one per row in the table of unreadable ranks; the rest summed up
_COLLAPSE = 3  # chains of single-child nodes with unchanged ranks longer than this are folded


def headline_title(found: bool, readable: bool) -> str:
    """``hang found`` / ``no single rank stands out`` / ``nothing could be read``."""
    if found:
        return "hang found"
    return "no single rank stands out" if readable else "nothing could be read"


def _headline(text: str, found: bool, readable: bool) -> Panel:
    style = "bold red" if found else ("bold green" if readable else "bold yellow")
    return Panel(safe_text(text), title=headline_title(found, readable), border_style=style, expand=True)


def _world(a: Analysis) -> int | None:
    return max((d.world_size for d in a.ranks if d.world_size), default=None) or (len(a.ranks) or None)


def _classes(a: Analysis) -> Table:
    t = Table(title="Equivalence classes (ranks with the same stack)", title_justify="left", expand=True)
    t.add_column("#", justify="right")
    t.add_column("ranks", ratio=1, overflow="fold")
    t.add_column("n", justify="right")
    t.add_column("where", ratio=1, overflow="fold")  # file:line wraps, never cut
    t.add_column("stack (innermost first)", ratio=2, overflow="fold")
    world = _world(a)
    suspects = {r for s in a.suspects for r in s.ranks}
    shown = [(i, g) for i, g in enumerate(a.classes, 1) if i <= _CLASSES_SHOWN or suspects.intersection(g.ranks)]
    for i, g in shown:
        style = "red" if suspects.intersection(g.ranks) else ""
        top = [escape(str(f)) for f in g.frames[:_CLASS_FRAMES]]
        if len(g.frames) > _CLASS_FRAMES:
            top.append(f"[dim]... {len(g.frames) - _CLASS_FRAMES} outer frames (in the tree and the JSON)[/dim]")
        frames = "\n".join(top) or "(no Python frames)"
        thread = f"\n[dim]thread {escape(g.thread)}[/dim]" if g.thread and g.thread != "MainThread" else ""
        t.add_row(str(i), escape(rank_class(g.ranks, world)), str(len(g.ranks)), escape(g.place.describe()) + thread, frames, style=style)
    rest = [g for i, g in enumerate(a.classes, 1) if (i, g) not in shown]
    if rest:
        ranks = [r for g in rest for r in g.ranks]
        t.add_row("...", escape(rank_class(ranks, world)), str(len(ranks)),
                  f"{len(rest)} smaller classes (every one in the JSON document and the HTML report)", "")
    return t


def _tree(node: TreeNode, total: int, world: int | None, suspects: frozenset[int]) -> Tree:
    """The merged tree; each node shows its class (count and ranks); the nodes only suspects pass
    through are bold red, and the guide down to them red."""
    root = Tree(f"[bold]merged call tree[/bold] ({total} ranks; each node: how many ranks and which)")
    todo: list[tuple[TreeNode, Tree]] = [(c, root) for c in reversed(node.children)]
    while todo:
        n, parent = todo.pop()
        chain = [n]
        while len(chain[-1].children) == 1 and chain[-1].children[0].ranks == n.ranks:
            chain.append(chain[-1].children[0])
        on_path = not suspects.isdisjoint(n.ranks)
        own = on_path and n.ranks <= suspects
        who = escape(rank_class(n.ranks, world))
        head = f"[bold red]{who}[/bold red]" if own else f"[cyan]{who}[/cyan]"
        if len(chain) > _COLLAPSE:
            frames = [escape(str(chain[0].frame)), f"[dim]  ... {len(chain) - 2} frames ...[/dim]", escape(str(chain[-1].frame))]
        else:
            frames = [escape(str(c.frame)) for c in chain]
        body = "\n".join(frames)
        label = f"{head}\n" + (f"[bold red]{body}[/bold red]" if own else body)
        branch = parent.add(label, guide_style="red" if on_path else "tree.line")
        todo.extend((c, branch) for c in reversed(chain[-1].children))
    return root


def _errors(a: Analysis) -> Iterator[RenderableType]:
    failed = [d for d in a.ranks if d.error]
    if failed:
        shown = failed[:_ERRORS_SHOWN]
        t = Table(title="Ranks whose stack could not be taken", title_justify="left", expand=True)
        t.add_column("rank", no_wrap=True)
        t.add_column("pid", no_wrap=True)
        t.add_column("error", ratio=1)
        for d in shown:
            t.add_row(str(d.rank), str(d.pid or ""), escape(d.error or ""))
        if len(failed) > len(shown):
            rest = [d.rank for d in failed[len(shown):]]
            t.add_row("...", "", escape(f"{len(rest)} more: {rank_class(rest)} (every one in the JSON document)"))
        yield t
    if a.missing_ranks:
        yield safe_text(f"Missing ranks (no process): {rank_class(a.missing_ranks)}", style="bold red")
    if a.progressing:
        yield safe_text(f"Progressing ranks (stack changed between samples): {rank_class(a.progressing)}", style="yellow")


def render_analysis(a: Analysis, tree: bool = True, evidence: bool = True) -> RenderableType:
    """A stack analysis as one renderable: its headline, its findings, the ranks that could not
    be read, the equivalence classes, the merged tree."""
    return _render(a, a.headline, a.findings, a.found, tree, evidence)


def render_stacks(result: StacksResult, tree: bool = True, evidence: bool = True) -> RenderableType:
    """The console view of ``dump``, ``analyze`` or ``demo``: the result's headline and findings
    (the nodes not read, the files not saved) above its analysis; the JSON twin is
    :func:`hangdbg.report.build.stacks_document` of the same result."""
    view = _render(result.analysis, result.headline, result.findings, result.found, tree, evidence)
    lines = [safe_text(f"source: {ln}") for ln in source_lines(result.sources)]
    if result.ras is not None:
        lines.append(safe_text(result.ras.line, style="dim"))
    return RGroup(view, *lines) if lines else view


def _render(a: Analysis, headline: str, findings: Sequence[Finding], found: bool, tree: bool,
            evidence: bool) -> RenderableType:
    parts: list[RenderableType] = [_headline(headline, found, a.readable)]
    if findings:
        parts.append(findings_table(findings, evidence, title="Findings (suspects first)"))
    parts.extend(_errors(a))
    if a.classes:
        parts.append(_classes(a))
    if tree and a.tree.children:
        suspects = frozenset(r for f in findings if f.is_suspect for r in f.ranks)
        parts.append(_tree(a.tree, len(a.tree.ranks), _world(a), suspects))
    return RGroup(*parts)
