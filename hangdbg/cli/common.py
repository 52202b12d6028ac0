"""What the subcommands share: output options, printing an analysis, writing the JSON."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import UsageError
from ..model import Analysis, SourceReport
from ..parse.textlines import files_where
from ..report.console import render_analysis
from ..report.evidence import render_source_report, source_report_to_dict, suspects_of
from ..report.jsonout import analysis_to_dict, dumps_json

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FOUND = 0, 1, 2, 3


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0 (seconds)."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {value}")
    return value


class Command:
    """Base of a subcommand: ``add_arguments`` on the parser, ``run(args) -> exit code``."""

    description = ""

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
    parser.add_argument("-o", "--out", metavar="DIR", type=Path, help="directory for raw outputs and hangdbg.json")
    parser.add_argument("--no-tree", action="store_true", help="leave the merged call tree out of the report")


def out_dir(args: argparse.Namespace, prefix: str = "hangdbg-dump") -> Path:
    """``--out``, or ``./PREFIX-YYYYmmdd-HHMMSS``: created, and stored back into ``args.out``."""
    if args.out is None:
        args.out = Path(f"{prefix}-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    args.out.mkdir(parents=True, exist_ok=True)
    return args.out


def progress_bar(console: Console, label: str, total: int, pending: bool = False) -> Progress:
    """A transient rich progress bar on ``console`` (stderr), shown only on a terminal when there
    is more than one item; tasks carry a ``failed`` field."""
    status = "{task.fields[failed]} failed" + (", {task.remaining:.0f} pending" if pending else "")
    return Progress(
        TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(), TextColumn(status),
        TimeElapsedColumn(), console=console, transient=True, disable=not (console.is_terminal and total > 1),
    )


def print_json(cmd: Command, doc: dict[str, Any]) -> None:
    """Print a JSON document on the command's output as it is (not through rich's renderer,
    which wraps text line by line: minutes for a large document)."""
    cmd.out.file.write(dumps_json(doc) + "\n")
    cmd.out.file.flush()


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write a JSON document atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.part")
    tmp.write_text(dumps_json(doc) + "\n")
    tmp.replace(path)


def emit(cmd: Command, a: Analysis, args: argparse.Namespace, command: str, extra: dict[str, Any] | None = None) -> int:
    """Print the report (or JSON), save ``hangdbg.json`` under ``--out``.

    Returns 3 when suspects were named, 1 when no stack at all could be read, else 0.
    """
    doc = analysis_to_dict(a, command, extra)
    if getattr(args, "out", None) is not None:
        write_json(args.out / "hangdbg.json", doc)
    if args.json:
        print_json(cmd, doc)
    else:
        cmd.out.print(render_analysis(a, tree=not args.no_tree))
        if getattr(args, "out", None) is not None:
            cmd.err.print(f"[dim]raw outputs and hangdbg.json kept in {args.out}[/dim]", highlight=False)
    if a.found_hang:
        return EXIT_FOUND
    if a.ranks and not a.groups:  # not one stack could be read: the tool failed, not the job
        return EXIT_ERROR
    return EXIT_OK


def expand_paths(paths: list[str], sniff: Callable[[bytes], bool]) -> list[str]:
    """Files as given; directories walked for the files whose first 64 KiB ``sniff`` accepts.

    Raises:
        UsageError: a path does not exist.
    """
    try:
        return files_where(paths, lambda _name, head: sniff(head))
    except FileNotFoundError as exc:
        raise UsageError(f"no such file or directory: {exc.filename}") from None


def emit_source_report(cmd: Command, rep: SourceReport, args: argparse.Namespace, command: str, title: str,
                       nothing: str, n_files: int, extra: Callable[[], list] | None = None) -> int:
    """Print one reader's report (or its JSON), save ``COMMAND.json`` under ``--out``.

    ``extra``: renderables shown above the rank table (built only for the text report).
    Returns 3 when suspects were found, 1 when none of the ``n_files`` files could be read, else 0.
    """
    doc = source_report_to_dict(rep, command, nothing)
    if args.out:
        write_json(Path(args.out) / f"{command}.json", doc)
    if args.json:
        print_json(cmd, doc)
    else:
        cmd.out.print(render_source_report(rep, title, nothing, extra() if extra else None,
                                           evidence=not args.no_evidence))
    if suspects_of(rep):
        return EXIT_FOUND
    if rep.errors and len(rep.errors) == n_files:
        return EXIT_ERROR
    return EXIT_OK
