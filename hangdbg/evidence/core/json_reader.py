"""The core-document reader: the JSON document of ``hangdbg core`` (``core -o DIR``'s
``hangdbg.json``, or the ``cores/NAME.json`` files ``hangdbg collect`` brings home: cores are read
on their node and only this document crosses the network).

The document is built by :mod:`hangdbg.report.document` (schema_version 2, 3 and 4 are read: the
``cores``, ``findings`` and ``source`` it reads have one shape in all three; the stack section, whose
equivalence classes are ``groups`` before 4 and ``classes`` from 4 on, is not read); this reader turns it
back into the core reader's findings and per-rank states and one :class:`RankDump` per core, so
the cores' stacks join the joint stack analysis of ``hangdbg report``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from typing import Sequence

from .facts import CoreFact, CoreJsonFacts
from ...frames import Frame
from ...model import (SCHEMA_VERSION, Evidence, FileError, Finding, Kind, RankDump, RankState, Severity, 
    SourceKind, SourceReport, Thread)
from ...enums import ThreadStatus
from ...text.jsondoc import load_json
from ...text.lines import open_input
from ...rankset import rank_number
from ..base import ReaderBase, with_source

__all__ = ["CoreJsonReader", "READER", "MAX_BYTES"]

MAX_BYTES = 256 << 20
"""Larger documents are not read (a core document is a few MiB at most)."""

_HEAD = re.compile(rb'"tool":\s*"hangdbg".{0,400}?"command":\s*"core"', re.S)


def _int(v: Any) -> int | None:
    return rank_number(v) if isinstance(v, int) else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _frame(d: dict[str, Any]) -> Frame:
    pairs = d.get("locals")
    return Frame(function=_str(d.get("function")) or "??", file=_str(d.get("file")), line=_int(d.get("line")),
                 native=bool(d.get("native")),
                 locals=tuple((str(p[0]), str(p[1])) for p in pairs if isinstance(p, list) and len(p) == 2)
                 if isinstance(pairs, list) else ())


def _threads(core: dict[str, Any]) -> tuple[Thread, ...]:
    out = []
    for t in core.get("threads") or ():
        if not isinstance(t, dict):
            continue
        frames = tuple(_frame(f) for f in t.get("frames") or () if isinstance(f, dict))
        out.append(Thread(thread_id=_int(t.get("thread_id")) or 0, name=t.get("name") if isinstance(t.get("name"), str) else None,
                          status=ThreadStatus.read(t.get("status"), ThreadStatus.UNKNOWN), frames=frames))
    return tuple(out)


def _finding(d: dict[str, Any]) -> Finding:
    ev = tuple(Evidence(_str(e.get("source")), _int(e.get("line")), _str(e.get("text")))
               for e in d.get("evidence") or () if isinstance(e, dict))
    return Finding(kind=Kind.read(d.get("kind"), Kind.CORE_CRASH), summary=_str(d.get("summary")),
                   ranks=tuple(r for r in d.get("ranks") or () if _int(r) is not None),
                   hosts=tuple(h for h in d.get("hosts") or () if isinstance(h, str)),
                   gpus=tuple(g for g in d.get("gpus") or () if isinstance(g, str)),
                   severity=Severity.read(d.get("severity"), Severity.INFO),
                   evidence=ev, action=_str(d.get("action")), source=SourceKind.read(d.get("source"), SourceKind.CORE))


def _load(path: str) -> dict[str, Any]:
    if os.path.getsize(path) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES >> 20} MiB")
    with open_input(path) as f:
        doc = load_json(f.read())
    if not isinstance(doc, dict) or doc.get("command") != "core":
        raise ValueError("not a hangdbg core document")
    if doc.get("schema_version") not in _READS:
        raise ValueError(f"schema_version {doc.get('schema_version')!r}, this hangdbg reads "
                         f"{', '.join(map(str, _READS))}: "
                         "run the same hangdbg version on the nodes and here")
    return doc


_READS = (2, 3, SCHEMA_VERSION)  # what this reader reads of a core document is the same in schema_version 2, 3 and 4


def _state(d: dict[str, Any]) -> RankState:
    return RankState(rank=d["rank"], host=_str(d.get("host")), pid=_int(d.get("pid")),
                     last_collective=d.get("last_collective") if isinstance(d.get("last_collective"), str) else None,
                     seq=_int(d.get("seq")), group=_str(d.get("group")), state=_str(d.get("state")),
                     source=SourceKind.read(d.get("source"), SourceKind.CORE))


def _fact(c: dict[str, Any], rank: int) -> CoreFact:
    env = c.get("environ")
    return CoreFact(file=_str(c.get("file")), rank=rank, rank_source=_str(c.get("rank_source")), host=_str(c.get("host")),
                    pid=_int(c.get("pid")), signal=c.get("signal") if isinstance(c.get("signal"), str) else None,
                    how=_str(c.get("how")), crashing_tid=_int(c.get("crashing_tid")), executable=_str(c.get("executable")),
                    executable_source=_str(c.get("executable_source")), truncated=bool(c.get("truncated")),
                    environ={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
                    diagnoses=tuple(x for x in c.get("diagnoses") or () if isinstance(x, str)))


def read_documents(paths: Sequence[str]) -> tuple[SourceReport[CoreJsonFacts], list[RankDump]]:
    """Read core documents.

    Returns:
        ``(report, dumps)``: findings, per-rank states, errors (the document's own: its unreadable
        cores) and facts of every document (kind ``core-json``; ``records`` counts the documents
        read), and one :class:`RankDump` per core that had stacks. A file that is not a readable
        core document goes to ``report.errors``.
    """
    findings: list[Finding] = []
    states: list[RankState] = []
    dumps: list[RankDump] = []
    errors: list[FileError] = []
    cores: list[CoreFact] = []
    docs: list[str] = []
    for path in map(str, paths):
        try:
            doc = _load(path)
            source = doc.get("source")
            src: dict[str, Any] = source if isinstance(source, dict) else {}
            # the core reader's own findings: the document's stack findings are redone jointly
            got_findings = [f for f in (_finding(f) for f in doc.get("findings") or () if isinstance(f, dict))
                            if f.source is SourceKind.CORE]
            got_states = [_state(r) for r in src.get("ranks") or () if isinstance(r, dict) and _int(r.get("rank")) is not None]
            got_errors = [FileError(_str(e.get("file")), _str(e.get("reason"))) for e in src.get("errors") or ()
                          if isinstance(e, dict)]
            got_cores, got_dumps = [], []
            for c in doc.get("cores") or ():
                rank = _int(c.get("rank")) if isinstance(c, dict) else None
                if rank is None:
                    continue
                got_cores.append(_fact(c, rank))
                threads = _threads(c)
                if threads and not c.get("error"):
                    got_dumps.append(RankDump(rank=rank, pid=_int(c.get("pid")), host=_str(c.get("host")),
                                              local_rank=_int(c.get("local_rank")), world_size=_int(c.get("world_size")),
                                              threads=threads, samples=(threads,), rank_source=_str(c.get("rank_source")) or "core",
                                              cmdline=_str(c.get("cmdline")),
                                              python=c.get("python") if isinstance(c.get("python"), str) else None))
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
            # a garbled document ("findings": 5, nesting too deep for json) is this file's error, not the batch's
            errors.append(FileError(path, f"cannot read the core document: {exc}"))
            continue
        findings += got_findings
        states += got_states
        errors += got_errors
        cores += got_cores
        dumps += got_dumps
        docs.append(path)
    report = SourceReport(kind=SourceKind.CORE_JSON, files=tuple(map(str, paths)), findings=tuple(findings),
                          ranks=tuple(states), records=len(docs), errors=tuple(errors),
                          facts=CoreJsonFacts(tuple(docs), tuple(cores)))
    return with_source(report), dumps


class CoreJsonReader(ReaderBase[CoreJsonFacts]):
    """Documents of ``hangdbg core`` (what ``hangdbg collect`` brings back per core file)."""

    kind = SourceKind.CORE_JSON

    def sniff(self, head: bytes) -> bool:
        """True for a JSON document written by ``hangdbg core`` (``"tool": "hangdbg"``, ``"command": "core"``)."""
        return head.lstrip()[:1] == b"{" and _HEAD.search(head) is not None

    def _read(self, paths: list[str]) -> SourceReport[CoreJsonFacts]:
        return read_documents(paths)[0]

    def read_dumps(self, paths: Sequence[str]) -> tuple[SourceReport[CoreJsonFacts], list[RankDump]]:
        return read_documents(paths)


READER = CoreJsonReader()
