"""The stack-text reader: saved gdb / pstack / eu-stack / lldb backtraces, gdb ``py-bt``,
``faulthandler`` dumps and PyTorch's C++ ``frame #N:`` traces (grammar:
:mod:`hangdbg.parse.native_stacks`), one :class:`~hangdbg.model.RankDump` per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..facts import StackTextFacts
from ..model import Evidence, FileError, Finding, Kind, RankDump, RankState, Severity, SourceKind, SourceReport, Thread
from ..parse.debug_server import is_debug_server_dump
from ..parse.native_stacks import StackBlock, TextInfo, crash_site, merge_native_python, parse_stacks, sniff, thread_status
from ..parse.pyspy_text import rank_from_filename
from ..parse.textlines import iter_lines
from .base import ReaderBase, with_source

__all__ = ["StackTextReader", "READER", "load"]


@dataclass
class _PerRank:
    blocks: list[StackBlock]
    info: TextInfo
    source: str
    rank_source: str


def _who(rank: int | None, source: str) -> str:
    return f"rank {rank}" if rank is not None else Path(source).name


def load(paths: Sequence[str]) -> tuple[SourceReport[StackTextFacts], list[RankDump]]:
    """Read stack text files into a :class:`SourceReport` and one :class:`RankDump` per process.

    Args:
        paths: text files (each one process's stacks, or a launcher log whose ``[rankN]:``
            prefixes tell the ranks apart).

    Returns:
        ``(report, dumps)``. A rank comes from a ``[rankN]:`` prefix, else the file name
        (``rank3.gdb.txt``), else the order of files (``rank_source="order"``). Findings:
        ``fatal-error`` per faulthandler ``Fatal Python error`` (suspect), ``crash`` per gdb/lldb
        ``signal`` (suspect), ``cpp-exception`` per PyTorch C++ trace (warning). Never raises.
    """
    findings: list[Finding] = []
    states: list[RankState] = []
    errors: list[FileError] = []
    read = skipped = 0
    per_rank: dict[int, _PerRank] = {}
    unranked: list[tuple[str, list[StackBlock], TextInfo]] = []
    for path in paths:
        path = str(path)
        try:
            blocks, bad, info = parse_stacks(iter_lines(path), path)
        except OSError as exc:
            errors.append(FileError(path, exc.strerror or str(exc)))
            continue
        read += info.lines
        skipped += bad
        file_rank = rank_from_filename(path)
        ranks_in = {b.rank for b in blocks if b.rank is not None}
        by_rank: dict[int | None, list[StackBlock]] = {}
        for b in blocks:
            r = b.rank if b.rank is not None else (next(iter(ranks_in)) if len(ranks_in) == 1 else file_rank)
            by_rank.setdefault(r, []).append(b)
        for r in info.fatal:  # a fatal error whose stack was not printed still names its rank
            by_rank.setdefault(r if r is not None else file_rank, [])
        if not by_rank and info.signal:
            by_rank[file_rank] = []
        for r, bl in by_rank.items():
            if r is None:
                unranked.append((path, bl, info))
            else:
                how = "prefix" if r in ranks_in or r in info.fatal else "file name"
                per_rank.setdefault(r, _PerRank([], info, path, how)).blocks.extend(bl)
    next_rank = max(per_rank, default=-1) + 1
    for path, bl, info in unranked:
        per_rank[next_rank] = _PerRank(bl, info, path, "order")
        next_rank += 1

    dumps: list[RankDump] = []
    for r in sorted(per_rank):
        e = per_rank[r]
        src, info, bl = e.source, e.info, e.blocks
        threads = _threads(bl)
        dumps.append(RankDump(rank=r, threads=threads, samples=(threads,) if threads else (), rank_source=e.rank_source,
                              cmdline=info.cmdline, error=None if threads else "no stack in the text"))
        current = next((t for t in threads if _is_current(bl, t)), threads[0] if threads else None)
        ev = [Evidence(src, n, raw) for n, raw, rk in info.evidence if rk in (None, r)][:4]
        where = crash_site(current.frames) if current else ""
        fatal = info.fatal.get(r) or (info.fatal.get(None) if len(info.fatal) == 1 else None)
        if fatal:
            findings.append(Finding(Kind.FATAL_ERROR, f"{_who(r, src)}: {fatal[1]}{where}", (r,), evidence=tuple(ev),
                                    action="read the Python frames of the current thread; a C extension or a library it called crashed"))
            states.append(RankState(r, state=fatal[1].removeprefix("Fatal Python error: "), source=SourceKind.STACK_TEXT))
        elif info.signal:
            findings.append(Finding(Kind.CRASH, f"{_who(r, src)} crashed with {info.signal}{where}", (r,), evidence=tuple(ev)))
            states.append(RankState(r, state=info.signal, source=SourceKind.STACK_TEXT))
        for b in bl:
            if b.format == "torch-cpp" and b.title:
                findings.append(Finding(Kind.CPP_EXCEPTION, f"{_who(r, src)}: C++ {b.title}", (r,), severity=Severity.WARNING,
                                        evidence=(Evidence(src, b.line, b.title),)))
                if not any(s.rank == r for s in states):
                    states.append(RankState(r, state="C++ exception", source=SourceKind.STACK_TEXT))
    report = SourceReport(SourceKind.STACK_TEXT, tuple(str(p) for p in paths), tuple(findings), tuple(states),
                          records=len(dumps), lines_read=read, lines_skipped=skipped, errors=tuple(errors),
                          facts=StackTextFacts(thread_count=sum(len(d.threads) for d in dumps), rank_count=len(dumps)))
    return with_source(report), dumps


def _is_current(blocks: list[StackBlock], t: Thread) -> bool:
    return any(b.current and b.thread_id == t.thread_id for b in blocks)


def _threads(blocks: list[StackBlock]) -> tuple[Thread, ...]:
    """Blocks of one process -> threads: a gdb ``bt`` and a ``py-bt`` of the same thread merge."""
    merged: dict[tuple[str, int], list[StackBlock]] = {}
    for b in blocks:
        fmt = "cpp" if b.format == "torch-cpp" else "thr"
        merged.setdefault((fmt, b.thread_id), []).append(b)
    out = []
    for (_fmt, tid), bs in merged.items():
        every = tuple(f for b in bs for f in b.frames)
        native = tuple(f for b in bs if b.format != "py-bt" for f in b.frames if f.native)
        python = [f for f in every if not f.native]
        frames = merge_native_python(native, [(f,) for f in python]) if native and python else every
        current = any(b.current for b in bs)
        name = next((b.name for b in bs if b.name), None)
        out.append(Thread(tid, name, thread_status(frames, current), frames))
    out.sort(key=lambda t: t.status != "active")  # the current thread first
    return tuple(out)


class StackTextReader(ReaderBase[StackTextFacts]):
    """gdb / pstack / eu-stack / lldb / py-bt / faulthandler / ``frame #N:`` texts: ``records``
    counts the ranks with a stack or a fatal error."""

    kind = SourceKind.STACK_TEXT

    def sniff(self, head: bytes) -> bool:
        return sniff(head) and not is_debug_server_dump(head)  # the debug server's dumps are the stacks reader's

    def _read(self, paths: list[str]) -> SourceReport[StackTextFacts]:
        return load(paths)[0]

    def read_dumps(self, paths: Sequence[str]) -> tuple[SourceReport[StackTextFacts], list[RankDump]]:
        return load(paths)


READER = StackTextReader()
