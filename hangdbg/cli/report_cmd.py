"""``hangdbg report DIR...``: every kind of evidence a job left, one verdict.

The reading and merging is :func:`hangdbg.evidence.read.read_evidence`; this prints the
verdict (console, ``--json``, HTML).
"""

from __future__ import annotations

import argparse
from pathlib import Path


from ..errors import UsageError
from ..model import Verdict
from ..report.build import report_document
from ..report.html import render_html
from ..report.safetext import safe_text
from ..report.verdict_console import render_verdict
from ..evidence.read import read_evidence
from .common import (Command, add_export_arguments, add_output_arguments, exit_status, progress_bar, write_exports,
    write_text)


class ReportCommand(Command):
    description = (
        "Walk directories of collected material (hangdbg dump outputs, py-spy texts, core files, "
        "gdb/faulthandler outputs, NCCL_DEBUG logs, torchrun logs, flight-recorder dumps, "
        "syslogs, tracer files), detect each file's kind by content and print one verdict: suspects "
        "with the evidence behind each. Exit status 3 when suspects were named, 1 when no file "
        "was recognised."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="DIR", help="directories (read recursively) or files")
        p.add_argument("--html", metavar="FILE", type=Path, help="also write one self-contained HTML report to FILE")
        add_output_arguments(p, "report.json and report.html", tree=True)
        add_export_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        with progress_bar(self.err, "reading evidence", 2) as progress:
            task = progress.add_task("reading", total=None, failed=0)
            try:
                v = read_evidence([str(p) for p in args.paths], lambda _kind, n: progress.advance(task, n))
            except FileNotFoundError as exc:
                raise UsageError(f"{exc.filename}: no such file or directory") from None
        return self.show(v, args)

    def show(self, v: Verdict, args: argparse.Namespace) -> int:
        """Print (and under ``--out`` write) the verdict of ``args.paths``; the exit status."""
        doc = report_document(v, [str(p) for p in args.paths], str(args.out) if args.out is not None else None)
        html_paths = [args.html] if args.html else []
        if args.out is not None:
            html_paths.append(Path(args.out) / "report.html")
        saved = [hp for hp in html_paths if write_text(Path(hp), render_html(v, hp))]
        write_exports(v.analysis, args, self.warn)  # the stacks it analysed (py-spy dumps, cores)
        self.emit(doc, args, "report.json", lambda: render_verdict(v, tree=not args.no_tree, evidence=not args.no_evidence))
        if not args.json:
            for hp in saved:  # one not saved is named among the not-saved warnings instead
                self.err.print(safe_text(f"HTML report: {hp}", style="dim"), highlight=False)
        return exit_status(doc.found, v.recognised)
