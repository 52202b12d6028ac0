"""``hangdbg report DIR...``: every kind of evidence a job left, one verdict.

The reading and merging is :func:`hangdbg.analyze.evidence.read_evidence`; this prints the
verdict (console, ``--json``, ``--html FILE``).
Exit 3 when suspects were named.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..analyze.evidence import read_evidence
from ..errors import HangdbgError, UsageError
from ..report.html import render_html
from ..report.verdict_console import render_verdict
from ..report.verdict_json import verdict_to_dict
from .common import EXIT_FOUND, EXIT_OK, Command, print_json, progress_bar, write_json


class ReportCommand(Command):
    description = (
        "Walk directories of collected material (hangdbg dump outputs, py-spy texts, core files, "
        "gdb/faulthandler outputs, NCCL_DEBUG logs, torchrun logs, flight-recorder dumps, "
        "syslogs), detect each file's kind by content and print one verdict: suspects with the "
        "evidence behind each. Exit status 3 when suspects were named."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="DIR", help="directories (read recursively) or files")
        p.add_argument("--html", metavar="FILE", type=Path, help="also write one self-contained HTML report")
        p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
        p.add_argument("-o", "--out", metavar="DIR", type=Path, help="also write report.json (and report.html) there")
        p.add_argument("--no-tree", action="store_true", help="leave the merged call tree out of the terminal report")

    def run(self, args: argparse.Namespace) -> int:
        with progress_bar(self.err, "reading evidence", 2) as progress:
            task = progress.add_task("reading", total=None, failed=0)
            try:
                v = read_evidence([str(p) for p in args.paths], lambda _kind, n: progress.advance(task, n))
            except FileNotFoundError as exc:
                raise UsageError(f"{exc.filename}: no such file or directory") from None
        if not v.files:
            raise UsageError(f"no files under {' '.join(map(str, args.paths))}")
        doc = verdict_to_dict(v, "report", {"inputs": [str(p) for p in args.paths]})
        html_paths = [args.html] if args.html else []
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            write_json(args.out / "report.json", doc)
            html_paths.append(args.out / "report.html")
        for hp in html_paths:
            try:
                hp.parent.mkdir(parents=True, exist_ok=True)
                hp.write_text(render_html(v, hp), encoding="utf-8")
            except OSError as exc:
                raise HangdbgError(f"cannot write {hp}: {exc.strerror or exc}") from None
        if args.json:
            print_json(self, doc)
        else:
            self.out.print(render_verdict(v, tree=not args.no_tree))
            for hp in html_paths:
                self.err.print(f"[dim]HTML report: {hp}[/dim]", highlight=False)
        return EXIT_FOUND if v.found_failure else EXIT_OK
