"""Reading log files line by line, whatever wrote them.

Logs from a cluster are not clean text: launchers prefix every line (``[rank3]:``, mpirun's
``[1,3]<stdout>:``, torchrun's ``[default3]:``, Ray's ``(RayWorkerWrapper pid=N, ip=...)``,
``host [stderr] ``), terminals draw borders (``│ ``), loggers add timestamps, files end in CRLF or
carry bytes that are not UTF-8. :func:`iter_lines` streams a file of any size with decoding
errors replaced; :func:`strip_prefix` peels the launcher decorations off one line and keeps the
rank they name.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

__all__ = ["read_capped", "iter_files", "files_where", "iter_lines", "iter_lines_from", "iter_lines_where", "strip_ansi", "strip_ansi_bytes", "strip_prefix", "Prefix",
           "read_head", "HEAD_BYTES", "MAX_LINE", "NotRegularFile", "open_input", "capped_lines", "HeadTail"]

HEAD_BYTES = 64 * 1024
"""How much of a file :func:`read_head` returns (for sniffing a file's kind)."""

_CHUNK = 1 << 20

MAX_LINE = 1 << 20
"""Longest line (bytes) a reader is given: the rest of a longer line is skipped, never accumulated
(a file of NUL padding or ``/dev/zero`` is one endless line)."""


class NotRegularFile(OSError):
    """A path names a FIFO, a device, a socket or a directory where a file was expected: reading it
    could block forever (a FIFO) or never end (``/dev/zero``). ``strerror`` is "not a regular file"."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", path)

    def __str__(self) -> str:
        return str(self.strerror)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a file"


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for reading in binary mode, only when it is a regular file (symlinks followed).

    The file is opened non-blocking and checked with ``fstat`` on the open descriptor, so a FIFO
    never blocks the open and nothing can swap the file between the test and the read.

    Raises:
        NotRegularFile: a FIFO, device, socket or directory (an ``OSError``; callers list it as an
            unreadable file with the reason).
        OSError: the file cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(os.fspath(path), _kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise

def read_capped(f: BinaryIO, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of ``f`` (one more than the cap tells a larger file), without
    allocating ``cap`` bytes for a small file: the first read asks for the size ``fstat`` gives
    (a buffer of the cap for each of 100,000 small files cost 5x the reading itself), then reads
    on while the file turns out longer (it grew, or ``/proc`` says 0).

    Args:
        f: a file opened in binary mode (e.g. by :func:`open_input`).
        cap: the bytes wanted at most.
    """
    try:
        size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError, AttributeError):
        size = cap
    data = f.read(min(size, cap) + 1)
    while len(data) <= cap:
        more = f.read(min(cap + 1 - len(data), 1 << 20))
        if not more:
            break
        data += more
    return data


# One decoration at the start of a line. Applied repeatedly: "[rank3]:[2024-...] ..." has two.
_PREFIXES = re.compile(
    r"""(?:
        \s+                                                   # indentation
      | (?:\x1b|\#033)?\[\d{1,3}(?:;\d{1,3})*m                # ANSI colour (raw, syslog's #033, ESC lost)
      | [│┃|]\s?                                              # terminal borders
      | \[rank(?P<rank>\d+)\]:\s?                             # torch: [rank3]:
      | \[(?P<role>[A-Za-z_][\w-]*?)(?P<local>\d+)\]:\s?      # torchrun --tee: [default3]:
      | \[(?:\d+,)?(?P<mpirank>\d+)\]<(?:stdout|stderr)>:\s?   # mpirun --tag-output [1,3]<stdout>:, horovodrun
                                                            # [3]<stderr>: (horovod runner safe_shell_exec.py)
      | \((?:Worker_TP(?P<tp>\d{1,6})(?:_DCP\d{1,6})?(?:_EP\d{1,6})?|[\w.]+)\ pid=\d+(?:,\ ip=(?P<ip>[\w.:\-]+))?\)\s?
                                      # Ray: (RayWorkerWrapper pid=N, ip=..); vLLM V1's worker process (Worker_TP1 pid=N)
      | \S+\ \[(?:stdout|stderr)\]\ ?                         # host [stderr]
      | \[\d{4}-\d\d-\d\d\ \d\d:\d\d:\d\d,\d{3}\ [TDIWEFC]\ \d{1,10}\ \d{1,10}\]\s?  # Ray's C++ log: [%F %T,%e %L %P %t]
                                                            # (ray src/ray/util/logging.cc log_format_pattern_)
      | \[?\d{4}-\d\d-\d\d[T\ ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?\]?\s?  # ISO time (to the minute or finer)
      | \[\s*\+?\d+\.\d+\]\s?                                 # dmesg time [  12.345], dmesg -H delta [  +0.000844]
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Prefix:
    """What :func:`strip_prefix` found.

    Attributes:
        text: the line without its decorations.
        rank: the global rank a launcher prefix named (``[rank3]:``, ``[1,3]<stdout>:``), or None
            (also for a number of more than 9 digits, which no rank has). vLLM V1 names a worker
            process ``Worker[_DPd][_PPd][_TPd][_DCPd][_EPd]``, each part only for a group of more than
            one rank (vllm 0.11 v1/executor/multiproc_executor.py ``setup_proc_title_and_log_prefix``):
            a name without ``_DP``/``_PP`` is a tensor-parallel world, whose TP rank is the global rank.
        local_rank: the local rank of torchrun's ``[default3]:`` prefix, or None.
        host: the node address of Ray's ``(Worker pid=N, ip=10.0.0.5)`` prefix, or None.
    """

    text: str
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None


def strip_prefix(line: str) -> Prefix:
    """Remove launcher prefixes, borders, indentation and leading timestamps from ``line``.

    Args:
        line: one line without its line ending.

    Returns:
        a :class:`Prefix`; ``text`` is ``line`` itself when there was nothing to strip.
    """
    rank = local = host = None
    pos = 0
    while True:
        m = _PREFIXES.match(line, pos)
        if m is None or m.end() == pos:
            break
        if m.group("ip") is not None and host is None:
            host = m.group("ip")
        if m.group("rank") is not None:
            rank = _small(m.group("rank"))
        elif m.group("tp") is not None:
            rank = _small(m.group("tp"))
        elif m.group("mpirank") is not None:
            rank = _small(m.group("mpirank"))
        elif m.group("local") is not None:
            local = _small(m.group("local"))
        pos = m.end()
    return Prefix(line[pos:] if pos else line, rank, local, host)


def _small(digits: str) -> int | None:
    """The number of a prefix's digits, None beyond 9 of them (a garbled line: int() of over 4300
    digits raises ValueError)."""
    return int(digits) if len(digits) <= 9 else None


def iter_lines_from(stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` from a binary stream, 1-based, line endings removed.

    Reads in 1 MiB chunks (memory stays flat for files of any size); bytes that are not UTF-8
    are replaced with U+FFFD; ``\\r\\n`` and a trailing ``\\r`` are removed; a last line without
    a newline (a truncated file) is yielded too.
    """
    return iter_lines_where(stream, None)


_ANSI = re.compile(rb"(?:\x1b|#033)\[[0-9;?]{0,32}[A-Za-z]")
"""A terminal escape sequence (colour, cursor), raw or as syslog writes ESC (``#033[31m``): removed from the
lines read, wherever in a line it is."""


_ANSI_TEXT = re.compile(_ANSI.pattern.decode("ascii"))  # the same sequences, in decoded text


def strip_ansi(text: str) -> str:
    """``text`` without its terminal escape sequences (:data:`_ANSI`)."""
    return _ANSI_TEXT.sub("", text)


def strip_ansi_bytes(body: bytes) -> bytes:
    """``body`` without its terminal escape sequences (:data:`_ANSI`); ``body`` itself when it has none."""
    return _ANSI.sub(b"", body) if b"\x1b" in body or b"#033[" in body else body


RECORD_STARTS = re.compile(r"(?<=\S)\s+(?=\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d|\[rank\d{1,9}\]:|\[default\d{1,5}\]:"
                     r"|[\w.\-]{1,128}:\d{1,10}:\d{1,10} \[-?\d{1,6}\] |Traceback \(most recent call last\)|File \"[^\"]{1,300}\", line \d"
                     r"|\[[EWIF]\d{0,4} ?[\w.]{1,80}\.(?:cpp|cc|h|hpp):\d{1,6}\]"      # c10 / glog: [E ProcessGroupNCCL.cpp:719]
                     r"|\[\d{1,3}\] NCCL (?:INFO|WARN) "                              # NCCL without its host:pid:tid
                     r"|[\w./\-]{1,200}\.(?:cc|cu|h):\d{1,6} NCCL (?:INFO|WARN) "        # ... nor its [dev]: file.cc:N NCCL WARN
                     r"|NCCL (?:INFO|WARN) [\w./\-]{1,200}\.(?:cc|cu|h):\d{1,6} "        # NCCL INFO init.cc:1093 -> 1
                     r"|\((?:[\w.]{1,120} )?pid=\d{1,10}(?:, ?ip=[\w.:\-]{1,80})?\) "      # Ray's worker: (RayWorkerWrapper pid=N)
                     r"|\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] "  # dmesg -T
                     r"|\[ {0,6}\d{1,8}\.\d{6}\] "                                    # dmesg
                     r"|(?:ERROR|WARNING|CRITICAL|FATAL):\S"                         # Python logging's default format
                     r"|[\w.\-]{1,64}@[\w.\-]{1,64}:\S{0,200}[#$] "                    # a shell prompt
                     # torchelastic's failure block (elastic/multiprocessing/errors/error_handler + __init__.py)
                     r"|(?:Root Cause \(first observed failure\)|Failures|Other Failures):"
                     r"|\[\d{1,6}\]:\s{1,4}time\s{0,8}:|time\s{0,12}:\s\d{4}-|host\s{0,12}:\s|rank\s{0,12}:\s\d{1,9} \(local_rank"
                     r"|exitcode\s{0,12}:\s-?\d{1,4} \(pid|error_file\s{0,3}:\s|traceback\s{0,12}:\s"
                     r"|(?:srun|slurmstepd): error: )")
"""Where a record starts in a line that is several records a paste ran together (it lost its newlines): a
timestamp, a ``[rankN]:``, an NCCL header (whole, or from its ``[dev]`` or its ``file.cc:N``), Ray's worker prefix
``(Name pid=N, ip=...)``, a c10/glog header, a dmesg time, a Python logging level, a shell
prompt, a traceback's head or frame, a field or entry of torchelastic's failure block, Slurm's error prefix."""


def glued(body: bytes) -> bool:
    """True for a small paste that lost its newlines: at most 5 lines, one of 400 characters or more holding
    3 record starts (:data:`RECORD_STARTS`) or more."""
    if body.count(b"\n") > 5:
        return False
    return any(len(ln) >= 400 and len(RECORD_STARTS.findall(ln.decode("utf-8", "replace"), 0, 65536)) >= 3
               for ln in body.split(b"\n"))


def unglued(body: bytes) -> bytes:
    """``body`` (a :func:`glued` paste) with a newline before each record start."""
    text = body.decode("utf-8", "replace")
    return RECORD_STARTS.sub("\n", text).encode("utf-8")


def dedented_paste(body: bytes) -> bytes:
    """``body`` without the indentation every line with text shares (a code block's, at least 2 lines): the
    lines as the program wrote them; ``body`` itself when there is none. Blank lines stay (line numbers kept)."""
    lines = body.split(b"\n")
    text = [ln for ln in lines if ln.strip()]
    if len(text) < 2 or text[0][:1] not in (b" ", b"\t"):
        return body
    pad = text[0][:len(text[0]) - len(text[0].lstrip(b" \t"))]
    for ln in text[1:]:
        while pad and not ln.startswith(pad):
            pad = pad[:-1]
    if not pad:
        return body
    return b"\n".join(ln[len(pad):] if ln.strip() else ln for ln in lines)


QUOTE = re.compile(rb"^[ \t]{0,3}>(?:[ \t]|$)", re.M)
"""A Markdown / e-mail quote at the start of a line (``> ``): a paste quoted in an issue or a reply."""


def quoted(body: bytes) -> bool:
    """True when 90 % of the lines with text of ``body`` (at least 2) start with a quote (:data:`QUOTE`):
    a quoted paste, whose quotes every reader peels before it reads the lines."""
    text = [ln for ln in body.split(b"\n") if ln.strip()]
    return len(text) >= 2 and sum(1 for ln in text if QUOTE.match(ln)) >= 0.9 * len(text)


def iter_lines_where(stream: BinaryIO, needles: tuple[bytes, ...] | None,
                     on_skipped: Callable[[int, bytes], None] | None = None,
                     force: Callable[[], bool] | None = None) -> Iterator[tuple[int, str]]:
    """:func:`iter_lines_from`, but 1 MiB runs of whole lines that contain none of ``needles`` are not
    split into lines at all: ``on_skipped(line_count, data)`` gets them instead (line numbers of the
    lines yielded stay right). For readers that act on a few lines of a huge log (a watchdog line in
    2 GB of training output): the test is a C substring search per needle, not Python per line.

    Args:
        stream: a binary stream.
        needles: byte strings; a run containing any of them is yielded line by line (``None``:
            every run, which is :func:`iter_lines_from`).
        on_skipped: called with the number of lines and the bytes of each skipped run.
        force: when it returns True, the next run is yielded line by line whatever it holds (a
            reader in the middle of a multi-line block).
    """
    n = 0
    pending: list[bytes] = []  # chunks of a line longer than a chunk: joined once its newline comes
    held = 0  # bytes in pending
    unquote: bool | None = None  # decided on the first chunk: a small file (one chunk) that is a quoted paste
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        if unquote is None:
            unquote = len(chunk) < _CHUNK and quoted(chunk)
            if len(chunk) < _CHUNK and glued(chunk):  # a small paste that lost its newlines: records apart again
                chunk = unglued(chunk)
            if unquote:
                chunk = QUOTE.sub(b"", chunk)
            if len(chunk) < _CHUNK:
                chunk = dedented_paste(chunk)
        elif unquote:
            chunk = QUOTE.sub(b"", chunk)
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if held < MAX_LINE:  # beyond the cap, the rest of the line is dropped, not kept
                pending.append(chunk[:MAX_LINE - held])
                held += len(pending[-1])
            continue
        pending.append(chunk[:cut])
        body = b"".join(pending)
        pending = [chunk[cut + 1:]]
        held = len(pending[0])
        if needles is not None and not (force and force()) and not any(k in body for k in needles):
            count = body.count(b"\n") + 1
            n += count
            if on_skipped is not None:
                on_skipped(count, body)
            continue
        if b"\x1b" in body or b"#033[" in body:  # terminal colours: a C search per run, a regex only when there are some
            body = _ANSI.sub(b"", body)
        for raw in body.split(b"\n"):
            n += 1
            yield n, raw[:MAX_LINE].decode("utf-8", "replace").rstrip("\r")
    rest = b"".join(pending)
    if b"\x1b" in rest or b"#033[" in rest:
        rest = _ANSI.sub(b"", rest)
    if rest:
        yield n + 1, rest[:MAX_LINE].decode("utf-8", "replace").rstrip("\r")


def capped_lines(stream: BinaryIO, limit: int = MAX_LINE) -> Iterator[tuple[bytes, int]]:
    """Yield ``(line, dropped)`` from a binary stream (a pipe), the newline removed: each line cut to its
    first ``limit`` bytes, ``dropped`` the bytes of it left out (read and thrown away, never held).
    Memory stays at ``limit`` bytes whatever the stream sends (one 2 GB line included); a last line
    without a newline is yielded too.

    Args:
        stream: a binary stream (``readline(size)``).
        limit: bytes kept of one line (:data:`MAX_LINE`).
    """
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1], 0
            continue
        if len(line) <= limit:  # the end of the stream
            yield line, 0
            continue
        dropped = len(line) - limit
        while True:
            more = stream.readline(_CHUNK)
            if not more:
                break
            if more.endswith(b"\n"):
                dropped += len(more) - 1
                break
            dropped += len(more)
        yield line[:limit], dropped


class HeadTail:
    """The first ``head`` and the last ``tail`` bytes of a stream fed in pieces, the bytes in between
    counted in ``dropped`` (a node's stderr: its first lines and its last error are what a reason
    quotes). Memory stays at ``head + tail`` bytes.

    Args:
        head: bytes kept from the start.
        tail: bytes kept from the end.
    """

    def __init__(self, head: int, tail: int) -> None:
        self.head, self.tail = head, tail
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.head - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail += data
        if len(self._tail) > 2 * self.tail:  # trimmed now and then: amortized, never above 2x tail
            cut = len(self._tail) - self.tail
            self.dropped += cut
            del self._tail[:cut]

    def drain(self, stream: BinaryIO) -> None:
        """:meth:`feed` everything ``stream`` sends until its end (a reader thread's loop); an
        ``OSError`` (the pipe closed under it) ends it."""
        try:
            while chunk := stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16):
                self.feed(chunk)
        except (OSError, ValueError):
            return

    def text(self) -> str:
        """What was kept, decoded with replacement; a line ``[... N bytes dropped ...]`` where bytes were left out."""
        if len(self._tail) > self.tail:
            self.dropped += len(self._tail) - self.tail
            del self._tail[:len(self._tail) - self.tail]
        middle = f"\n[... {self.dropped} bytes dropped ...]\n" if self.dropped else ""
        return (bytes(self._head).decode("utf-8", "replace") + middle + bytes(self._tail).decode("utf-8", "replace"))


def iter_lines(path: str) -> Iterator[tuple[int, str]]:
    """:func:`iter_lines_from` on the file at ``path`` (:func:`open_input`: regular files only).

    Raises:
        OSError: the file cannot be opened or is not a regular file (:class:`NotRegularFile`);
            callers record it as an unreadable file.
    """
    with open_input(path) as f:
        yield from iter_lines_from(f)


def iter_files(path: str) -> Iterator[str]:
    """``path`` itself when it is a file, else every regular file below it, recursively, in sorted
    order; hidden files and directories (``.name``) are skipped, symlinked directories not followed
    (a symlink loop ends), FIFOs, devices and sockets below ``path`` never opened. A ``path`` named
    directly is yielded whatever it is: its reader lists a non-regular file with the reason.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(2, "no such file or directory", path)
    if not os.path.isdir(path):
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            full = os.path.join(root, name)
            if not name.startswith(".") and _is_regular(full):
                yield full


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def files_where(paths: list[str], accept: Callable[[str, bytes], bool]) -> list[str]:
    """Files named in ``paths`` as they are; in directories (:func:`iter_files`) the files whose
    name and first 64 KiB ``accept(name, head)`` takes (unreadable ones are left out).

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    out: list[str] = []
    for p in paths:
        if not os.path.isdir(p):
            out.extend(iter_files(p))
            continue
        for f in iter_files(p):
            try:
                head = read_head(f)
            except OSError:
                continue
            if accept(os.path.basename(f), head):
                out.append(f)
    return out


def read_head(path: str, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of a file (for content sniffing).

    Raises:
        OSError: the file cannot be opened or is not a regular file (:class:`NotRegularFile`).
    """
    with open_input(path) as f:
        return f.read(size)
