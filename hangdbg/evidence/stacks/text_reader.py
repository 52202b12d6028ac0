"""The stack-text reader: saved gdb / pstack / eu-stack / lldb backtraces, gdb ``py-bt``,
numbered ``#N f from x.py:N`` Python frames, ``faulthandler`` dumps, PyTorch's C++ ``frame #N:``
traces and fatal-signal dumps (c10's handler, UCX's ``Caught signal``) (grammar:
:mod:`hangdbg.stacks.native_text`), one :class:`~hangdbg.model.RankDump` per process, and what
the native frames show (:mod:`hangdbg.stacks.native_causes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...stacks.native_causes import is_service_thread, native_cause
from .facts import StackTextFacts
from ...frames import Frame
from ...model import (Evidence, FileError, Finding, Kind, RankDump, RankState, Severity, SourceKind, 
    SourceReport, Thread)
from ...enums import ThreadStatus
from ...stacks.debug_server import is_debug_server_dump
from ...stacks.native_text import (NULL_PC, CrashLine, StackBlock, TextInfo, crash_site, merge_native_python, parse_stacks,
    sniff, thread_status)
from ...stacks.pyspy_text import rank_from_filename
from ...text.lines import iter_lines
from ..base import ReaderBase, with_source

__all__ = ["READER", "StackTextReader", "load"]


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
        (``rank3.gdb.txt``), else the order of files (``rank_source="order"``; the findings of
        such a process name its file, not a rank). Findings: ``fatal-error`` per faulthandler
        ``Fatal Python error`` (suspect), ``crash`` per gdb/lldb/c10/UCX fatal signal (suspect; a
        debugger's attach signal is none), ``cpp-exception`` per PyTorch C++ trace (warning), and
        per process what its native frames show (:func:`hangdbg.stacks.native_causes.native_cause`:
        ``cuda-error``, ``comm-init-failed``, ``abort-hang``, ``watchdog-timeout``, ``cuda-stuck``).
        Never raises.
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
        findings.extend(_crash_finding(c, c.rank if c.rank is not None else file_rank, blocks, path) for c in info.crashes)
        ranks_in = {b.rank for b in blocks if b.rank is not None}
        by_rank: dict[int | None, list[StackBlock]] = {}
        for b in blocks:
            if b.format == "ucx":  # a signal handler's report: the crash finding's site, not a live stack
                continue
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
        rk = None if e.rank_source == "order" else r
        who, ranks = _who(rk, src), ((r,) if rk is not None else ())
        seen = _threads(bl)
        threads = tuple(t for t, _thrown, _line in seen)
        dumps.append(RankDump(rank=r, threads=threads, samples=(threads,) if threads else (), rank_source=e.rank_source,
                              cmdline=info.cmdline, error=None if threads else "no stack in the text"))
        current = next((t for t in threads if _is_current(bl, t)), threads[0] if threads else None)
        ev = [Evidence(src, n, raw) for n, raw, rk in info.evidence if rk in (None, r)][:4]
        where = (crash_site(current.frames) or _native_site(current.frames)) if current else ""
        fatal = info.fatal.get(r) or (info.fatal.get(None) if len(info.fatal) == 1 else None)
        if fatal:
            findings.append(Finding(Kind.FATAL_ERROR, f"{who}: {fatal[1]}{where}", ranks, evidence=tuple(ev),
                                    action="read the Python frames of the current thread; a C extension or a library it called crashed"))
            states.append(RankState(r, state=fatal[1].removeprefix("Fatal Python error: "), source=SourceKind.STACK_TEXT))
        elif info.signal:
            null = " (a call through a NULL function pointer)" if any(NULL_PC.search(x.text) for x in ev) else ""
            findings.append(Finding(Kind.CRASH, f"{who} crashed with {info.signal}{null}{where}", ranks, evidence=tuple(ev),
                                    action=_CRASH_ACTIONS.get(info.signal, _CRASH_ACTION)))
            states.append(RankState(r, state=info.signal, source=SourceKind.STACK_TEXT))
        kinds: set[Kind] = set()
        for t, thrown, line in seen:
            cause = native_cause(t, thrown)
            if cause is not None and cause.kind not in kinds:
                kinds.add(cause.kind)
                findings.append(Finding(cause.kind, f"{who}: {cause.summary}", ranks, severity=cause.severity,
                                        evidence=(Evidence(src, line, cause.frame.function),), action=cause.action))
        for b in bl:
            if b.format == "torch-cpp" and b.title and not b.title.startswith("SIG"):
                findings.append(Finding(Kind.CPP_EXCEPTION, f"{who}: C++ {b.title}", ranks, severity=Severity.WARNING,
                                        evidence=(Evidence(src, b.line, b.title),)))
                if not any(s.rank == r for s in states):
                    states.append(RankState(r, state="C++ exception", source=SourceKind.STACK_TEXT))
    report = SourceReport(SourceKind.STACK_TEXT, tuple(str(p) for p in paths), tuple(findings), tuple(states),
                          records=len(dumps), lines_read=read, lines_skipped=skipped, errors=tuple(errors),
                          facts=StackTextFacts(thread_count=sum(len(d.threads) for d in dumps), rank_count=len(dumps)))
    return with_source(report), dumps


_CRASH_ACTION = ("read the error printed just before the signal (an exception, a failed check, `terminate called "
                 "after throwing`); the thread that is not waiting is the one that crashed")
_CRASH_ACTIONS = {
    "SIGBUS": "a bus error in NCCL or a DataLoader usually means shared memory ran out: give the container more "
              "/dev/shm (docker --shm-size or --ipc=host) or set NCCL_SHM_DISABLE=1 to confirm",
    "SIGSEGV": "read the native frames of the crashing thread; rerun under faulthandler (PYTHONFAULTHANDLER=1) to "
               "see the Python caller",
}
_NOT_THE_SITE = ("killpg", "raise", "abort", "__restore_rt", "__sigaction", "sigaction", "__GI_raise", "gsignal", "ucs_",
                 "??", "<unknown", "start_thread", "clone", "c10::FatalSignalHandler", "__pthread_kill", "pthread_kill", "__GI_")


def _native_site(frames: tuple[Frame, ...]) -> str:
    """`` in f`` for the innermost native frame that is not a signal handler's own, ``""`` if none."""
    f = next((f for f in frames if f.native and not f.function.startswith(_NOT_THE_SITE)), None)
    return f" in {f.function.split('(', 1)[0]}" if f is not None else ""


def _crash_finding(c: CrashLine, rank: int | None, blocks: list[StackBlock], path: str) -> Finding:
    """A process a signal handler in the log (UCX ``Caught signal``) reported, with the innermost
    frame of its backtrace that is not the handler's own."""
    bt = next((b for b in blocks if b.format == "ucx" and b.thread_id == c.tid), None)
    site = next((f.function for f in bt.frames if not f.function.startswith(_NOT_THE_SITE)), None) if bt else None
    who = f"rank {rank}" if rank is not None else f"process {c.pid} on {c.host}"
    what = f" ({c.detail})" if c.detail else ""
    return Finding(Kind.CRASH, f"{who} crashed with {c.signal}{what}" + (f" in {site}" if site else ""),
                   (rank,) if rank is not None else (), hosts=(c.host,), evidence=(Evidence(path, c.line, c.raw.strip()),),
                   action=_CRASH_ACTIONS.get(c.signal, _CRASH_ACTION))


def _is_current(blocks: list[StackBlock], t: Thread) -> bool:
    return any(b.current and b.thread_id == t.thread_id for b in blocks)


def _threads(blocks: list[StackBlock]) -> list[tuple[Thread, bool, int]]:
    """Blocks of one process -> ``(thread, thrown, line)``: a gdb ``bt`` and a ``py-bt`` of the
    same thread merge; ``thrown`` marks a C++ exception's trace (not a live stack). The thread
    that speaks for the process comes first: the current one, then one whose native frames show
    a cause, then one with Python frames; PyTorch's and NCCL's own threads (watchdog, proxy) last."""
    merged: dict[tuple[str, int], list[StackBlock]] = {}
    for b in blocks:
        fmt = "cpp" if b.format == "torch-cpp" and not b.title.startswith("SIG") else "thr"
        merged.setdefault((fmt, b.thread_id), []).append(b)
    out = []
    for (fmt, tid), bs in merged.items():
        every = tuple(f for b in bs for f in b.frames)
        native = tuple(f for b in bs if b.format != "py-bt" for f in b.frames if f.native)
        python = [f for f in every if not f.native]
        frames = merge_native_python(native, [(f,) for f in python]) if native and python else every
        current = any(b.current for b in bs)
        name = next((b.name for b in bs if b.name), None)
        t = Thread(tid, name, thread_status(frames, current), frames)
        out.append((t, fmt == "cpp", bs[0].line, current))
    out.sort(key=lambda x: (not x[3], native_cause(x[0], x[1]) is None, is_service_thread(x[0]), x[0].status != ThreadStatus.ACTIVE,
                            not x[0].python_frames))
    return [(t, thrown, line) for t, thrown, line, _cur in out]


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
