"""The training logs' progress for ``hangdbg watch`` (:class:`LogProbe`): where the last line that
matches ``--log-pattern`` ends, read from the end of each log, and whether the logs can be trusted.

Rules (issue 31, "a stall is real"):

* **Progress is the last matching line, not the log's size.** With a pattern, each file's progress
  is the byte offset where its last complete matching line ends; a new matching line moves it,
  whatever else the job printed around it. The bytes appended since the last observation are
  scanned forward in 1 MiB blocks, at most :data:`LOG_SCAN_CAP` bytes per observation (no byte is
  skipped: a burst of warnings bigger than the cap is scanned over several observations); when
  the scan is behind, the last :data:`LOG_TAIL_CAP` bytes are searched backward too and a matching
  line there moves progress at once. A file seen for the first time is searched from its end
  only. Without a pattern, progress is the file's size.
* **A log that cannot be trusted is said and not used.** A ``--log`` that does not exist at the
  first observation (never created), that disappears (deleted), whose path now names another file
  (a new inode: replaced, rotated) or that shrank (truncated) gives a warning and leaves the log
  signal: the job may be writing where the watcher no longer reads, so its silence proves nothing.
  The watcher samples the stacks meanwhile (:attr:`LogProbe.blind`). Such a file is trusted again
  once it shows progress of its own (a new matching line, or without a pattern new bytes, after
  the watcher first read it): then the job writes there. A file that first appears in a glob after
  the start follows the same rule.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from dataclasses import dataclass, field
from typing import BinaryIO, Hashable, Literal

from ..text.lines import MAX_LINE, open_input

__all__ = ["LOG_SCAN_CAP", "LOG_TAIL_CAP", "LogProbe"]

LOG_SCAN_CAP = 64 << 20
"""Bytes of one log scanned forward at one observation (the rest waits for the next one)."""

LOG_TAIL_CAP = 16 << 20
"""Bytes read from the end of a log to find its last matching line (first sight, or a scan behind)."""

_BLOCK = 1 << 20
"""Bytes read at a time by the forward scan."""

_State = Literal["ok", "missing", "deleted", "replaced", "truncated", "late"]


@dataclass
class _File:
    ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file read
    scanned: int = 0  # bytes of complete lines examined
    last: int = -1  # pattern: where the last matching line ends (-1: none seen); else the size
    state: _State = "ok"
    baseline: int | None = None  # untrusted: the progress at the first read of the (new) file
    said: bool = False  # its trouble was warned about


@dataclass
class LogProbe:
    """Progress of the training logs (see the module docstring for the rules).

    Args:
        patterns: log files or glob patterns.
        match: with a regular expression, progress is where the last complete line that matches
            it (``re.search`` on its first :data:`~hangdbg.text.lines.MAX_LINE` bytes) ends; without,
            the size in bytes.
    """

    patterns: list[str]
    match: re.Pattern[str] | None = None
    warnings: list[str] = field(default_factory=list)
    """Warnings not yet taken (:meth:`take_warnings`)."""
    notes: list[str] = field(default_factory=list)
    """Other news (a log trusted again), not yet taken."""
    _files: dict[str, _File] = field(default_factory=dict)
    _started: bool = False
    _blind: bool = False

    @property
    def blind(self) -> bool:
        """At the last observation, some ``--log`` had no trusted file (missing, deleted, replaced,
        truncated or not yet moving): its silence proves nothing, watch the stacks."""
        return self._blind

    def take_warnings(self) -> tuple[list[str], list[str]]:
        """The warnings and notes gathered since the last call (and forget them)."""
        out = (self.warnings, self.notes)
        self.warnings, self.notes = [], []
        return out

    def files(self) -> list[str]:
        """The regular files the patterns name now."""
        return [f for p in self.patterns for f in self._hits(p)]

    @staticmethod
    def _hits(pattern: str) -> list[str]:
        hits = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        return [h for h in hits if os.path.isfile(h)]

    def progress(self) -> Hashable | None:
        """The progress of the trusted files (``((path, offset or size), ...)``), or None when no
        file is trusted; :attr:`blind` and the warnings are updated on the way."""
        first, self._started = not self._started, True
        values: list[tuple[str, int]] = []
        blind = False
        for pattern in self.patterns:
            is_glob = glob.has_magic(pattern)
            paths = self._hits(pattern) if is_glob else [pattern]
            if is_glob:  # a file of the glob seen before and gone now is a deleted one
                paths += [p for p in self._files if p not in paths and fnmatch.fnmatchcase(p, pattern)]
            trusted = False
            for path in dict.fromkeys(paths):
                value = self._read(path, first)
                if value is not None:
                    values.append((path, value))
                    trusted = True
            if not trusted:
                blind = True
                if is_glob and not paths and first:
                    self.warnings.append(f"--log {pattern}: no file matches it; watching the stacks until one shows progress")
        self._blind = blind
        return tuple(sorted(values)) or None

    def _read(self, path: str, first: bool) -> int | None:
        """The progress of ``path``, or None when it cannot be trusted (said once per trouble)."""
        t = self._files.get(path)
        if t is None:
            t = self._files[path] = _File(state="ok" if first else "late")
        try:
            f = open_input(path)
        except OSError as exc:
            if t.ident is None and t.state in ("ok", "late"):
                what = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc})"
                self._trouble(t, path, "missing", what)
            elif t.ident is not None:
                self._trouble(t, path, "deleted", "was deleted")
                t.ident = None
            return None
        with f:
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino)
            if t.ident is not None and ident != t.ident:
                self._trouble(t, path, "replaced", "now names another file (replaced or rotated)")
                t.ident = None
            elif t.ident is not None and st.st_size < (t.scanned if self.match is not None else t.last):
                self._trouble(t, path, "truncated", "shrank (truncated)")
                t.ident = None
            if t.ident is None:
                t.ident, t.scanned, t.last = ident, 0, -1
                self._first_read(f, t, st.st_size)
                if t.state != "ok":
                    t.baseline = t.last
            else:
                self._next_read(f, t, st.st_size)
        if t.state != "ok" and t.baseline is not None and t.last != t.baseline:
            self.notes.append(f"--log {path} shows progress again: trusted again")
            t.state, t.baseline, t.said = "ok", None, False
        return t.last if t.state == "ok" else None

    def _trouble(self, t: _File, path: str, state: _State, what: str) -> None:
        if t.state == "late" and state == "missing":
            return  # a file a glob named before it existed: nothing to say
        t.state, t.baseline = state, None
        if not t.said:
            self.warnings.append(f"--log {path} {what}: its silence is no stall; watching the stacks until it shows "
                                 "progress again")
            t.said = True

    def _first_read(self, f: BinaryIO, t: _File, size: int) -> None:
        if self.match is None:
            t.last = t.scanned = size
            return
        found, complete = self._tail(f, size)
        t.last = found if found is not None else -1
        t.scanned = complete

    def _next_read(self, f: BinaryIO, t: _File, size: int) -> None:
        if self.match is None:
            t.last = t.scanned = size
            return
        if size <= t.scanned:
            return
        behind = t.scanned + LOG_SCAN_CAP < size
        self._forward(f, t, size)
        if behind:  # more than one scan behind: the end may hold a newer matching line
            found, complete = self._tail(f, size)
            if found is not None and found > t.last:
                t.last, t.scanned = found, max(t.scanned, complete)

    def _forward(self, f: BinaryIO, t: _File, size: int) -> None:
        """Scan the complete lines after ``t.scanned``, at most :data:`LOG_SCAN_CAP` bytes."""
        limit = min(size, t.scanned + LOG_SCAN_CAP)
        f.seek(t.scanned)
        base = t.scanned  # the file offset of pending[0]
        pending = bytearray()
        while base + len(pending) < limit:
            block = f.read(min(_BLOCK, limit - base - len(pending)))
            if not block:
                break
            pending += block
            cut = pending.rfind(b"\n")
            if cut < 0:
                continue
            found = self._last_in(pending, cut + 1)
            if found is not None:
                t.last = base + found
            base += cut + 1
            del pending[:cut + 1]
        t.scanned = base

    def _tail(self, f: BinaryIO, size: int) -> tuple[int | None, int]:
        """(where the last matching complete line of the last :data:`LOG_TAIL_CAP` bytes ends, or
        None; where the last complete line ends)."""
        start = max(0, size - LOG_TAIL_CAP)
        f.seek(start)
        data = f.read(size - start)
        cut = data.rfind(b"\n")
        if cut < 0:
            return None, start
        first = 0 if start == 0 else data.find(b"\n") + 1  # the part before ends inside a line
        if first > cut:
            return None, start + cut + 1
        found = self._last_in(memoryview(data)[first:], cut + 1 - first)
        return (None if found is None else start + first + found), start + cut + 1

    def _last_in(self, data: bytearray | memoryview, end: int) -> int | None:
        """Where the last line of ``data[:end]`` (complete lines) that matches ends, or None."""
        assert self.match is not None
        raw = bytes(data[:end]) if not isinstance(data, bytes) else data
        while end > 0:
            start = raw.rfind(b"\n", 0, end - 1) + 1
            line = raw[start:min(end - 1, start + MAX_LINE)].decode("utf-8", "replace")
            if self.match.search(line):
                return end
            end = start
        return None

