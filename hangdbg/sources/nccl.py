"""The NCCL reader: NCCL_DEBUG logs (one interleaved file, ``NCCL_DEBUG_FILE=%h.%p`` files, or both).

The record grammar is :mod:`hangdbg.parse.nccl`, the fast scan :mod:`hangdbg.parse.nccl_scan`,
the findings :mod:`hangdbg.analyze.nccl`.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..analyze.nccl import analyze
from ..facts import NcclFacts
from ..model import FileError, SourceKind, SourceReport
from ..parse.nccl import sniff
from ..parse.nccl_scan import scan
from .base import ReaderBase, with_source

__all__ = ["NcclReader", "READER"]


class NcclReader(ReaderBase[NcclFacts]):
    """NCCL_DEBUG logs: ``records`` counts the NCCL records."""

    kind = SourceKind.NCCL

    def sniff(self, head: bytes) -> bool:
        return sniff(head)

    def _read(self, paths: list[str]) -> SourceReport[NcclFacts]:
        return self.read_split(paths)

    def read_split(self, paths: Sequence[str], split_on: re.Pattern[str] | None = None,
                   workers: int | None = None) -> SourceReport[NcclFacts]:
        """Read NCCL_DEBUG logs and name the suspects.

        Args:
            paths: log files.
            split_on: ``--split-on`` regex (per-iteration slices, see
                :func:`hangdbg.analyze.nccl.slice_table`).
            workers: processes for the fast scan (``None``: automatic).

        Returns:
            a report of kind ``nccl``; never raises for bad content.
        """
        log = scan([str(p) for p in paths], split_on=split_on, workers=workers)
        findings, rows, facts = analyze(log)
        return with_source(SourceReport(
            kind=self.kind, files=tuple(log.files), findings=tuple(findings), ranks=tuple(rows), records=log.records,
            lines_read=log.lines_read, lines_skipped=log.lines_skipped,
            errors=tuple(FileError(p, why) for p, why in log.errors), facts=facts))


READER = NcclReader()
