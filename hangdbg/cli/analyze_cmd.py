"""``hangdbg analyze PATH...``: redo the analysis on saved py-spy dump texts."""

from __future__ import annotations

import argparse

from ..stacks.analysis import analyze
from ..errors import UsageError
from ..stacks.saved import load_dumps
from ..parallel import gc_paused
from .common import Command, add_export_arguments, add_output_arguments, emit_stacks


class AnalyzeCommand(Command):
    description = (
        "Read py-spy dump texts (a `hangdbg dump -o DIR` directory, or files named rank-N.txt, "
        "or one file with several `Process N:` blocks) and print the same report as `dump`. Exit status "
        "3 when suspects are named, 1 when no py-spy dump could be read."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories of py-spy dump output")
        add_output_arguments(p, "hangdbg.json", tree=True)
        add_export_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        with gc_paused():  # millions of acyclic objects at 100,000 ranks: see hangdbg.parallel
            return self._run(args)

    def _run(self, args: argparse.Namespace) -> int:
        try:
            dumps, stats = load_dumps(args.paths)
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
        for path, reason in stats.unreadable:
            self.warn(f"{path}: {reason}" if reason.startswith("larger than") else f"skipped {path}: {reason}")
        if stats.garbled_lines:
            self.err.print(f"[dim]{stats.garbled_lines} unrecognised lines skipped[/dim]", highlight=False)
        if not dumps:
            self.warn(f"no py-spy dump found in {' '.join(map(str, args.paths))}")
        return emit_stacks(self, analyze(dumps), args, "analyze", inputs=[str(p) for p in args.paths],
                           garbled_lines=stats.garbled_lines)
