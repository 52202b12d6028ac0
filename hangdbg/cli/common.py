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
import math
import weakref
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from rich.console import Console, RenderableType

from ..errors import UsageError
from ..evidence.base import Reader
from ..evidence.own_output import is_own_output
from ..model import SourceReport
from ..outdir import NotSaved, OutDir, check_writable, claim, run_path
from ..report.safetext import escape
from ..text.lines import files_where
from .events import ConsoleEvents

# The report layer (documents, pydantic, rich views) is imported where it is used: a command
# starts in a tenth of a second (`nccl summary` of a 1 GB log takes under a second in all).

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FOUND = 0, 1, 2, 3

_JSON_PRINTED: "weakref.WeakKeyDictionary[Console, int]" = weakref.WeakKeyDictionary()
"""Documents printed on each console (:meth:`Command.print_json`, whichever command printed it)."""


def json_printed(out: Console) -> int:
    """How many JSON documents were printed on ``out`` so far: ``main`` adds a JSON error only to a
    failure that printed none (a command may hand its work to another, which prints)."""
    return _JSON_PRINTED.get(out, 0)


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


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (seconds)."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, not {text}")
    return value


class Command:
    """Base of a subcommand: ``add_arguments`` on the parser, ``run(args) -> exit status``.

    ``files`` is the command's output directory once it has one (``-o DIR``, or one it claimed);
    every file the command writes goes through it, and the files that
    could not be written are listed there and reported with the document.
    """

    description = ""

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self.document: Any = None
        self.files: OutDir | None = None

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, args: argparse.Namespace) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def events(self, args: argparse.Namespace, prefix: str = "hangdbg") -> ConsoleEvents:
        """Progress bars, warnings and ``-v`` lines on stderr (no status notes with ``--json``)."""
        return ConsoleEvents(self.err, verbose=bool(getattr(args, "verbose", False)),
                             quiet=bool(getattr(args, "json", False)), prefix=prefix)

    # -- output -------------------------------------------------------------------------------
    def print_json(self, doc: Any) -> None:
        """Print a document as it is (not through rich's renderer, which wraps text line by line:
        minutes for a large document)."""
        from ..report.schema import json_parts

        _JSON_PRINTED[self.out] = _JSON_PRINTED.get(self.out, 0) + 1
        for part in json_parts(doc):
            self.out.file.write(part)
        self.out.file.write("\n")
        self.out.file.flush()

    def warn(self, text: str) -> None:
        """A warning line on stderr (``text`` is plain text, never markup): :meth:`ConsoleEvents.warn`."""
        ConsoleEvents(self.err).warn(text)

    def emit(self, doc: Any, args: argparse.Namespace, name: str, render: Callable[[], RenderableType | None]) -> None:
        """Write ``doc`` to ``--out``/``name`` when asked (through :attr:`files`), then show it."""
        from ..report.build import with_not_saved
        from ..report.schema import to_json

        out = getattr(args, "out", None)
        if out is not None and (self.files is None or self.files.path != Path(out)):
            self.files = OutDir(out)
        written = None
        if self.files is not None:
            self.files.save_text(name, to_json(with_not_saved(doc, self.files.not_saved)) + "\n")
            written = str(self.files.path)
        lost = self.files.not_saved if self.files is not None else ()
        self.show(with_not_saved(doc, lost), args, render, lost, written)

    def show(self, doc: Any, args: argparse.Namespace, render: Callable[[], RenderableType | None],
             lost: Sequence[NotSaved] = (), written_to: str | None = None) -> None:
        """Print ``doc`` (``--json``) or its view (``render()``), then the files not saved and
        where the output went."""
        self.document = doc  # what the command said, for a caller running it
        if args.json:
            self.print_json(doc)
        else:
            view = render()
            if view is not None:
                self.out.print(view)
        for n in lost[:10]:
            self.warn(f"not saved: {n.path}: {n.reason}")
        if len(lost) > 10:
            self.warn(f"not saved: {len(lost) - 10} more file(s)")
        if written_to is not None and not args.json:
            but = f" (but for the {len(lost)} file(s) not saved)" if lost else ""
            self.err.print(f"[dim]written to {escape(written_to)}{but}[/dim]", highlight=False)


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
    from ..collect.plan import SPEEDSCOPE_BY  # only for the commands that export (start-up of the others)

    g = parser.add_argument_group("export")
    g.add_argument("--speedscope", metavar="FILE", type=Path,
                   help="also write the stacks of every thread of every rank as a speedscope file "
                        "(https://www.speedscope.app), one profile per equivalence class (or per rank)")
    g.add_argument("--speedscope-by", dest="speedscope_by", choices=SPEEDSCOPE_BY, default="class",
                   help="one speedscope profile per equivalence class (default) or per rank")
    g.add_argument("--folded", metavar="FILE", type=Path,
                   help="also write folded stacks (`frame;frame;frame COUNT`, outermost first; the input of "
                        "flamegraph.pl, which speedscope imports too)")


def out_dir(args: argparse.Namespace, prefix: str = "hangdbg-dump", own: bool = True) -> OutDir:
    """``--out``, or ``./PREFIX-YYYYmmdd-HHMMSS-XXXXXX`` (:func:`hangdbg.outdir.unique_name`): claimed for this run (:func:`hangdbg.outdir.claim`:
    created, writable, not holding another run's output unless ``--force``); it becomes the
    command's :attr:`Command.files` by the caller. ``own=False`` (``nccl split``, whose files are
    named after the ranks and rewritten whole): only created and checked writable.

    Raises:
        UsageError: the directory cannot be created or written (read-only, a file in the way,
            full), or holds another run's output and ``--force`` was not given.
    """
    path = run_path(args.out, prefix)
    if own:
        return claim(path, str(getattr(args, "command", None) or prefix), command_line(args),
                     force=bool(getattr(args, "force", False)))
    return OutDir(check_writable(path))


def command_line(args: argparse.Namespace) -> list[str]:
    """The command line as ``main`` received it (``args._argv``; empty when a caller parsed it
    itself), for the run marker's ``argv`` (:func:`hangdbg.outdir.claim` masks its secrets)."""
    return [str(a) for a in getattr(args, "_argv", None) or ()]


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

    error_lines: ClassVar[bool] = False
    """The command also reads the files' other error lines with the catalog (``with_catalog``), so a
    directory's text files that only the error-lines reader takes are read too."""

    def takes(self, reader: Reader) -> Callable[[str, bytes], bool]:
        """Which files of a directory to read: those the reader takes (with :attr:`error_lines`,
        also those the error-lines reader takes)."""
        if not self.error_lines:
            return reader.takes
        from ..evidence.error_lines.reader import READER as LINES

        return lambda name, head: reader.takes(name, head) or LINES.takes(name, head)

    def read(self, reader: Reader, files: list[str], args: argparse.Namespace) -> SourceReport:
        return reader.read(files)

    def extra_views(self, rep: SourceReport, args: argparse.Namespace) -> list[RenderableType]:
        """Tables shown above the per-rank table (none by default)."""
        return []

    def run(self, args: argparse.Namespace) -> int:
        from ..headline import source_headline
        from ..report.build import source_document
        from ..report.source_view import render_source_report

        reader = self.reader(args)
        files = expand_paths(args.paths, self.takes(reader))
        rep = self.read(reader, files, args)
        for e in rep.errors:
            self.warn(f"cannot read {e.file}: {e.reason}")
        own = rep.kind == getattr(reader, "kind", None)  # a command may read another kind (fr: a RAS report)
        doc = source_document(rep, self.name, [str(p) for p in args.paths],
                              source_headline(rep, reader.all_clear(rep)) if own else None)
        if not rep.records:
            print_error(self.err, doc.headline, self.nothing_help)
        self.emit(doc, args, self.json_name, lambda: render_source_report(
            rep, doc.headline, self.title, self.extra_views(rep, args) if rep.records else [],
            evidence=not args.no_evidence, rank_rows=None if self.rank_table else 0))
        return exit_status(doc.found, rep.records > 0)


def show_stacks(cmd: Command, result: Any, args: argparse.Namespace) -> int:
    """Show the result of ``dump``, ``analyze`` or ``demo`` (:class:`~hangdbg.collect.result.StacksResult`:
    its document already written by the use case); the exit status.

    Returns:
        3 when a suspect was named; 1 when a node could not be read (the job was not seen whole),
        when not one stack could be read, or when the stacks cannot decide (no all-clear); else 0.
    """
    from ..report.build import stacks_document
    from ..report.console import render_stacks

    cmd.show(stacks_document(result), args,
             lambda: render_stacks(result, tree=not args.no_tree, evidence=not getattr(args, "no_evidence", False)),
             result.not_saved, result.out_dir or (str(args.out) if getattr(args, "out", None) is not None else None))
    return int(result.status)


def add_privacy_arguments(g: argparse._ActionsContainer) -> None:
    """``--no-redact`` and ``--no-cmdline`` (``dump``, ``watch``, ``run``, ``demo`` and the agent):
    what the outputs may hold (:mod:`hangdbg.redact`)."""
    g.add_argument("--no-redact", dest="redact", action="store_false",
                   help="keep the values of locals named like secrets (token, password, secret, api_key, auth, "
                        "credential, cookie, session...) and of secret command-line arguments; masked by default")
    g.add_argument("--no-cmdline", dest="cmdline", action="store_false",
                   help="leave the ranks' command lines out of every output (raw/, processes.json, JSON)")
