"""What the subcommands share: output options, the exit status, writing and printing documents,
and the base of the commands that read one kind of evidence.

One meaning per flag and per exit status, for every command:

* ``--json``: print the command's document (``hangdbg schema`` describes it) instead of the report;
* ``-o/--out DIR``: write everything the command produces into DIR (raw outputs, its JSON
  document, HTML); created when missing;
* ``--no-evidence``: leave the raw evidence lines out of the terminal report;
* exit status :data:`EXIT_OK` (0) read, nothing abnormal; :data:`EXIT_FOUND` (3) a suspect was
  named; :data:`EXIT_ERROR` (1) nothing could be read or the tool failed; :data:`EXIT_USAGE` (2)
  usage (bad options, a path that does not exist).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import UsageError
from ..model import Kind, Analysis, Finding, Severity, SourceReport
from ..outdir import check_writable, claim, not_saved, save_text
from ..text.lines import files_where
from ..report.safetext import escape
from ..evidence.base import Reader
from ..evidence.own_output import is_own_output

# The report layer (documents, pydantic, rich views) is imported where it is used: a command
# starts in a tenth of a second (`nccl summary` of a 1 GB log takes under a second in all).

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FOUND = 0, 1, 2, 3


def exit_status(found: bool, read_anything: bool) -> int:
    """The one rule: 3 when a suspect was named, else 0 when something was read, else 1."""
    if found:
        return EXIT_FOUND
    return EXIT_OK if read_anything else EXIT_ERROR


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
    """Base of a subcommand: ``add_arguments`` on the parser, ``run(args) -> exit status``."""

    description = ""

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self.document: Any = None

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- output -------------------------------------------------------------------------------
    def print_json(self, doc: Any) -> None:
        """Print a document as it is (not through rich's renderer, which wraps text line by line:
        minutes for a large document)."""
        from ..report.schema import json_parts

        for part in json_parts(doc):
            self.out.file.write(part)
        self.out.file.write("\n")
        self.out.file.flush()

    def warn(self, text: str) -> None:
        """A warning line on stderr (``text`` is plain text, never markup)."""
        self.err.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False)

    def emit(self, doc: Any, args: argparse.Namespace, name: str, render: Callable[[], RenderableType | None]) -> None:
        """Write ``doc`` to ``--out``/``name`` when asked, then print it (``--json``) or its report."""
        out = getattr(args, "out", None)
        doc = with_not_saved(doc)
        if out is not None:
            write_json(Path(out) / name, doc)
            doc = with_not_saved(doc)
        self.document = doc  # what the command said, for a caller running it (``watch`` runs ``dump``)
        if args.json:
            self.print_json(doc)
        else:
            view = render()
            if view is not None:
                self.out.print(view)
        lost = not_saved()
        for n in lost[:10]:
            self.warn(f"not saved: {n.path}: {n.reason}")
        if len(lost) > 10:
            self.warn(f"not saved: {len(lost) - 10} more file(s)")
        if out is not None and not args.json:
            but = f" (but for the {len(lost)} file(s) not saved)" if lost else ""
            self.err.print(f"[dim]written to {escape(str(out))}{but}[/dim]", highlight=False)


def print_error(err: Console, text: str, help: str | None = None) -> None:
    """``hangdbg: error: TEXT`` (and ``help: HELP``) on stderr; both plain text, never markup."""
    err.print(f"[bold red]hangdbg: error:[/bold red] {escape(text)}", highlight=False)
    if help:
        err.print(f"[yellow]help:[/yellow] {escape(help)}", highlight=False)


def add_output_arguments(parser: argparse.ArgumentParser, name: str, tree: bool = False, evidence: bool = True,
                         out_help: str | None = None) -> None:
    """``--json``, ``-o/--out DIR`` (and ``--no-tree``, ``--no-evidence`` where they apply)."""
    g = parser.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print the JSON document (see `hangdbg schema`) instead of the report")
    g.add_argument("-o", "--out", metavar="DIR", type=Path,
                   help=out_help or f"write everything this command produces into DIR ({name})")
    if tree:
        g.add_argument("--no-tree", action="store_true", help="leave the merged call tree out of the report")
    if evidence:
        g.add_argument("--no-evidence", action="store_true", help="leave the raw evidence lines out of the report")


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    """``--speedscope FILE`` (with ``--speedscope-by class|rank``) and ``--folded FILE``: the stacks
    for flame-graph tools (:mod:`hangdbg.report.export`)."""
    g = parser.add_argument_group("export")
    g.add_argument("--speedscope", metavar="FILE", type=Path,
                   help="also write the stacks of every thread of every rank as a speedscope file "
                        "(https://www.speedscope.app), one profile per equivalence class (or per rank)")
    g.add_argument("--speedscope-by", dest="speedscope_by", choices=("class", "rank"), default="class",
                   help="one speedscope profile per equivalence class (default) or per rank")
    g.add_argument("--folded", metavar="FILE", type=Path,
                   help="also write folded stacks (`frame;frame;frame COUNT`, outermost first; the input of "
                        "flamegraph.pl, which speedscope imports too)")


def write_exports(analysis: Analysis | None, args: argparse.Namespace, warn: Callable[[str], None]) -> None:
    """Write ``--speedscope``/``--folded`` of ``analysis`` (options absent: nothing). A file that
    cannot be written is recorded as not saved (:func:`write_text`); with no stack analysis
    nothing is written and ``warn`` says so."""
    speedscope, folded = getattr(args, "speedscope", None), getattr(args, "folded", None)
    if speedscope is None and folded is None:
        return
    if analysis is None or not analysis.ranks:
        names = " and ".join(str(p) for p in (speedscope, folded) if p is not None)
        warn(f"no stacks among the inputs: {names} not written")
        return
    import json

    from ..report.export import folded_lines, speedscope_document

    if speedscope is not None:
        doc = speedscope_document(analysis, by=getattr(args, "speedscope_by", "class"))
        write_text(Path(speedscope), json.dumps(doc, ensure_ascii=False) + "\n")
    if folded is not None:
        lines = folded_lines(analysis)
        write_text(Path(folded), "".join(line + "\n" for line in lines))


def out_dir(args: argparse.Namespace, prefix: str = "hangdbg-dump", own: bool = True) -> Path:
    """``--out``, or ``./PREFIX-YYYYmmdd-HHMMSS``: claimed for this run (:func:`hangdbg.outdir.claim`:
    created, writable, not holding another run's output unless ``--force``), and stored back into
    ``args.out``. ``own=False`` (``nccl split``, whose files are named after the ranks and
    rewritten whole): only created and checked writable.

    Raises:
        UsageError: the directory cannot be created or written (read-only, a file in the way,
            full), or holds another run's output and ``--force`` was not given.
    """
    if args.out is None:
        args.out = Path(f"{prefix}-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    if own:
        claim(args.out, str(getattr(args, "command", None) or prefix), force=bool(getattr(args, "force", False)))
    else:
        check_writable(args.out)
    return args.out


def with_not_saved(doc: Any) -> Any:
    """``doc`` with a ``not-saved`` warning (and a headline note) when files of the output
    directory could not be written (:func:`hangdbg.outdir.not_saved`); unchanged otherwise, or
    when it has one already. ``found`` (the exit status) is not changed."""
    lost = not_saved()
    if not lost or any(f.kind is Kind.NOT_SAVED for f in doc.findings):
        return doc
    reasons = sorted({n.reason for n in lost})
    names = ", ".join(n.path for n in lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
    summary = f"{len(lost)} output file(s) not saved ({'; '.join(reasons)}): {names}"
    finding = Finding(Kind.NOT_SAVED, summary, severity=Severity.WARNING,
                      action="free space or choose another output directory with -o DIR; the analysis above is complete")
    headline = f"{doc.headline} ({len(lost)} output file(s) not saved: {reasons[0]})"
    return replace(doc, findings=tuple(doc.findings) + (finding,), headline=headline)


def progress_bar(console: Console, label: str, total: int, pending: bool = False) -> Progress:
    """A transient rich progress bar on ``console`` (stderr), shown only on a terminal when there
    is more than one item; tasks carry a ``failed`` field."""
    status = "{task.fields[failed]} failed" + (", {task.remaining:.0f} pending" if pending else "")
    return Progress(
        TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(), TextColumn(status),
        TimeElapsedColumn(), console=console, transient=True, disable=not (console.is_terminal and total > 1),
    )


def write_json(path: Path, doc: Any) -> bool:
    """Write a document atomically (a reader never sees half a file): :func:`write_text`."""
    from ..report.schema import to_json

    return write_text(path, to_json(doc) + "\n")


def write_text(path: Path, text: str) -> bool:
    """Write a file atomically (:func:`hangdbg.outdir.save_text`). Never raises: a file that
    cannot be written is recorded as not saved (:func:`with_not_saved` reports it).

    Returns:
        True when saved.
    """
    return save_text(path, text)


def expand_paths(paths: Sequence[str], takes: Callable[[str, bytes], bool]) -> list[str]:
    """Files as given (read whatever their content); directories walked for the files ``takes``
    accepts (name, first 64 KiB), hangdbg's own outputs left out (a ``-o DIR`` of an earlier run).

    Raises:
        UsageError: a path does not exist.
    """
    try:
        return files_where(list(paths), lambda name, head: not is_own_output(name) and takes(name, head))
    except FileNotFoundError as exc:
        raise UsageError(f"no such file or directory: {exc.filename}") from None


class ReaderCommand(Command):
    """Base of the commands that read one kind of evidence (``logs``, ``gpu``, ``fr``, ``nccl
    summary``, ``traces``): paths, the output options, reading, the document, the exit status.

    Subclasses set :attr:`name` (the document's command), :attr:`json_name`, :attr:`title`,
    :attr:`paths_help`, and implement :meth:`reader`; they may add options
    (:meth:`add_reader_arguments`) and views above the generic report (:meth:`extra_views`).
    """

    name: ClassVar[str]
    json_name: ClassVar[str]
    title: ClassVar[str]
    paths_help: ClassVar[str] = "files, or directories holding them"
    metavar: ClassVar[str] = "PATH"
    rank_table: ClassVar[bool] = True
    """Show the generic per-rank table (commands with a table of their own do not)."""
    nothing_help: ClassVar[str] = ""
    """What to do when no file holds this kind of evidence (shown with the error)."""

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar=cls.metavar, help=cls.paths_help)
        cls.add_reader_arguments(p)
        add_output_arguments(p, cls.json_name)

    @classmethod
    def add_reader_arguments(cls, p: argparse.ArgumentParser) -> None:
        """Options of this reader (none by default)."""

    def reader(self, args: argparse.Namespace) -> Reader:  # pragma: no cover - abstract
        raise NotImplementedError

    def takes(self, reader: Reader) -> Callable[[str, bytes], bool]:
        """Which files of a directory to read: those the reader takes (by default)."""
        return reader.takes

    def read(self, reader: Reader, files: list[str], args: argparse.Namespace) -> SourceReport:
        return reader.read(files)

    def extra_views(self, rep: SourceReport, args: argparse.Namespace) -> list[RenderableType]:
        """Tables shown above the per-rank table (none by default)."""
        return []

    def run(self, args: argparse.Namespace) -> int:
        from ..report.build import source_document
        from ..report.source_view import render_source_report

        reader = self.reader(args)
        files = expand_paths(args.paths, self.takes(reader))
        rep = self.read(reader, files, args)
        for e in rep.errors:
            self.warn(f"cannot read {e.file}: {e.reason}")
        doc = source_document(rep, self.name, [str(p) for p in args.paths])
        if not rep.records:
            print_error(self.err, doc.headline, self.nothing_help)
        self.emit(doc, args, self.json_name, lambda: render_source_report(
            rep, doc.headline, self.title, self.extra_views(rep, args) if rep.records else [],
            evidence=not args.no_evidence, rank_rows=None if self.rank_table else 0))
        return exit_status(doc.found, rep.records > 0)


def emit_stacks(cmd: Command, a: Analysis, args: argparse.Namespace, command: str, **doc: Any) -> int:
    """Print a stack analysis (or its document), save ``hangdbg.json`` under ``--out``.

    Args:
        doc: more fields of :func:`hangdbg.report.build.stacks_document` (``out_dir``, ``inputs``,
            ``nodes``, ``findings``, ``headline``...).

    Returns:
        3 when a suspect was named, 1 when not one stack could be read, else 0.
    """
    from ..report.build import stacks_document
    from ..report.console import render_analysis

    write_exports(a, args, cmd.warn)  # first: a file not saved is in the document
    document = with_not_saved(stacks_document(a, command, **doc))
    view = replace(a, headline=document.headline, findings=document.findings)
    cmd.emit(document, args, "hangdbg.json",
             lambda: render_analysis(view, tree=not args.no_tree, evidence=not getattr(args, "no_evidence", False)))
    decided = not any(f.kind is Kind.UNDECIDED for f in a.findings)  # no all-clear when the stacks cannot decide
    return exit_status(document.found, a.readable and bool(a.ranks) and decided)
