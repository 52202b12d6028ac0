"""``hangdbg core COREFILE...``: what each core file says (signal, crashing thread, rank, host,
native and Python frames per thread), then the same clustering as live dumps."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Group as RGroup
from rich.panel import Panel

from ..stacks.analysis import analyze
from ..errors import UsageError
from ..report.build import core_document
from ..report.console import render_analysis
from ..report.source_view import findings_table, headline_panel
from ..report.safetext import escape
from ..evidence.core.reader import CoreOptions, CoreReading, load
from ..evidence.own_output import GDB_TEXT_SUFFIX
from ..outdir import save_text
from .common import Command, add_output_arguments, exit_status, positive_float, positive_int, print_error

_SHOWN_FRAMES = 12



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
            self._write_backtraces(readings, args.out)
        self.emit(doc, args, "hangdbg.json", lambda: self._render(readings, analysis, doc, args))
        return exit_status(doc.found, any(d.threads for d in dumps))

    @staticmethod
    def _write_backtraces(readings: list[CoreReading], out: Path) -> None:
        for i, c in enumerate(readings):
            if c.gdb_text:  # a text that cannot be written is recorded as not saved
                save_text(out / f"{Path(c.path).name}.{i}{GDB_TEXT_SUFFIX}", c.gdb_text)

    def _render(self, readings: list[CoreReading], analysis, doc, args):
        findings = doc.findings
        parts: list = [headline_panel(doc.headline, "core files", doc.found)]
        parts += [_core_panel(c) for c in readings]
        if findings:
            parts.append(findings_table(findings, evidence=not args.no_evidence))
        if len([d for d in analysis.ranks if d.threads]) > 1:
            parts.append(render_analysis(analysis, tree=not args.no_tree, evidence=not args.no_evidence))
        return RGroup(*parts)


def _core_panel(c: CoreReading) -> Panel:
    d = c.dump
    lines = []
    who = f"rank {d.rank}" + (f" (from {d.rank_source})" if d.rank_source else "")
    if d.host:
        who += f" on {d.host}"
    lines.append(f"[bold]{escape(who)}[/bold], pid {d.pid}" + (f", world size {d.world_size}" if d.world_size else ""))
    if c.signal:
        how = {"crash": "a fault, raised by the kernel", "self": "raised by the process itself, e.g. abort()", "killed": "sent by another process"}.get(c.how, c.how)
        lines.append(f"signal [bold red]{c.signal}[/bold red] ({how}), crashing thread {c.crashing_tid}")
    elif c.info is not None:
        lines.append("no signal: a core taken on demand (gcore)")
    if d.cmdline:
        lines.append(f"command: {escape(d.cmdline)}")
    if c.executable:
        lines.append(f"[dim]executable {escape(c.executable)} (from {c.exe_source}); {len(d.threads)} threads[/dim]")
    t = c.crash_thread or (d.threads[0] if d.threads else None)
    if t is not None:
        label = "crashing thread" if c.crash_thread is not None else "first thread"
        lines.append(f"{label} {t.thread_id}{' ' + escape(t.name) if t.name else ''}:")
        first_py = next((i for i, f in enumerate(t.frames) if not f.native), len(t.frames))
        top = t.frames[:min(first_py, 4)]
        python = [f for f in t.frames if not f.native][:_SHOWN_FRAMES]
        for f in top:
            lines.append(f"  [dim]{escape(str(f))}[/dim]")
        if first_py > len(top) and python:
            lines.append(f"  [dim]... {first_py - len(top)} native frames[/dim]")
        for f in python:
            lines.append(f"  [bold]{escape(str(f))}[/bold]")
        if len(t.frames) > len(top) + len(python):
            lines.append(f"  [dim]({len(t.frames)} frames in all; --json shows them)[/dim]")
    for msg in c.diagnoses:
        lines.append(f"[yellow]! {escape(msg)}[/yellow]")
    style = "red" if c.signal else ("yellow" if c.info is None else "green")
    return Panel("\n".join(lines), title=escape(f"core {c.path}"), title_align="left", border_style=style)
