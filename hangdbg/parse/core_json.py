"""Read back the JSON document of ``hangdbg core`` (``core -o DIR``'s ``hangdbg.json``, or the
``cores/NAME.json`` files ``hangdbg collect`` brings home: cores are read on their node and only
this document crosses the network).

The document is built by :mod:`hangdbg.report.core_json`; this reader turns it back into the
core reader's :class:`SourceReport` (kind ``core``) and one :class:`RankDump` per core, so the
cores' stacks join the joint stack analysis of ``hangdbg report``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ..model import Evidence, Finding, Frame, RankDump, RankState, SourceReport, Thread

__all__ = ["sniff", "read", "read_dumps", "MAX_BYTES"]

MAX_BYTES = 256 << 20
"""Larger documents are not read (a core document is a few MiB at most)."""

_HEAD = re.compile(rb'"tool":\s*"hangdbg".{0,400}?"command":\s*"core"', re.S)


def sniff(head: bytes) -> bool:
    """True for a JSON document written by ``hangdbg core`` (``"tool": "hangdbg"``, ``"command": "core"``)."""
    return head.lstrip()[:1] == b"{" and _HEAD.search(head) is not None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _frame(d: dict) -> Frame:
    locals_ = d.get("locals")
    return Frame(function=_str(d.get("function")) or "??", file=_str(d.get("file")), line=_int(d.get("line")),
                 native=bool(d.get("native")),
                 locals=tuple((str(k), str(v)) for k, v in locals_.items()) if isinstance(locals_, dict) else ())


def _threads(core: dict) -> tuple[Thread, ...]:
    out = []
    for t in core.get("threads") or ():
        if not isinstance(t, dict):
            continue
        frames = tuple(_frame(f) for f in t.get("frames") or () if isinstance(f, dict))
        out.append(Thread(thread_id=_int(t.get("thread_id")) or 0, name=t.get("name") if isinstance(t.get("name"), str) else None,
                          status=_str(t.get("status")) or "unknown", frames=frames))
    return tuple(out)


def _finding(d: dict) -> Finding:
    ev = tuple(Evidence(_str(e.get("source")), _int(e.get("line")), _str(e.get("text")))
               for e in d.get("evidence") or () if isinstance(e, dict))
    return Finding(kind=_str(d.get("kind")) or "core-crash", summary=_str(d.get("summary")),
                   ranks=tuple(r for r in d.get("ranks") or () if isinstance(r, int)),
                   hosts=tuple(h for h in d.get("hosts") or () if isinstance(h, str)),
                   gpus=tuple(g for g in d.get("gpus") or () if isinstance(g, str)),
                   severity=d.get("severity") if d.get("severity") in ("suspect", "warning", "info") else "info",
                   evidence=ev, action=_str(d.get("action")))


def _load(path: str) -> dict:
    if os.path.getsize(path) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES >> 20} MiB")
    with open(path, "rb") as f:
        doc = json.loads(f.read().decode("utf-8", "replace"))
    if not isinstance(doc, dict) or doc.get("command") != "core":
        raise ValueError("not a hangdbg core document")
    return doc


def _state(d: dict) -> RankState:
    return RankState(rank=d["rank"], host=_str(d.get("host")), pid=_int(d.get("pid")),
                     last_collective=d.get("last_collective") if isinstance(d.get("last_collective"), str) else None,
                     seq=_int(d.get("seq")), group=_str(d.get("group")), state=_str(d.get("state")),
                     source=_str(d.get("source")) or "core")


def read_dumps(paths: list[str]) -> tuple[SourceReport, list[RankDump]]:
    """Read core documents.

    Returns:
        ``(report, dumps)``: findings, per-rank states, errors (the document's own: its unreadable
        cores) and facts of every document (kind ``core``), and one :class:`RankDump` per core that
        had stacks. A file that is not a readable core document goes to ``report.errors``.
    """
    findings: list[Finding] = []
    states: list[RankState] = []
    dumps: list[RankDump] = []
    errors: list[tuple[str, str]] = []
    cores: list[dict] = []
    for path in paths:
        try:
            doc = _load(path)
            rep = doc.get("report") if isinstance(doc.get("report"), dict) else {}
            got_findings = [_finding(f) for f in rep.get("findings") or () if isinstance(f, dict)]
            got_states = [_state(r) for r in rep.get("ranks") or () if isinstance(r, dict) and _int(r.get("rank")) is not None]
            got_errors = [(e[0], e[1]) for e in rep.get("errors") or ()
                          if isinstance(e, (list, tuple)) and len(e) == 2 and all(isinstance(x, str) for x in e)]
            got_cores, got_dumps = [], []
            for c in doc.get("cores") or ():
                if not isinstance(c, dict) or _int(c.get("rank")) is None:
                    continue
                got_cores.append({k: c.get(k) for k in ("file", "rank", "host", "pid", "signal", "how")} | {"document": path})
                threads = _threads(c)
                if threads and not c.get("error"):
                    got_dumps.append(RankDump(rank=c["rank"], pid=_int(c.get("pid")), host=_str(c.get("host")),
                                              local_rank=_int(c.get("local_rank")), world_size=_int(c.get("world_size")),
                                              threads=threads, samples=(threads,), rank_source=_str(c.get("rank_source")) or "core",
                                              cmdline=_str(c.get("cmdline")),
                                              python=c.get("python") if isinstance(c.get("python"), str) else None))
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
            # a garbled document ("findings": 5, nesting too deep for json) is this file's error, not the batch's
            errors.append((path, f"cannot read the core document: {exc}"))
            continue
        findings += got_findings
        states += got_states
        errors += got_errors
        cores += got_cores
        dumps += got_dumps
    report = SourceReport(kind="core", files=tuple(paths), findings=tuple(findings), ranks=tuple(states),
                          errors=tuple(errors), facts={"cores": cores})
    return report, dumps


def read(paths: list[str]) -> SourceReport:
    """:func:`read_dumps` without the dumps."""
    return read_dumps(paths)[0]
