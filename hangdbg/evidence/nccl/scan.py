"""The fast scan of NCCL_DEBUG logs: files -> a filled :class:`~hangdbg.evidence.nccl.grammar.NcclLog`.

Files are read in newline-aligned chunks of bytes. The standard collective lines - the bulk of a
big log - are told apart from the rest and aggregated per (process, communicator, collective)
without a Python object per line: by the optional C extension ``hangdbg.evidence.nccl._cscan``
(``setup.py``; ``HANGDBG_PURE=1`` turns it off), or else by one compiled bytes regex (``findall``)
and C-level ``Counter``/``dict`` operations, with the same acceptance (``tests/test_nccl_cscan.py``).
Chunks of big files are spread over the CPUs: worker threads with the C scan (it releases the GIL;
each thread reads its chunks into one buffer of its own, nothing is forked or pickled), worker
processes without it. Only the other lines go through the per-line parser (:meth:`NcclLog.line`),
in file order, in this thread; the totals of runs of chunks without other lines are applied once.
"""

from __future__ import annotations

import gc
import mmap
import importlib
import os
import re
import threading
from collections import Counter
from functools import partial
from itertools import compress, count
from operator import itemgetter, not_

from ...rankset import rank_number
from .grammar import NcclLog, has_marker
from .records import add_op, op_sig
from ...text.lines import iter_lines, open_input

__all__ = ["scan", "scan_path", "CHUNK", "C_CHUNK", "PARALLEL_MIN"]

CHUNK = 16 << 20
"""Bytes per chunk of the fast scan (the pure-Python one; the C scan takes :data:`C_CHUNK`)."""
C_CHUNK = 32 << 20
"""Bytes per chunk of the C scan: each chunk's keys are built and merged once (fewer chunks, less of
that), read into one buffer per thread (two threads: 64 MiB)."""
TAIL_WINDOW = 1 << 20
"""Bytes at the end of a chunk searched first for each key's last opCount (widened x4 as needed)."""
PARALLEL_MIN = 64 << 20
"""Files (in total) at least this big are scanned by worker processes."""

# pid, tid and device of at most 10 digits: a longer one is a garbled line (int() of >4300 digits raises)
_PREFIX = re.compile(r"^(?P<host>[^\s:\[\]()<>]+):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) \[(?P<dev>-?\d{1,10})\]$")
_HEAD = re.compile(r"^(?P<host>[^\s:\[\]()<>]+):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) \[(?P<dev>-?\d{1,10})\] NCCL INFO (?P<name>[A-Za-z]+)$")

# The fast scan: one match per physical line (every match starts at a "\n"). Alternative 1 is a
# standard collective line (head ending in the collective's name, opCount, comm pointer), whole
# up to the line end (a second record spliced onto it fails here); alternative 2 captures any
# other line whole, for the per-line parser.
# The host excludes what str regexes (_HEAD, RECORD) take for whitespace: \x1c-\x1f and non-ASCII
# (U+00A0, U+0085...); such lines go to the per-line parser, which finds the record after them.
_COLL_HEAD = rb"([^\s:\[\]()<>\x1c-\x1f\x80-\xff]+:\d+:\d+ \[\d+\] NCCL INFO [A-Z][A-Za-z]+): opCount "
_COLL_BODY = (rb" sendbuff \S+ recvbuff \S+ count \d+ datatype \d+ op \d+ root -?\d+ comm (0x[0-9a-fA-F]+ \[nranks=\d+\]) "
              rb"stream (?:0x[0-9a-fA-F]+|\(nil\))\r?(?=\n|\Z)")
# (head, comm) per line, ("", "") for any other line: what the counts need.
_FAST = re.compile(rb"\n(?:" + _COLL_HEAD + rb"[0-9a-fA-F]+" + _COLL_BODY + rb"|[^\n]*)")
# (head, opCount, comm): run on the end of a chunk only, for the last opCount of each key.
_FAST_OP = re.compile(rb"\n(?:" + _COLL_HEAD + rb"([0-9a-fA-F]+)" + _COLL_BODY + rb"|[^\n]*)")
# (head, opCount, count, datatype, op, root, comm pointer) of a standard collective line: the
# same acceptance as _FAST's first alternative, run on the end of each file only (:func:`_tail_ops`).
_TAIL_OP = re.compile(rb"(?:^|(?<=\n))" + _COLL_HEAD + rb"([0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (\d{1,20}) datatype (\d{1,10}) "
                      rb"op (\d{1,10}) root (-?\d{1,10}) comm (0x[0-9a-fA-F]+) \[nranks=\d+\] stream (?:0x[0-9a-fA-F]+|\(nil\))"
                      rb"\r?(?=\n|\Z)")
OPS_TAIL = 1 << 20
"""Bytes at the end of each file read again for the operations of the last opCounts (:func:`_tail_ops`)."""
OPS_TAIL_TOTAL = 64 << 20
"""At most this many bytes over all files (many per-rank files: less of each)."""


# --- the fast scan ----------------------------------------------------------------------------
def _ranges(size: int, path: str, chunk: int) -> list[tuple[int, int]]:
    """Newline-aligned byte ranges of about ``chunk`` bytes covering a file: each range ends after
    the first newline at or past ``start + chunk`` (read in pieces of 64 KiB: a line with no end
    costs no memory), or at ``size``."""
    out = []
    start = 0
    with open_input(path) as f:
        while start < size:
            end = start + chunk
            if end < size:
                f.seek(end)
                for piece in iter(partial(f.readline, 1 << 16), b""):
                    end += len(piece)
                    if piece.endswith(b"\n"):
                        break
                else:
                    end = size
            end = min(size, end)
            out.append((start, end))
            start = end
    return out


def _load_cscan():
    """The C scan (``hangdbg/evidence/nccl/_cscan.c``, built by setup.py when a compiler is there), or None
    when it is not built or ``HANGDBG_PURE=1`` asks for the pure-Python scan."""
    if os.environ.get("HANGDBG_PURE", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"{__package__}._cscan")
    except ImportError:
        return None


_cscan = _load_cscan()


def scan_path() -> str:
    """Which fast scan :func:`scan` uses: ``"c"`` (the ``hangdbg.evidence.nccl._cscan`` extension) or ``"python"``."""
    return "c" if _cscan is not None else "python"


def _scan_chunk(path: str, start: int, end: int) -> dict:
    """Scan one newline-aligned byte range: aggregated standard collective lines + other lines.

    Returns small data (picklable: the pure-Python scan runs in worker processes for big inputs).
    With the C extension (:func:`scan_path`), ``_cscan.scan`` walks the range once, read into this
    thread's buffer (no new pages per chunk; the GIL is released while reading and walking), and
    returns the same data as the Python code, which it replaces (``tests/test_nccl_cscan.py`` holds
    them equal).
    """
    if _cscan is not None:
        n = end - start
        buf = _chunk_buffer(n)
        with open_input(path) as f:
            if _read_at(f, start, memoryview(buf)[:n]) < n:
                raise ValueError("the file shrank while it was read")
        nlines, coll, lasts, other = _cscan.scan(buf, 0, n)
        return {"nlines": nlines, "coll": coll, "lasts": lasts, "other": other}
    return _scan_chunk_py(path, start, end)


_local = threading.local()  # each scanning thread's chunk buffer


def _chunk_buffer(n: int) -> bytearray:
    """A buffer of at least ``n`` bytes for one chunk, kept by this thread for its next chunks
    (sized up to a whole MiB: chunks differ by the length of a line; a chunk longer than two
    chunks, a line of hundreds of MB, gets one of its own)."""
    buf = getattr(_local, "buf", None)
    if buf is None or len(buf) < n:
        if n > 2 * C_CHUNK:
            return bytearray(n)
        buf = _local.buf = bytearray(-(-n // (1 << 20)) << 20 if n > 1 << 20 else n)
    return buf


def _read_at(f, start: int, view: memoryview) -> int:
    """Read ``len(view)`` bytes of ``f`` at offset ``start`` into ``view``: the count read (less at
    the end of the file)."""
    fd = f.fileno()
    got = 0
    while got < len(view):
        if hasattr(os, "preadv"):
            k = os.preadv(fd, [view[got:]], start + got)
        else:  # pragma: no cover - not Linux
            f.seek(start + got)
            k = f.readinto(view[got:]) or 0
        if k <= 0:
            break
        got += k
    return got


def _scan_chunk_py(path: str, start: int, end: int) -> dict:
    """The pure-Python :func:`_scan_chunk`.

    The file is mapped (no copy); every line of the range is one ``_FAST`` match starting at the
    newline before it. Counts come from ``Counter`` over the ``(head, comm)`` pairs; the last
    opCount of each pair from a second match over the end of the range only (widened until every
    pair is seen).
    """
    with open_input(path) as f:
        data: bytes | mmap.mmap
        if start == 0:
            data = b"\n" + f.read(end)
            pos, stop = 0, len(data)
        else:
            data = mmap.mmap(f.fileno(), end, access=mmap.ACCESS_READ)
            pos, stop = start - 1, end
        try:
            if stop > pos + 1 and data[stop - 1] == 10:  # the range's last newline ends its last line
                stop -= 1
            rows = _FAST.findall(data, pos, stop)
            nlines = len(rows)
            counts = Counter(rows)
            nother = counts.pop((b"", b""), 0)
            lasts = _lasts(data, pos, stop, nlines, counts)
            other = []
            if nother:
                lines = data[pos + 1:stop].split(b"\n")
                prev = -2
                for i in compress(count(), map(not_, map(itemgetter(0), rows))):
                    t = lines[i]
                    if i == prev + 1 or i == 0 or has_marker(t):
                        other.append((i, t))
                        prev = i
                del lines
        finally:
            if isinstance(data, mmap.mmap):
                data.close()
    return {"nlines": nlines, "coll": dict(counts), "lasts": lasts, "other": other}


def _lasts(data, pos: int, stop: int, nlines: int, counts: Counter) -> dict:
    """``(record prefix "host:pid:tid [dev]", comm) -> (index of its last line, opCount, collective)``.

    Matches only the end of the range (widened x4 until every pair of ``counts`` was seen), walking
    back from the last line: with hundreds of ranks interleaved, each one's last line is near the end.
    """
    need = {(h.rpartition(b" NCCL INFO ")[0], c) for h, c in counts}
    if not need:
        return {}
    window = TAIL_WINDOW
    while True:
        wpos = max(pos, stop - window)
        if wpos > pos:
            wpos = data.rfind(b"\n", pos, wpos)
            wpos = pos if wpos < 0 else wpos
        rows = _FAST_OP.findall(data, wpos, stop)
        base = nlines - len(rows)
        found: dict = {}
        for j in range(len(rows) - 1, -1, -1):
            h, op, c = rows[j]
            if not h:
                continue
            prefix, _, name = h.rpartition(b" NCCL INFO ")
            if (prefix, c) not in found:
                found[(prefix, c)] = (base + j, op, name)
                if len(found) == len(need):
                    return found
        if wpos == pos:
            return found
        window *= 4


def _scan_chunk_args(args: tuple) -> dict:
    """One chunk in a worker process (the pure-Python scan): the GC paused around it."""
    enabled = gc.isenabled()
    gc.disable()  # ~100k short-lived tuples per chunk, no cycles: collections only cost time
    try:
        return _scan_chunk_safe(args)
    finally:
        if enabled:
            gc.enable()


def _scan_chunk_safe(args: tuple) -> dict:
    """One chunk (in a thread with the C scan: the GC is paused by :func:`scan` itself)."""
    try:
        return _scan_chunk(*args)
    except (OSError, ValueError) as exc:  # the file shrank or vanished while being read
        return {"error": getattr(exc, "strerror", None) or str(exc)}


def scan(paths: list[str], split_on: re.Pattern[str] | None = None, workers: int | None = None,
         chunk: int | None = None) -> NcclLog:
    """Read NCCL_DEBUG logs into an :class:`NcclLog` (never raises for bad content).

    Args:
        paths: files (interleaved logs or ``NCCL_DEBUG_FILE=%h.%p`` files).
        split_on: a regex for ``--split-on``: a matching line starts a new slice (iteration); the
            per-line parser is used for the whole input then.
        workers: threads (C scan) or processes (pure-Python scan) for the fast scan (default: the
            CPUs available, used only for inputs of at least :data:`PARALLEL_MIN` bytes); 1 scans
            in this thread.
        chunk: bytes per chunk (default :data:`C_CHUNK` or :data:`CHUNK`; tests use small chunks
            to exercise chunk boundaries).

    Unreadable files are recorded in ``errors``.
    """
    log = NcclLog(split_on)
    sizes = []
    for path in paths:
        try:
            with open_input(path) as f:  # regular files only: a FIFO would block, /dev/zero never end
                sizes.append(os.fstat(f.fileno()).st_size)
        except OSError as exc:
            log.errors.append((path, exc.strerror or str(exc)))
            sizes.append(-1)
    if split_on is not None:
        for path, size in zip(paths, sizes):
            if size >= 0:
                _scan_lines(log, path)
        log.finish()
        return log
    total = sum(s for s in sizes if s > 0)
    if workers is None:
        try:
            workers = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover
            workers = os.cpu_count() or 1
        if total < PARALLEL_MIN:
            workers = 1
    enabled = gc.isenabled()
    gc.disable()  # millions of acyclic objects (records, the chunks' keys): collections only cost time
    try:
        _scan_files(log, paths, sizes, workers, chunk or (C_CHUNK if _cscan is not None else CHUNK))
    finally:
        if enabled:
            gc.enable()
    log.finish()
    return log


def _scan_files(log: NcclLog, paths: list[str], sizes: list[int], workers: int, chunk: int) -> None:
    """The fast scan of :func:`scan`: chunks in worker threads (the C scan releases the GIL: nothing
    is forked or pickled) or, for the pure-Python scan, worker processes; merged here in order."""
    from concurrent.futures import Executor, ThreadPoolExecutor  # noqa: PLC0415 - big inputs only (process pool: below)

    tasks: list[tuple[int, str, int, int]] = []  # (file index, path, start, end) of each chunk
    sizes_of: dict[int, int] = {}
    for path, size in zip(paths, sizes):
        if size < 0:
            continue
        fi = len(log.files)
        log.files.append(path)
        sizes_of[fi] = size
        try:
            tasks.extend((fi, path, s, e) for s, e in _ranges(size, path, chunk))
        except OSError as exc:
            log.errors.append((path, exc.strerror or str(exc)))
    ex: Executor | None = None
    if workers > 1 and len(tasks) > 1:
        if _cscan is not None:
            ex = ThreadPoolExecutor(workers)
        else:  # the pure-Python scan: worker processes (multiprocessing's import only on this path)
            from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415
            ex = ProcessPoolExecutor(workers)
    try:
        args = [t[1:] for t in tasks]
        one = _scan_chunk_safe if _cscan is not None else _scan_chunk_args
        results = ex.map(one, args) if ex else map(one, args)
        line0: dict[int, int] = {}
        failed: set[int] = set()
        fast: set[int] = set()  # files with standard collective lines (only counted by the fast scan)
        pend = None
        for (fi, path, s, _e), res in zip(tasks, results):
            if "error" in res or fi in failed:
                if fi not in failed:
                    log.errors.append((path, res["error"]))
                    failed.add(fi)
                continue
            if res["coll"]:
                fast.add(fi)
            first = line0.get(fi, 1)
            log._chunks.setdefault(fi, []).append((first, s))
            pend = _merge(log, fi, first, res, pend)
            line0[fi] = first + res["nlines"]
            log.lines_read += res["nlines"]
        if pend is not None:
            _flush(log, pend)
        for fi, nxt in line0.items():  # the line after each file's last, at its size: fetch() reads back from there
            if fi not in failed:
                log._chunks[fi].append((nxt, sizes_of[fi]))
    finally:
        if ex:
            ex.shutdown()
        _local.__dict__.pop("buf", None)  # this thread's, when it scanned
    tail = max(64 << 10, min(OPS_TAIL, OPS_TAIL_TOTAL // max(1, len(fast))))
    for fi in sorted(fast - failed):
        try:
            _tail_ops(log, fi, sizes_of[fi], line0[fi] - 1, tail)
        except OSError as exc:
            log.errors.append((log.files[fi], exc.strerror or str(exc)))


def _tail_ops(log: NcclLog, fi: int, size: int, nlines: int, window: int) -> None:
    """Re-read the last ``window`` bytes of file ``fi`` (``size`` bytes, ``nlines`` lines) for the
    operations of its standard collective lines (:data:`_TAIL_OP`: what the fast scan only counted):
    per communicator and opCount, each rank's type, count, datatype, reduction and root
    (:func:`~hangdbg.evidence.nccl.records.add_op`). The first opCount of each (process,
    communicator) in a window that does not start the file is dropped: the window may cut its
    group of operations (NCCL >= 2.12 gives a whole group one opCount)."""
    start = max(0, size - window)
    with open_input(log.files[fi]) as f:
        f.seek(start)
        data = f.read(size - start)
    if start:
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
    if data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        return
    first = nlines - data.count(b"\n")  # line number of the window's first line
    dropped: dict[tuple, int] = {}
    seen: dict[tuple, tuple] = {}  # (head, comm) -> (process, communicator, collective) or (None, None, None)
    pos = 0
    for m in _TAIL_OP.finditer(data):
        at = m.start()
        first += data.count(b"\n", pos, at)
        pos = at
        head, opb, countb, dt, redop, root, commb = m.groups()
        pcn = seen.get((head, commb))
        if pcn is None:
            h = _parse_head(log, head)
            if h is None:
                pcn = (None, None, None)
            else:
                p = log.proc(h[0], h[1], fi)
                pcn = (p, p.comms.get(commb.decode()), h[3])
            seen[(head, commb)] = pcn
        p, c, name = pcn
        if c is None:
            continue
        op, count = int(opb, 16), int(countb)
        if count > 1 << 62:
            continue  # garbage, as op_fields
        if start:
            low = dropped.setdefault((id(p), id(c)), op)
            if op == low:
                continue
        add_op(c, op, op_sig(name, count, int(dt), int(redop), int(root)), (fi, first),
               m.group(0).decode("utf-8", "replace").rstrip("\r"))


def _merge(log: NcclLog, fi: int, first: int, res: dict, pend: tuple | None) -> tuple:
    """Feed one chunk's result into ``log``: other lines through the per-line parser, in order;
    the aggregated collective lines are added to ``pend`` (returned), the running totals of the
    chunks since the last one with other lines, applied by :func:`_flush` before the next other
    line is parsed (and at the end): the same sequence of changes to ``log`` as applying each
    chunk's totals after its other lines, with the per-key work done once for the run of chunks."""
    if pend is not None and (pend[0] != fi or res["other"]):
        _flush(log, pend)
        pend = None
    if res["other"]:
        for head, _ in res["coll"]:  # register the processes first: spliced lines need their host names
            h = _parse_head(log, head)
            if h is not None:
                log.proc(h[0], h[1], fi)
        for i, t in res["other"]:
            log.line(fi, first + i, t.decode("utf-8", "replace").rstrip("\r"))
    if pend is None:
        pend = (fi, Counter(), {})
    merge = getattr(_cscan, "merge", None)
    if merge is not None:  # the same, without a Python loop per key
        merge(pend[1], pend[2], res["coll"], res["lasts"], first)
        return pend
    pend[1].update(res["coll"])
    lasts = pend[2]
    for key, (idx, op, name) in res["lasts"].items():
        lasts[key] = (first + idx, op, name)  # a later chunk's last line is later
    return pend


def _flush(log: NcclLog, pend: tuple) -> None:
    """Apply the aggregated collective lines of :func:`_merge`: ``(file index, Counter((head,
    comm)), {(prefix, comm): (line number, opCount, collective)})``."""
    fi, coll, lasts = pend
    for (head, comm), n in coll.items():
        h = _parse_head(log, head)
        if h is None:
            log.lines_skipped += n
            continue
        host, pid, dev, name = h
        p = log.proc(host, pid, fi)
        p.devs.add(dev)
        p.records += n
        log.records += n
        ptr, _, nr = comm.decode().partition(" [nranks=")
        log.collective(p, name, None, ptr, rank_number(nr[:-1], 1), None, None, n)
    for (prefix, comm), (lineno, op, name) in lasts.items():
        pm = _PREFIX.match(prefix.decode("utf-8", "replace"))
        if pm is None:
            continue
        p = log.proc(pm.group("host"), int(pm.group("pid")), fi)
        ptr = comm.decode().partition(" [nranks=")[0]
        log.last_collective(p, name.decode(), int(op, 16), ptr, (fi, lineno), None)


def _parse_head(log: NcclLog, head: bytes) -> tuple[str, int, int, str] | None:
    """``b"host:pid:tid [dev] NCCL INFO Name"`` -> ``(host, pid, dev, Name)``, None when it does
    not parse; each distinct head is parsed once per scan (``log._heads``)."""
    try:
        return log._heads[head]
    except KeyError:
        hm = _HEAD.match(head.decode("utf-8", "replace"))
        h = log._heads[head] = (hm.group("host"), int(hm.group("pid")), int(hm.group("dev")), hm.group("name")) if hm else None
        return h


def _scan_lines(log: NcclLog, path: str) -> None:
    """The per-line path (``--split-on``): every line through :meth:`NcclLog.line`."""
    fi = len(log.files)
    log.files.append(path)
    pat = log.split_on
    assert pat is not None  # the per-line path is taken for --split-on only
    try:
        for lineno, text in iter_lines(path):
            log.lines_read += 1
            if pat.search(text):
                log.flush()
                log.mark_slice(fi, text)
            log.line(fi, lineno, text)
    except OSError as exc:
        log.errors.append((path, exc.strerror or str(exc)))
    log.flush()
