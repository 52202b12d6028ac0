"""The NCCL RAS reader: reports of NCCL's RAS client (``ncclras``, NCCL >= 2.24), saved as text.

The grammar is :mod:`hangdbg.evidence.nccl_ras.grammar`, the findings :mod:`hangdbg.evidence.nccl_ras.analysis`. A RAS
report is its own kind of evidence (not a NCCL_DEBUG log: one process answers for the whole job,
with per-communicator operation counts), so it has its own reader; ``hangdbg fr`` reads it
together with flight-recorder dumps, being the other cross-rank report of where each rank is.
"""

from __future__ import annotations

from typing import Any

from .analysis import analyze_ras
from .facts import RasFacts
from ...model import FileError, SourceKind, SourceReport
from .grammar import RasText, read_ras, sniff
from ..base import ReaderBase

__all__ = ["RasReader", "READER"]


class RasReader(ReaderBase[RasFacts]):
    """NCCL RAS reports: ``records`` counts the reports read (a file may hold several queries)."""

    kind = SourceKind.NCCL_RAS


    def all_clear(self, rep: SourceReport[Any]) -> str:
        return (f"{rep.records} NCCL RAS report{'s' if rep.records != 1 else ''}: no NCCL error, missing process or differing "
                "operation count at the time of the query (NCCL's own state, not an all-clear for the job)")

    def sniff(self, head: bytes) -> bool:
        return sniff(head)

    def _read(self, paths: list[str]) -> SourceReport[RasFacts]:
        """Read RAS report files. Never raises for bad content: unreadable files go into
        ``errors``; lines inside a report's Errors/Warnings sections that do not parse are counted
        in ``lines_skipped``."""
        texts: list[RasText] = []
        errors: list[FileError] = []
        for p in paths:
            try:
                texts.append(read_ras(p))
            except OSError as exc:
                errors.append(FileError(p, f"cannot read: {exc.strerror or exc}"))
        findings, rows, facts = analyze_ras(texts)
        return SourceReport(kind=self.kind, files=tuple(paths), findings=tuple(findings), ranks=tuple(rows),
                            records=facts.reports, lines_read=sum(t.lines_read for t in texts),
                            lines_skipped=sum(t.skipped for t in texts), errors=tuple(errors), facts=facts)


READER = RasReader()
