"""``hangdbg traces DIR``: the "working with trace files" recipes as one command.

Per rank: where its trace ends (last lines side by side), whether the tracer finished, the
first traced call that not all ranks reached, and ``--grep PATTERN`` counts per rank.
"""

from __future__ import annotations

import argparse
import re

from rich.console import RenderableType

from ..errors import UsageError
from ..model import SourceReport
from ..evidence.base import Reader
from ..evidence.traces.facts import TracesFacts
from ..evidence.traces.reader import TracesReader
from ..report.kind_views import traces_views
from .common import ReaderCommand


class TracesCommand(ReaderCommand):
    description = (
        "Read trace-HOST-RANK-PID.txt files (tracer package, format v1) and show the last lines "
        "of every rank side by side, the first traced call that not all ranks reached, and "
        "--grep counts per rank. Exit status 3 when a rank's trace ends early or ranks diverge, "
        "1 when no trace file could be read."
    )
    name = "traces"
    json_name = "traces.json"
    title = "traces"
    metavar = "DIR"
    paths_help = "directories with trace files (or the files)"
    rank_table = False
    nothing_help = ("trace files are written by the tracer package: `python -m tracer --outdir DIR train.py` or "
                    "tracer.NicerTrace(outdir=DIR).start() in the script")

    @classmethod
    def add_reader_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("-n", "--last", type=int, default=8, metavar="N", help="last lines shown per rank (default 8)")
        p.add_argument("--grep", metavar="PATTERN", help="count the lines matching this regular expression per rank")

    def reader(self, args: argparse.Namespace) -> Reader:
        try:
            pattern = re.compile(args.grep) if args.grep else None
        except re.error as exc:
            raise UsageError(f"bad --grep pattern: {exc}") from None
        return TracesReader(max(0, args.last), pattern)

    def extra_views(self, rep: SourceReport, args: argparse.Namespace) -> list[RenderableType]:
        if not isinstance(rep.facts, TracesFacts):
            return []
        return traces_views(rep.facts, args.grep, args.last)
