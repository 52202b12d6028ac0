"""What each file of a post-mortem directory is, and which readers read it.

``hangdbg report DIR`` walks directories and asks every reader's ``sniff(head)`` about the first
64 KiB of each file (content, not names: a NCCL log named ``slurm-1234.out`` is still a NCCL log;
one job log often holds NCCL lines, watchdog timeouts and py-spy dumps at once, so a file can have
several kinds). Documentation (a README or MANIFEST in Markdown that quotes log lines) is
skipped, and files no reader takes are listed with the reason.
"""

from __future__ import annotations

import os
import re
from typing import Sequence

from ..model import ClassifiedFile, SourceKind
from ..text.lines import QUOTE, dedented_paste, iter_files, quoted, read_head
from .base import Reader
from .own_output import is_own_output
from .registry import READERS

__all__ = ["NO_READER", "classify", "is_prose", "walk"]

NO_READER = "no reader recognised its content"
_STRUCTURED = {SourceKind.STACKS, SourceKind.CORE, SourceKind.CORE_JSON, SourceKind.FLIGHT_RECORDER, SourceKind.TRACES,
               SourceKind.LAST_STACKS}
"""Kinds whose files the error-lines reader leaves alone (py-spy dumps, cores, recorder dumps, traces)."""

_PROSE_SUFFIXES = (".md", ".markdown", ".rst", ".adoc")
_PROSE_LINE = re.compile(rb"^(?:#{1,6} \S|\s{0,3}[-*+] \S|\s{0,3}\d{1,3}\. \S|\|.*\|\s*$|```|={3,}\s*$|-{3,}\s*$|\.\. \w)")


def is_prose(path: str, head: bytes) -> bool:
    """True for documentation: a Markdown / reStructuredText / AsciiDoc file (by its suffix) whose
    first lines are mostly headings, list items, table rows or fences, or whose quoted spans
    (backticks) outnumber its log-like lines. A log saved under ``.md`` without that structure
    is still read. Heuristic (ours)."""
    if not os.path.basename(path).lower().endswith(_PROSE_SUFFIXES):
        return False
    lines = [ln for ln in head.split(b"\n")[:400] if ln.strip()]
    if not lines:
        return False
    marked = sum(1 for ln in lines if _PROSE_LINE.match(ln) or b"`" in ln)
    return marked * 4 >= len(lines)


def classify(path: str, readers: Sequence[Reader] = READERS) -> ClassifiedFile:
    """Sniff one regular file with every reader; never raises."""
    try:
        head = read_head(path)
    except OSError as exc:
        return ClassifiedFile(path, (), f"cannot read: {exc.strerror or exc}")
    if not head:
        return ClassifiedFile(path, (), "empty file")
    if is_own_output(path):  # before sniffing: hangdbg's documents quote the evidence they rest on
        core_doc = next((r for r in readers if r.kind is SourceKind.CORE_JSON), None)
        if core_doc is not None and core_doc.sniff(head):
            return ClassifiedFile(path, (core_doc.kind,))
        return ClassifiedFile(path, (), "hangdbg's own output (its inputs are read instead)")
    if is_prose(path, head):  # a README quoting log lines in backticks is not a log
        return ClassifiedFile(path, (), "documentation (Markdown/reST prose), not a log: skipped")
    heads = [head, QUOTE.sub(b"", head)] if quoted(head) else [head]  # a quoted paste: its readers unquote it
    if (flat := dedented_paste(heads[-1])) is not heads[-1]:
        heads.append(flat)  # a code block's indentation: its readers take the lines stripped (iter_lines_where)
    kinds = []
    for r in readers:
        try:
            if any(r.sniff(h) for h in heads):
                kinds.append(r.kind)
        except Exception as exc:  # a reader's sniff must never stop the walk
            return ClassifiedFile(path, tuple(kinds), f"sniffing as {r.kind} failed: {exc!r}")
    if SourceKind.ERROR_LINES in kinds and set(kinds) & _STRUCTURED:
        kinds.remove(SourceKind.ERROR_LINES)  # a dump or a trace: its own reader reads every line of it
    if kinds:
        return ClassifiedFile(path, tuple(kinds))
    binary = b"\x00" in head[:8192]
    if not binary and any(r.kind is SourceKind.ERROR_LINES for r in readers):
        # a JSON document no reader of its own takes (a structured logger's record, an API's error object, an
        # array of events): its error lines are still read, as text
        return ClassifiedFile(path, (SourceKind.ERROR_LINES,))
    return ClassifiedFile(path, (), "binary file of unknown kind" if binary else NO_READER)


def walk(paths: Sequence[str], readers: Sequence[Reader] = READERS) -> list[ClassifiedFile]:
    """Classify every regular file under ``paths`` (recursively; hidden files and directories
    skipped; symlinks to files followed, to directories not).

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    return [classify(f, readers) for p in paths for f in iter_files(p)]
