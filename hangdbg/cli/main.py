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
import signal
import sys
import threading
from typing import Any, Sequence

from rich.console import Console

from .._version import __version__
from ..errors import HangdbgError, UsageError
from ..outdir import check_writable
from ..report.safetext import visible
from ..tools import children
from ..tools.subproc import LOG
from .stdin_input import spooled_stdin
from .common import EXIT_ERROR, EXIT_USAGE, Command, json_printed, print_error
from .events import ConsoleEvents

__all__ = ["main", "COMMANDS", "command_class", "build_parser", "wants_json", "print_json_error", "UsageExit", "Terminated"]

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
    "completion": ("completion_cmd", "CompletionCommand", "print the shell completion script (bash, zsh or tcsh)"),
}


def command_class(name: str) -> type[Command]:
    """The class of subcommand ``name`` (its module imported now)."""
    module, cls, _ = COMMANDS[name]
    found: type[Command] = getattr(importlib.import_module(f"{__package__}.{module}"), cls)
    return found


class UsageExit(SystemExit):
    """argparse's usage error: ``SystemExit(2)`` as argparse raises it, with the message (for the
    JSON error of ``--json``: :func:`main`)."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_USAGE)
        self.message = message


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: the command unwinds as after Ctrl-C (its ``finally``
    blocks run: temporary files removed, children stopped)."""


def _raise_terminated(_signum: int, _frame: Any) -> None:
    raise Terminated


class _Signals:
    """SIGTERM turned into :class:`Terminated` and SIGINT into KeyboardInterrupt while a command
    runs (main thread only: Python delivers signals there; a signal ignored when hangdbg started
    stays ignored); the previous handlers restored after."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "_Signals":
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig, handler in ((signal.SIGTERM, _raise_terminated), (signal.SIGINT, signal.default_int_handler)):
            if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored by whoever started us (nohup, `&`): kept so
                self.previous[sig] = signal.signal(sig, handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 on usage errors: keep that, no traceback
        self.print_usage(sys.stderr)
        text = visible(message)  # argv may hold escapes
        self._print_message(f"hangdbg: error: {text}\n", sys.stderr)
        raise UsageExit(text)


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
    """Run one hangdbg command; returns the exit code (never raises for a tool error; argparse's
    ``--help``, ``--version`` and usage errors end in ``SystemExit`` as argparse makes them).

    With ``--json``, every failure also prints an :class:`~hangdbg.report.document.ErrorDocument`
    on stdout (``{"error": ..., "help": ..., "exit": N}``) when the command printed no document of
    its own; the text still goes to stderr. Options' defaults come from the ``hangdbg.toml`` files
    (:mod:`hangdbg.cli.config`) before the command line is read; ``args._argv`` is the command line
    as given (the run marker's ``argv``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    out = out or Console()
    err = err or Console(stderr=True)
    json_errors = wants_json(argv)
    first = next((a for a in argv if not a.startswith("-")), None)  # as build_parser chooses
    named = first if first in COMMANDS else None
    try:
        parser = build_parser(argv)
        config_set = _apply_config(parser, named, err, argv)
        args = parser.parse_args(argv)
    except UsageExit as exc:
        if json_errors:
            print_json_error(out, named, exc.message, None, EXIT_USAGE)
        raise
    except UsageError as exc:  # a config file that cannot be read
        return _failed(out, err, exc, named if json_errors else None, EXIT_USAGE, json_errors)
    args._argv = list(argv)  # the command line as given, for the run marker
    args._config_set = config_set
    handler = None
    if args.verbose and getattr(args.command_class, "verbose_to_stderr", True):
        handler = _ConsoleHandler(err)
        LOG.addHandler(handler)
        LOG.setLevel(logging.INFO)
    printed = json_printed(out)  # a document printed from here on: no JSON error on top of it
    started = children.mark()  # the children of this command: stopped when it ends, however
    try:
        with _Signals():
            try:
                if getattr(args, "out", None) is not None and args.command != "agent":
                    check_writable(args.out)  # before any work: an -o that cannot be written is exit 2
                with spooled_stdin(args):
                    status = args.command_class(out, err).run(args)
            finally:
                children.stop(started)  # TERM, then KILL after children.GRACE seconds
        if json_errors and status in (EXIT_ERROR, EXIT_USAGE) and json_printed(out) == printed:
            print_json_error(out, args.command, f"hangdbg {args.command} failed (exit {status}); see its messages on stderr",
                             None, status)
        return status
    except UsageError as exc:
        return _failed(out, err, exc, args.command, EXIT_USAGE, json_errors and json_printed(out) == printed)
    except HangdbgError as exc:
        return _failed(out, err, exc, args.command, EXIT_ERROR, json_errors and json_printed(out) == printed)
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        err.print(f"[yellow]{how}[/yellow]: what was collected so far is kept in the output directory")
        if json_errors and json_printed(out) == printed:
            print_json_error(out, args.command, "interrupted: what was collected so far is kept in the output directory",
                             None, EXIT_ERROR)
        return EXIT_ERROR
    finally:
        if handler is not None:
            LOG.removeHandler(handler)


def wants_json(argv: Sequence[str]) -> bool:
    """``--json`` (or an abbreviation argparse would take, ``--js``) among the options, before ``--``."""
    for a in argv:
        if a == "--":
            return False
        if a.startswith("--js") and "--json".startswith(a):
            return True
    return False


def _failed(out: Console, err: Console, exc: HangdbgError, command: str | None, status: int, as_json: bool) -> int:
    """Print ``exc`` on stderr (and, ``as_json``, as a JSON error on stdout); returns ``status``."""
    print_error(err, str(exc), exc.help)
    if as_json:
        print_json_error(out, command, str(exc), exc.help, status)
    return status


def print_json_error(out: Console, command: str | None, error: str, help: str | None, status: int) -> None:
    """One :class:`~hangdbg.report.document.ErrorDocument` as a line of JSON on ``out``."""
    from ..model import SCHEMA_VERSION
    from ..report.document import ErrorDocument
    from ..report.schema import to_json

    doc = ErrorDocument(SCHEMA_VERSION, "hangdbg", __version__, command, error, help or None, status)  # type: ignore[arg-type]
    out.file.write(to_json(doc, pretty=False) + "\n")
    out.file.flush()


def _apply_config(parser: argparse.ArgumentParser, command: str | None, err: Console,
                  argv: Sequence[str]) -> dict[str, tuple[str, Any]]:
    """The ``hangdbg.toml`` defaults of ``command``'s options set on its parser (:mod:`hangdbg.cli.config`);
    with ``-v``, one line per option set. Returns the dests set, each with the file that set it and
    the value. The internal commands (no help line: ``agent``, ``check-node``) read no file.

    Raises:
        UsageError: a config file that cannot be read or parsed, a value its option refuses.
    """
    if command is None or not COMMANDS[command][2]:
        return {}
    from .config import apply_config

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    applied = apply_config(sub, command, warn=lambda text: ConsoleEvents(err).warn(text), known=_all_options)
    if any(a in ("-v", "--verbose") for a in argv[:argv.index("--") if "--" in argv else len(argv)]):
        for line in applied.lines():
            err.print(f"hangdbg: {line}", style="dim", markup=False, highlight=False, soft_wrap=True)
    return dict(applied.dests)


def _all_options() -> dict[str, set[str]]:
    """Every command's long options, without dashes (imports every command: only for a config key
    the chosen command does not have)."""
    sub = next(a for a in build_parser([])._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {o[2:] for a in p._actions for o in a.option_strings if o.startswith("--")}
            for name, p in sub.choices.items()}


def run() -> None:
    """Console-script entry point. When the command has returned, no child may start any more
    and those still running are stopped (:func:`hangdbg.tools.children.close`): worker threads
    that outlive the command cannot leave a process behind."""
    try:
        status = main()
    finally:
        children.close()
    sys.exit(status)
