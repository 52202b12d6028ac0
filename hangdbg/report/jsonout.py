"""The JSON twin of every report: plain dicts with a ``schema_version`` (see README, "JSON")."""

from __future__ import annotations

import json
import socket
from datetime import datetime, timezone
from typing import Any

from .. import __version__
from ..analyze.rankset import compress
from ..model import SCHEMA_VERSION, Analysis, Frame, Place, RankDump, Thread, TreeNode

__all__ = ["analysis_to_dict", "document_header", "dumps_json", "frame_to_dict", "thread_to_dict"]


def frame_to_dict(f: Frame) -> dict[str, Any]:
    d: dict[str, Any] = {"function": f.function, "file": f.file, "line": f.line}
    if f.native:
        d["native"] = True
    if f.locals:
        d["locals"] = dict(f.locals)
    return d


def thread_to_dict(t: Thread) -> dict[str, Any]:
    return {
        "thread_id": t.thread_id,
        "name": t.name,
        "status": t.status,
        "frames": [frame_to_dict(f) for f in t.frames],
    }


def _place(p: Place | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "kind": p.kind,
        "collective": p.collective,
        "call_site": frame_to_dict(p.call_site) if p.call_site else None,
        "thread": p.thread,
        "text": p.describe(),
    }


def _rank(d: RankDump, a: Analysis) -> dict[str, Any]:
    return {
        "rank": d.rank,
        "host": d.host,
        "pid": d.pid,
        "local_rank": d.local_rank,
        "world_size": d.world_size,
        "rank_source": d.rank_source,
        "error": d.error,
        "place": _place(a.places.get(d.rank)),
        "progressing": d.rank in a.progressing,
        "samples": len(d.samples),
        "threads": [thread_to_dict(t) for t in d.threads],
    }


def _tree(node: TreeNode) -> dict[str, Any]:
    out: dict[str, Any] = {"ranks": compress(node.ranks), "count": len(node.ranks)}
    if node.frame is not None:
        out["frame"] = frame_to_dict(node.frame)
    if node.children:
        out["children"] = [_tree(c) for c in node.children]
    return out


def document_header(command: str) -> dict[str, Any]:
    """The fields every JSON document starts with: schema_version, tool, version, command, created."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "hangdbg",
        "version": __version__,
        "command": command,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def analysis_to_dict(a: Analysis, command: str = "analyze", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The documented JSON document for one analysis (schema_version 1)."""
    doc: dict[str, Any] = {
        **document_header(command),
        "collector_host": socket.gethostname(),
        "verdict": a.verdict,
        "found_hang": a.found_hang,
        "suspects": [{"ranks": list(s.ranks), "reason": s.reason, "kind": s.kind, "hosts": list(s.hosts)} for s in a.suspects],
        "missing_ranks": list(a.missing_ranks),
        "progressing_ranks": list(a.progressing),
        "unreadable_ranks": list(a.unreadable),
        "groups": [
            {
                "ranks": list(g.ranks),
                "ranks_text": compress(g.ranks),
                "thread": g.thread,
                "place": _place(g.place),
                "frames": [frame_to_dict(f) for f in g.frames],
            }
            for g in a.groups
        ],
        "ranks": [_rank(d, a) for d in a.ranks],
        "tree": _tree(a.tree),
    }
    if extra:
        doc.update(extra)
    return doc


PRETTY_LIMIT = 2 << 20
"""Documents up to this size (bytes, compact) are indented for people; bigger ones stay compact."""


def dumps_json(doc: dict[str, Any]) -> str:
    """The JSON text of ``doc``: indented when small, compact when large (the indenting encoder
    is pure Python: a 100k-rank document would take tens of seconds)."""
    text = json.dumps(doc, separators=(",", ":"))
    return json.dumps(doc, indent=2) if len(text) <= PRETTY_LIMIT else text
