"""``hangdbg nccl summary|split LOG...``: NCCL_DEBUG logs per rank, and the suspects in them.

``summary`` prints per rank the NCCL version, interfaces, net plugin, init state, collective
counts by type and the last opCount per communicator, then the suspects (ranks that never
completed init, lagging ranks, unreachable peers named by host, hosts set up differently).
``--split-on REGEX`` cuts per-iteration slices (the ``csplit`` recipe) and compares the counts
per slice. ``split`` writes one file per rank (``rankN.log``; ``HOST.PID.log`` when the rank is
unknown) into ``-o DIR``.
"""

from __future__ import annotations

import argparse
import re

from rich.console import RenderableType

from ..headline import split_headline, unread_headline
from ..errors import UsageError
from ..evidence.nccl.facts import NcclFacts
from ..model import SourceReport
from ..evidence.nccl.split import split_logs
from ..report.build import split_document
from ..report.document import SplitRow
from ..report.safetext import safe_text
from ..evidence.base import Reader
from ..evidence.nccl.reader import NcclReader
from ..evidence.verdict import with_catalog
from ..report.kind_views import nccl_ranks_table, nccl_slices_table
from .common import (EXIT_ERROR, EXIT_OK, Command, ReaderCommand, add_output_arguments, expand_paths, out_dir,
    print_error)

NO_RECORDS_HELP = ("run the job with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,COLL,NET for collective lines), "
                   "optionally NCCL_DEBUG_FILE=/some/dir/nccl.%h.%p, and pass those files")


def _regex(text: str | None) -> re.Pattern[str] | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"bad --split-on pattern: {exc}") from None


def _every_file(name: str, head: bytes) -> bool:
    """NCCL logs hide among other output: every file of a directory is read (but hangdbg's own)."""
    return True


class NcclSummary(ReaderCommand):
    name = "nccl summary"
    json_name = "nccl.json"
    title = "nccl summary"
    metavar = "LOG"
    paths_help = "NCCL_DEBUG logs (files or directories)"
    rank_table = False
    nothing_help = NO_RECORDS_HELP

    @classmethod
    def add_reader_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--split-on", metavar="REGEX", help="a line matching REGEX starts a new slice (iteration)")
        p.add_argument("--rows", type=int, default=64, metavar="N",
                       help="per-rank rows shown (suspects always shown; default 64, 0 = all)")
        p.add_argument("--workers", type=int, default=None, metavar="N", help="scan processes (default: CPUs)")

    def reader(self, args: argparse.Namespace) -> Reader:
        return NcclReader()

    def takes(self, reader: Reader):
        return _every_file

    def run(self, args: argparse.Namespace) -> int:
        self._split_on = _regex(args.split_on)
        return super().run(args)

    def read(self, reader: Reader, files: list[str], args: argparse.Namespace) -> SourceReport:
        assert isinstance(reader, NcclReader)
        rep = reader.read_split(files, split_on=self._split_on, workers=args.workers)
        return with_catalog(rep, files)

    def extra_views(self, rep: SourceReport, args: argparse.Namespace) -> list[RenderableType]:
        if not isinstance(rep.facts, NcclFacts):
            return []
        views: list[RenderableType] = [nccl_ranks_table(rep, rep.facts, args.rows)]
        if rep.facts.slices:
            views.append(nccl_slices_table(rep.facts))
        return views


class NcclCommand(Command):
    description = (
        "summary: per rank NCCL version, interfaces, plugin, init state, collective counts and last "
        "opCount per communicator, and the suspects. split: one file per rank. Exit status 3 when "
        "suspects were found, 1 when the files hold no NCCL_DEBUG record."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        sub = p.add_subparsers(dest="action", metavar="ACTION")
        sub.required = True
        s = sub.add_parser("summary", help="per-rank summary and suspects", description=(
            "Per rank: NCCL version, interfaces, net plugin, init state, collective counts and the last opCount "
            "per communicator; then the suspects. Every file of a directory is read. Exit status 3 when "
            "suspects were found, 1 when the files hold no NCCL_DEBUG record."))
        NcclSummary.add_arguments(s)
        t = sub.add_parser("split", help="write one file per rank")
        t.add_argument("paths", nargs="+", metavar="LOG", help="NCCL_DEBUG logs (files or directories)")
        t.add_argument("--split-on", metavar="REGEX", help="also cut each rank's file per slice (iteration)")
        add_output_arguments(t, "rank00.log ..., split.json; default ./hangdbg-nccl-split-DATE", evidence=False)

    def run(self, args: argparse.Namespace) -> int:
        if args.action == "split":
            return self._split(args)
        return NcclSummary(self.out, self.err).run(args)

    def _split(self, args: argparse.Namespace) -> int:
        paths = expand_paths(args.paths, _every_file)
        pattern = _regex(args.split_on)
        out = self.files = out_dir(args, "hangdbg-nccl-split", own=False)
        res = split_logs(paths, out, pattern)
        for path, why in res.errors:
            self.warn(f"cannot read {path}: {why}")
        if not res.records:  # the document still says so (--json, split.json)
            doc = split_document([str(p) for p in args.paths], str(out), [], 0, unread_headline(len(paths), "NCCL_DEBUG log"))
            print_error(self.err, f"no NCCL_DEBUG record in {len(paths)} file(s)", NO_RECORDS_HELP)
            self.emit(doc, args, "split.json", lambda: safe_text(doc.headline))
            return EXIT_ERROR
        rows = [SplitRow(r["rank"], r["host"], r["pid"], tuple(r["files"]), r["lines"]) for r in res.rows]
        known = [r.rank for r in rows if r.rank is not None]
        unattributed = res.written.get("unattributed.log", 0)
        headline = split_headline(len(res.written), str(out), known, len(rows) - len(known), unattributed)
        doc = split_document([str(p) for p in args.paths], str(out), rows, unattributed, headline)
        self.emit(doc, args, "split.json", lambda: safe_text(headline))
        return EXIT_OK
