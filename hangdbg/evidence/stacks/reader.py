"""The stacks reader: py-spy ``dump`` texts and ``hangdbg dump -o DIR`` outputs, and the joint
analysis of every source of stacks.

The files go through :func:`hangdbg.stacks.saved.load_dumps` and the same analyzer as a live
``hangdbg dump``; ``hangdbg report`` analyzes the dumps of this reader, of core files and of
stack texts together and :func:`with_analysis` puts the analysis' findings in the stacks report.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Sequence

from ...stacks.analysis import analyze
from .facts import StacksFacts
from ...model import Analysis, FileError, RankDump, RankState, SourceKind, SourceReport
from ...enums import PlaceKind
from ...stacks.debug_server import is_debug_server_dump
from ...stacks.saved import load_dumps
from ..base import ReaderBase, with_source

__all__ = ["PySpyReader", "READER", "with_analysis"]

_PYSPY = re.compile(rb"^(?:# hangdbg rank=|Process \d+: |Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:idle|active))", re.M)
_OWN_DUMP = re.compile(rb"^(?:-+ ?Thread ?ID: ?\d+|# ?ThreadID: ?\d+|# ?Thread: ?[^()\n]{0,200}\(\d+\))", re.M)


def with_analysis(report: SourceReport[Any], a: Analysis) -> SourceReport[StacksFacts]:
    """``report`` (kind ``stacks``) with the analysis' findings and one RankState per rank.

    Args:
        report: the stacks report (files, skipped lines), or an empty one.
        a: the joint analysis of every stack source (``live=False`` when only core files and
            saved stack texts were read: see :func:`hangdbg.stacks.analysis.analyze`).
    """
    states = []
    known = set()
    for d in a.ranks:
        known.add(d.rank)
        place = a.places.get(d.rank)
        if d.rank in a.missing_ranks:
            state = "gone"
        elif d.rank in a.unreadable:
            state = "unreadable"
        else:
            state = place.describe() if place else ""
        coll = place.collective if place is not None and place.kind == PlaceKind.COLLECTIVE else None
        states.append(RankState(rank=d.rank, host=d.host, pid=d.pid, last_collective=coll, state=state, source=SourceKind.STACKS))
    states += [RankState(rank=r, state="missing", source=SourceKind.STACKS) for r in a.missing_ranks if r not in known]
    findings = a.findings
    return with_source(replace(report, kind=SourceKind.STACKS, findings=tuple(findings),
                               ranks=tuple(sorted(states, key=lambda s: s.rank)), records=report.records or len(a.ranks),
                               facts=StacksFacts(len(a.ranks), len(a.classes), a.headline)))


class PySpyReader(ReaderBase[StacksFacts]):
    """py-spy dump texts: ``records`` counts the rank dumps read."""

    kind = SourceKind.STACKS

    def sniff(self, head: bytes) -> bool:
        """True for py-spy ``dump`` text (py-spy 0.3/0.4: ``Process N: cmd`` / ``Thread 0x..
        (idle)`` lines), hangdbg's raw files (``# hangdbg rank=`` header) and thread dumps a program
        printed itself (``-- Thread ID: N ---`` / ``# ThreadID: N`` headers, see
        :mod:`hangdbg.stacks.thread_dump_text`), and the per-rank dumps of PyTorch's debug server
        (``=== Rank N: addr ===`` blocks, :mod:`hangdbg.stacks.debug_server`)."""
        if head.startswith(b"# hangdbg-last "):  # a sample of `watch --keep-last` (evidence/last_stacks): not a dump of now
            return False
        return b"\x00" not in head and (_PYSPY.search(head) is not None or _OWN_DUMP.search(head) is not None
                                         or is_debug_server_dump(head))

    def read_dumps(self, paths: Sequence[str]) -> tuple[SourceReport[StacksFacts], list[RankDump]]:
        """Read py-spy dump texts into rank dumps (the caller analyzes them with other stacks).

        Returns:
            ``(report, dumps)``: the report has the files, skipped lines and unreadable files but
            no findings yet (see :func:`with_analysis`).
        """
        paths = [str(p) for p in paths]
        server = [p for p in paths if _is_server_dump(p)]
        try:
            dumps, stats = load_dumps([p for p in paths if p not in server]) if len(server) < len(paths) else ([], None)
            if server:
                dumps = _fill_from_server(dumps, load_dumps(server)[0])
        except FileNotFoundError as exc:
            return SourceReport(kind=self.kind, files=tuple(paths), errors=(FileError(str(exc.filename), "no such file"),)), []
        errors = tuple(FileError(p, why) for p, why in stats.unreadable) if stats is not None else ()
        return SourceReport(kind=self.kind, files=tuple(paths), records=len(dumps),
                            lines_skipped=stats.garbled_lines if stats is not None else 0, errors=errors), dumps

    def _read(self, paths: list[str]) -> SourceReport[StacksFacts]:
        """Read and analyze py-spy dump texts on their own."""
        report, dumps = self.read_dumps(paths)
        return with_analysis(report, analyze(dumps)) if dumps else report


def _is_server_dump(path: str) -> bool:
    """Whether the file is a debug-server dump (its head, :func:`hangdbg.stacks.debug_server.is_debug_server_dump`)."""
    try:
        with open(path, "rb") as f:
            return is_debug_server_dump(f.read(4096))
    except OSError:
        return False


def _fill_from_server(dumps: list[RankDump], server: list[RankDump]) -> list[RankDump]:
    """``dumps`` (py-spy's, taken together) with the debug server's stacks (``dump ... -o DIR`` keeps
    them in ``DIR/debug_server/``) only for the ranks py-spy gave no thread: the same rule as the
    live dump (:func:`hangdbg.collect.live_sources.fill_stacks`). Fetched a moment apart, the two
    texts of one rank would otherwise read as a rank that moved between samples."""
    if not dumps:
        return server
    have = {d.rank for d in dumps if d.threads}
    extra = {d.rank: d for d in server if d.threads and d.rank not in have}
    return [extra.pop(d.rank, d) if not d.threads else d for d in dumps] + list(extra.values())


READER = PySpyReader()
