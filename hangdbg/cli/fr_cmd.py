"""``hangdbg fr DUMP...|DIR``: read PyTorch flight-recorder dumps of all ranks and compare them.

Per rank and process group: the last collective recorded (its state) and the last completed one;
then the findings: ranks without a dump or whose record stops early, the first collective whose
type, sizes or dtypes differ across ranks, collectives that never completed. Exit status 3 when
suspects were found.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from ..analyze.flight_recorder import read
from ..errors import HangdbgError, UsageError
from ..model import SourceReport
from ..parse.flight_recorder import collect_paths
from ..report.evidence import SEVERITY_STYLE, source_report_dict, suspects_of
from ..report.jsonout import document_header
from .common import EXIT_FOUND, EXIT_OK, Command, print_json, write_json


def _verdict(rep: SourceReport) -> str:
    suspects = suspects_of(rep)
    if suspects:
        return suspects[0].summary
    if rep.findings:
        return rep.findings[0].summary
    n = rep.facts.get("dumps", 0)
    return f"{n} dumps read: every rank recorded the same collectives and none is pending"


class FrCommand(Command):
    description = (
        "Read flight-recorder dumps (TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE; the files "
        "TORCH_NCCL_DUMP_ON_TIMEOUT writes to TORCH_FR_DUMP_TEMP_FILE or TORCH_NCCL_DEBUG_INFO_TEMP_FILE "
        "+ rank, JSON or pickle; pickles are read without running any code) and match the collectives "
        "across ranks by process group and sequence number. Shows per rank the last collective "
        "recorded and the last completed one, ranks without a dump or whose record stops early, and "
        "the first collective whose type, sizes or dtypes differ. Exit status 3 when suspects are found."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="DUMP|DIR",
                       help="dump files (rank = the number ending the name, e.g. nccl_trace_rank_3) or directories")
        p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
        p.add_argument("-o", "--out", metavar="DIR", help="also write fr.json there")

    def run(self, args: argparse.Namespace) -> int:
        files, problems = collect_paths(args.paths)
        for path, reason in problems:
            self.err.print(f"[yellow]warning:[/yellow] {escape(path)}: {escape(reason)}", highlight=False)
        if not files:
            raise UsageError(f"no flight-recorder dump in {' '.join(args.paths)}",
                             help="dumps are written when TORCH_NCCL_DUMP_ON_TIMEOUT=1 and TORCH_FR_BUFFER_SIZE>0, "
                                  "to /tmp/nccl_trace_rank_<rank> unless TORCH_FR_DUMP_TEMP_FILE says otherwise")
        rep = read(files)
        if not rep.facts.get("dumps"):
            raise HangdbgError(f"none of the {len(files)} files could be read as a flight-recorder dump: "
                               + "; ".join(f"{p}: {r}" for p, r in rep.errors[:5]))
        doc = {**document_header("fr"), "verdict": _verdict(rep), "found_suspects": bool(suspects_of(rep)),
               **source_report_dict(rep)}
        if args.out:
            write_json(Path(args.out) / "fr.json", doc)
        if args.json:
            print_json(self, doc)
        else:
            self._render(rep, doc["verdict"])
        return EXIT_FOUND if doc["found_suspects"] else EXIT_OK

    def _render(self, rep: SourceReport, verdict: str) -> None:
        bad = bool(suspects_of(rep))
        self.out.print(Panel(escape(verdict), title="flight recorder", border_style="red" if bad else "green"))
        t = Table(title="Ranks (last collective per process group)", title_justify="left", expand=True)
        for col in ("rank", "group", "last seq", "last collective", "state", "last started", "last completed"):
            t.add_column(col, no_wrap=col != "last collective", overflow="fold")
        for row in rep.facts.get("table", []):
            last, begun, done = row["last"], row["last_started"], row["last_completed"]
            state = last["state"] if last else ""
            style = "" if state == "completed" or not last else "yellow"
            t.add_row(str(row["rank"]), escape(row["group"]), str(last["seq"]) if last else "-",
                      escape(last["desc"]) if last else "(none)", f"[{style}]{state}[/{style}]" if style else state,
                      f"{begun['seq']} {escape(begun['op'])}" if begun else "-",
                      f"{done['seq']} {escape(done['op'])}" if done else "-")
        for r in rep.ranks:
            if r.state in ("no dump", "dump unreadable"):
                t.add_row(str(r.rank), "", "-", "", f"[red]{r.state}[/red]", "-", "-")
        self.out.print(t)
        if rep.findings:
            self.out.print("[bold]Findings[/bold]")
            for f in rep.findings:
                style = SEVERITY_STYLE.get(f.severity, "")
                self.out.print(f"[{style}]{f.severity}[/{style}] [bold]{f.kind}[/bold]: {escape(f.summary)}", highlight=False)
                for ev in f.evidence:
                    self.out.print(f"    [dim]{escape(Path(ev.source).name)}:[/dim] {escape(ev.text)}", highlight=False)
                if f.action:
                    self.out.print(f"    [green]→[/green] {escape(f.action)}", highlight=False)
        for path, reason in rep.errors:
            self.out.print(f"[red]unreadable[/red] {escape(path)}: {escape(reason)}", highlight=False)
        versions = rep.facts.get("versions") or []
        fmts = rep.facts.get("formats") or {}
        self.out.print(f"[dim]{rep.facts.get('dumps', 0)} dumps ({', '.join(f'{n} {k}' for k, n in fmts.items())}), "
                       f"version {', '.join(versions) or '?'}, {rep.lines_read} entries[/dim]", highlight=False)
