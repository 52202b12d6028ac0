"""The ``report`` use case: one verdict from everything a job left (:func:`report`), and the files
of that verdict (:func:`save_report`: ``report.json``, the HTML report, the stack exports)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ..collect.plan import SpeedscopeBy
from ..errors import UsageError
from ..events import Events
from ..evidence.read import read_evidence
from ..model import Verdict
from ..outdir import NotSaved, OutDir
from ..report.build import report_document, with_not_saved
from ..report.export import write_exports
from ..report.html import render_html
from ..report.schema import to_json

__all__ = ["report", "save_report"]


def report(paths: Sequence[str | os.PathLike], events: Events | None = None) -> Verdict:
    """Walk ``paths`` (directories read recursively, or files), read every file by the kind its
    content shows (stacks, cores, NCCL/torch logs, flight recorder, RAS, Xid, traces) and merge
    it all into one verdict: the first failure, not its echoes.

    Raises:
        UsageError: a path does not exist.
    """
    events = events or Events()
    with events.progress("reading evidence", 2) as advance:
        def on_kind(_kind: object, n: int) -> None:
            for _ in range(n):
                advance(False)

        try:
            return read_evidence([str(p) for p in paths], on_kind)
        except FileNotFoundError as exc:
            raise UsageError(f"{exc.filename}: no such file or directory") from None


def save_report(v: Verdict, inputs: Sequence[str | os.PathLike], out: Path | None = None, html: Path | None = None,
                speedscope: Path | None = None, speedscope_by: SpeedscopeBy = "class", folded: Path | None = None,
                events: Events | None = None) -> tuple[Any, list[Path], tuple[NotSaved, ...]]:
    """Write the verdict's files: the HTML report to ``html``, the stacks it analysed to
    ``speedscope``/``folded``, and under ``out`` ``report.html`` and last ``report.json``.

    Returns:
        The verdict's document (naming the files not saved), the HTML files written, and every
        file that could not be.
    """
    files = OutDir(out if out is not None else ".")
    html_paths = [html] if html else []
    if out is not None:
        html_paths.append(out / "report.html")
    saved = [hp for hp in html_paths if files.save_text(hp, render_html(v, hp))]
    write_exports(v.analysis, files, speedscope, speedscope_by, folded, (events or Events()).warn)
    doc = report_document(v, [str(p) for p in inputs], str(out) if out is not None else None)
    if out is not None:
        files.save_text("report.json", to_json(with_not_saved(doc, files.not_saved)) + "\n")
    return with_not_saved(doc, files.not_saved), saved, files.not_saved
