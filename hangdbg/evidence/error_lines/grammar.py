"""Lines to events: every error-looking line of a text file, looked up in the catalog.

A line is offered to the catalog when it looks like an error (:func:`hangdbg.catalog.message.looks_like_error`),
after its prefixes are peeled off (:func:`hangdbg.catalog.message.parse_line`). Lines that are code or
stack frames (``File "x.py", line 3``, ``    raise RuntimeError(...)``, ``frame #3: c10::Error...``,
``Exception raised from ...``) and the headers of a block whose last line says what failed
(``Traceback (most recent call last):``) are context, not errors. A large log gets its first pass from
``grep -F -i`` with the stems of error words (:mod:`hangdbg.tools.grep`); a small one is read whole.
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterator

from ...catalog.catalog import Catalog, Match, cuda_named
from ...catalog.message import ERROR_STEMS, Message, looks_like_error, parse_line
from ...model import Evidence
from .paste import double_spaced, repaired
from .tracebacks import FRAME, CutTraceback, cut_at_end, cut_header, traceback_at
from ...text.lines import MAX_LINE, RECORD_STARTS, iter_lines_from, open_input, strip_prefix
from ...tools.grep import find_grep, grep_lines
from .roster import NEEDLES, Roster
from .blocks import OpenBlock, opened
from .context import FILE_LINE, is_code, is_context_line
from .passed import passed_over
from .stall import stall_at, stall_in_tail
from .log import LOOKED_AT, ErrorEvent, ErrorLog

__all__ = ["ErrorEvent", "ErrorLog", "scan_file", "sniff", "is_context_line", "GREP_FROM_BYTES"]

_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "error", "critical", "fatal", "E", "F"})
"""Logger levels that make a line an error line whatever its words (Python logging's, glog's E and F)."""
_WORDY = re.compile(r"[A-Za-z]{3,40}[\W\d]{1,10}[A-Za-z]{2}")
_BENIGN_EXC = re.compile(r"(?:Warning|StopIteration|KeyboardInterrupt|SystemExit|GeneratorExit)$")
_PAD = re.compile(r"(?<=\S) {16,}(?=\S)")
_LEVEL = re.compile(r"\bWARN(?:ING)?\b|\bwarning\b|\[W\]|^W\d{4} ")
_JSON_START = re.compile(rb"\s*(?:\{|\[\s*[\[{\"\]])")


def sniff(head: bytes) -> bool:
    """True for a text file: no NUL byte in its first 8 KiB and not a JSON document (the flight
    recorder and hangdbg's documents have their own readers); a JSON Lines log (one object per line:
    a structured logger's, a container runtime's) is text read line by line."""
    if not head or b"\x00" in head[:8192]:
        return False
    return _JSON_START.match(head) is None or _json_lines(head)


def _json_lines(head: bytes) -> bool:
    """True when the first complete lines of ``head`` (2 to 4 of them) are each one JSON object (``{...}``): JSON
    Lines, not a JSON document (that opens with ``{`` alone, or is one line)."""
    lines = [ln.strip() for ln in head.split(b"\n")[:-1] if ln.strip()][:4]
    return len(lines) >= 2 and all(ln.startswith(b"{") and ln.endswith(b"}") for ln in lines)


GREP_FROM_BYTES = 1 << 20
"""Files of at least this size (bytes) get their first pass from ``grep -F -i`` when there is one
(:mod:`hangdbg.tools.grep`); smaller ones are read line by line here."""


def _candidates(path: str, log: ErrorLog, data: bytes | None) -> Iterator[tuple[int, str, bool]]:
    """``(line_number, line, every)`` of the lines of ``path`` that may be error lines; ``every``
    is True where every line of the file is given (a small file, whose bytes ``data`` are already
    read, or a large one without grep), not only those with an error stem."""
    if data is not None:
        for no, line in iter_lines_from(io.BytesIO(data)):
            log.lines_read += 1
            yield no, line, True
        return
    grep = find_grep()
    if grep is not None:
        with open_input(path) as f:  # regular files only (a FIFO would block grep)
            lines = 0
            while chunk := f.read(1 << 22):
                lines += chunk.count(b"\n")
            log.lines_read += lines
        for no, raw in grep_lines(grep, path, ERROR_STEMS, MAX_LINE):
            yield no, raw.decode("utf-8", "replace"), False
        return
    with open_input(path) as f:
        for no, line in iter_lines_from(f):
            log.lines_read += 1
            yield no, line, True


def _small_file(path: str) -> bytes | None:
    """The bytes of a file under :data:`GREP_FROM_BYTES` (an excerpt: read once, whole), None for a
    large one.

    Raises:
        OSError: the file cannot be opened.
    """
    if os.path.getsize(path) >= GREP_FROM_BYTES:
        return None
    with open_input(path) as f:
        return f.read()


def _last_line(body: bytes) -> int:
    """The number of the last non-empty line of an excerpt's bytes (its last line may be cut)."""
    body = body.rstrip(b"\r\n\t ")
    return body.count(b"\n") + 1 if body else 0


_LABELS = {"srun": re.compile(r" {0,4}(\d{1,5}): (?=\S)"), "pdsh": re.compile(r"([A-Za-z][\w.\-]{0,62}): ")}
"""A line's label, by kind (:func:`_labelled`): the task number of ``srun --label``, the host of pdsh/clush."""
_NOT_HOST = re.compile(r"(?i)^(?:error|warning|warn|info|debug|critical|fatal|note|hint|help|traceback|file|caused by|"
                       r"during handling|stderr|stdout|message|reason|status|exitcode|rank|host|time|msg)$"
                       r"|(?:Error|Exception|Warning|Exit|Interrupt|Failure)$")


def _labelled(body: bytes) -> str:
    """The label most lines of ``body`` start with: ``"srun"`` for ``srun --label``'s task number (``3: text``;
    the task id, SLURM_PROCID, which torch's env:// launch under srun uses as the global rank), ``"pdsh"``
    for pdsh's / clush's host (``node7: text``: pdsh(1) prefixes each line of remote output with the host
    name), ``""`` for neither. At least 4 labelled lines, 60 % of the non-empty ones; srun needs two
    numbers (or, from 2 lines, one number that a labelled line's own prefix names as its rank), pdsh a host seen 3
    times or more and no label that is a log level or an exception class."""
    lines = [ln.decode("utf-8", "replace") for ln in body.splitlines()[:4000] if ln.strip()]
    if not lines:
        return ""
    nums = [m.group(1) for ln in lines if (m := _LABELS["srun"].match(ln)) is not None]
    if len(nums) >= 4 and len(set(nums)) >= 2 and len(nums) >= 0.6 * len(lines):
        return "srun"
    if len(nums) >= 2 and len(nums) >= 0.6 * len(lines) and any(
            parse_line(ln[m.end():]).rank == int(m.group(1)) for ln in lines[:200] if (m := _LABELS["srun"].match(ln))):
        return "srun"  # one task's lines, its label confirmed by a rank its own line names (MPICH's [Rank N])
    hosts = [m.group(1) for ln in lines if (m := _LABELS["pdsh"].match(ln)) is not None]
    if len(hosts) >= 4 and len(hosts) >= 0.6 * len(lines) and max(hosts.count(h) for h in set(hosts)) >= 3 \
            and not any(_NOT_HOST.search(h) for h in set(hosts)):
        return "pdsh"
    return ""


_GLUED = re.compile(r"\s(?=(?:[a-z_]\w{0,40}\.){0,6}[A-Z]\w{0,80}(?:Error|Exception): \S)")


_BAR_END = re.compile(r"(?:it/s|s/it|B/s)\]|\d\d:\d\d<\?\]")  # a tqdm bar's end: "[05:07<06:48,  1.61it/s]"


def _unglued(cands: Iterator[tuple[int, str, bool]]) -> Iterator[tuple[int, str, bool]]:
    """The lines of a paste that lost its newlines split again: a line that starts as a frame of a
    traceback (``File "x.py", line 3, in f ...``) and goes on into an exception (``... DistBackendError:
    NCCL error ...``) is cut before each exception class, and the text a tqdm progress bar ran into
    (its ``\\r`` lost: ``... 1.61it/s]WARNING:torch...``) is cut from the bar; the pieces keep the line's number."""
    for no, whole, every in cands:
        for line in _records_of(whole):
            yield from _unglued_line(no, line, every)


_GLUED_LINE = 160
"""Characters of a line from which it is looked at as several records a paste ran together."""


def _records_of(line: str) -> list[str]:
    """A line that is several records run together (a paste that lost its newlines: three or more record
    starts - a timestamp, a ``[rankN]:``, an NCCL header, a c10/glog header, a dmesg time, a Python logging
    level, a shell prompt, a traceback's head or frame - in a line of
    :data:`_GLUED_LINE` characters or more) cut before each start; any other line as it is."""
    if len(line) < _GLUED_LINE:
        return [line]
    cuts = [m.end() for m in RECORD_STARTS.finditer(line, 0, 16 * LOOKED_AT)]
    cuts = [c for a, c in zip([0, *cuts], cuts) if not _PREFIX_ONLY.fullmatch(line[a:c].strip())]
    if len(cuts) < 2:
        return [line]
    return [line[a:b].rstrip() for a, b in zip([0, *cuts], [*cuts, len(line)])]


_PREFIX_ONLY = re.compile(r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[\d.,:]{0,12}Z?\]?|[\w.\-]{1,128}:\d{1,10}:\d{1,10} \[-?\d{1,6}\]")
"""A piece between two record starts that is only a prefix of the record after it (a timestamp, NCCL's
``host:pid:tid [dev]`` header): no record of its own, so no cut after it."""


def _unglued_line(no: int, line: str, every: bool) -> Iterator[tuple[int, str, bool]]:
    """:func:`_unglued` of one record."""
    bar = _BAR_END.search(line, 0, LOOKED_AT)
    if bar is not None and bar.end() < len(line) and line[bar.end():].strip():
        yield no, line[:bar.end()], every
        line = line[bar.end():]
    if not is_context_line(line[:LOOKED_AT]) or _GLUED.search(line, 0, LOOKED_AT) is None:
        yield no, line, every
        return
    cuts = [m.end() for m in _GLUED.finditer(line, 0, LOOKED_AT)]
    for a, b in zip([0, *cuts], [*cuts, len(line)]):
        yield no, line[a:b].rstrip(), every


def _after_unknown(log: ErrorLog, path: str, before: int) -> bool:
    """True when the last event is an unrecognised (or weakly read) error line of ``path`` at line ``before``: the
    only line a continuation can join (:func:`_wrapped`; a cheap test before a line is parsed for it)."""
    last = log.events[-1] if log.events else None
    return last is not None and (last.match is None or last.weak) and last.evidence.source == path \
        and last.evidence.line == before


def _was_event(log: ErrorLog, path: str, no: int) -> bool:
    """True when line ``no`` of ``path`` became the last event (recognised or not)."""
    last = log.events[-1] if log.events else None
    return last is not None and last.evidence.source == path and last.evidence.line == no


def _wrapped(log: ErrorLog, path: str, before: int, line: str, catalog: Catalog) -> bool:
    """True when ``line`` (indented, or bare: :func:`_bare`) continues the unrecognised error line just
    before it (``before``: the number of the last line with text), hard-wrapped by a terminal or a paste,
    and the two read together are a catalog message: that event is read again. An uncaught exception no entry
    knows takes the line into its message (up to :data:`_EXC_TEXT` characters) when the line is no message of
    its own."""
    last = log.events[-1] if log.events else None
    if last is None or (last.match is not None and not last.weak) or last.evidence.source != path \
            or last.evidence.line != before:
        return False
    text = f"{last.message.text} {line.strip()}".lstrip()  # an exception printed with an empty first line
    match = catalog.search(text)
    if match is None:
        if not (last.match is None and last.message.exception and len(text) <= _EXC_TEXT and
                not is_context_line(line) and catalog.search(parse_line(line).text) is None):
            return False
        match = None  # an exception's message that goes on over the next lines (a wrap, or written so)
    log.events[-1] = replace(last, message=replace(last.message, text=text), match=match, weak=False)
    return True


_EXC_TEXT = 600  # most characters an uncaught exception's message takes from the bare lines after it (_wrapped)


def _head_joined(catalog: Catalog, head: str, msg: Message) -> tuple[Message, Match] | None:
    """The message a soft wrap split before its error word: ``head`` (the text line just before, no event
    of its own) and the bare continuation ``msg`` read together (with a blank: the wrap fell between two
    words; without: inside one) when that is a catalog message and neither part is one alone. The message
    keeps the head's prefixes (its time, host and rank)."""
    if is_context_line(head) or FILE_LINE.match(head):
        return None
    top = parse_line(head)
    if not top.text or catalog.search(top.text) is not None:
        return None
    for text in (f"{top.text.rstrip()} {msg.text.strip()}", f"{top.text.rstrip()}{msg.text.strip()}"):
        if (match := catalog.search(text)) is not None:
            return replace(top, text=text), match
    return None


def _settled(catalog: Catalog, msg: Message, match: Match | None, error: bool) -> tuple[Message, Match | None, bool]:
    """The message with the rank its entry names (:func:`_field_rank`), and for an error line no lookup read the
    entry whose message is glued inside it (:meth:`Catalog.match_inside`), else the entry whose long start it
    shares (:meth:`Catalog.match_head`, then ``weak``: a wrap may still join it)."""
    if match is None and error and (inside := catalog.match_inside(msg.text)) is not None:
        return _field_rank(msg, inside), inside, False  # a message glued behind other text (interleaved writes)
    if match is None and error and (head := catalog.match_head(msg.text)) is not None:
        return msg, head, True
    return _field_rank(msg, match), match, False


def _field_rank(msg: Message, match: Match | None) -> Message:
    """``msg`` with the rank its entry's ``rank_field`` placeholder captured (mp.spawn's process index) when its
    prefixes gave none."""
    i = match.entry.rank_field if match is not None and msg.rank is None else None
    f = match.fields[i].strip() if match is not None and i is not None and i < len(match.fields) else ""
    return replace(msg, rank=int(f)) if f.isdigit() and len(f) <= 7 else msg


def _bare(line: str) -> bool:
    """True for a line with nothing to peel (no time, host, rank or level prefix): a continuation
    candidate for :func:`_wrapped` even when a paste lost its indentation."""
    msg = parse_line(line)
    return bool(line.strip()) and line.strip().startswith(msg.text[:60]) and msg.rank is None and msg.host is None \
        and msg.time is None  # nothing peeled at its start (a closing quote may go at its end)


def _unpadded(text: str, catalog: Catalog) -> tuple[str, Match | None]:
    """``text`` without the runs of blanks a terminal's wrap leaves when pasted (``... after 600s w``
    + 200 blanks + ``hile trying ...``): the wrap fell inside a word (joined) or between two (one
    blank); the reading the catalog knows wins (with its match), else the one with a blank (None)."""
    joined = _PAD.sub("", text.rstrip())
    match = catalog.search(joined)
    return (joined, match) if match is not None else (_PAD.sub(" ", text.rstrip()), None)


_POD_NODE = re.compile(rb"^Node:\s+([A-Za-z0-9][\w.\-]{0,252})(?:/[0-9A-Fa-f.:]{2,45})?[ \t]*\r?$", re.M)


def _pod_node(body: bytes) -> str | None:
    """The node of a ``kubectl describe pod`` output (its ``Name:`` / ``Namespace:`` head and ``Node:
    NAME/IP`` field): the host of the pod's messages (an eviction, a container's exit)."""
    head = body[:8192]
    if not head.lstrip().startswith(b"Name:") or b"\nNamespace:" not in head:
        return None
    m = _POD_NODE.search(head)
    return m.group(1).decode("ascii", "replace") if m is not None else None


def _first_of_block(log: ErrorLog, path: str, gap: int = 1) -> None:
    """Move the last event before the events of the lines just above it (a block of adjacent lines
    of ``path``: ``DistBackendError: NCCL error ...`` / ``ncclInvalidArgument: ...`` / ``Last error:``),
    keeping the order numbers in place."""
    ev = log.events
    i = len(ev) - 1
    while i > 0 and ev[i - 1].evidence.source == path and (ev[i].evidence.line or 0) - (ev[i - 1].evidence.line or 0) <= 2 * gap:
        i -= 1
    if i < len(ev) - 1:
        orders = [e.order for e in ev[i:]]
        moved = [ev[-1]] + ev[i:-1]
        ev[i:] = [replace(e, order=o) for e, o in zip(moved, orders)]


def _shape(path: str, catalog: Catalog) -> tuple[bytes | None, int, str, int, str | None]:
    """What the whole of a small file says about its lines: its bytes (colours removed; None for a large
    file), its last line's number (an excerpt's may be cut where the paste ended), the label most lines
    carry (:func:`_labelled`), the gap between lines that belong together (2 in a double-spaced paste)
    and the node of a ``kubectl describe pod`` (:func:`_pod_node`).

    Raises:
        OSError: the file cannot be opened.
    """
    data = _small_file(path)
    if data is None:
        return None, 0, "", 1, None
    data = repaired(data, catalog)
    return (data, _last_line(data), _labelled(data.rstrip(b"\r\n\t ")), 2 if double_spaced(data) else 1,
            _pod_node(data))


_REDACTED = re.compile(r"\s?(?:\(\.\.\.\)|\[\.\.\.\]|<\.\.\.>|\.\.\.|…|\b[xX]{3,}\b|\*{3,}|<(?:redacted|hidden|removed|"
                       r"masked|ip|hostname|host|node|user|path)>|\[(?:redacted|hidden|removed|masked)\])", re.I)
"""What a paste puts where it hid a value (an address, a host, a path): ``node (...)``, ``xxx``, ``<redacted>``. A
message that no entry matches is looked up again up to it (:meth:`Catalog.match_hidden`)."""


_ENUM_NUMBER = re.compile(r"\b(?P<enum>CUresult|cudaError|cuda driver error)(?:_t)?\b[^\d\n]{0,24}?(?P<n>\d{1,4})\b", re.I)
"""A CUDA error printed as its enum's number, not its name (``[torch_memory_saver.cpp] CUresult error result=2``,
``cudaError_t 700``): looked up by value among the CUresult / cudaError names (``include/cuda.h``,
``include/driver_types.h``, which give both enums the same values)."""
_ENUM_FAMILY = {"curesult": "cuda.curesult", "cudaerror": "cuda.cudaerror", "cuda driver error": "cuda.curesult"}
_API_RETURN = re.compile(r"\b(?:return(?:ed)? (?:value|code|status)|error(?: code)?|status) (?P<n>\d{1,4}) (?:from|in|of) "
                         r"['\"`]?(?P<api>cu(?:da)?)[A-Z]\w{1,60}\(", re.I)
"""A CUDA call's return value printed as a number after the call's name (``Return value 46 from
'cudaStreamCreate(&kernel_stream)'``): a runtime API call (``cuda*``) returns a cudaError_t, a driver API call
(``cu*``) a CUresult; looked up like :data:`_ENUM_NUMBER`."""


_LOCAL_AND_RANK = re.compile(r"\s*\[[A-Za-z_][\w-]*?(\d{1,6})\]:\s?\[rank(\d{1,9})\]:")
"""torchrun's ``--tee`` prefix ``[{role_name}{local_rank}]:`` (torch/distributed/run.py ``--local-ranks-filter``
/ ``--log-line-prefix-template`` default) followed by the ``[rank{N}]:`` that torch puts before an uncaught
exception's lines (torch/distributed/elastic/multiprocessing/errors/__init__.py): the same process wrote both."""


@dataclass
class _Tally:
    """What the lines of one file say together: how often each occurs, how many repeat the line with text
    before them (a logger with two handlers writes each twice in a row), and which global rank each torchrun
    local rank is (:data:`_LOCAL_AND_RANK`)."""

    seen: Counter[str] = field(default_factory=Counter)
    repeats: int = 0
    last_text: str = ""
    local_to_rank: dict[int, set[int]] = field(default_factory=dict)
    ib_hca: Evidence | None = None
    no_ib: Evidence | None = None

    def pair(self, line: str) -> None:
        if "]:[rank" in line and (both := _LOCAL_AND_RANK.match(line)) is not None:
            self.local_to_rank.setdefault(int(both.group(1)), set()).add(int(both.group(2)))

    def nccl_ib(self, path: str, no: int, line: str) -> None:
        """Note NCCL's ``NCCL_IB_HCA set to %s`` and ``NET/IB : No device found.`` INFO lines (NCCL
        src/transport/net_ib/init.cc: the HCAs the environment names, then none usable)."""
        if "NCCL_IB_HCA set to" in line and self.ib_hca is None:
            self.ib_hca = Evidence(path, no, line)
        if "NET/IB : No device found" in line and self.no_ib is None:
            self.no_ib = Evidence(path, no, line)

    def count(self, line: str) -> None:
        self.seen[line] += 1
        if line.strip():
            self.repeats += line == self.last_text
            self.last_text = line


def _rank_by_local(log: ErrorLog, first: int, local_to_rank: dict[int, set[int]]) -> None:
    """Give a global rank to the events (from index ``first`` on) that carry only torchrun's local rank.

    A file whose lines pair ``[defaultN]:`` with ``[rankM]:`` says which global rank each local rank is; the
    pairing is used only where it is one-to-one in the file (a file that merges several nodes' output pairs
    one local rank with several global ranks, and then says nothing).
    """
    ranks = [next(iter(r)) for r in local_to_rank.values() if len(r) == 1]
    if not local_to_rank or len(ranks) != len(set(ranks)):
        return
    by_local = {n: next(iter(r)) for n, r in local_to_rank.items() if len(r) == 1}
    for i in range(first, len(log.events)):
        msg = log.events[i].message
        if msg.rank is None and msg.local_rank is not None and msg.local_rank in by_local:
            log.events[i] = replace(log.events[i], message=replace(msg, rank=by_local[msg.local_rank]))


_LAUNCHER_NAMED = re.compile(r"(?:mpirun|mpiexec|orterun|prterun|prun|oshrun) |MPI_ABORT was invoked ")
"""A launcher's line that starts with its own name, the ``%s`` of its help text (Open MPI's orterun, PRRTE's prterun
print argv[0]'s basename first: ``mpirun has exited due to process rank %s ...``), or Open MPI's ``MPI_ABORT`` report
(a name the first-word index cannot key): looked up in every entry, those that start with a placeholder too (a line
with no error word otherwise only meets the indexed ones)."""


def _lookup(catalog: Catalog, msg: Message, error: bool, last: bool, joined: Match | None) -> Match | None:
    """The catalog entry of a line's message: by the code printed with it, anywhere in an error line (``search``), then as the excerpt's
    cut last line, the exception class with its text, or up to a value the paste hid; a line without an error
    word only when it starts like a known message."""
    if msg.src and (coded := catalog.match_code(msg.src, msg.text)) is not None:
        return coded  # a message printed with its code (Ascend CANN's EI0006): the code decides
    if not error:
        renamed = cuda_named(msg.text)  # a ROCm build's CUDA message (the text itself when it names no HIP)
        return catalog.match(msg.text, indexed_only=True) \
            or (catalog.match(renamed, indexed_only=True) if renamed != msg.text else None) \
            or (catalog.match(msg.text) if _LAUNCHER_NAMED.match(msg.text) else None) \
            or (catalog.match_cut(msg.text) if last else None)
    match = joined or catalog.search(msg.text) or (catalog.match_cut(msg.text) if last else None)
    if match is None and msg.exception and msg.text != msg.exception:  # an entry for the class itself
        match = catalog.match(f"{msg.exception}: {msg.text}")
    if match is None and (red := _REDACTED.search(msg.text)) is not None:
        match = catalog.match_hidden(msg.text[:red.start()])  # the message up to what the paste hid
    if match is None and (num := _ENUM_NUMBER.search(msg.text)) is not None:
        match = catalog.by_code(_ENUM_FAMILY[num.group("enum").lower()], int(num.group("n")))
    if match is None and (call := _API_RETURN.search(msg.text)) is not None:
        match = catalog.by_code("cuda.cudaerror" if call.group("api") == "cuda" else "cuda.curesult", int(call.group("n")))
    return match


def scan_file(path: str, catalog: Catalog, log: ErrorLog) -> None:
    """Add the error lines of ``path`` to ``log``.

    Every line of a small file is offered to the catalog (an upstream message need not hold an
    error word: ``Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 10`` after
    ``Last error:``); a line that is not error-looking counts only when an entry of severity
    above ``info`` matches it. The source line after a traceback's ``File "...", line N`` is code.

    Raises:
        OSError: the file cannot be opened (the reader lists it with the reason).
    """
    before, said = log.error_lines, len(log.roster.said) + len(log.roster.missing)
    first_event = len(log.events)
    tally = _Tally()
    code_next = False
    data, last, labelled, gap, pod_node = _shape(path, catalog)
    if gap > 1:
        log.gaps[path] = gap
    label_rx = _LABELS.get(labelled)
    last_error = 0  # the line number of a "Last error:" line just read
    frame = ""  # the last 'File "x.py", line N, in f' frame read
    prev_no = prev_text = 0
    prev_line = ""
    tb: CutTraceback | None = None  # the traceback open at this line (its header read, no exception yet)
    block: OpenBlock | None = None  # a launcher's banner whose head was read (blocks.py)
    for no, whole, every in _unglued(_candidates(path, log, data)):
        line = whole[:LOOKED_AT]
        tally.pair(line)
        label = ""
        if label_rx is not None and (lab := label_rx.match(line)) is not None:  # srun's rank, pdsh's host
            label, line = lab.group(1), line[lab.end():]
        if every and _after_unknown(log, path, prev_text) and (line[:1] in (" ", "\t") or _bare(line)) \
                and _wrapped(log, path, prev_text, line, catalog):
            continue
        head = prev_line if every and prev_text and not _was_event(log, path, prev_text) else ""
        if line.strip():
            prev_text, prev_line = no, line  # the last line with text (a paste may put blank lines between a line and its wrap)
        if every:
            tally.count(line)
            if "NCCL" in line or "NET/IB" in line:
                tally.nccl_ib(path, no, line)
            if log.roster.expecting or any(n in line for n in NEEDLES):
                log.roster.read(parse_line(line).text, Evidence(path, no, line))
        body = strip_prefix(line).text if line[:1] == "[" else line  # a traceback under a launcher's [rank3]:
        if code_next and not body.strip():
            after_file_line = False  # a blank line a double-spaced paste put between a frame and its source line
        else:
            after_file_line, code_next = code_next and no != prev_no, every and FILE_LINE.match(body) is not None
        if after_file_line and parse_line(line).exception:
            after_file_line = False  # a frame without source (Cython's .pyx, a frozen module): its exception follows
        prev_no = no  # a piece of a glued line (_unglued) is no source line after its frame
        tb, frame = _followed(tb, Evidence(path, no, line), body, frame, after_file_line)
        if tb is not None and tb.ipython:
            continue  # a line of an IPython traceback (its title, frames, numbered source): context
        if block is not None and line and (block := block.after(log, no, line, parse_line(line), catalog)) and block.took:
            continue  # a row of a launcher's banner: part of its head's event
        if not line or after_file_line or is_context_line(line) or cut_header(body):
            continue
        if not every and not looks_like_error(line) and not _LEVEL.search(line):
            continue
        msg = _asserted(_labelled_message(parse_line(line), label, labelled, pod_node), head)
        if msg.text.strip() == "Last error:":  # PyTorch's NCCL error: ncclGetLastError() follows
            last_error = no
            continue
        if (not msg.text and not msg.exception) or is_context_line(msg.text) or is_code(msg.text, catalog):
            continue  # code (not a known message a wrap cut after its comma or parenthesis)
        # the line as a whole (a NCCL INFO or a Python warning is no error) and the message's own
        # words (an ERROR level in the prefix of a code line is none)
        error = "NCCL WARN" in line or (looks_like_error(line) and looks_like_error(msg.text)) or (
            msg.level in _ERROR_LEVELS and (_WORDY.search(msg.text) is not None or catalog.search(msg.text) is not None)) or (
            bool(msg.exception) and not _BENIGN_EXC.search(msg.exception)) or (  # the last line of a traceback
            msg.src.endswith(")") and catalog.search(msg.text) is not None) or (  # a known level of MPICH's error stack
            (ret := _API_RETURN.search(msg.text)) is not None and ret.group("n") != "0")  # a CUDA call's non-zero code
        if not error and not _WORDY.search(msg.text):
            continue  # a number, a path, a bar: no message to look up
        joined: Match | None = None
        if error and _PAD.search(msg.text):
            text, joined = _unpadded(msg.text, catalog)
            msg = replace(msg, text=text)
        match = _lookup(catalog, msg, error, no == last, joined)
        if match is None and error and head and _bare(line) and (two := _head_joined(catalog, head, msg)) is not None:
            (msg, match), line = two, f"{head.rstrip()} {line.strip()}"  # a message wrapped before its error word
        if not error and (match is None or match.innermost.severity == "info"):
            continue  # a line without an error word is an event only when the catalog knows it as one
        msg, match, weak = _settled(catalog, msg, match, error)
        log.error_lines += 1
        explains = bool(last_error and no - last_error <= 2 * gap)
        event = ErrorEvent(Evidence(path, no, line), msg, match, log.error_lines, frame if msg.exception else "",
                           named=explains, weak=weak)
        frame, last_error = "", 0
        log.add(event)
        block = opened(log, event) or block
        if explains:  # the line after "Last error:" says what the failure just before it was: it reads first
            _first_of_block(log, path, gap)
    if block is not None:
        block.close(log, catalog)
    _drop_empty_heads(log, path)
    _file_done(log, path, tally, first_event, cut_at_end(tb) if data is not None else None, log.error_lines == before and
               len(log.roster.said) + len(log.roster.missing) == said, Evidence(path, prev_text, prev_line) if data is not None
               and prev_text else None, catalog, data)


def _drop_empty_heads(log: ErrorLog, path: str) -> None:
    """Drop the events of ``path`` that are an exception printed with an empty first line (``ValueError: ``) and
    took no line after it (:func:`_wrapped`): alone it says nothing, and the file is read as if it were no event
    (a quiet file's last line, the traceback it ends)."""
    kept = [e for e in log.events if e.evidence.source != path or e.message.text or not e.message.exception]
    log.error_lines -= len(log.events) - len(kept)
    log.events[:] = kept


def _followed(tb: CutTraceback | None, ev: Evidence, body: str, frame: str,
              after_file_line: bool) -> tuple[CutTraceback | None, str]:
    """The traceback open after line ``ev`` (:func:`~.tracebacks.traceback_at`) and the last frame read: a CPython
    frame line's, or an IPython traceback's (the frame its exception line, when pasted, was raised in)."""
    if "File \"" in ev.text and (f := FRAME.search(ev.text)) is not None:
        frame = f"{f.group('path')}:{f.group('line')}" + (f" in {f.group('func')}" if f.group("func") else "")
    tb = traceback_at(tb, ev, body, frame, after_file_line)
    return tb, (tb.frame or frame) if tb is not None and tb.ipython else frame


def _file_done(log: ErrorLog, path: str, tally: _Tally, first_event: int, cut: CutTraceback | None,
               nothing_else: bool, last: Evidence | None = None, catalog: Catalog | None = None,
               data: bytes | None = None) -> None:
    """What a file says as a whole, once read: the global ranks of its local-rank lines, IB HCAs named with no
    IB device, the traceback it ends inside, its doubled-log test, whether it was quiet (``nothing_else``:
    no error line and no roster line read from it), and for a quiet small file whose ``last`` line with text is a
    progress message that starts a step that can wait forever (a catalog entry's ``stall``), that line, or the
    last such line that only other processes' copies of earlier lines follow (:func:`~.stall.stall_in_tail`)."""
    _rank_by_local(log, first_event, tally.local_to_rank)
    ib = (tally.ib_hca, tally.no_ib) if tally.ib_hca is not None and tally.no_ib is not None else None
    if ib is not None:
        log.ib_missing.append(ib)
    if cut is not None:
        log.cut_tracebacks.append(cut)
    log.roster.note_file(path, tally.seen, tally.repeats)
    log.roster.expecting = False  # a block does not run on into the next file
    if nothing_else and cut is None and ib is None:
        stall = stall_at(last, catalog)
        if stall is None and last is not None and data is not None and catalog is not None:
            found = stall_in_tail(path, data, catalog)
            if found is not None:
                last, stall = found[0], found[1:]
        if stall is not None and last is not None:
            log.stalls.append((last, *stall))
        elif data is None or catalog is None or not passed_over(log, path, data, catalog):
            log.quiet_files.append(path)


def _asserted(msg: Message, before: str) -> Message:
    """A bare ``AssertionError`` (an ``assert`` without a message) with the ``assert`` statement its traceback shows on
    the line ``before`` it: the condition that failed is the message (CPython prints the statement's source line
    under its frame, Lib/traceback.py)."""
    if msg.exception == "AssertionError" and msg.text.strip() in ("", "AssertionError") and \
            (code := strip_prefix(before).text.strip()).startswith("assert "):
        return replace(msg, text=code.removeprefix("assert ").strip())
    return msg


def _labelled_message(msg: Message, label: str, labelled: str | None, pod_node: str | None) -> Message:
    """``msg`` with the rank of srun's ``--label`` or the host of pdsh's label, and a pod's node, where its own
    prefixes named none."""
    if label and labelled == "srun" and msg.rank is None:
        msg = replace(msg, rank=int(label))
    elif label and labelled == "pdsh" and msg.host is None:
        msg = replace(msg, host=label)
    return replace(msg, host=pod_node) if pod_node and msg.host is None else msg

