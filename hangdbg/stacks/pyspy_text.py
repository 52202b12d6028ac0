"""Parse the text output of ``py-spy dump`` (py-spy 0.3/0.4, and older variants), no I/O.

Recognised, line by line (ANSI colour codes and trailing whitespace are ignored):

* ``Process 1984: /usr/bin/python3 -u train.py`` starts a process block, optionally followed by
  ``Python v3.11.7 (/usr/bin/python3.11)`` and, with ``--subprocesses``, ``Parent Process N: ...``
  and a separator line of dashes before each child.
* ``Thread 1984 (idle): "MainThread"`` starts a thread: a decimal OS thread id (py-spy >= 0.3.10)
  or a hex pthread id ``0x7F1A2B3C4700`` (older py-spy, macOS), a status ``idle``, ``active``,
  ``active+gil`` (``gil`` alone is read as ``active+gil``), and an optional quoted name that may
  itself contain spaces, quotes and parentheses.
* Indented ``function (file:line)`` / ``function (library)`` / ``0x7f.. (libc.so.6)`` lines are
  frames, innermost first; ``--locals`` adds ``Arguments:``/``Locals:`` sub-headers (older
  py-spy printed ``Arguments::``) and deeper-indented ``name: repr`` lines.
* ``Error: ...`` with ``Caused by:`` / ``Reason:`` / ``Stack backtrace:`` sections, and the
  one-line ``Permission Denied: ...``, make a process whose ``error`` is set.
* ``# hangdbg key=value ...`` lines (written by hangdbg's collector) describe the next block,
  which is one py-spy run: every error message and stack up to the next header or ``Process``
  line belongs to that one process. Without a header, each ``Error:`` after a stack starts a
  new process (the ``pgrep ... | xargs py-spy dump --pid`` recipe). Other ``#`` lines are
  comments.

Anything else is skipped and counted as garbled; parsing never raises. A thread deeper than
``MAX_FRAMES`` keeps its ``INNER_FRAMES`` innermost and ``OUTER_FRAMES`` outermost frames, the
frames in between are dropped and counted with the garbled lines (a runaway recursion made the
analysis and the report super-linear in the stack depth); a process keeps its first ``MAX_THREADS``
threads, the lines of the others are counted the same way.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Iterator

from ..model import Thread
from ..frames import Frame
from ..enums import ThreadStatus
from ..frames import is_python_file

__all__ = ["ParsedProcess", "parse_pyspy_dump", "rank_from_filename", "sample_from_filename", "MAX_FRAMES", "MAX_THREADS"]

INNER_FRAMES = 1536
"""Innermost frames kept of a deeper thread (where it waits)."""
OUTER_FRAMES = 512
"""Outermost frames kept of a deeper thread (its entry point: the training loop)."""
MAX_FRAMES = INNER_FRAMES + OUTER_FRAMES
MAX_THREADS = 1024
"""Threads kept of one process (in py-spy's order); the lines of the others are skipped and counted
with the garbled lines (a runaway output of 100,000s of one-frame threads took gigabytes)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PROCESS = re.compile(r"^Process (\d{1,20}):(?: (.*))?$")
_PYTHON = re.compile(r"^Python v(\S+)(?: \((.*)\))?$")
_PARENT = re.compile(r"^Parent Process \d+:")
_THREAD = re.compile(r"^Thread (0[xX][0-9a-fA-F]{1,32}|\d{1,20}) \(([a-z+]+)\)(?::\s*(.*))?$")
_SEPARATOR = re.compile(r"^-{3,}$")
_HEADER = re.compile(r"^# hangdbg(?:\s|$)")
_MAX_DIGITS = 9  # a longer line number is garbled text (and int() of over 4300 digits raises ValueError)
_LOCALS_HEADERS = ("Arguments:", "Arguments::", "Locals:", "Locals::")
_LOCAL = re.compile(r"^(\S+?):(?: (.*))?$")
_NATIVE_SOURCE_DIRS = ("/include/",)


@dataclass(frozen=True, slots=True)
class ParsedProcess:
    """One process block of a py-spy dump.

    Attributes:
        pid: from ``Process N:``; ``None`` when the text had no process line.
        cmdline: the command line py-spy printed, ``""`` when unknown.
        python: the interpreter version (``"3.11.7"``), ``None`` when not printed.
        threads: in py-spy's order; empty when ``error`` is set, except in a block of hangdbg's
            collector where py-spy printed stacks and then failed (e.g. a timeout).
        error: py-spy's error message with its ``Caused by`` reasons (no Rust backtrace),
            ``None`` on success.
        header: the ``# hangdbg key=value`` pairs that preceded the block (not hashed).
    """

    pid: int | None = None
    cmdline: str = ""
    python: str | None = None
    threads: tuple[Thread, ...] = ()
    error: str | None = None
    header: dict[str, str] = field(default_factory=dict, hash=False)


_INTERNED: dict[tuple, Frame] = {}
_INTERN_LIMIT = 200_000


def _frame(function: str, file: str, line: int | None, native: bool, locals_: list) -> Frame:
    """One Frame object per distinct frame (without locals), shared by every rank that has it:
    saves memory on large jobs and lets the analyzer bucket stacks by object identity."""
    if locals_:
        return Frame(function, file, line, native, tuple(locals_))
    key = (function, file, line, native)
    frame = _INTERNED.get(key)
    if frame is None:
        if len(_INTERNED) >= _INTERN_LIMIT:
            _INTERNED.clear()
        frame = _INTERNED[key] = Frame(function, file, line, native)
    return frame


class _Builder:
    """Mutable state of one process block while its lines are read."""

    def __init__(self, header: dict[str, str] | None) -> None:
        self.owned = header is not None  # opened by a "# hangdbg" header: one py-spy run
        self.header = header or {}
        self.pid: int | None = None
        self.cmdline = ""
        self.python: str | None = None
        # frames as read ([fn, file, line, native, locals] lists), or a thread body's frames
        # already built (:func:`_thread_body`)
        self.threads: list[tuple[int, str | None, ThreadStatus, list[list] | tuple[Frame, ...]]] = []
        self.error: str | None = None
        self.reasons: list[str] = []

    def build(self) -> tuple[ParsedProcess, int]:
        """The process, and how many frames of too deep threads were dropped."""
        dropped = 0
        for *_ignored, frames in self.threads:
            if len(frames) > MAX_FRAMES and isinstance(frames, list):
                dropped += len(frames) - MAX_FRAMES
                del frames[INNER_FRAMES:len(frames) - OUTER_FRAMES]
        threads = tuple(
            Thread(tid, name, status, frames if isinstance(frames, tuple) else
                   tuple(_frame(fn, fl, ln, nat, lc) for fn, fl, ln, nat, lc in frames))
            for tid, name, status, frames in self.threads
        )
        error = self.error
        if error is not None:
            reasons = [r for r in dict.fromkeys(self.reasons) if r and r not in error]
            if reasons:
                error = f"{error} Caused by: {'; '.join(reasons)}"
        elif self.owned and self.pid is None and not self.threads:
            error = "no py-spy output followed the hangdbg header"
        return ParsedProcess(self.pid, self.cmdline, self.python, threads, error, self.header), dropped


class _Parser:
    """The line-by-line state machine behind :func:`parse_pyspy_dump`."""

    def __init__(self) -> None:
        self.processes: list[ParsedProcess] = []
        self.garbled = 0
        self.cur: _Builder | None = None
        self.pending: dict[str, str] | None = None  # a hangdbg header waiting for its block
        self.frames: list[list] | None = None  # frames of the current thread; None: no thread
        self.locals_indent: int | None = None  # indent of the current Arguments:/Locals: line
        self.error_part: str | None = None  # "message", "caused" or "backtrace"

    def finish(self) -> None:
        if self.cur is not None:
            proc, dropped = self.cur.build()
            self.processes.append(proc)
            self.garbled += dropped
        self.cur, self.frames, self.locals_indent, self.error_part = None, None, None, None

    def start(self) -> _Builder:
        self.finish()
        self.cur, self.pending = _Builder(self.pending), None
        return self.cur

    def feed(self, raw: str) -> None:
        line = (_ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip()
        stripped = line.lstrip()
        if not stripped:
            return
        if len(line) > len(stripped):
            self.indented(stripped, len(line) - len(stripped))
        elif not (self.error_part is not None and self.error_section(stripped)):
            self.error_part = None
            self.top_level(stripped)

    def indented(self, text: str, indent: int) -> None:
        if self.error_part == "caused":
            assert self.cur is not None  # an error part is only set with a current process
            self.cur.reasons.append(_CAUSE_NUMBER.sub("", text))
        elif self.error_part is not None:
            pass  # Rust "Stack backtrace:" lines
        elif self.frames is None:
            self.garbled += 1
        elif text in _LOCALS_HEADERS and self.frames:
            self.locals_indent = indent
        elif self.locals_indent is not None and indent > self.locals_indent and (m := _LOCAL.match(text)):
            self.frames[-1][4].append((m.group(1), m.group(2) or ""))
        elif (frame := _parse_frame(text)) is not None:
            frames = self.frames
            frames.append(frame)
            self.locals_indent = None
            if len(frames) >= MAX_FRAMES + OUTER_FRAMES:  # amortized: one cut per OUTER_FRAMES frames
                del frames[INNER_FRAMES:INNER_FRAMES + OUTER_FRAMES]
                self.garbled += OUTER_FRAMES
        else:
            self.garbled += 1

    def thread_line(self, line: str) -> bool:
        """:meth:`feed` of a well-formed ``Thread`` line (no colour codes): what ``top_level``
        does with it, without trying the other line kinds first; False (nothing done) for any
        other line."""
        thread = _parse_thread_header(line.rstrip())
        if thread is None:
            return False
        self.error_part = None
        cur = self.cur
        if cur is None or cur.error is not None and not cur.owned:
            cur = self.start()
        self.add_thread(cur, thread)
        return True

    def add_thread(self, cur: _Builder, thread: tuple[int, str | None, ThreadStatus]) -> None:
        """Start ``thread`` in ``cur``; beyond :data:`MAX_THREADS` the thread and its lines are garbled."""
        self.locals_indent = None
        if len(cur.threads) >= MAX_THREADS:
            self.frames = None
            self.garbled += 1
            return
        self.frames = []
        cur.threads.append((*thread, self.frames))

    def error_section(self, text: str) -> bool:
        """Consume the column-0 lines that continue a py-spy error; False for other lines."""
        if text == "Caused by:":
            self.error_part = "caused"
        elif text == "Stack backtrace:":
            self.error_part = "backtrace"
        elif text.startswith("Reason:"):  # py-spy before anyhow (failure crate)
            assert self.cur is not None  # an error part is only set with a current process
            self.cur.reasons.append(text[len("Reason:"):].strip())
        else:
            return False
        return True

    def top_level(self, text: str) -> None:
        cur = self.cur
        if text.startswith("#"):
            if _HEADER.match(text):
                self.finish()
                if self.pending is not None:  # the previous header got no output
                    self.start()
                    self.finish()
                self.pending = _parse_header(text)
        elif m := _PROCESS.match(text):
            if cur is None or not cur.owned or cur.pid is not None or cur.threads:
                cur = self.start()
            cur.pid, cur.cmdline = int(m.group(1)), (m.group(2) or "").strip()
        elif (m := _PYTHON.match(text)) and cur is not None and cur.python is None and not cur.threads:
            cur.python = m.group(1)
        elif _PARENT.match(text) or _SEPARATOR.match(text):
            pass
        elif text.startswith(("Error:", "Permission Denied")):
            if cur is None or not cur.owned and (cur.threads or cur.error is not None):
                cur = self.start()
            msg = (text[len("Error:"):].strip() if text.startswith("Error:") else text) or "py-spy failed"
            if cur.error is None:
                cur.error = msg
            else:  # hangdbg's collector writes its diagnosis, then py-spy's own error
                cur.reasons.append(msg)
            self.frames, self.error_part = None, "message"
        elif (thread := _parse_thread_header(text)) is not None:
            if cur is None or cur.error is not None and not cur.owned:
                cur = self.start()
            self.add_thread(cur, thread)
        else:
            self.garbled += 1
            if text.startswith("Thread"):
                self.frames = None  # a broken thread header: its frames belong to no thread

    def close(self) -> tuple[list[ParsedProcess], int]:
        self.finish()
        if self.pending is not None:
            self.start()
            self.finish()
        return self.processes, self.garbled


def parse_pyspy_dump(text: str, deadline: float | None = None) -> tuple[list[ParsedProcess], int]:
    """Parse ``py-spy dump`` text output (py-spy 0.3/0.4 and older) into processes.

    Args:
        text (str): one dump, several dumps concatenated (``--subprocesses``, or one
            ``py-spy dump --pid`` per process appended to one file), possibly with
            ``# hangdbg ...`` header lines and py-spy error messages in between.
        deadline (float | None): a :func:`time.monotonic` time after which the lines not read
            yet are skipped and counted as garbled (the collector's per-rank time budget).

    Returns:
        ``(processes, garbled)``: the process blocks in order of appearance, and the number of
        lines skipped because they were not recognised (or were frames beyond ``MAX_FRAMES``
        of one thread). Thread blocks without a ``Process``
        line form one process with ``pid=None``; a ``# hangdbg`` header followed by nothing
        gives a process whose ``error`` says so; an empty text gives ``[]``.

    Raises:
        Nothing: garbled lines are skipped and counted.
    """
    if "\x1b" not in text and "#" not in text and (deadline is None or len(text) < _TIMED_BLOCKS_LIMIT
                                                   and time.monotonic() < deadline):
        fast = _by_thread_blocks(text, deadline)
        if fast is not None:
            return fast
    return _by_lines(text, deadline)


def _by_lines(text: str, deadline: float | None = None) -> tuple[list[ParsedProcess], int]:
    """:func:`parse_pyspy_dump` one line at a time (the reference the block parser must match)."""
    parser = _Parser()
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        if deadline is not None and not i & 0x1FFF and time.monotonic() > deadline:
            parser.garbled += len(lines) - i
            break
        parser.feed(raw)
    return parser.close()


_TIMED_BLOCKS_LIMIT = 1 << 20  # a longer text with a deadline is read line by line (checked as it goes)
_BODIES: dict[str, tuple[tuple[Frame, ...], int] | None] = {}
_BODIES_CHARS = 0
_BODIES_LIMIT = 64 << 20  # bytes of thread bodies kept, counted as characters plus _ENTRY_COST each (then the cache starts over)
_ENTRY_COST = 256  # bytes a cached body costs besides its characters (the str, the dict slot, the frames tuple): a
# million one-frame bodies once held 500 MB under a 64 Mi-character count


def _thread_body(body: str) -> tuple[tuple[Frame, ...], int] | None:
    """The frames of one thread's body (the indented lines after its ``Thread`` line) and the
    number of its garbled lines; None when the body holds a line at column 0 (not a plain thread
    body: the line-by-line parser must read it). Memoized on the body's text: thousands of ranks
    print the same stack, so each distinct stack is parsed once and its frames tuple is shared."""
    global _BODIES_CHARS
    try:
        return _BODIES[body]
    except KeyError:
        pass
    got: tuple[tuple[Frame, ...], int] | None = None
    if all(not line.strip() or line[0] in " \t" for line in body.splitlines()):
        parser = _Parser()
        parser.feed("Thread 0 (idle)")
        for line in body.splitlines():
            parser.feed(line)
        procs, garbled = parser.close()
        got = procs[0].threads[0].frames, garbled
    cost = len(body) + _ENTRY_COST
    if _BODIES_CHARS + cost > _BODIES_LIMIT:
        _BODIES.clear()
        _BODIES_CHARS = 0
    _BODIES[body] = got
    _BODIES_CHARS += cost
    return got


def _by_thread_blocks(text: str, deadline: float | None) -> tuple[list[ParsedProcess], int] | None:
    """:func:`parse_pyspy_dump` a block at a time: the lines before the first ``Thread`` line go
    through the line parser, each thread's header too, and each thread's body is looked up in
    :func:`_thread_body` (the result is the line parser's, which the tests check). None when a
    body is not plain (the caller parses the whole text line by line)."""
    parts = _thread_parts("\n" + text)
    parser = _Parser()
    for raw in next(parts).splitlines():
        parser.feed(raw)
    for i, part in enumerate(parts, 1):
        if deadline is not None and not i & 0x3F and time.monotonic() > deadline:
            parser.garbled += part.count("\n") + 1 + sum(p.count("\n") + 1 for p in parts)
            break
        head, _nl, body = part.partition("\n")
        cur = parser.cur
        if cur is not None and cur.error is None and len(cur.threads) >= MAX_THREADS and _is_thread(head):
            # a thread past the cap (what the line parser does with it, without caching its body)
            lines = body.splitlines()
            if any(line and line[0] not in " \t" and line.strip() for line in lines):
                return None
            parser.garbled += 1 + sum(1 for line in lines if line.strip())
            parser.frames = None
            continue
        got = _thread_body(body)
        if got is None:
            return None
        if not parser.thread_line("Thread " + head):
            parser.feed("Thread " + head)
        if parser.frames is None or parser.cur is None:  # a broken header: its body is garbled
            for raw in body.splitlines():
                parser.feed(raw)
            continue
        frames, garbled = got
        tid, name, status, _empty = parser.cur.threads[-1]
        parser.cur.threads[-1] = (tid, name, status, frames)
        parser.garbled += garbled
        parser.frames = None
    return parser.close()


def _thread_parts(text: str) -> Iterator[str]:
    """``text.split("\\nThread ")`` one part at a time (a million-thread text is not copied into a list)."""
    start = 0
    while (at := text.find("\nThread ", start)) >= 0:
        yield text[start:at]
        start = at + len("\nThread ")
    yield text[start:]


def _is_thread(head: str) -> bool:
    """Whether ``"Thread " + head`` is a well-formed thread header (a broken one is read by the line parser)."""
    return _parse_thread_header(("Thread " + head).rstrip()) is not None


def _parse_header(text: str) -> dict[str, str]:
    """``# hangdbg rank=3 host=n1`` -> ``{"rank": "3", "host": "n1"}`` (tokens without ``=`` dropped)."""
    pairs = (tok.partition("=") for tok in text[len("# hangdbg"):].split())
    return {k: v for k, sep, v in pairs if sep and k}


def _parse_thread_header(text: str) -> tuple[int, str | None, ThreadStatus] | None:
    """``Thread 1984 (active+gil): "Thread-1 (worker)"`` -> ``(1984, "Thread-1 (worker)", "active+gil")``."""
    m = _THREAD.match(text)
    if m is None:
        return None
    status = _STATUSES.get(m.group(2))
    if status is None:
        return None
    ident = m.group(1)
    tid = int(ident, 16) if ident[:2] in ("0x", "0X") else int(ident)
    name = m.group(3)
    if name is not None:
        name = name.strip()
        if name.startswith('"'):
            name = name[1:-1] if len(name) > 1 and name.endswith('"') else name[1:]
    return tid, name or None, status


_FRAME_TEXT: dict[str, tuple[str, str, int | None, bool]] = {}


def _parse_frame(text: str) -> list | None:
    """``fn (file:12)`` -> ``[fn, file, 12, native, []]``; None when there is no ``(location)``.

    Memoized on the line's text: a job's ranks print the same frame lines over and over.
    """
    hit = _FRAME_TEXT.get(text)
    if hit is not None:
        return [*hit, []]
    frame = _parse_frame_text(text)
    if frame is not None:
        if len(_FRAME_TEXT) >= _INTERN_LIMIT:
            _FRAME_TEXT.clear()
        _FRAME_TEXT[text] = tuple(frame[:4])
    return frame


def _parse_frame_text(text: str) -> list | None:
    if not text.endswith(")"):
        return None
    cut = text.rfind(" (")
    if cut < 0:
        return None
    function, location = text[:cut], text[cut + 2:-1]
    file, sep, line = location.rpartition(":")
    if sep and line.isascii() and line.isdigit():
        lineno: int | None = int(line) if len(line) <= _MAX_DIGITS else None  # garbled: no line number
    else:
        file, lineno = location, None
    return [function, file, lineno, _is_native(file, lineno), []]


def _is_native(file: str, line: int | None) -> bool:
    """Native unless ``is_python_file(file)``, or a script without extension with a line number.

    Console scripts such as ``torchrun`` or ``deepspeed`` print as ``<module> (torchrun:8)``: a
    file name without a dot that has a line number is Python, unless it lives in an
    ``/include/`` directory (C++ headers such as ``condition_variable``).
    """
    if is_python_file(file):
        return False
    if line is None:
        return True
    base = file.rsplit("/", 1)[-1]
    return "." in base or any(d in file for d in _NATIVE_SOURCE_DIRS)


def sample_from_filename(name: str) -> int | None:
    """The sample number in a dump file name, e.g. ``rank-0003.sample-2.txt`` -> 2.

    Args:
        name (str): a file name or path; only the last component is read.

    Returns:
        The number after ``sample`` (``sample2``, ``sample-2``, ``sample_2``, ``sample.2``),
        case-insensitive, or None. The form is the one hangdbg's collector writes.

    Raises:
        Nothing.
    """
    m = _SAMPLE.search(_basename(name))
    return int(m.group(1)) if m else None


def rank_from_filename(name: str) -> int | None:
    """The rank a dump file name states explicitly, or None.

    Only explicit patterns count, on the last path component with any ``sample-K`` part removed
    (case-insensitive):

    1. ``rank`` not preceded by a letter, then an optional ``-``, ``_`` or ``.`` and digits:
       ``rank-0003.txt`` (hangdbg's collector, ``rank-NNNN[.sample-K].txt``), ``rank3.txt``,
       ``rank_3.log``, ``rank.3.txt``, ``dump.rank12``, ``nccl_trace_rank_5`` (PyTorch's
       flight-recorder dump, ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank) -> 3, 3, 3, 3, 12, 5.
    2. PyTorch's dump-file numeric suffix: a name without extension ending in ``trace_N``
       (``fr_trace_7``, the rank appended to a custom ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``) -> 7.

    Any other number is not a rank: issue numbers (``accelerate-3104``), thread ids
    (``thread3293``), parallel sizes (``pp32``), GPU models (``h100``), ``c10``,
    ``exitcode-6``, pids. A number above 2**24 is garbage, not a rank.

    Args:
        name (str): a file name or path.

    Returns:
        The rank, or None when the name states none (the caller numbers such dumps by order
        and says the rank is unknown).

    Raises:
        Nothing.
    """
    base = _SAMPLE.sub("", _basename(name))
    m = _RANK.search(base) or _TRACE_SUFFIX.search(base)
    if m is None:
        return None
    rank = int(m.group(1))
    return rank if rank <= _MAX_RANK else None


def _basename(name: str) -> str:
    return str(name).replace("\\", "/").rsplit("/", 1)[-1]


_STATUSES = {"idle": ThreadStatus.IDLE, "active": ThreadStatus.ACTIVE, "active+gil": ThreadStatus.ACTIVE_GIL,
             "gil": ThreadStatus.ACTIVE_GIL}  # py-spy's words (src/stack_trace.rs status_str; `gil`: older py-spy)
_CAUSE_NUMBER = re.compile(r"^\d+:\s*")
_SAMPLE = re.compile(r"[._-]?sample[._-]?(\d+)", re.IGNORECASE)
_RANK = re.compile(r"(?<![a-z])rank[._-]?(\d{1,9})(?!\d)", re.IGNORECASE)
_TRACE_SUFFIX = re.compile(r"trace_(\d{1,9})$", re.IGNORECASE)
_MAX_RANK = 1 << 24
