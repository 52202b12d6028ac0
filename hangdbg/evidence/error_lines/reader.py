"""The error-lines reader: every error-looking line of any text file, read with the catalog.

The grammar is :mod:`.grammar`, the findings :mod:`.analysis`, the catalog :mod:`hangdbg.catalog`.
``records`` counts error-looking lines, so a file with one error line is never "nothing could be read".
"""

from __future__ import annotations

from typing import Any, cast

from ...catalog.catalog import Catalog, load
from ...model import FileError, SourceKind, SourceReport
from ..base import ReaderBase, with_source
from .analysis import findings_from
from .facts import ErrorLinesFacts
from .grammar import ErrorLog, scan_file, sniff

__all__ = ["ErrorLinesReader", "READER"]


class _LazyCatalog:
    """The catalog, loaded (:func:`~hangdbg.catalog.catalog.load`, about 0.1 s) on the first look-up: a file without
    an error-looking line (a healthy NCCL_DEBUG log of a gigabyte) never needs it."""

    def __getattr__(self, name: str) -> Any:  # called once per attribute: it is kept on the instance after
        value = getattr(load(), name)
        setattr(self, name, value)
        return value


class ErrorLinesReader(ReaderBase[ErrorLinesFacts]):
    """Any text file: ``records`` counts its error-looking lines."""

    kind = SourceKind.ERROR_LINES

    def all_clear(self, rep: SourceReport[Any]) -> str:
        return f"no error line among {rep.lines_read} lines"

    def sniff(self, head: bytes) -> bool:
        return sniff(head)

    def _read(self, paths: list[str]) -> SourceReport[ErrorLinesFacts]:
        catalog = cast(Catalog, _LazyCatalog())
        log = ErrorLog()
        errors: list[FileError] = []
        for path in paths:
            try:
                scan_file(path, catalog, log)
            except OSError as exc:
                errors.append(FileError(path, exc.strerror or str(exc)))
        findings, facts = findings_from(log)
        return with_source(SourceReport(kind=self.kind, files=tuple(paths), findings=tuple(findings),
                                        records=facts.error_lines + len(log.roster.said) + len(log.roster.missing) + len(log.cut_tracebacks) + len(log.ib_missing)
                                        + len(log.stalls),
                                        lines_read=log.lines_read,
                                        errors=tuple(errors), facts=facts))


READER = ErrorLinesReader()
