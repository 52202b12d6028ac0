"""``hangdbg report DIR...``: every kind of evidence a job left, one verdict.

Walks the directories, detects each file's kind by its content (parse.sources), hands the files
of each kind to their reader, analyzes stacks (py-spy dumps, core files) together, and merges
everything into one verdict (analyze.verdict): console, ``--json``, ``--html FILE``.
Exit 3 when suspects were named.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ..analyze import analyze
from ..analyze.fr_crosscheck import cross_check
from ..analyze.verdict import build_verdict
from ..errors import HangdbgError, UsageError
from ..model import Analysis, SourceReport
from ..parse.sources import reader, walk
from ..parse.stacks_source import with_analysis
from ..report.html import render_html
from ..report.jsonout import dumps_json
from ..report.verdict_console import render_verdict
from ..report.verdict_json import verdict_to_dict
from .common import EXIT_FOUND, EXIT_OK, Command, progress_bar, write_json


def read_sources(paths: list[str], progress=None) -> tuple[list[SourceReport], Analysis | None, list, list]:
    """Classify and read everything under ``paths``.

    Returns:
        ``(sources, analysis, unparsed, files)`` as :func:`build_verdict` takes them.

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    classified = walk(paths)
    by_kind: dict[str, list[str]] = {}
    unparsed = []
    for c in classified:
        for k in c.kinds:
            by_kind.setdefault(k, []).append(c.path)
        if not c.kinds:
            unparsed.append((c.path, c.reason))
    sources: list[SourceReport] = []
    dumps = []
    task = progress.add_task("reading", total=len(by_kind), failed=0) if progress else None
    for kind, files in by_kind.items():
        mod = reader(kind)
        try:
            if hasattr(mod, "read_dumps"):  # stacks: analyzed together below
                rep, found = mod.read_dumps(files)
                dumps.extend(found)
            else:
                rep = mod.read(files)
        except Exception as exc:  # a reader bug must not lose the rest of the report
            rep = SourceReport(kind=kind, files=tuple(files),
                               errors=tuple((f, f"{kind} reader failed: {exc!r}") for f in files))
        sources.append(rep)
        if progress:
            progress.advance(task)
    analysis = None
    if dumps:
        analysis = analyze(dumps)
        stacks = next((s for s in sources if s.kind == "stacks"), None)
        if stacks is None:  # cores and stack texts only
            sources.append(with_analysis(SourceReport(kind="stacks"), analysis, live=False))
        else:
            sources[sources.index(stacks)] = with_analysis(stacks, analysis)
        sources = [_cross_checked(s, analysis) if s.kind == "flight-recorder" else s for s in sources]
    files = [(c.path, c.kinds) for c in classified]
    return sources, analysis, unparsed, files


def _cross_checked(fr: SourceReport, analysis: Analysis) -> SourceReport:
    """The flight recorder's report with its agreement or contradiction with the stacks added."""
    return replace(fr, findings=fr.findings + tuple(cross_check(fr, analysis)))


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
            try:
                sources, analysis, unparsed, files = read_sources([str(p) for p in args.paths], progress)
            except FileNotFoundError as exc:
                raise UsageError(f"{exc.filename}: no such file or directory") from None
        if not files:
            raise UsageError(f"no files under {' '.join(map(str, args.paths))}")
        v = build_verdict(sources, analysis, unparsed, files)
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
            self.out.out(dumps_json(doc), highlight=False)
        else:
            self.out.print(render_verdict(v, tree=not args.no_tree))
            for hp in html_paths:
                self.err.print(f"[dim]HTML report: {hp}[/dim]", highlight=False)
        return EXIT_FOUND if v.found_failure else EXIT_OK
