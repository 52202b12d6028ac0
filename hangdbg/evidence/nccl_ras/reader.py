"""The NCCL RAS reader: reports of NCCL's RAS client (``ncclras``, NCCL >= 2.24), saved as text.

The grammar is :mod:`hangdbg.evidence.nccl_ras.grammar`, the findings :mod:`hangdbg.evidence.nccl_ras.analysis`. A RAS
report is its own kind of evidence (not a NCCL_DEBUG log: one process answers for the whole job,
with per-communicator operation counts), so it has its own reader; ``hangdbg fr`` reads it
together with flight-recorder dumps, being the other cross-rank report of where each rank is.
Both of RAS's formats are read: the text (:mod:`~hangdbg.evidence.nccl_ras.grammar`) and the
JSON of NCCL >= 2.28.7 (:mod:`~hangdbg.evidence.nccl_ras.json_format`), told apart by content.
"""

from __future__ import annotations

from typing import Any

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

__all__ = ["RasReader", "READER"]


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
        in ``lines_skipped``."""
        texts: list[RasText] = []
        errors: list[FileError] = []
        for p in paths:
            try:
                texts.append(read_one(p))
            except OSError as exc:
                errors.append(FileError(p, f"cannot read: {exc.strerror or exc}"))
        findings, rows, facts = analyze_ras(texts)
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
