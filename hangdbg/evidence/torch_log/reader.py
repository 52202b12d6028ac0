"""The torch-log reader: PyTorch distributed logs (watchdog timeouts, desync reports, C++ frames,
torchrun's ``ChildFailedError`` summary) and torchelastic ``error.json`` files.

The grammar is :mod:`hangdbg.evidence.torch_log.grammar`; the findings are :mod:`hangdbg.evidence.torch_log.analysis`.
"""

from __future__ import annotations

from typing import Any


from .analysis import analyze_events
from .facts import TorchLogFacts
from ...model import FileError, SourceKind, SourceReport
from ...text.jsondoc import load_json
from ...text.lines import open_input, read_head
from .grammar import TorchLogEvents, is_error_json, parse_error_json, scan_file, sniff
from ..base import ReaderBase

__all__ = ["TorchLogReader", "READER"]

MAX_ERROR_JSON = 64 << 20
"""Bytes of an ``error.json`` file read at most."""


class TorchLogReader(ReaderBase[TorchLogFacts]):
    """Torch logs and ``error.json`` files: ``records`` counts the events recognised."""

    kind = SourceKind.TORCH_LOG


    def all_clear(self, rep: SourceReport[Any]) -> str:
        return f"no rank stands out in {rep.records} log events: no watchdog timeout, desync report or failed child"

    def sniff(self, head: bytes) -> bool:
        return sniff(head)

    def _read(self, paths: list[str]) -> SourceReport[TorchLogFacts]:
        """Read logs and ``error.json`` files of one job.

        Never raises for bad content: unreadable files and invalid JSON go into ``errors``; lines
        that look like watchdog / ChildFailedError lines but do not parse are counted in
        ``lines_skipped``.
        """
        ev = TorchLogEvents()
        errors: list[FileError] = []
        for path in paths:
            try:
                if is_error_json(read_head(path, 4096)):
                    with open_input(path) as f:
                        raw = f.read(MAX_ERROR_JSON)
                    ev.lines_read += raw.count(b"\n") + 1
                    try:
                        ev.error_files.append(parse_error_json(load_json(raw), path))
                    except ValueError as exc:
                        errors.append(FileError(path, f"invalid error file: {exc}"))
                    continue
                scan_file(path, path, ev)
            except OSError as exc:
                errors.append(FileError(path, exc.strerror or str(exc)))
        findings, ranks, facts = analyze_events(ev)
        return SourceReport(kind=self.kind, files=tuple(paths), findings=tuple(findings), ranks=tuple(ranks),
                            records=ev.records, lines_read=ev.lines_read, lines_skipped=ev.lines_skipped,
                            errors=tuple(errors), facts=facts)


READER = TorchLogReader()
