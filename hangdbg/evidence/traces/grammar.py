"""Read the per-rank files of the ``tracer`` package (format v1) and compare the ranks.

Format v1 (see ``tracer/README.md``)::

    # tracer v1 host=node1 rank=3 pid=4242 start=2026-11-22T03:20:00Z argv=train.py --lr 1
        0.000123 > train:30 compute          <- a call: module:first line, qualified name
        0.000150 train.py:31 | acc = 0       <- a line: file basename:line | source
    #count train.py:31 1000                  <- count mode, at the end
    # tracer end elapsed=12.5                <- written by stop(); absent when the process died

A file whose process died may end in NUL padding (the tracer may write through a file mapping
that is truncated to its real length only by ``stop()``); NUL bytes are dropped.

Streaming: a file is read line by line, keeping only its last lines, its call sequence (as
small integers) and counts, so multi-GB traces are fine. Garbled lines are skipped and counted.
"""

from __future__ import annotations

import io
import math
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ...text.lines import MAX_LINE, open_input

__all__ = ["RankTrace", "Divergence", "read_trace", "divergence"]

_HEADER = re.compile(r"^# tracer v1 host=(\S*) rank=(\S*) pid=(\d+) start=(\S*) argv=(.*)$")
_CALL = re.compile(r"^\s*(\S+) > (\S+):(\d+) (.+)$")
_LINE = re.compile(r"^\s*(\S+) (\S+):(\d+) \|(?: (.*))?$")
_END = re.compile(r"^# tracer end elapsed=(\S+)$")


@dataclass(frozen=True, slots=True)
class RankTrace:
    """What one trace file says.

    Attributes:
        path: the file.
        rank: from the header (``None`` when it said ``na``).
        host, pid, start, argv: from the header.
        events: traced lines and calls.
        calls: the calls, in order, as ``module:line qualname`` strings.
        last_lines: the last lines (raw text, up to the requested number).
        ended: the tracer wrote its end line (the process stopped tracing normally).
        elapsed: seconds from the end line, else the last event's time (``None`` without timing).
        grep_count: lines matching the ``grep`` pattern, if one was given.
        garbled: lines that matched no form of the format.
        cut: the file ended in a line without its newline (SIGKILL while the line was being
            written); that line is left out of ``last_lines``.
        last_line: the last traced line (raw text), kept whatever ``last`` is; ``None`` when
            nothing was traced.
    """

    path: Path
    rank: int | None
    host: str
    pid: int | None
    start: str
    argv: str
    events: int
    calls: tuple[str, ...]
    last_lines: tuple[str, ...]
    ended: bool
    elapsed: float | None
    grep_count: int | None
    garbled: int
    cut: bool = False
    last_line: str | None = None

    @property
    def last_call(self) -> str | None:
        return self.calls[-1] if self.calls else None


def _float(text: str) -> float | None:
    """A finite number of seconds, else None (``inf``/``nan`` are no time: JSON cannot hold them)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _bounded_lines(f: io.TextIOWrapper) -> Iterator[str | None]:
    """The lines of ``f`` with their newline (the last one may lack it), None for a line longer
    than :data:`~.textlines.MAX_LINE` characters, whose rest is read and dropped."""
    while True:
        raw = f.readline(MAX_LINE)
        if len(raw) < MAX_LINE or raw.endswith("\n"):
            if raw:
                yield raw
                continue
            return
        while len(raw) == MAX_LINE and not raw.endswith("\n"):
            raw = f.readline(MAX_LINE)
        yield None


def read_trace(path: str | Path, last: int = 10, grep: re.Pattern[str] | None = None) -> RankTrace:
    """Read one trace file.

    Raises:
        OSError: the file cannot be read.
        ValueError: its first line is not a ``# tracer v1`` header.
    """
    path = Path(path)
    tail: deque[str] = deque(maxlen=max(0, last))
    calls: list[str] = []
    events = garbled = grepped = 0
    ended, elapsed, cut = False, None, False
    last_line: str | None = None
    with io.TextIOWrapper(open_input(path), encoding="utf-8", errors="replace") as f:
        first = f.readline(MAX_LINE).rstrip("\n")
        m = _HEADER.match(first)
        if m is None:
            raise ValueError(f"{path}: not a tracer v1 file (first line {first[:80]!r})")
        host, rank_text, pid, start, argv = m.groups()
        for raw in _bounded_lines(f):
            if raw is None:  # longer than MAX_LINE: the rest was skipped
                garbled += 1
                continue
            if not raw.endswith("\n"):
                # the file's last bytes without a newline: a line cut by SIGKILL while it was being
                # copied into the mapped file (the copy can stop at a page boundary), then padding
                if raw.replace("\0", "").strip():
                    cut = True
                break
            line = raw.rstrip("\n")
            if "\0" in line:
                line = line.replace("\0", "")
            if not line:
                continue
            if line.startswith("#"):
                if (e := _END.match(line)) is not None:
                    ended, elapsed = True, _float(e.group(1))
                elif not line.startswith("#count "):
                    garbled += 1
                continue
            if (c := _CALL.match(line)) is not None:
                calls.append(f"{c.group(2)}:{c.group(3)} {c.group(4)}")
                stamp = c.group(1)
            elif (ln := _LINE.match(line)) is not None:
                stamp = ln.group(1)
            else:
                garbled += 1
                continue
            events += 1
            last_line = line
            tail.append(line)
            if not ended:
                elapsed = _float(stamp) if stamp != "-" else elapsed
            if grep is not None and grep.search(line):
                grepped += 1
    rank = int(rank_text) if rank_text.isdigit() else None
    grep_count = grepped if grep is not None else None
    return RankTrace(path, rank, host, int(pid), start, argv, events, tuple(calls), tuple(tail), ended,
                     elapsed, grep_count, garbled, cut, last_line)


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the ranks' call sequences part.

    Attributes:
        common: how many calls every rank made in the same order.
        last_common: the last of those calls (``None`` if none).
        next_calls: per trace index, the call it made next (``None``: its trace ends there).
        behind: trace indexes whose trace ends at the divergence point (they never reached
            the next call the others made), the usual sign of the stuck or dead ranks.
    """

    common: int
    last_common: str | None
    next_calls: tuple[str | None, ...]
    behind: tuple[int, ...]

    @property
    def diverged(self) -> bool:
        return len(set(self.next_calls)) > 1


def divergence(traces: list[RankTrace]) -> Divergence:
    """The first traced call that not all ranks reached (common-prefix comparison)."""
    if not traces:
        return Divergence(0, None, (), ())
    seqs = [t.calls for t in traces]
    n = min(len(s) for s in seqs)
    i = 0
    while i < n and all(s[i] == seqs[0][i] for s in seqs):
        i += 1
    nxt = tuple(s[i] if i < len(s) else None for s in seqs)
    behind = tuple(k for k, c in enumerate(nxt) if c is None) if len(set(nxt)) > 1 else ()
    return Divergence(i, seqs[0][i - 1] if i else None, nxt, behind)
