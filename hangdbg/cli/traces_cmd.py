"""``hangdbg traces DIR``: the "working with trace files" recipes as one command.

Per rank: where its trace ends (last lines side by side), whether the tracer finished, the
first traced call that not all ranks reached, and ``--grep PATTERN`` counts per rank.
Exit status 3 when a rank's trace stops early (no end line) or the ranks diverge.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rich.columns import Columns
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from ..errors import UsageError
from ..model import SCHEMA_VERSION
from ..parse.traces import RankTrace, divergence, read_trace_dir
from .common import EXIT_ERROR, EXIT_FOUND, EXIT_OK, Command, print_json, write_json


def _who(t: RankTrace) -> str:
    return f"rank {t.rank}" if t.rank is not None else f"{t.host} pid {t.pid}"


def _where(t: RankTrace) -> str:
    """The last traced line without its timestamp: ``train.py:21 | dist.all_reduce(t)``."""
    if not t.last_lines:
        return "(nothing traced)"
    return t.last_lines[-1].strip().split(" ", 1)[-1]


class TracesCommand(Command):
    description = (
        "Read trace-HOST-RANK-PID.txt files (tracer package, format v1) and show the last lines "
        "of every rank side by side, the first traced call that not all ranks reached, and "
        "--grep counts per rank. Exit status 3 when a rank's trace ends early or ranks diverge."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="DIR", help="directories with trace files (or the files)")
        p.add_argument("-n", "--last", type=int, default=8, metavar="N", help="last lines shown per rank (default 8)")
        p.add_argument("--grep", metavar="PATTERN", help="count the lines matching this regular expression per rank")
        p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
        p.add_argument("-o", "--out", metavar="DIR", help="also write traces.json there")

    def run(self, args: argparse.Namespace) -> int:
        try:
            pattern = re.compile(args.grep) if args.grep else None
        except re.error as exc:
            raise UsageError(f"bad --grep pattern: {exc}") from None
        try:
            traces, bad = read_trace_dir(args.paths, max(0, args.last), pattern)
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
        for path, reason in bad:
            self.err.print(f"[yellow]warning:[/yellow] skipped {escape(path)}: {escape(reason)}", highlight=False)
        if not traces:
            raise UsageError(f"no trace-*.txt file in {' '.join(args.paths)}")
        div = divergence(traces)
        stopped = [t for t in traces if not t.ended]
        verdict = self._verdict(traces, div, stopped)
        doc = {
            "schema_version": SCHEMA_VERSION,
            "command": "traces",
            "verdict": verdict,
            "ranks": [
                {"rank": t.rank, "host": t.host, "pid": t.pid, "file": str(t.path), "events": t.events,
                 "ended": t.ended, "elapsed": t.elapsed, "last_call": t.last_call, "last_lines": list(t.last_lines),
                 "grep_count": t.grep_count, "garbled_lines": t.garbled}
                for t in traces
            ],
            "divergence": {
                "common_calls": div.common,
                "last_common_call": div.last_common,
                "next_calls": [{"rank": t.rank, "host": t.host, "pid": t.pid, "call": c} for t, c in zip(traces, div.next_calls, strict=True)],
                "diverged": div.diverged,
            },
            "stopped_early": [t.rank for t in stopped],
        }
        if args.out:
            write_json(Path(args.out) / "traces.json", doc)
        if args.json:
            print_json(self, doc)
        else:
            self._render(traces, div, verdict, args)
        if stopped or div.diverged:
            return EXIT_FOUND
        return EXIT_OK if traces else EXIT_ERROR

    @staticmethod
    def _verdict(traces: list[RankTrace], div, stopped: list[RankTrace]) -> str:
        parts = []
        if stopped:
            parts.append(f"{len(stopped)} of {len(traces)} traces end without the tracer's end line "
                         f"({', '.join(_who(t) for t in stopped[:8])}): stopped, killed or still running")
        if div.diverged:
            behind = [traces[i] for i in div.behind]
            after = f"call #{div.common} ({div.last_common})" if div.common else "the start"
            if behind:
                where = _where(behind[0])
                parts.append(f"{', '.join(_who(t) for t in behind[:8])} stopped at {where} after {after}, while the "
                             f"others went on to call #{div.common + 1} ({next(c for c in div.next_calls if c)})")
            else:
                parts.append(f"the ranks' calls part after {after}")
        return "; ".join(parts) or f"all {len(traces)} traces ended normally and made the same calls"

    def _render(self, traces: list[RankTrace], div, verdict: str, args: argparse.Namespace) -> None:
        problem = any(not t.ended for t in traces) or div.diverged
        self.out.print(Panel(escape(verdict), title="traces", border_style="red" if problem else "green"))
        t = Table(title="Ranks", title_justify="left", expand=True)
        for col in ("rank", "host", "pid", "events", "ended"):
            t.add_column(col, no_wrap=True)
        t.add_column("where the trace ends", ratio=1, overflow="fold")
        if args.grep:
            t.add_column(f"grep {args.grep!r}", justify="right", no_wrap=True)
        for tr in traces:
            row = [str(tr.rank if tr.rank is not None else "?"), tr.host, str(tr.pid), str(tr.events),
                   "yes" if tr.ended else "[red]no[/red]", escape(_where(tr))]
            if args.grep:
                row.append(str(tr.grep_count))
            t.add_row(*row)
        self.out.print(t)
        if args.last:
            panels = [Panel("\n".join(escape(x.strip()) for x in tr.last_lines) or "(empty)", title=_who(tr),
                            border_style="green" if tr.ended else "red") for tr in traces]
            self.out.print(Columns(panels, equal=True, expand=True) if len(panels) <= 4 else Columns(panels))
