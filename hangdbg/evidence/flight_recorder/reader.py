"""The flight-recorder reader: PyTorch flight-recorder dumps (JSON or pickle), one per rank, and
the text ``torchfrtrace`` (``fr_trace``) prints after matching them.

Decoding is :mod:`hangdbg.evidence.flight_recorder.grammar` (pickles through a restricted unpickler that
refuses every global); matching the ranks' records is :mod:`hangdbg.evidence.flight_recorder.analysis`.
The ``fr_trace`` text is :mod:`hangdbg.evidence.flight_recorder.trace_text` and :mod:`hangdbg.evidence.flight_recorder.trace_analysis`.
A file's content decides which it is, before its name is looked at.
"""

from __future__ import annotations

from typing import Any

import re
from dataclasses import replace

from .analysis import analyze
from .trace_analysis import analyze_text
from .facts import FrFacts
from ...model import FileError, SourceKind, SourceReport
from . import trace_text as fr_trace_text
from .waits import fr_waits, settle_lagging
from .grammar import FrDump, FrDumpError, load_dump, rank_from_path, sniff
from ...text.lines import read_head
from ..base import ReaderBase

__all__ = ["FlightRecorderReader", "READER"]

_NAME_LIKE = re.compile(r"(trace|rank|fr|flight)[\w.-]*?_?\d+(\.(json|pkl|pickle))?$", re.IGNORECASE)


class FlightRecorderReader(ReaderBase[FrFacts]):
    """Flight-recorder dumps: ``records`` counts the dumps read."""

    kind = SourceKind.FLIGHT_RECORDER


    def all_clear(self, rep: SourceReport[Any]) -> str:
        return f"{rep.records} dumps read: every rank recorded the same collectives and none is pending"

    def sniff(self, head: bytes) -> bool:
        return sniff(head) or fr_trace_text.sniff(head)

    def takes(self, name: str, head: bytes) -> bool:
        """A dump or ``fr_trace`` text by content, or by a per-rank dump's name
        (``nccl_trace_rank_3``), so that a garbled dump in a directory is reported rather than skipped."""
        return self.sniff(head) or _NAME_LIKE.search(name) is not None

    def _read(self, paths: list[str]) -> SourceReport[FrFacts]:
        """Read flight-recorder dumps (one per rank; files, not directories) and analyze them.

        Never raises for bad content: a file that cannot be read (truncated, garbled, too large, a
        pickle asking for a global, no rank in its name) goes into ``errors`` with the reason and the
        rest is analyzed. ``lines_read`` counts entries read, ``lines_skipped`` entries that could not
        be used. A file whose head is ``fr_trace`` text is read as such (whatever its name): its blocks
        count as records, its lines as lines read.
        """
        dumps: list[FrDump] = []
        texts: list[fr_trace_text.FrTraceText] = []
        errors: list[FileError] = []
        unreadable: dict[int, tuple[str, str]] = {}
        first_of: dict[int, str] = {}
        for p in paths:
            try:
                if fr_trace_text.sniff(read_head(p)):
                    texts.append(fr_trace_text.read_fr_trace(p))
                    continue
            except OSError as exc:
                errors.append(FileError(p, f"cannot read: {exc.strerror or exc}"))
                continue
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
        findings = list(settle_lagging(findings, fr_waits(dumps)))  # behind in a group only while waiting in another
        if texts:
            t_findings, t_rows, t_facts = analyze_text(texts)
            findings, rows, facts = findings + t_findings, rows + t_rows, _merge(facts, t_facts)
        return SourceReport(
            kind=self.kind, files=tuple(paths), findings=tuple(findings), ranks=tuple(rows),
            records=len(dumps) + sum(len(t.reports) + len(t.tables) for t in texts),
            lines_read=sum(len(d.entries) + d.skipped for d in dumps) + sum(t.lines_read for t in texts),
            lines_skipped=sum(d.skipped for d in dumps) + sum(t.skipped for t in texts),
            errors=tuple(errors), facts=facts,
        )


def _merge(a: FrFacts, b: FrFacts) -> FrFacts:
    """The facts of the dumps (``a``) with those of ``fr_trace`` texts (``b``) added."""
    return replace(a, world=tuple(sorted(set(a.world) | set(b.world))), formats={**a.formats, **b.formats},
                   groups={**b.groups, **a.groups})


READER = FlightRecorderReader()
