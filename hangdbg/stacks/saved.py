"""Load saved py-spy dumps (``hangdbg analyze PATH...``) into :class:`~hangdbg.model.RankDump`.

Accepted inputs: files written by hangdbg's collector (``OUT/raw/rank-0003[.sample-2].txt`` with a
``# hangdbg rank=...`` header), plain ``py-spy dump --pid N > file`` outputs, and concatenations
of several dumps (``py-spy dump --subprocesses``, ``pgrep ... | xargs -I {} py-spy dump --pid {}``),
thread dumps a program printed itself from ``sys._current_frames()`` or with ``faulthandler``
(:mod:`.thread_dump_text`), and the per-rank ``=== Rank N: addr ===`` dumps of PyTorch's debug
server (:mod:`.debug_server`).
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..launchers import is_launcher
from ..model import RankDump, Thread
from ..frames import Frame
from ..enums import DumpState
from ..rankset import rank_number
from ..parallel import cores, fork_map, gc_paused

from .debug_server import parse_debug_server_dump
from ..text.lines import open_input, read_capped
from .pyspy_text import ParsedProcess, parse_pyspy_dump, rank_from_filename, sample_from_filename
from .thread_dump_text import parse_thread_dump

__all__ = ["LoadStats", "load_dumps", "load_dump_texts", "NOT_DUMPED"]

NOT_DUMPED = "not dumped: the dump was interrupted before this rank was read (processes.json lists it alive)"
"""The error of a rank ``OUT/processes.json`` lists but no raw file holds (unreadable, not missing)."""
_PROCESSES_CAP = 16 << 20


@dataclass(frozen=True, slots=True)
class LoadStats:
    """What :func:`load_dumps` read.

    Attributes:
        files_read: files read and parsed.
        processes: process blocks found in them.
        garbled_lines: lines skipped because they were not py-spy output.
        unreadable: ``(path, reason)`` for each file that could not be read.
    """

    files_read: int = 0
    processes: int = 0
    garbled_lines: int = 0
    unreadable: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class _Entry:
    """One parsed process with what its file and header say about it."""

    proc: ParsedProcess
    order: int
    rank: int | None
    rank_source: str
    sample: int | None


def load_dumps(paths: Sequence[str | os.PathLike]) -> tuple[list[RankDump], LoadStats]:
    """Read saved py-spy dump text files (py-spy 0.3/0.4 ``dump`` output) into rank dumps.

    Args:
        paths (Sequence[str | os.PathLike]): files, or directories whose regular files are read
            (not recursively, sorted by name, skipping ``*.json`` and hidden files); a directory
            holding a ``raw/`` subdirectory (an ``-o OUT`` directory) is read through ``raw/``.

    Returns:
        ``(dumps, stats)``: one :class:`RankDump` per rank, sorted by rank, and a
        :class:`LoadStats`. The rank comes from the ``# hangdbg rank=`` header or the debug
        server's ``=== Rank N`` block header, else from the
        file name when the file holds exactly one process (``rank_source="file name"``), else
        from the order of appearance, numbered after the highest rank known otherwise
        (``rank_source="order"``). Blocks of the same rank (the collector's ``sample=K``
        headers, ``rank-0003.sample-2.txt`` names, or for order-numbered blocks the same pid)
        merge into one dump: ``samples`` holds the successful samples by sample number,
        ``threads`` the last of them, and ``error`` is set only when no sample succeeded or the
        last one found the process gone. ``state`` is what the collector's header line says
        (``state=gone``); for a file without it (written by an older hangdbg), whether the error
        is hangdbg's gone message (:func:`hangdbg.errors.gone_message`).
        A rank the ``processes.json`` of a named ``-o OUT`` directory lists but no file holds
        (an interrupted dump) gets a dump without stacks whose ``error`` is :data:`NOT_DUMPED`
        (``unreadable``).

    Raises:
        FileNotFoundError: a named path does not exist. A file that exists but cannot be read
            is reported in ``stats.unreadable`` instead.

    From :data:`PARALLEL_FILES` files on, they are read and parsed on every core (the result is
    the same), with the cyclic garbage collector paused (:mod:`hangdbg.parallel`).
    """
    with gc_paused():
        return _load_dumps(paths)


def _load_dumps(paths: Sequence[str | os.PathLike]) -> tuple[list[RankDump], LoadStats]:
    named = [Path(p) for p in paths]
    for p in named:
        if not p.exists():
            raise FileNotFoundError(errno.ENOENT, "no such dump file or directory", str(p))
    files = list(dict.fromkeys(f for p in named for f in _expand(p)))  # a file named twice is read once

    entries: list[_Entry] = []
    read = garbled = 0
    unreadable: list[tuple[str, str]] = []
    canonical = _Canonical()
    for f, (why, bad, procs) in zip(files, _read_all(files)):
        if why:
            unreadable.append((str(f), why))
        if procs is None:
            continue
        read += 1
        garbled += bad
        for proc in procs:
            if isinstance(proc, tuple):
                proc = _unpack(proc, canonical)
            entries.append(_entry(proc, len(entries), f.name, len(procs) == 1))

    dumps = _merge(entries)
    have = {d.rank for d in dumps}
    listed: dict[int, RankDump] = {}
    for p in named:
        alive, why = _listed_processes(p)
        if why:
            unreadable.append((str(p / "processes.json"), why))
        for d in alive:
            if d.rank not in have:
                listed.setdefault(d.rank, d)
    stats = LoadStats(read, len(entries), garbled, tuple(unreadable))
    return sorted([*dumps, *listed.values()], key=lambda d: d.rank), stats


def _listed_processes(p: Path) -> tuple[list[RankDump], str]:
    """The ranks ``p/processes.json`` (``hangdbg dump -o p``) lists, as dumps without stacks
    (error :data:`NOT_DUMPED`), and why the file could not be read (``""`` when it could or
    there is none)."""
    f = p / "processes.json"
    if not p.is_dir() or not f.is_file():
        return [], ""
    try:
        with f.open("rb") as fh:
            data = fh.read(_PROCESSES_CAP + 1)
    except OSError as exc:
        return [], exc.strerror or str(exc)
    if len(data) > _PROCESSES_CAP:
        return [], f"larger than {_PROCESSES_CAP >> 20} MiB, not a processes.json of hangdbg"
    try:
        doc = json.loads(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        return [], f"not JSON: {str(exc)[:200]}"
    procs = doc.get("processes") if isinstance(doc, dict) else None
    if not isinstance(procs, list):
        return [], "no process list"
    out = []
    for q in procs:
        if not isinstance(q, dict):
            continue
        rank, pid = _json_int(q.get("rank")), _json_int(q.get("pid"))
        if rank is None or not 0 <= rank <= _MAX_LISTED_RANK:
            continue
        out.append(RankDump(
            rank=rank, pid=pid, host=str(q.get("host") or ""),
            local_rank=_json_int(q.get("local_rank")), world_size=_json_int(q.get("world_size")),
            local_world_size=_json_int(q.get("local_world_size")), threads=(), samples=(),
            error=NOT_DUMPED, rank_source=str(q.get("rank_source") or "processes.json"),
            cmdline=str(q.get("cmdline") or ""), state=DumpState.UNREADABLE,
        ))
    return out, ""


_MAX_LISTED_RANK = 1 << 24


def _json_int(v: object) -> int | None:
    """A JSON integer field (not a bool, within 0..2**31), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 31 else None


def load_dump_texts(texts: Sequence[tuple[str, str]]) -> tuple[list[RankDump], LoadStats]:
    """:func:`load_dumps` of texts held in memory: ``(file name, text)`` pairs, in that order (the
    fan-out's raw dumps as they arrived: the analysis never depends on what the disk kept)."""
    entries: list[_Entry] = []
    garbled = sum(_add_text(entries, text, name) for name, text in texts)
    return _merge(entries), LoadStats(len(texts), len(entries), garbled, ())


def _add_text(entries: list[_Entry], text: str, name: str) -> int:
    """Parse one file's ``text`` into ``entries``; the number of garbled lines."""
    procs, bad = _parse_text(text)
    for proc in procs:
        entries.append(_entry(proc, len(entries), name, len(procs) == 1))
    return bad


def _parse_text(text: str) -> tuple[list[ParsedProcess], int]:
    """One file's processes (py-spy, the debug server's or a program's own thread dump) and its
    garbled lines."""
    server = parse_debug_server_dump(text)
    procs, bad = server if server is not None else parse_pyspy_dump(text)
    if not procs:  # no py-spy output: a thread dump the program printed itself?
        own, own_bad = parse_thread_dump(text)
        if own:
            procs, bad = own, own_bad
    return procs, bad


PARALLEL_FILES = 2000
"""From this many files on, :func:`load_dumps` reads and parses them on every core
(:func:`hangdbg.parallel.fork_map`); below, forking costs more than it saves."""

_Packed = tuple  # a ParsedProcess as plain tuples (cheap to pickle back from a worker)
_FileResult = tuple[str, int, "list[ParsedProcess] | list[_Packed] | None"]


def _read_all(files: list[Path]) -> list[_FileResult]:
    """``(why unreadable, garbled lines, processes or None when not read)`` of each file, in
    order; on every core when there are many files."""
    n = cores() if len(files) >= PARALLEL_FILES else 1
    if n < 2:
        return _read_chunk(files, pack=False)
    size = -(-len(files) // n)
    chunks = [files[i:i + size] for i in range(0, len(files), size)]
    return [r for part in fork_map(_read_packed, chunks, n) for r in part]


def _read_packed(files: list[Path]) -> list[_FileResult]:
    return _read_chunk(files, pack=True)


def _read_chunk(files: list[Path], pack: bool) -> list[_FileResult]:
    out: list[_FileResult] = []
    for f in files:
        text, why = _read(f)
        if text is None:
            out.append((why, 0, None))
            continue
        procs, bad = _parse_text(text)
        out.append((why, bad, [_pack(p) for p in procs] if pack else procs))
    return out


def _pack(p: ParsedProcess) -> _Packed:
    """A process as plain tuples: pickling frozen dataclasses one by one was most of the cost of
    sending 50,000 of them back (the frames tuples stay shared, pickled once per chunk)."""
    return (p.pid, p.cmdline, p.python, tuple((t.thread_id, t.name, t.status, t.frames) for t in p.threads),
            p.error, p.header)


def _unpack(packed: _Packed, canonical: _Canonical) -> ParsedProcess:
    """:func:`_pack` undone; equal frames tuples of different workers become one object again
    (the analyzer groups stacks by identity first)."""
    pid, cmdline, python, threads, error, header = packed
    return ParsedProcess(pid, cmdline, python,
                         tuple(Thread(tid, name, status, canonical.one(frames)) for tid, name, status, frames in threads),
                         error, header)


class _Canonical:
    """One object per distinct frames tuple: looked up by identity (a worker's equal tuples arrive
    as one object: pickle keeps sharing), then by value once per distinct object."""

    def __init__(self) -> None:
        self._by_value: dict[tuple[Frame, ...], tuple[Frame, ...]] = {}
        self._by_id: dict[int, tuple[tuple[Frame, ...], tuple[Frame, ...]]] = {}  # keeps the key object alive

    def one(self, frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
        got = self._by_id.get(id(frames))
        if got is None:
            got = self._by_id[id(frames)] = (frames, self._by_value.setdefault(frames, frames))
        return got[1]


def _expand(p: Path) -> list[Path]:
    if not p.is_dir():
        return [p]
    d = p / "raw" if (p / "raw").is_dir() else p
    return sorted(
        (f for f in d.iterdir() if f.is_file() and not f.name.endswith(".json") and not f.name.startswith(".")),
        key=lambda f: f.name,
    )


MAX_DUMP_FILE = 64 << 20
"""Bytes of one saved dump file that are read (a file may hold many ranks' outputs; ``dump`` keeps
:data:`hangdbg.tools.pyspy.OUTPUT_CAP` of each rank's): the rest of a larger file is not read, and the
file is listed in ``stats.unreadable`` as cut. The parser's caps (threads per process, frames per
thread) keep what 64 MiB of any shape costs to a few hundred MiB."""


def _read(f: Path) -> tuple[str | None, str]:
    """The text of ``f`` (at most :data:`MAX_DUMP_FILE` bytes), or ``(None, reason)``."""
    try:
        with open_input(f) as fh:  # regular files only: a FIFO would block, /dev/zero never end
            data = read_capped(fh, MAX_DUMP_FILE)
    except OSError as exc:
        return None, exc.strerror or str(exc)
    if b"\x00" in data:
        return None, "binary data, not py-spy text output"
    if len(data) > MAX_DUMP_FILE:
        cut = data.rfind(b"\n", 0, MAX_DUMP_FILE)
        return data[:cut + 1 if cut >= 0 else MAX_DUMP_FILE].decode("utf-8", errors="replace"), \
            f"larger than {MAX_DUMP_FILE >> 20} MiB: only the first {MAX_DUMP_FILE >> 20} MiB were read"
    return data.decode("utf-8", errors="replace"), ""




def _int(value: str | None) -> int | None:
    """A number of a ``# hangdbg`` header (rank, world size, pid...); None when absent, not a
    number, or out of range (:func:`hangdbg.rankset.rank_number`: a garbled ``world_size=4294967296``
    must not make the analysis build a set of 4 billion ranks)."""
    return rank_number(value)


def _seconds(value: str | None) -> float | None:
    """A Unix time of a ``# hangdbg`` header (``unix=``, ``started=``: seconds); None when absent or
    not a finite positive number."""
    try:
        got = float(value) if value else None
    except ValueError:
        return None
    return got if got is not None and 0 < got < 1e11 else None


def _entry(proc: ParsedProcess, order: int, filename: str, alone: bool) -> _Entry:
    header = proc.header
    sample = _int(header.get("sample"))
    if sample is None:
        sample = sample_from_filename(filename)
    rank = _int(header.get("rank"))
    if rank is not None:
        return _Entry(proc, order, rank, header.get("rank_source") or "header", sample)
    rank = rank_from_filename(filename) if alone else None
    return _Entry(proc, order, rank, "file name" if rank is not None else "order", sample)


def _merge(entries: list[_Entry]) -> list[RankDump]:
    groups: dict[int, list[_Entry]] = {}
    for e in entries:
        if e.rank is not None:
            groups.setdefault(e.rank, []).append(e)
    by_pid: dict[tuple[str, int], int] = {}
    next_rank = max(groups, default=-1) + 1
    for e in entries:
        if e.rank is not None or is_launcher(e.proc.cmdline):
            continue  # `py-spy dump --subprocesses` of torchrun also shows torchrun itself
        pid = _pid(e.proc)
        key = (e.proc.header.get("host", ""), pid) if pid is not None else None
        if key is not None and key in by_pid:
            groups[by_pid[key]].append(e)
            continue
        groups[next_rank] = [e]
        if key is not None:
            by_pid[key] = next_rank
        next_rank += 1
    return [_dump(rank, groups[rank]) for rank in sorted(groups)]


def _pid(proc: ParsedProcess) -> int | None:
    return proc.pid if proc.pid is not None else _int(proc.header.get("pid"))


def _dump(rank: int, group: list[_Entry]) -> RankDump:
    return _one(rank, group[0]) if len(group) == 1 else _merged(rank, group)


def _merged(rank: int, group: list[_Entry]) -> RankDump:
    """The dump of a rank read several times (samples, or blocks of one pid)."""
    group = sorted(group, key=lambda e: (e.sample is None, e.sample or 0, e.order))
    samples: tuple[tuple[Thread, ...], ...] = tuple(e.proc.threads for e in group if e.proc.error is None)
    failed = [e.proc for e in group if e.proc.error is not None]
    # the last failure counts when no sample succeeded, or when the last sample found the process gone
    final = failed[-1] if failed and (not samples or _state(group[-1].proc) == DumpState.GONE) else None

    def last(values):
        found = [v for v in values if v not in (None, "")]
        return found[-1] if found else None

    headers = [e.proc.header for e in group]
    times = [_seconds(e.proc.header.get("unix")) for e in group if e.proc.error is None]
    return RankDump(
        rank=rank,
        pid=last(_pid(e.proc) for e in group),
        host=last(h.get("host") for h in headers) or "",
        local_rank=last([*(_local_rank_arg(e.proc.cmdline) for e in group), *(_int(h.get("local_rank")) for h in headers)]),
        world_size=last(_int(h.get("world_size")) for h in headers),
        local_world_size=last(_int(h.get("local_world_size")) for h in headers),
        threads=samples[-1] if samples else (),
        samples=samples,
        error=final.error if final is not None else None,
        state=_state(final) if final is not None else DumpState.OK,
        rank_source=group[-1].rank_source,
        cmdline=last(e.proc.cmdline for e in group) or "",
        python=last(e.proc.python for e in group),
        steps=tuple(dict.fromkeys(s for h in headers for s in (h.get("steps") or "").split(",") if s)),
        sample_times=tuple(t for t in times if t is not None) if None not in times else (),
        started=last(_seconds(h.get("started")) for h in headers),
    )


def _one(rank: int, e: _Entry) -> RankDump:
    """:func:`_dump` of a rank read once (most ranks): the same values, without the merging."""
    proc, h = e.proc, e.proc.header
    local_rank = _int(h.get("local_rank")) if "local_rank" in h else None
    if local_rank is None and "-local" in proc.cmdline:
        local_rank = _local_rank_arg(proc.cmdline)
    ok = proc.error is None
    return RankDump(
        rank=rank, pid=_pid(proc), host=h.get("host") or "", local_rank=local_rank,
        world_size=_int(h.get("world_size")) if "world_size" in h else None,
        local_world_size=_int(h.get("local_world_size")) if "local_world_size" in h else None,
        threads=proc.threads if ok else (), samples=(proc.threads,) if ok else (),
        error=None if ok else proc.error, rank_source=e.rank_source, cmdline=proc.cmdline, python=proc.python or None,
        steps=tuple(dict.fromkeys(s for s in (h.get("steps") or "").split(",") if s)), state=_state(proc),
        sample_times=(at,) if ok and (at := _seconds(h.get("unix"))) is not None else (), started=_seconds(h.get("started")),
    )


def _local_rank_arg(cmdline: str) -> int | None:
    """``--local_rank=0`` / ``--local-rank 0`` in a command line (the argument
    ``torch.distributed.launch`` and DeepSpeed's launcher pass): a *local* rank, never the rank."""
    m = _LOCAL_RANK_ARG.search(cmdline)
    return _int(m.group(1)) if m else None


_LOCAL_RANK_ARG = re.compile(r"(?:^|\s)--local[_-]rank(?:=|\s+)(\d{1,6})(?!\S)")


_GONE_MESSAGE = re.compile(r"process \d+ is gone\b")
""":func:`hangdbg.errors.gone_message`, at the start of an error or after a prefix such as a
retry's ``...; then ...``: how a raw file of a hangdbg without the header's ``state`` said so."""


def _state(proc: ParsedProcess) -> DumpState:
    """How the py-spy run of one block went: ``ok`` without an error; else the ``state`` of its
    ``# hangdbg`` header (``gone``; any other value: ``unreadable``); a block without one (a raw
    file of an older hangdbg, a plain py-spy text) is ``gone`` when its error is hangdbg's gone
    message, the one place where a state is read from an error's text."""
    if proc.error is None:
        return DumpState.OK
    said = proc.header.get("state")
    if said is not None:
        return DumpState.GONE if said == DumpState.GONE else DumpState.UNREADABLE
    return DumpState.GONE if _GONE_MESSAGE.search(proc.error) else DumpState.UNREADABLE
