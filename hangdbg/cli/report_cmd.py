"""``hangdbg report DIR...``: every kind of evidence a job left, one verdict.

The reading and merging is :func:`hangdbg.api.report`; this prints the verdict (console,
``--json``) and has :func:`hangdbg.api.save_report` write its files (HTML, report.json).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..api._report import report, save_report
from ..model import Verdict
from ..report.safetext import safe_text
from ..report.verdict_console import render_verdict
from .common import Command, add_export_arguments, add_output_arguments, exit_status


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
        return self.show_verdict(report(args.paths, self.events(args)), args, args.paths, args.out)

    def show_verdict(self, v: Verdict, args: argparse.Namespace, inputs: list[str], out: Path | None) -> int:
        """Print the verdict of ``inputs`` (and write its files under ``out``); the exit status."""
        doc, saved, lost = save_report(v, inputs, out, getattr(args, "html", None), getattr(args, "speedscope", None),
                                       getattr(args, "speedscope_by", "class"), getattr(args, "folded", None),
                                       self.events(args))
        self.show(doc, args, lambda: render_verdict(v, tree=not args.no_tree, evidence=not args.no_evidence), lost,
                  str(out) if out is not None else None)
        if not args.json:
            for hp in saved:  # one not saved is named among the not-saved warnings instead
                self.err.print(safe_text(f"HTML report: {hp}", style="dim"), highlight=False)
        return exit_status(doc.found, v.recognised)
