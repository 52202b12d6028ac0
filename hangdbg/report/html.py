"""``hangdbg report --html FILE``: one self-contained HTML file that stays small and readable at
10,000 ranks (issue 16).

Rendered with jinja2 with autoescaping on: every string from a log, a stack or a file name is
HTML-escaped. Identical ranks are shown once, as classes with counts (``4093 ranks {0-4095 except
17, 900, 3001}``, :func:`hangdbg.rankset.rank_class`); the merged call tree is nested ``<details>``
elements (collapsible without JavaScript) whose nodes show their rank count, with the suspects'
branches highlighted (nodes only suspects pass through) and the way down to them open. One small inline script (``templates/filter.js``) filters the tree
and the tables by rank, host or text; the Content-Security-Policy allows that script alone (by its
SHA-256) and no external resource, so the file works offline and a string from the inputs can never
run. Evidence links point to the raw files, relative to the HTML file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections import defaultdict
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from ..model import Severity, TreeNode, Verdict
from ..frames import Frame
from ..rankset import compress, rank_class, rank_set
from .safetext import visible
from .schema import to_jsonable

__all__ = ["render_html", "FILTER_SCRIPT"]

_FOLD = 3  # chains of single-child frames with unchanged ranks longer than this are folded
_OPEN_DEPTH = 4  # levels opened by default (the suspects' branches are opened to the end)
_FILES_SHOWN = 50  # files listed per (directory, kinds) row of the file table

FILTER_SCRIPT = resources.files("hangdbg.report").joinpath("templates/filter.js").read_text(encoding="utf-8")
"""The report's only script (the filter box), inlined; the CSP names its hash."""
_SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(FILTER_SCRIPT.encode("utf-8")).digest()).decode()


@dataclass
class _View:
    ranks: str  # machine form for the filter script (``0-2,5``)
    label: str  # for people: ``3 ranks {0-2, 5}``
    count: int
    chain: list[str]
    folded: int
    inner: str  # the folded frames, one per line (the fold's tooltip; the filter searches them)
    open: bool
    mark: str  # "suspect": only suspects pass here (highlighted); "path": leads to one; ""
    children: list["_View"]
    first: bool = False  # the first suspect node (``id="suspect-branch"``, linked from the top)


def _full(f: Frame | None) -> str:
    """``function (/the/whole/path.py:12)``: the HTML wraps long paths, it never shortens them."""
    return "" if f is None else f"{f.function} ({f.location})"


def _tree_views(root: TreeNode, world: int | None, suspects: frozenset[int]) -> list[_View]:
    """Collapse single-child chains (iteratively: stacks can be hundreds of frames deep)."""
    out: list[_View] = []
    todo: deque[tuple[TreeNode, list[_View], int]] = deque((c, out, 0) for c in root.children)
    while todo:
        n, sink, depth = todo.popleft()
        chain = [n]
        while len(chain[-1].children) == 1 and chain[-1].children[0].ranks == n.ranks:
            chain.append(chain[-1].children[0])
        if len(chain) > _FOLD:
            labels, folded = [_full(chain[0].frame), _full(chain[-1].frame)], len(chain) - 2
            inner = "\n".join(_full(c.frame) for c in chain[1:-1])
        else:
            labels, folded, inner = [_full(c.frame) for c in chain], 0, ""
        on_path = not suspects.isdisjoint(n.ranks)  # the way down to a suspect's own branch: opened
        mark = "suspect" if on_path and n.ranks <= suspects else ("path" if on_path else "")
        view = _View(compress(n.ranks), rank_class(n.ranks, world), len(n.ranks), labels, folded, inner,
                     on_path or depth < _OPEN_DEPTH, mark, [])
        sink.append(view)
        todo.extend((c, view.children, depth + 1) for c in chain[-1].children)
    first = _first_suspect(out)
    if first is not None:
        first.first = True
    return out


def _first_suspect(views: list[_View]) -> _View | None:
    """The first ``suspect`` node in document order (iterative: trees can be deep)."""
    todo = list(reversed(views))
    while todo:
        v = todo.pop()
        if v.mark == "suspect":
            return v
        todo.extend(reversed(v.children))
    return None


@dataclass
class _Row:
    """Ranks that one source says the same about (one row instead of one per rank)."""

    ranks: str
    label: str
    hosts: str
    source: str
    last_collective: str
    seq: str
    group: str
    state: str
    suspect: bool


def _rank_rows(v: Verdict, world: int | None, suspects: frozenset[int]) -> list[_Row]:
    same: dict[tuple, list] = defaultdict(list)
    for s in v.rank_states:
        key = (s.source.value if hasattr(s.source, "value") else str(s.source), s.last_collective or "",
               "" if s.seq is None else str(s.seq), s.group, s.state)
        same[key].append(s)
    rows = []
    for (source, coll, seq, group, state), states in same.items():
        ranks = [s.rank for s in states]
        hosts = sorted({s.host for s in states if s.host})
        shown = ", ".join(hosts[:3]) + (f" (+{len(hosts) - 3} more)" if len(hosts) > 3 else "")
        rows.append(_Row(compress(ranks), rank_class(ranks, world), shown, source, coll, seq, group, state,
                         not suspects.isdisjoint(ranks)))
    rows.sort(key=lambda r: (not r.suspect, r.source, r.ranks))
    return rows


@dataclass
class _FileRow:
    where: str
    kinds: str
    count: int
    files: list[tuple[str, str | None]]  # (name, link)


def _file_rows(v: Verdict, links: dict[str, str]) -> list[_FileRow]:
    """Files grouped by directory and by what read them (10,000 rank files are one row)."""
    same: dict[tuple[str, str], list[str]] = defaultdict(list)
    for c in v.files:
        kinds = ", ".join(k.value if hasattr(k, "value") else str(k) for k in c.kinds) or "-"
        same[(os.path.dirname(c.file), kinds)].append(c.file)
    return [_FileRow(d or ".", k, len(fs), [(f, links.get(f)) for f in fs[:_FILES_SHOWN]])
            for (d, k), fs in sorted(same.items())]


def _facts_text(facts: object) -> str:
    """A reader's facts as indented JSON, cut to 2,000 characters (escaped by the template)."""
    if facts is None:
        return ""
    text = json.dumps(to_jsonable(facts), indent=1)
    return text if len(text) <= 2000 else text[:2000] + " ..."


def _shown(value: object) -> object:
    """What a template prints of ``value``: a data string through :func:`~.safetext.visible` (control
    characters and the Unicode direction overrides U+202A-U+202E, U+2066-U+2069, U+200E/F written
    out, so a frame cannot reorder the text around it; cut to :data:`~.safetext.SHOWN_MAX`
    characters); markup hangdbg made itself (:class:`markupsafe.Markup`) as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hangdbg.report", "templates"),
        autoescape=True,  # every string from the inputs is escaped
        finalize=_shown,  # and shown: control and bidi characters written out, its length bounded
        undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["basename"] = lambda p: os.path.basename(str(p))
    return env


def _links(v: Verdict, base: Path) -> dict[str, str]:
    links = {}
    for c in v.files:
        f = c.file
        try:
            rel = Path(os.path.relpath(Path(f).resolve(), base)).as_posix()
            # percent-encoded and never scheme-like: a file named "javascript:..." stays a path
            links[f] = quote(rel if rel.startswith("../") else "./" + rel)
        except ValueError:
            continue
    return links


def render_html(v: Verdict, html_path: str | os.PathLike) -> str:
    """The report as one HTML document (offline, one inline script allowed by its hash).

    Args:
        v: the verdict.
        html_path: where the document will be written (links to raw files are made relative
            to its directory).
    """
    links = _links(v, Path(html_path).resolve().parent)
    a = v.analysis
    suspects = frozenset(r for f in v.suspects for r in f.ranks)
    world = None
    hosts: dict[str, list[int]] = defaultdict(list)
    if a is not None:
        world = max((d.world_size for d in a.ranks if d.world_size), default=None) or (len(a.ranks) or None)
        for d in a.ranks:
            if d.host:
                hosts[d.host].append(d.rank)
    for s in v.rank_states:
        if s.host:
            hosts[s.host].append(s.rank)
    tree = _tree_views(a.tree, world, suspects) if a is not None else []
    tmpl = _env().get_template("report.html.j2")
    return tmpl.render(
        v=v, a=a, tree=tree, has_branch=_first_suspect(tree) is not None,
        classes=[(compress(g.ranks), rank_class(g.ranks, world), g, not suspects.isdisjoint(g.ranks))
                 for g in (a.classes if a is not None else ())],
        links=links, rank_set=rank_set, compress=compress, rank_rows=_rank_rows(v, world, suspects), file_rows=_file_rows(v, links),
        hosts_json={h: compress(rs) for h, rs in sorted(hosts.items())},
        others=[f for f in v.findings if f.severity is not Severity.SUSPECT],
        facts_text=[_facts_text(s.facts) for s in v.sources],
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), nfiles=len(v.files),
        title=v.headline[:80], full=_full, script=FILTER_SCRIPT, script_hash=_SCRIPT_HASH,
    )
