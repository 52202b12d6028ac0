"""``hangdbg`` command line: one class per subcommand, ``main(argv) -> int``.

Exit codes: 0 no hang found, 3 suspects found (a hang or failure), 1 tool error, 2 usage.
This package is the only place that prints or exits.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from rich.console import Console

from .. import __version__
from ..errors import HangdbgError, UsageError
from .common import EXIT_ERROR, EXIT_USAGE

__all__ = ["main", "COMMANDS", "command_class"]

COMMANDS: dict[str, tuple[str, str, str]] = {
    # name: (module in hangdbg.cli, class, one-line help). A command's module is imported only
    # when that command runs (startup cost: `nccl summary` on a 1 GB log takes under a second).
    "dump": ("dump_cmd", "DumpCommand",
             "dump the stacks of a hung job's ranks (this node, a SLURM job or ssh hosts) and name the suspects"),
    "analyze": ("analyze_cmd", "AnalyzeCommand",
             "analyze saved py-spy dumps (files or directories) as `dump` would"),
    "demo": ("demo_cmd", "DemoCommand",
             "run a real torchrun/gloo job that hangs in a known way and dump it"),
    "agent": ("agent_cmd", "AgentCommand",
             "collect this node's ranks and print framed results (run by dump --jobid/--hosts)"),
    "traces": ("traces_cmd", "TracesCommand",
             "compare the per-rank files of the tracer package: where each rank stopped"),
    "report": ("report_cmd", "ReportCommand",
             "one verdict from everything a job left: stacks, cores, NCCL/torch logs, flight recorder, Xid"),
    "collect": ("collect_cmd", "CollectCommand",
             "gather post-mortem evidence (NCCL logs, cores, dmesg, traces) from every node into one directory"),
    "core": ("core_cmd", "CoreCommand",
             "read core files: signal, crashing thread, rank and host, native and Python frames of every thread"),
    "nccl": ("nccl_cmd", "NcclCommand",
             "read NCCL_DEBUG logs: per-rank summary and suspects, or split them per rank"),
    "logs": ("logs_cmd", "LogsCommand",
             "read PyTorch/torchrun logs and error.json files: watchdog timeouts, lagging SeqNum, failed ranks"),
    "fr": ("fr_cmd", "FrCommand",
             "compare PyTorch flight-recorder dumps of all ranks: missing ranks, first mismatch"),
    "gpu": ("gpu_cmd", "GpuCommand",
             "read dmesg/syslog/journal files and nvidia-smi -q outputs: Xid errors and ECC state per node and GPU"),
}


def command_class(name: str) -> type:
    """The class of subcommand ``name`` (its module imported now)."""
    module, cls, _ = COMMANDS[name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 on usage errors: keep that, no traceback
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"hangdbg: error: {message}\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the subcommand named in ``argv`` (all of them when ``argv`` is
    None) gets its options, the others are listed with their help line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = _Parser(prog="hangdbg", description="Find out which rank of a distributed PyTorch job is stuck, where, and why.")
    parser.add_argument("--version", action="version", version=f"hangdbg {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (_module, _cls, help_line) in COMMANDS.items():
        if chosen is not None and name != chosen:
            sub.add_parser(name, help=help_line)
            continue
        cls = command_class(name)
        p = sub.add_parser(name, help=help_line, description=cls.description)
        cls.add_arguments(p)
        p.set_defaults(command_class=cls)
    return parser


def main(argv: Sequence[str] | None = None, out: Console | None = None, err: Console | None = None) -> int:
    """Run one hangdbg command; returns the exit code (never raises for a tool error)."""
    args = build_parser(argv).parse_args(argv)
    out = out or Console()
    err = err or Console(stderr=True)
    try:
        return args.command_class(out, err).run(args)
    except UsageError as exc:
        _print_error(err, exc)
        return EXIT_USAGE
    except HangdbgError as exc:
        _print_error(err, exc)
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: what was collected so far is kept in the output directory")
        return EXIT_ERROR


def _print_error(err: Console, exc: HangdbgError) -> None:
    err.print(f"[bold red]hangdbg: error:[/bold red] {exc}", markup=True, highlight=False)
    if exc.help:
        err.print(f"[yellow]help:[/yellow] {exc.help}", highlight=False)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
