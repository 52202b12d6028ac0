"""``hangdbg nccl split``: NCCL_DEBUG logs cut into one file per rank (the per-rank recipe).

The rank of each process comes from its init lines (``ncclCommInitRank ... rank R``); a process
whose rank is unknown gets ``HOST.PID.log``. Lines without a NCCL record (application prints,
tracebacks) go to the process named by a launcher prefix (``[rank3]:``), to the file's only
process, or continue a hard-wrapped record; the rest go to ``unattributed.log``. With a slice
pattern (``--split-on``, the ``csplit`` recipe) each rank's file is cut per slice.
Used by the CLI and on every node by ``hangdbg collect`` (logs are split where they lie).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...outdir import OutDir, make_dirs
from .grammar import _looks_cut, has_marker, line_prefix, records
from .scan import scan
from ...text.lines import iter_lines

__all__ = ["SplitResult", "split_logs"]


@dataclass(frozen=True)
class SplitResult:
    """What :func:`split_logs` wrote.

    Attributes:
        rows: one dict per process: ``rank``, ``host``, ``pid``, ``files`` (names in the output
            directory) and ``lines``.
        written: file name -> lines written.
        errors: ``(file, reason)`` for inputs that could not be read (the rest is split).
        records: NCCL records found (0: nothing was written).
    """

    rows: list[dict]
    written: dict[str, int]
    errors: list[tuple[str, str]]
    records: int


def split_logs(paths: list[str], out: OutDir, pattern: re.Pattern[str] | None = None) -> SplitResult:
    """Write one file per rank of the NCCL_DEBUG logs ``paths`` into ``out`` (created).

    Args:
        paths: log files (one interleaved job log, or ``NCCL_DEBUG_FILE=%h.%p`` files).
        out: output directory.
        pattern: a line matching it starts a new slice (files ``rankN.sliceK.log``).

    Returns:
        a :class:`SplitResult`; nothing is written when the logs hold no NCCL record.
    """
    errors: list[tuple[str, str]] = []
    log = scan(paths)
    if not log.records:
        return SplitResult([], {}, [], 0)
    make_dirs(out.path)
    names = _file_names(log)
    by_rank: dict[int, tuple[str, int]] = {}  # rank -> (host, pid) of its process
    for key, p in log.procs.items():
        for r in (p.launcher_rank, p.rank):
            if r is not None:
                by_rank.setdefault(r, key)
    writer = _Writer(out)
    slices: dict[tuple, int] = {}
    file_index: dict[str, int] = {}
    for fi, path in enumerate(log.files):
        file_index.setdefault(path, fi)
    for path in paths:
        path_fi = file_index.get(path)
        fi_procs = list(log._file_procs.get(path_fi, ())) if path_fi is not None else []
        only = fi_procs[0] if len(fi_procs) == 1 else None
        prev_key, prev_cut = None, False
        try:
            for _lineno, raw in iter_lines(path):
                text, rank, _ = line_prefix(raw)
                recs = records(text) if has_marker(raw) else []
                if pattern is not None and pattern.search(raw):
                    targets = ([_key(log, recs[0][0])] if recs else
                               [by_rank[rank]] if rank in by_rank else [only] if only else list(fi_procs))
                    for k in targets:
                        if k in log.procs:
                            slices[k] = slices.get(k, 0) + 1
                if recs:
                    if len(recs) == 1:
                        k = _key(log, recs[0][0])
                        writer.add(_target(names, k, slices, pattern), raw)
                    else:
                        for m, end in recs:
                            writer.add(_target(names, _key(log, m), slices, pattern), text[m.start():end])
                    last = recs[-1][0]
                    prev_key = _key(log, last)
                    prev_cut = _looks_cut(text[last.end():])
                    continue
                if rank is not None and rank in by_rank:
                    k = by_rank[rank]
                elif only is not None:
                    k = only
                elif prev_cut and raw.strip():
                    k = prev_key
                else:
                    k = None
                prev_cut = False
                writer.add(_target(names, k, slices, pattern) if k else "unattributed.log", raw)
        except OSError as exc:
            errors.append((path, exc.strerror or str(exc)))
    written = writer.close()
    rows = []
    for key, p in sorted(log.procs.items(), key=lambda kv: kv[1].sort_key):
        files = sorted(f for f in written if f == names[key] + ".log" or f.startswith(names[key] + ".slice"))
        rows.append({"rank": p.rank, "host": p.host, "pid": p.pid, "files": files,
                     "lines": sum(written[f] for f in files)})
    return SplitResult(rows, written, errors, log.records)


def _key(log, m) -> tuple[str, int]:
    key = (m.group("host"), int(m.group("pid")))
    if key not in log.procs:
        key = (log._unsplice_host(key[0], key[1]), key[1])
    return key


def _file_names(log) -> dict:
    """Process key -> file stem: ``rank0003`` (zero-padded), ``HOST.PID`` when the rank is unknown."""
    width = max((len(str(p.rank)) for p in log.procs.values() if p.rank is not None), default=1)
    names, used = {}, set()
    for key, p in sorted(log.procs.items(), key=lambda kv: kv[1].sort_key):
        stem = f"rank{p.rank:0{width}d}" if p.rank is not None else f"{_safe(p.host)}.{p.pid}"
        if stem in used:
            stem = f"{stem}.{_safe(p.host)}.{p.pid}"
        used.add(stem)
        names[key] = stem
    return names


def _safe(text: str) -> str:
    return re.sub(r"[^\w.\-]", "_", text) or "_"


def _target(names: dict, key, slices: dict, pattern) -> str:
    stem = names.get(key)
    if stem is None:
        return "unattributed.log"
    if pattern is None:
        return stem + ".log"
    return f"{stem}.slice{slices.get(key, 0):04d}.log"


class _Writer:
    """Buffered appends to many files without keeping them open (512 ranks -> 512 files)."""

    LIMIT = 64 * 1024

    def __init__(self, out: OutDir) -> None:
        self.out = out
        self.buf: dict[str, list[str]] = {}
        self.size: dict[str, int] = {}
        self.lines: dict[str, int] = {}
        self.started: set[str] = set()
        self.lost: set[str] = set()

    def add(self, name: str, line: str) -> None:
        self.buf.setdefault(name, []).append(line)
        self.lines[name] = self.lines.get(name, 0) + 1
        self.size[name] = self.size.get(name, 0) + len(line) + 1
        if self.size[name] > self.LIMIT:
            self._flush(name)

    def _flush(self, name: str) -> None:
        if name not in self.lost and not self.out.append_text(name, "\n".join(self.buf[name]) + "\n",
                                                     first=name not in self.started):
            self.lost.add(name)  # recorded as not saved (disk full, read-only); the counts stay right
        self.started.add(name)
        self.buf[name] = []
        self.size[name] = 0

    def close(self) -> dict[str, int]:
        for name in list(self.buf):
            if self.buf[name] or name not in self.started:
                self._flush(name)
        return dict(self.lines)


