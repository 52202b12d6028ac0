"""``hangdbg core COREFILE...``: what each core file says (signal, crashing thread, rank, host,
native and Python frames per thread), then the same clustering as live dumps."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..stacks.analysis import analyze
from ..errors import UsageError
from ..report.build import core_document
from ..report.core_view import render_cores
from ..evidence.core.reader import CoreOptions, load
from ..evidence.own_output import GDB_TEXT_SUFFIX
from ..outdir import OutDir
from .common import Command, add_output_arguments, exit_status, positive_float, positive_int, print_error



class CoreCommand(Command):
    description = (
        "Read ELF core files (from a crash, kill -ABRT or gcore): the signal and the crashing thread, every "
        "thread's native backtrace (gdb) merged with its Python frames (pystack, else py-spy), and the rank and "
        "host from the environment saved in the core. Several cores are clustered as `dump` clusters live "
        "ranks. Exit status: 3 a core shows a crash or the analysis names suspects (other than ranks without "
        "a core), 0 otherwise, 1 when no core could be read, 2 usage."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("cores", nargs="+", metavar="COREFILE", help="core files")
        p.add_argument("--exe", metavar="PYTHON", help="the executable the cores came from (default: found in each core)")
        p.add_argument("--gdb", metavar="PATH", help="the gdb program (default: gdb on PATH)")
        p.add_argument("--timeout", type=positive_float, default=120.0, metavar="S",
                       help="seconds for each gdb / pystack run (default 120)")
        p.add_argument("--jobs", type=positive_int, default=2, metavar="N", help="cores read at once (default 2)")
        add_output_arguments(p, "hangdbg.json and gdb's backtrace of each core", tree=True)

    def run(self, args: argparse.Namespace) -> int:
        missing = [c for c in args.cores if not os.path.exists(c)]
        if missing:
            raise UsageError(f"no such core file: {' '.join(missing)}")
        if args.exe and not os.path.isfile(args.exe):
            raise UsageError(f"--exe {args.exe}: no such file")
        opts = CoreOptions(exe=args.exe, timeout=args.timeout, gdb=args.gdb, jobs=args.jobs)
        report, dumps, readings = load(args.cores, opts)
        if not dumps:  # the document is still printed (--json) and written (-o): it says nothing was read
            reasons = "; ".join(f"{c.path}: {'; '.join(c.diagnoses)}" for c in readings)
            print_error(self.err, f"no core file could be read ({reasons})",
                        "pass ELF core files (`file CORE` says 'core file'); systemd-coredump keeps them compressed: "
                        "`coredumpctl dump PID -o core`")
        analysis = analyze(dumps, live=False)  # a rank without a core only left none
        doc = core_document(readings, report, analysis, args.cores)
        if args.out is not None:
            self.files = OutDir(args.out)
            for i, c in enumerate(readings):
                if c.gdb_text:  # a text that cannot be written is recorded as not saved
                    self.files.save_text(f"{Path(c.path).name}.{i}{GDB_TEXT_SUFFIX}", c.gdb_text)
        self.emit(doc, args, "hangdbg.json", lambda: render_cores(readings, analysis, doc, tree=not args.no_tree,
                                                                  evidence=not args.no_evidence))
        return exit_status(doc.found, any(d.threads for d in dumps))
