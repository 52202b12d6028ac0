"""``hangdbg nccl summary|split LOG...``: NCCL_DEBUG logs per rank, and the suspects in them.

``summary`` prints per rank the NCCL version, interfaces, net plugin, init state, collective
counts by type and the last opCount per communicator, then the suspects (ranks that never
completed init, lagging ranks, unreachable peers named by host, hosts set up differently).
``--split-on REGEX`` cuts per-iteration slices (the ``csplit`` recipe) and compares the counts
per slice. ``split`` writes one file per rank (``rankN.log``; ``HOST.PID.log`` when the rank is
unknown). Exit status 3 when suspects were found.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from ..analyze.nccl import read
from ..analyze.rankset import compress
from ..errors import HangdbgError, UsageError
from ..model import SCHEMA_VERSION, SourceReport
from ..parse.nccl_split import split_logs
from ..parse.textlines import iter_files
from ..report.evidence import source_report_dict, suspects_of
from .common import EXIT_FOUND, EXIT_OK, Command, print_json, write_json

NO_RECORDS_HELP = ("run the job with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,COLL,NET for collective lines), "
                   "optionally NCCL_DEBUG_FILE=/some/dir/nccl.%h.%p, and pass those files")


def _paths(items: list[str]) -> list[str]:
    """Files as given; directories expanded to the regular files below them (sorted)."""
    try:
        out = [f for item in items for f in iter_files(item)]
    except FileNotFoundError as exc:
        raise UsageError(f"no such file or directory: {exc.filename}") from None
    if not out:
        raise UsageError("no files to read in " + " ".join(items))
    return out


def _regex(text: str | None) -> re.Pattern[str] | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"bad --split-on pattern: {exc}") from None


class NcclCommand(Command):
    description = (
        "summary: per rank NCCL version, interfaces, plugin, init state, collective counts and last "
        "opCount per communicator, and the suspects. split: one file per rank. Exit status 3 when "
        "suspects were found."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        sub = p.add_subparsers(dest="action", metavar="ACTION")
        sub.required = True
        s = sub.add_parser("summary", help="per-rank summary and suspects")
        s.add_argument("paths", nargs="+", metavar="LOG", help="NCCL_DEBUG logs (files or directories)")
        s.add_argument("--split-on", metavar="REGEX", help="a line matching REGEX starts a new slice (iteration)")
        s.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
        s.add_argument("-o", "--out", metavar="DIR", help="also write nccl.json there")
        s.add_argument("--rows", type=int, default=64, metavar="N",
                       help="per-rank rows shown (suspects always shown; default 64, 0 = all)")
        s.add_argument("--workers", type=int, default=None, metavar="N", help="scan processes (default: CPUs)")
        t = sub.add_parser("split", help="write one file per rank")
        t.add_argument("paths", nargs="+", metavar="LOG", help="NCCL_DEBUG logs (files or directories)")
        t.add_argument("-o", "--out", metavar="DIR", required=True, help="directory for the per-rank files")
        t.add_argument("--split-on", metavar="REGEX", help="also cut each rank's file per slice (iteration)")
        t.add_argument("--json", action="store_true", help="print the files written as JSON")

    def run(self, args: argparse.Namespace) -> int:
        if args.action == "split":
            return self._split(args)
        return self._summary(args)

    # -- summary ---------------------------------------------------------------------------
    def _summary(self, args: argparse.Namespace) -> int:
        paths = _paths(args.paths)
        rep = read(paths, split_on=_regex(args.split_on), workers=args.workers)
        for path, reason in rep.errors:
            self.err.print(f"[yellow]warning:[/yellow] cannot read {escape(path)}: {escape(reason)}", highlight=False)
        if not rep.facts.get("records"):
            raise HangdbgError(f"no NCCL_DEBUG record in {len(paths)} file(s) ({rep.lines_read} lines read)",
                               help=NO_RECORDS_HELP)
        suspects = suspects_of(rep)
        verdict = self._verdict(rep, suspects)
        doc = {"schema_version": SCHEMA_VERSION, "command": "nccl summary", "verdict": verdict,
               "found_suspects": bool(suspects), **source_report_dict(rep)}
        if args.out:
            write_json(Path(args.out) / "nccl.json", doc)
        if args.json:
            print_json(self, doc)
        else:
            self._render(rep, verdict, args)
        return EXIT_FOUND if suspects else EXIT_OK

    @staticmethod
    def _verdict(rep: SourceReport, suspects) -> str:
        procs = rep.facts["processes"]
        hosts = len({p["host"] for p in procs})
        head = f"{len(procs)} processes on {hosts} host{'s' if hosts != 1 else ''}, {rep.facts['records']} NCCL records"
        if not suspects:
            return head + ": no suspect (init completed, opCounts agree, set-up the same on every host)"
        return head + ": " + "; ".join(f.summary for f in suspects[:3]) + (
            f" (+{len(suspects) - 3} more)" if len(suspects) > 3 else "")

    def _render(self, rep: SourceReport, verdict: str, args: argparse.Namespace) -> None:
        suspects = suspects_of(rep)
        self.out.print(Panel(escape(verdict), title="nccl summary", border_style="red" if suspects else "green"))
        for f in rep.findings:
            color = "red" if f.severity == "suspect" else "yellow"
            self.out.print(f"[{color}]{f.severity}[/{color}] [bold]{f.kind}[/bold]: {escape(f.summary)}", highlight=False)
            if f.action:
                self.out.print(f"  [dim]action:[/dim] {escape(f.action)}", highlight=False)
            for e in f.evidence:
                loc = f"{os.path.basename(e.source)}:{e.line}" if e.line else os.path.basename(e.source)
                self.out.print(f"  [dim]{escape(loc)}[/dim] {escape(e.text)}", highlight=False)
        blamed = {r for f in suspects for r in f.ranks}
        blamed_hosts = {h for f in suspects for h in f.hosts}
        procs = rep.facts["processes"]
        shown = [p for p in procs if not args.rows or len(procs) <= args.rows or p["rank"] in blamed or p["host"] in blamed_hosts]
        if args.rows and len(shown) > args.rows:
            shown = [p for p in shown if p["rank"] in blamed] or shown[:args.rows]
        types = sorted({k for p in procs for k in p["collectives"]})
        t = Table(title=f"Ranks ({len(shown)} of {len(procs)} shown)", title_justify="left")
        for col in ("rank", "host", "pid", "init", "version", "net / plugin", "interfaces"):
            t.add_column(col, overflow="fold", no_wrap=col in ("rank", "pid", "init"))
        for ty in types:
            t.add_column(ty, justify="right")
        t.add_column("last opCount per comm", overflow="fold")
        for p in shown:
            mark = p["rank"] in blamed
            rank = "?" if p["rank"] is None else str(p["rank"])
            state = p["state"] if p["state"] == "ok" else f"[red]{p['state']}[/red]"
            net = ",".join(p["networks"]) or "-"
            plug = p["plugin"] or "-"
            last = " ".join(f"{c['key'][:10]}:{c['last_op_hex'] or '-'}" for c in p["comms"])
            t.add_row(f"[red]{rank}[/red]" if mark else rank, escape(p["host"]), str(p["pid"]), state,
                      escape(p["version"] or "-"), escape(f"{net} / {plug}"), escape(",".join(p["interfaces"]) or "-"),
                      *[str(p["collectives"].get(ty, 0)) for ty in types], escape(last))
        self.out.print(t)
        if "slices" in rep.facts:
            self._render_slices(rep)
        self.out.print(f"[dim]{rep.lines_read} lines read, {rep.lines_skipped} NCCL-looking lines skipped[/dim]",
                       highlight=False)

    def _render_slices(self, rep: SourceReport) -> None:
        table = rep.facts["slices"]
        if not table:
            return
        n = max(len(v) for v in table.values())
        t = Table(title=f"Collectives per slice (--split-on {rep.facts['split_on']!r})", title_justify="left")
        t.add_column("rank")
        for s in range(n):
            t.add_column(f"slice {s}", justify="right")
        majority = rep.facts["slice_majority"]  # the one the nccl-slice-differs findings used
        for label, rows in table.items():
            cells = []
            for s, c in enumerate(rows):
                txt = " ".join(f"{k}:{v}" for k, v in c.items()) or "-"
                cells.append(f"[red]{escape(txt)}[/red]" if c != majority[s] else escape(txt))
            t.add_row(escape(label), *cells)
        self.out.print(t)

    # -- split -----------------------------------------------------------------------------
    def _split(self, args: argparse.Namespace) -> int:
        paths = _paths(args.paths)
        res = split_logs(paths, Path(args.out), _regex(args.split_on))
        if not res.records:
            raise HangdbgError(f"no NCCL_DEBUG record in {len(paths)} file(s)", help=NO_RECORDS_HELP)
        for path, why in res.errors:
            self.err.print(f"[yellow]warning:[/yellow] cannot read {escape(path)}: {escape(why)}")
        rows, written, out = res.rows, res.written, Path(args.out)
        doc = {"schema_version": SCHEMA_VERSION, "command": "nccl split", "out": str(out), "ranks": rows,
               "unattributed_lines": written.get("unattributed.log", 0)}
        if args.json:
            print_json(self, doc)
        else:
            known = [r["rank"] for r in rows if r["rank"] is not None]
            self.out.print(f"wrote {len(written)} files to {escape(str(out))}: ranks {compress(known) or '-'}"
                           + (f", {len(rows) - len(known)} processes without a rank (HOST.PID.log)" if len(rows) > len(known) else "")
                           + (f", {written['unattributed.log']} unattributed lines" if "unattributed.log" in written else ""),
                           highlight=False)
        return EXIT_OK

