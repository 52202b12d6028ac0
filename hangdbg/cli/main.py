"""``hangdbg`` command line: one class per subcommand, ``main(argv) -> int``.

Exit codes: 0 no hang found, 3 suspects found (a hang or failure), 1 tool error, 2 usage.
This package is the only place that prints or exits.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from rich.console import Console

from .. import __version__
from ..errors import HangdbgError, UsageError
from .agent_cmd import AgentCommand
from .analyze_cmd import AnalyzeCommand
from .collect_cmd import CollectCommand
from .common import EXIT_ERROR, EXIT_USAGE
from .core_cmd import CoreCommand
from .demo_cmd import DemoCommand
from .dump_cmd import DumpCommand
from .fr_cmd import FrCommand
from .gpu_cmd import GpuCommand
from .logs_cmd import LogsCommand
from .nccl_cmd import NcclCommand
from .report_cmd import ReportCommand
from .traces_cmd import TracesCommand

__all__ = ["main", "COMMANDS"]

COMMANDS = {
    "dump": DumpCommand,
    "analyze": AnalyzeCommand,
    "demo": DemoCommand,
    "agent": AgentCommand,
    "traces": TracesCommand,
    "core": CoreCommand,
    "nccl": NcclCommand,
    "logs": LogsCommand,
    "fr": FrCommand,
    "gpu": GpuCommand,
    "report": ReportCommand,
    "collect": CollectCommand,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 on usage errors: keep that, no traceback
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"hangdbg: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hangdbg", description="Find out which rank of a distributed PyTorch job is stuck, where, and why.")
    parser.add_argument("--version", action="version", version=f"hangdbg {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, cls in COMMANDS.items():
        p = sub.add_parser(name, help=cls.help, description=cls.description)
        cls.add_arguments(p)
        p.set_defaults(command_class=cls)
    return parser


def main(argv: Sequence[str] | None = None, out: Console | None = None, err: Console | None = None) -> int:
    """Run one hangdbg command; returns the exit code (never raises for a tool error)."""
    args = build_parser().parse_args(argv)
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
