"""``hangdbg report --html FILE``: one self-contained HTML file (no script, no external asset).

Rendered with jinja2 with autoescaping on: every string from a log, a stack or a file name is
HTML-escaped. The merged call tree is nested ``<details>`` elements (collapsible without
JavaScript); evidence links point to the raw files, relative to the HTML file.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

import jinja2

from ..rankset import compress
from ..model import Severity, TreeNode, Verdict
from .schema import to_jsonable

__all__ = ["render_html"]

_FOLD = 3  # chains of single-child frames with unchanged ranks longer than this are folded
_OPEN_DEPTH = 6  # levels opened by default


@dataclass
class _View:
    ranks: str
    chain: list[str]
    folded: int
    open: bool
    children: list["_View"]


def _tree_views(root: TreeNode) -> list[_View]:
    """Collapse single-child chains (iteratively: stacks can be hundreds of frames deep)."""
    out: list[_View] = []
    todo: deque[tuple[TreeNode, list[_View], int]] = deque((c, out, 0) for c in root.children)
    while todo:
        n, sink, depth = todo.popleft()
        chain = [n]
        while len(chain[-1].children) == 1 and chain[-1].children[0].ranks == n.ranks:
            chain.append(chain[-1].children[0])
        if len(chain) > _FOLD:
            labels, folded = [str(chain[0].frame), str(chain[-1].frame)], len(chain) - 2
        else:
            labels, folded = [str(c.frame) for c in chain], 0
        view = _View(compress(n.ranks), labels, folded, depth < _OPEN_DEPTH, [])
        sink.append(view)
        todo.extend((c, view.children, depth + 1) for c in chain[-1].children)
    return out


def _facts_text(facts: object) -> str:
    """A reader's facts as indented JSON, cut to 2,000 characters (escaped by the template)."""
    if facts is None:
        return ""
    text = json.dumps(to_jsonable(facts), indent=1)
    return text if len(text) <= 2000 else text[:2000] + " ..."


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hangdbg.report", "templates"),
        autoescape=True,  # every string from the inputs is escaped
        undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["basename"] = lambda p: os.path.basename(str(p))
    return env


def render_html(v: Verdict, html_path: str | os.PathLike) -> str:
    """The report as one HTML document.

    Args:
        v: the verdict.
        html_path: where the document will be written (links to raw files are made relative
            to its directory).
    """
    base = Path(html_path).resolve().parent
    links = {}
    for c in v.files:
        f = c.file
        try:
            rel = Path(os.path.relpath(Path(f).resolve(), base)).as_posix()
            # percent-encoded and never scheme-like: a file named "javascript:..." stays a path
            links[f] = quote(rel if rel.startswith("../") else "./" + rel)
        except ValueError:
            continue
    tmpl = _env().get_template("report.html.j2")
    return tmpl.render(
        v=v, a=v.analysis, tree=_tree_views(v.analysis.tree) if v.analysis is not None else [],
        links=links, ranks_text=compress, suspect_ranks={r for f in v.suspects for r in f.ranks},
        others=[f for f in v.findings if f.severity is not Severity.SUSPECT],
        facts_text=[_facts_text(s.facts) for s in v.sources],
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), nfiles=len(v.files),
        title=v.headline[:80],
    )
