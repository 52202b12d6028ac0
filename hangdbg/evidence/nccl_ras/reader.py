"""The NCCL RAS reader: reports of NCCL's RAS client (``ncclras``, NCCL >= 2.24), saved as text.

The grammar is :mod:`hangdbg.evidence.nccl_ras.grammar`, the findings :mod:`hangdbg.evidence.nccl_ras.analysis`. A RAS
report is its own kind of evidence (not a NCCL_DEBUG log: one process answers for the whole job,
with per-communicator operation counts), so it has its own reader; ``hangdbg fr`` reads it
together with flight-recorder dumps, being the other cross-rank report of where each rank is.
Both of RAS's formats are read: the text (:mod:`~hangdbg.evidence.nccl_ras.grammar`) and the
JSON of NCCL >= 2.28.7 (:mod:`~hangdbg.evidence.nccl_ras.json_format`), told apart by content.
"""

from __future__ import annotations

import os
import re
from typing import Any, Sequence

from .analysis import analyze_ras
from .facts import RasFacts
from ...model import FileError, SourceKind, SourceReport
from .grammar import RasText, read_ras, sniff
from .json_format import parse_json, sniff_json
from ..base import ReaderBase
from ...text.lines import open_input, read_capped

JSON_CAP = 256 << 20
"""Bytes of a RAS JSON file read at most (NCCL prints ~30 lines per rank: some 10 MB at 10,000
ranks); a larger file is not read whole and counts as unreadable."""

__all__ = ["RasReader", "READER", "read_one", "join_series"]

_SERIES = re.compile(r"ras-(\d{1,6})\.(?:json|txt)$")
"""The names ``dump`` gives its RAS answers, numbered in the order asked."""


def join_series(texts: Sequence[RasText]) -> list[RasText]:
    """``texts`` with the numbered answers of each folder (``ras-N.json|txt``) joined in order
    into one (the last one's path), the other files as they are."""
    series: dict[str, list[tuple[int, RasText]]] = {}
    out: list[RasText] = []
    for t in texts:
        m = _SERIES.match(os.path.basename(t.path))
        if m is None:
            out.append(t)
        else:
            series.setdefault(os.path.dirname(t.path), []).append((int(m.group(1)), t))
    for items in series.values():
        ts = [t for _, t in sorted(items, key=lambda x: x[0])]
        out.append(RasText(ts[-1].path, tuple(r for t in ts for r in t.reports), sum(t.lines_read for t in ts),
                           sum(t.skipped for t in ts)))
    return out


class RasReader(ReaderBase[RasFacts]):
    """NCCL RAS reports: ``records`` counts the reports read (a file may hold several queries)."""

    kind = SourceKind.NCCL_RAS


    def all_clear(self, rep: SourceReport[Any]) -> str:
        return (f"{rep.records} NCCL RAS report{'s' if rep.records != 1 else ''}: no NCCL error, missing process or differing "
                "operation count at the time of the query (NCCL's own state, not an all-clear for the job)")

    def sniff(self, head: bytes) -> bool:
        return sniff(head) or sniff_json(head)

    def _read(self, paths: list[str]) -> SourceReport[RasFacts]:
        """Read RAS report files. Never raises for bad content: unreadable files go into
        ``errors``; lines inside a report's Errors/Warnings sections that do not parse are counted
        in ``lines_skipped``. The answers of one ``dump`` (``ras/ras-1.json``, ``ras/ras-2.json``
        of one folder: :mod:`hangdbg.collect.ras`) are one series, judged like a file holding
        repeated queries: the second tells whether the counts of the first advanced."""
        texts: list[RasText] = []
        errors: list[FileError] = []
        for p in paths:
            try:
                texts.append(read_one(p))
            except OSError as exc:
                errors.append(FileError(p, f"cannot read: {exc.strerror or exc}"))
        findings, rows, facts = analyze_ras(join_series(texts))
        return SourceReport(kind=self.kind, files=tuple(paths), findings=tuple(findings), ranks=tuple(rows),
                            records=facts.reports, lines_read=sum(t.lines_read for t in texts),
                            lines_skipped=sum(t.skipped for t in texts), errors=tuple(errors), facts=facts)


READER = RasReader()


def read_one(path: str) -> RasText:
    """One RAS file, text or JSON (by its first bytes: a JSON report starts with ``{``).

    Raises:
        OSError: the file cannot be read, or is a JSON file larger than :data:`JSON_CAP`.
    """
    with open_input(path) as f:
        head = f.read(4096)
        if not head.lstrip()[:1] == b"{":
            return read_ras(path)
        data = head + read_capped(f, JSON_CAP - len(head))
    if len(data) > JSON_CAP:
        raise OSError(f"larger than {JSON_CAP >> 20} MiB")
    return parse_json(data.decode("utf-8", "replace"), path)
