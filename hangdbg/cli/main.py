"""``hangdbg`` command line: one class per subcommand, ``main(argv) -> int``.

Exit status, for every command: 0 read, nothing abnormal; 3 a suspect was named (a hang or a
failure); 1 nothing could be read, or the tool failed; 2 usage. ``-v`` logs every external
command (py-spy, gdb, pystack, srun, ssh, pdsh, scontrol...) to stderr with its argv, exit
status and duration. This package is the only place that prints or exits.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Any, Sequence

from rich.console import Console

from .._version import __version__
from ..errors import HangdbgError, UsageError
from ..outdir import check_writable
from ..report.safetext import visible
from ..tools.subproc import LOG
from .stdin_input import spooled_stdin
from .common import EXIT_ERROR, EXIT_USAGE, Command, print_error

__all__ = ["main", "COMMANDS", "command_class"]

COMMANDS: dict[str, tuple[str, str, str]] = {
    # name: (module in hangdbg.cli, class, one-line help). A command's module is imported only
    # when that command runs (startup cost: `nccl summary` on a 1 GB log takes under a second).
    "dump": ("dump_cmd", "DumpCommand",
             "dump the stacks of a hung job's ranks (this node, a SLURM job or ssh hosts) and name the suspects"),
    "watch": ("watch_cmd", "WatchCommand",
              "watch a running job; when it stalls, dump it as `dump` would, run --on-hang, --then kill/requeue"),
    "run": ("run_cmd", "RunCommand", "start a job (-- torchrun ...) with the debug environment set, watch it, dump it when it stalls, report when it ends"),
    "analyze": ("analyze_cmd", "AnalyzeCommand",
             "analyze saved py-spy dumps (files or directories) as `dump` would"),
    "demo": ("demo_cmd", "DemoCommand",
             "run a real torchrun/gloo job that hangs in a known way and dump it"),
    "check": ("check_cmd", "CheckCommand",
              "run a short diagnostics job (collectives, bandwidth) on this node, a SLURM job's nodes or ssh hosts; bisect to the bad node or GPU"),
    "agent": ("agent_cmd", "AgentCommand", ""),  # internal: run on every node by dump/collect; not listed
    "check-node": ("check_node_cmd", "CheckNodeCommand", ""),  # internal: a node's part of `check`; not listed
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
    "schema": ("schema_cmd", "SchemaCommand",
               "print the JSON Schema of every --json document, or (--kinds) the finding kinds and severities"),
}


def command_class(name: str) -> type[Command]:
    """The class of subcommand ``name`` (its module imported now)."""
    module, cls, _ = COMMANDS[name]
    found: type[Command] = getattr(importlib.import_module(f"{__package__}.{module}"), cls)
    return found


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 on usage errors: keep that, no traceback
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"hangdbg: error: {visible(message)}\n")  # argv may hold escapes


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the subcommand named in ``argv`` (all of them when ``argv`` is
    None) gets its options, the others are listed with their help line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = _Parser(prog="hangdbg", description="Find out which rank of a distributed PyTorch job is stuck, where, and why.",
                     epilog="exit status: 0 nothing abnormal, 3 a suspect was named, 1 nothing could be read or tool "
                            "error, 2 usage. `hangdbg schema` describes every --json document.")
    parser.add_argument("--version", action="version", version=f"hangdbg {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every external command run (argv, exit status, seconds) to stderr")
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="log every external command run (argv, exit status, seconds) to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (_module, _cls, help_line) in COMMANDS.items():
        listed: dict[str, Any] = {"help": help_line} if help_line else {}  # a parser without help is not listed
        if chosen is not None and name != chosen:
            sub.add_parser(name, **listed)
            continue
        cls = command_class(name)
        p = sub.add_parser(name, description=cls.description, parents=[verbose], **listed)  # type: ignore[list-item]
        cls.add_arguments(p)
        p.set_defaults(command_class=cls)
    return parser


class _ConsoleHandler(logging.Handler):
    """Log records as dim lines on a rich console (stderr), never read as markup."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(f"hangdbg: {visible(record.getMessage())}", style="dim", markup=False, highlight=False,
                               soft_wrap=True)
        except Exception:  # logging must never break the command
            self.handleError(record)


def main(argv: Sequence[str] | None = None, out: Console | None = None, err: Console | None = None) -> int:
    """Run one hangdbg command; returns the exit code (never raises for a tool error)."""
    args = build_parser(argv).parse_args(argv)
    out = out or Console()
    err = err or Console(stderr=True)
    handler = None
    if args.verbose and getattr(args.command_class, "verbose_to_stderr", True):
        handler = _ConsoleHandler(err)
        LOG.addHandler(handler)
        LOG.setLevel(logging.INFO)
    try:
        if getattr(args, "out", None) is not None and args.command != "agent":
            check_writable(args.out)  # before any work: an -o that cannot be written is exit 2
        with spooled_stdin(args):
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
    finally:
        if handler is not None:
            LOG.removeHandler(handler)


def _print_error(err: Console, exc: HangdbgError) -> None:
    print_error(err, str(exc), exc.help)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
