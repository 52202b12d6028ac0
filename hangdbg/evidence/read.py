"""Everything a dead job left, read and merged into one verdict (``hangdbg report``).

Walks the paths, detects each file's kind by its content (:mod:`hangdbg.evidence.walk`), hands the
files of each kind to their reader (a reader bug becomes an error line, never a lost report),
analyzes every source of stacks together (py-spy dumps, core files, saved stack texts), checks the
flight recorder against those stacks, and merges it all with :func:`build_verdict`.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Callable, Sequence

from ..stacks.analysis import analyze
from .crosscheck import cross_check
from .fr_join import joined_analysis, settle_fr_source
from .fr_files import fr_dumps
from .jobs import mixed_jobs
from .verdict import build_verdict
from ..model import Analysis, ClassifiedFile, FileError, RankDump, SourceKind, SourceReport, Verdict
from .job_signature import JobSignature, signature
from ..text.lines import read_head
from .base import StackReader, with_source
from .stacks.reader import with_analysis
from .registry import reader_for
from .walk import NO_READER, walk
from .error_lines.facts import ErrorLinesFacts

__all__ = ["read_sources", "read_evidence"]


def read_sources(paths: Sequence[str], on_kind: Callable[[SourceKind, int], None] | None = None
                 ) -> tuple[list[SourceReport], Analysis | None, list[FileError], list[ClassifiedFile]]:
    """Classify and read everything under ``paths``.

    Args:
        paths: directories (walked) or files.
        on_kind: called with each kind and its number of files after they were read (progress).

    Returns:
        ``(sources, analysis, unparsed, files)`` as :func:`build_verdict` takes them.

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    classified = [_second_chance(c) for c in walk(paths)]
    by_kind: dict[SourceKind, list[str]] = {}
    unparsed = []
    for c in classified:
        for k in c.kinds:
            by_kind.setdefault(k, []).append(c.file)
        if not c.kinds:
            unparsed.append(FileError(c.file, c.reason))
    sources: list[SourceReport] = []
    dumps: list[RankDump] = []
    for kind, files in by_kind.items():
        reader = reader_for(kind)
        try:
            if isinstance(reader, StackReader):  # stacks: analyzed together below
                rep, found = reader.read_dumps(files)
                dumps.extend(found)
            else:
                rep = reader.read(files)
        except Exception as exc:  # a reader bug must not lose the rest of the report
            rep = SourceReport(kind=kind, files=tuple(files),
                               errors=tuple(FileError(f, f"{kind} reader failed: {exc!r}") for f in files))
        sources.append(with_source(rep))
        if on_kind is not None:
            on_kind(kind, len(files))
    sources, unparsed = _quiet_files_unread(sources, unparsed, classified)
    analysis = None
    if dumps:
        stacks = next((s for s in sources if s.kind is SourceKind.STACKS), None)
        # live processes (py-spy dumps) among the stacks: a rank without one is missing
        analysis = analyze(dumps, live=stacks is not None and stacks.records > 0)
        fr = next((s for s in sources if s.kind is SourceKind.FLIGHT_RECORDER), None)
        if fr is not None:  # the joint verdict: the flight recorder decides where the stacks cannot
            analysis = joined_analysis(analysis, fr_dumps(fr.files))
        if stacks is None:  # cores and stack texts only
            sources.append(with_analysis(SourceReport(kind=SourceKind.STACKS), analysis))
        else:
            sources[sources.index(stacks)] = with_analysis(stacks, analysis)
        sources = [_cross_checked(s, analysis) if s.kind is SourceKind.FLIGHT_RECORDER else s for s in sources]
    return sources, analysis, unparsed, classified


def _quiet_files_unread(sources: list[SourceReport], unparsed: list[FileError], classified: list[ClassifiedFile]
                        ) -> tuple[list[SourceReport], list[FileError]]:
    """Files that only the error-lines reader took and that hold no error line are not used (listed
    with :data:`~hangdbg.evidence.walk.NO_READER`); its report is kept only when it read an error line."""
    lines = next((s for s in sources if s.kind is SourceKind.ERROR_LINES), None)
    if lines is None or not isinstance(lines.facts, ErrorLinesFacts):
        return sources, unparsed
    quiet = set(lines.facts.quiet_files)
    unparsed = unparsed + [FileError(c.file, NO_READER) for c in classified
                           if c.kinds == (SourceKind.ERROR_LINES,) and c.file in quiet]
    if not lines.records and not lines.errors:
        sources = [s for s in sources if s is not lines]
    return sources, unparsed


LOG_KINDS = (SourceKind.TORCH_LOG, SourceKind.NCCL, SourceKind.GPU)
"""The line readers of the per-kind commands ``logs``, ``nccl summary`` and ``gpu``."""
PROBE_MAX_BYTES = 8 << 20
"""Larger files get no second chance (their head decided)."""
_NO_LOG_READER = {SourceKind.STACK_TEXT, SourceKind.ERROR_LINES}


def _second_chance(c: ClassifiedFile) -> ClassifiedFile:
    """``c`` with the log readers that find records in it although their ``sniff`` of its first
    64 KiB said no.

    The per-kind commands read every file they are given; ``report`` only what a sniff takes. A
    text file that no log reader took (none at all, or only a stack reader: a torchrun log that
    starts with ``frame #N:`` lines) is read by each log reader alone and kept by those that
    recognise records in it, so that ``report`` finds what ``logs`` / ``nccl summary`` / ``gpu``
    find in that file. Documentation, binary, empty and hangdbg's own files are not retried, nor
    py-spy dumps (``stacks``: a job's thousands of dump files must be read once).
    """
    if c.kinds == (SourceKind.STACKS,):
        return _stackless_dump(c)
    if c.kinds and not set(c.kinds) <= _NO_LOG_READER or not c.kinds and c.reason != NO_READER:
        return c
    try:
        if os.path.getsize(c.file) > PROBE_MAX_BYTES:
            return c
    except OSError:
        return c
    found = []
    for kind in LOG_KINDS:
        try:
            if reader_for(kind).read([c.file]).records > 0:
                found.append(kind)
        except Exception:  # a reader bug must not lose the walk; the reader's own pass reports it
            continue
    return replace(c, kinds=c.kinds + tuple(found), reason="") if found else c


_PYSPY_THREAD = re.compile(rb"(?m)^\s*Thread (?:0x[0-9A-Fa-f]+|\d+) \(")
"""A py-spy dump's thread header (``Thread 0x7F3A... (active): "MainThread"``, or the native id: ``Thread 3626
(idle)``): a file without one holds no stack."""


def _stackless_dump(c: ClassifiedFile) -> ClassifiedFile:
    """A file that starts as a py-spy dump (``Process N: ...`` / ``Python v3.x``) but holds no thread (py-spy
    failed, or a paste kept only its header and the error after it) is read by the error-lines reader too: its
    error lines would otherwise be lost behind "could not read the stacks"."""
    try:
        if _PYSPY_THREAD.search(read_head(c.file)):  # the usual dump: its first thread is near its top
            return c
        if os.path.getsize(c.file) > PROBE_MAX_BYTES:
            return c
        with open(c.file, "rb") as f:
            data = f.read(PROBE_MAX_BYTES)
    except OSError:
        return c
    return c if _PYSPY_THREAD.search(data) else replace(c, kinds=c.kinds + (SourceKind.ERROR_LINES,))


def _cross_checked(fr: SourceReport, analysis: Analysis) -> SourceReport:
    """The flight recorder's report with its agreement or contradiction with the stacks added (its
    lag suspects made warnings when the stacks show the job moving: :func:`settle_fr_source`)."""
    return with_source(replace(fr, findings=settle_fr_source(fr.findings, analysis) + tuple(cross_check(fr, analysis))))


def read_evidence(paths: Sequence[str], on_kind: Callable[[SourceKind, int], None] | None = None) -> Verdict:
    """:func:`read_sources` then :func:`build_verdict`: the verdict on everything under ``paths``.

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    sources, analysis, unparsed, files = read_sources(paths, on_kind)
    return build_verdict(sources, analysis, unparsed, files, mixed_jobs(_signatures(files)))


def _signatures(files: Sequence[ClassifiedFile]) -> list[tuple[str, JobSignature]]:
    """The job traits of every file a reader took (its first 64 KiB)."""
    out = []
    for c in files:
        if not c.kinds or set(c.kinds) & {SourceKind.CORE, SourceKind.CORE_JSON, SourceKind.FLIGHT_RECORDER}:
            continue  # binary dumps: their job traits are not in text lines
        try:
            out.append((c.file, signature(read_head(c.file))))
        except OSError:
            continue
    return out
