"""``hangdbg analyze PATH...``: redo the analysis on saved py-spy dump texts (:func:`hangdbg.api.analyze`)."""

from __future__ import annotations

import argparse

from ..api._dump import analyze
from ..stacks.window import DEFAULT_MIN_WINDOW
from .common import Command, add_export_arguments, add_output_arguments, non_negative_float, show_stacks


class AnalyzeCommand(Command):
    description = (
        "Read py-spy dump texts (a `hangdbg dump -o DIR` directory, or files named rank-N.txt, "
        "or one file with several `Process N:` blocks) and print the same report as `dump`. Exit status "
        "3 when suspects are named, 1 when no py-spy dump could be read."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories of py-spy dump output")
        p.add_argument("--min-window", type=non_negative_float, default=DEFAULT_MIN_WINDOW, metavar="S",
                       help="progress before blame, as in dump: for files that carry their sample times (a dump's "
                            "raw/), a rank on CPU outside any collective is named only when its samples span this long "
                            f"(or the job's estimated step time x 1.5); 0: no window (default {DEFAULT_MIN_WINDOW:g}; "
                            "files without times: two samples decide)")
        add_output_arguments(p, "hangdbg.json", tree=True)
        add_export_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        result = analyze(args.paths, self.events(args), out=args.out, speedscope=args.speedscope,
                         speedscope_by=args.speedscope_by, folded=args.folded, min_window=args.min_window)
        return show_stacks(self, result, args)
