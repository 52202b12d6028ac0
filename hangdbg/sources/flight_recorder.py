"""The flight-recorder reader: PyTorch flight-recorder dumps (JSON or pickle), one per rank.

Decoding is :mod:`hangdbg.parse.flight_recorder` (pickles through a restricted unpickler that
refuses every global); matching the ranks' records is :mod:`hangdbg.analyze.flight_recorder`.
"""

from __future__ import annotations

import re

from ..analyze.flight_recorder import analyze
from ..facts import FrFacts
from ..model import FileError, SourceKind, SourceReport
from ..parse.flight_recorder import FrDump, FrDumpError, load_dump, rank_from_path, sniff
from .base import ReaderBase

__all__ = ["FlightRecorderReader", "READER"]

_NAME_LIKE = re.compile(r"(trace|rank|fr|flight)[\w.-]*?_?\d+(\.(json|pkl|pickle))?$", re.IGNORECASE)


class FlightRecorderReader(ReaderBase[FrFacts]):
    """Flight-recorder dumps: ``records`` counts the dumps read."""

    kind = SourceKind.FLIGHT_RECORDER

    def sniff(self, head: bytes) -> bool:
        return sniff(head)

    def takes(self, name: str, head: bytes) -> bool:
        """A dump by content, or by a per-rank dump's name (``nccl_trace_rank_3``), so that a
        garbled dump in a directory is reported rather than skipped."""
        return sniff(head) or _NAME_LIKE.search(name) is not None

    def _read(self, paths: list[str]) -> SourceReport[FrFacts]:
        """Read flight-recorder dumps (one per rank; files, not directories) and analyze them.

        Never raises for bad content: a file that cannot be read (truncated, garbled, too large, a
        pickle asking for a global, no rank in its name) goes into ``errors`` with the reason and the
        rest is analyzed. ``lines_read`` counts entries read, ``lines_skipped`` entries that could not
        be used.
        """
        dumps: list[FrDump] = []
        errors: list[FileError] = []
        unreadable: dict[int, tuple[str, str]] = {}
        first_of: dict[int, str] = {}
        for p in paths:
            try:
                d = load_dump(p)
                if d.rank in first_of:
                    errors.append(FileError(p, f"a second dump of rank {d.rank} (the first read was {first_of[d.rank]}): ignored"))
                    continue
                first_of[d.rank] = p
                dumps.append(d)
            except FrDumpError as exc:
                errors.append(FileError(p, str(exc)))
                r = rank_from_path(p)
                if r is not None:
                    unreadable[r] = (p, str(exc))
        findings, rows, facts = analyze(dumps, unreadable) if dumps else ([], [], FrFacts())
        return SourceReport(
            kind=self.kind, files=tuple(paths), findings=tuple(findings), ranks=tuple(rows), records=len(dumps),
            lines_read=sum(len(d.entries) + d.skipped for d in dumps), lines_skipped=sum(d.skipped for d in dumps),
            errors=tuple(errors), facts=facts,
        )


READER = FlightRecorderReader()
