"""The NCCL reader: NCCL_DEBUG logs (one interleaved file, ``NCCL_DEBUG_FILE=%h.%p`` files, or both).

The record grammar is :mod:`hangdbg.evidence.nccl.grammar`, the fast scan :mod:`hangdbg.evidence.nccl.scan`,
the findings :mod:`hangdbg.evidence.nccl.analysis`.
"""

from __future__ import annotations

import re
from typing import Sequence

from .analysis import analyze
from .facts import NcclFacts
from ...model import FileError, SourceKind, SourceReport
from .grammar import sniff
from .scan import scan
from ..base import ReaderBase, with_source

__all__ = ["NcclReader", "READER"]


class NcclReader(ReaderBase[NcclFacts]):
    """NCCL_DEBUG logs: ``records`` counts the NCCL records."""

    kind = SourceKind.NCCL


    def all_clear(self, rep: SourceReport[NcclFacts]) -> str:
        """What the NCCL logs show, and only that: init completed only when every process logged
        it, opCounts only when collective lines were read, set-up only when hosts logged it."""
        facts = rep.facts
        procs = facts.processes if facts is not None else ()
        hosts = len({p.host for p in procs})
        lead = f"no suspect in {rep.records} NCCL records of {len(procs)} processes on {hosts} host{'s' if hosts != 1 else ''}: "
        ok = sum(1 for p in procs if p.state == "ok")
        parts = []
        if procs and ok == len(procs):
            parts.append("init completed")
        elif ok or any(p.state == "init logged" for p in procs):
            seen = sum(1 for p in procs if p.state == "init logged")
            parts.append(f"init completed on {ok}" + (f", logged without COMPLETE on {seen}" if seen else "")
                         + f" of {len(procs)} processes")
        else:
            parts.append("no process wrote an init line (an excerpt?)")
        parts.append("opCounts agree" if facts is not None and facts.collectives else "no collective lines (NCCL_DEBUG_SUBSYS=COLL)")
        if hosts > 1 and facts is not None and facts.hosts and any(facts.hosts.values()):
            parts.append("set-up the same on every host")
        return lead + ", ".join(parts)

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
                :func:`hangdbg.evidence.nccl.analysis.slice_table`).
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
