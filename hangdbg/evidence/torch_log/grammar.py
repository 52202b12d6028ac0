"""Read PyTorch distributed logs: ProcessGroupNCCL watchdog timeouts, desync reports, C++ frames,
torchrun's ``ChildFailedError`` summary and torchelastic ``error.json`` files.

Formats (PyTorch source, ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`` and ``TraceUtils.h``,
``torch/distributed/elastic/multiprocessing/errors/__init__.py`` and ``error_handler.py``):

* the work as ``operator<<(WorkNCCL)`` prints it, by era::

    WorkNCCL(OpType=ALLREDUCE, TensorShape=[4], Timeout(ms)=1800000)                  # 1.7-1.9
    WorkNCCL(SeqNum=12, OpType=ALLREDUCE, TensorShape=[4], Timeout(ms)=1800000)       # 1.10-1.12
    WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000)  # 1.13+

* the timeout: ``[Rank 3] Watchdog caught collective operation timeout: <work> ran for 600015
  milliseconds before timing out.`` (``Caught collective ...`` from blocking wait in old versions);
  2.4+ start with the process group's log prefix instead, ``[PG ID 0 PG GUID 0(default_pg) Rank 3]``
  (2.3: ``[PG 0 (default_pg) Rank 3]``, 2.2: ``[PG 0 Rank 3]``); glog adds ``[E1218 20:27:21.42
  ProcessGroupNCCL.cpp:629]`` or ``[E ProcessGroupNCCL.cpp:574]``; torchrun adds ``[rank3]:``.
* per-group status: ``Timeout at NCCL work: N, last enqueued NCCL work: N, last completed NCCL work:
  N.``, ``Exception (either an error or timeout) detected by watchdog at work: N, ...``, ``failure
  detected by watchdog at work sequence id: N PG status: last enqueued work: N, last completed work:
  N``, ``Received a dump signal due to a collective timeout from rank R ... Last enqueued NCCL work:``.
  Some 2.2 builds print an uninitialised ``last completed`` (a huge number): values above the last
  enqueued one are ignored.
* a line cut off in a pasted excerpt: ``[rank9]:[E816`` (the launcher prefix and part of glog's
  header) or ``[Rank 4] Watchdog caught collective operation`` (a watchdog message that stops
  short) is recorded in ``cut``: what that rank was doing is unknown.
* desync debug (``TORCH_NCCL_DESYNC_DEBUG=1``, ``retrieveDesyncReport``): ``[3] Timeout at
  collective: ALLREDUCE, #1234``, ``ranks [5] are the lagging ranks that caused this timeout. They
  never joined any collectives``, ``[5] joined but didn't finish collective #1234 (count from 1)``,
  ``[0, 1] finished collective #1234, but didn't join collective #1235``.
* ``Some NCCL operations have failed or timed out`` / ``To avoid data inconsistency, we are taking
  the entire process down.``; C++ frames ``frame #8: f(...) + 0x1a2 (0x7f.. in /x/libtorch_cuda.so)``.
* ``ChildFailedError``: ``Failures:`` / ``Root Cause (first observed failure):`` sections (also
  without the ``ChildFailedError`` header line, when a paste starts below it) of
  ``[i]:`` entries with ``time``, ``host``, ``rank : R (local_rank: L)``, ``exitcode : C (pid: P)
  (SIGNAME)``, ``error_file``, ``traceback`` (possibly many lines); the agent's ``failed (exitcode:
  -11) local_rank: 1 (pid: 4242) of binary: ...`` line.
* the messages of :mod:`hangdbg.evidence.torch_log.messages` (collective fingerprint and DDP model
  mismatches, the heartbeat monitor, NCCL errors, application lines naming a rank).
* hard-wrapped lines (:mod:`hangdbg.evidence.torch_log.wrapped`) are joined before parsing.
* ``error.json``: ``{"message": {"message": "T: msg", "extraInfo": {"py_callstack": "...",
  "timestamp": "1700000000"}, "errorCode": N}}`` or the older ``{"message": "msg", "timestamp": T}``.

:func:`scan` is pure text parsing into :class:`TorchLogEvents`; the reader (:mod:`hangdbg.evidence.torch_log.reader`)
reads files and hands the events to :mod:`hangdbg.evidence.torch_log.analysis` for the findings.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...model import Evidence
from . import messages as torch_messages
from .error_json import JSON_HEAD, ErrorFile, is_error_json, parse_error_json
from ...text.lines import iter_lines_where, open_input, strip_prefix
from .messages import TorchMessages, parse_message
from .wrapped import Joiner

__all__ = [
    "ChildFailure",
    "Desync",
    "ErrorFile",
    "Timeout",
    "TorchLogEvents",
    "WorkStatus",
    "parse_error_json",
    "is_error_json",
    "scan",
    "sniff",
]


# --- regular expressions (formats in the module docstring) ---------------------------------------
_PG_TAG = re.compile(
    r"\[PG ID (?P<id>\d{1,12}) PG GUID (?P<guid>[^\s()\]]+)(?:\((?P<desc>[^)]*)\))? Rank (?P<r>\d{1,9})\]"
    r"|\[PG (?P<id2>\d{1,12})(?: \((?P<desc2>[^)]*)\))? Rank (?P<r2>\d{1,9})\]"
    r"|\[Rank (?P<r3>\d{1,9})\]"
)
_WORK = (r"WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
         r"(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?(?:, TensorShape=\[(?P<shape>[^\]]*)\])?"
         r", Timeout\(ms\)=(?P<tmo>\d+)\)")
_TIMEOUT = re.compile(r"(?:Watchdog caught|Caught) collective operation timeout: " + _WORK
                      + r"(?: ran for (?P<ran>\d+) milliseconds before timing out)?")
_TIMEOUT_HINT = re.compile(r"collective operation timeout|WorkNCCL\(|Watchdog caught|Caught collective")
_ENQ = re.compile(r"last enqueued (?:NCCL )?work: (?P<enq>-?\d+), last completed (?:NCCL )?work: (?P<done>-?\d+)",
                  re.IGNORECASE)
_AT_WORK = re.compile(r"(?:Timeout at NCCL work|detected ?by watchdog at work|at work sequence id): (?P<w>\d+)")
_DUMP_FROM = re.compile(r"dump signal due to a collective timeout from\s+(?:rank (?P<r>\d+)|(?P<other>[^.]+?)) and")
_DESYNC_AT = re.compile(r"\[(?P<r>\d+)\] Timeout at collective: (?P<op>\w+), #(?P<seq>\d+)")
_DESYNC_MISSING = re.compile(r"ranks \[(?P<ranks>[\d, ]*)\] are the lagging ranks that caused this timeout")
_DESYNC_JOINED = re.compile(r"\[(?P<ranks>[\d, ]+)\] joined but didn't finish collective #(?P<seq>\d+)")
_DESYNC_FINISHED = re.compile(r"\[(?P<ranks>[\d, ]+)\] finished collective #(?P<seq>\d+), but didn't join collective #(?P<next>\d+)")
_DESYNC_OTHER = re.compile(r"lagging/dead/mismatched ranks|Snapshot of ranks' latest states|^#\d+ (?:started|finished) ranks:"
                           r"|^\[[\d, ]+\] (?:started|finished) \w+$")
_ABORT = re.compile(r"Some NCCL operations have failed or timed out|taking the entire process down")
_FRAME = re.compile(r"^frame #(?P<n>\d+): (?P<func>.+?)(?: \+ 0x[0-9a-fA-F]+)? \(0x[0-9a-fA-F]+ in (?P<lib>[^)]+)\)\s*$")
# ChildFailedError summary
_CFE_START = re.compile(r"ChildFailedError")
_CFE_ENTRY = re.compile(r"^\[(?P<i>\d+)\]:\s*$")
_CFE_FIELD = re.compile(r"^(?P<k>time|host|rank|exitcode|error_file|traceback)\s*:\s?(?P<v>.*)$")
_CFE_RANK = re.compile(r"^(?P<r>-?\d+) \(local_rank: (?P<l>-?\d+)\)")
_CFE_EXIT = re.compile(r"^(?P<c>-?\d+) \(pid: (?P<p>\d+)\)\s*(?:\((?P<s>\w+)\))?")
_CFE_RULE = re.compile(r"^[=-]{10,}\s*$")
# the first field of a failure entry as torchelastic's template pads it ("  time      : 2024-...",
# torch/distributed/elastic/multiprocessing/errors/__init__.py _FAILURE_FORMAT_TEMPLATE): an excerpt
# cut above its "[0]:" / "Root Cause" lines still starts an entry here
_CFE_TIME = re.compile(r"^time {6}: \S")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (?P<c>-?\d+)\) local_rank: (?P<l>\d+) \(pid: (?P<p>\d+)\) of binary")

# every line the scanner acts on contains one of these (checked before the full parse)
_KEYWORDS = re.compile(r"collective operation timeout|WorkNCCL\(|Watchdog caught|Caught collective|ast enqueued|Timeout at collective|lagging|joined but"
                       r"|finished collective|Snapshot of ranks|started|finished|operations have failed|entire process"
                       r"|frame #|ChildFailedError|failed \(exitcode|dump signal|Failures:|Root Cause \(first|time {6}: "
                       r"|" + torch_messages.HINT.pattern)
# a line starting a message that may be hard-wrapped (see :mod:`hangdbg.evidence.torch_log.wrapped`)
_WRAP_HINT = re.compile(r"collective operation timeout|WorkNCCL\(|detected ?by watchdog|Exception \(either an error or timeout\)"
                        r"|Timeout at NCCL work|at work sequence id|Detected mismatch between collectives|DDP expects same model")
_CFE_HEADLESS = ("Failures:", "Root Cause (first observed failure):")
_RANK_PREFIX = re.compile(r"\[rank(\d{1,9})\]:")  # at most 9 digits: int() of a garbled 5000-digit run raises
# a line that stops right after the launcher prefix or inside glog's header: "[rank9]:[E816" (bounded)
_CUT_HEAD = re.compile(r"\[rank(\d{1,7})\]:[ \t]{0,8}\[[EWIF]\d{0,4}(?: [\d:.]{0,24})?[ \t\r]{0,8}$")
_SRUN_LABEL = re.compile(r"^\s*\d{1,6}: (?=\[)")  # srun --label "3: " before a launcher or glog prefix

_MARKERS = ((b"Watchdog caught collective operation timeout", b"Caught collective operation timeout",
            b"ChildFailedError", b"Root Cause (first observed failure)", b"last enqueued NCCL work",
            b"Some NCCL operations have failed or timed out", b"ProcessGroupNCCL.cpp",
            b"torch.distributed.elastic", b"Timeout at collective: ", b"torch/distributed/elastic/",
            b"Watchdog caught collective", b"Root Cause (first observed", b"failed (exitcode: ", b"error_file: ")
            + torch_messages.MARKERS)


def _ranks(text: str) -> tuple[int, ...]:
    return tuple(sorted({int(x) for x in re.findall(r"(?<!\d)\d{1,9}(?!\d)", text)}))


def signal_name(exitcode: int | None) -> str:
    """``SIGSEGV`` for exit code ``-11`` (as torchelastic's ``ProcessFailure.signal_name``), else ``""``."""
    if exitcode is None or exitcode >= 0:
        return ""
    try:
        return _signal.Signals(-exitcode).name
    except ValueError:
        return ""


# --- events ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Timeout:
    """One watchdog timeout: ``rank`` is global when a launcher prefix named it (``global_rank``), else the PG rank."""

    rank: int
    group: str
    seq: int | None
    op: str
    timeout_ms: int
    ran_ms: int | None
    numel_in: int | None
    numel_out: int | None
    evidence: Evidence
    global_rank: bool = True


@dataclass(frozen=True, slots=True)
class WorkStatus:
    """``last enqueued / last completed`` of one rank's process group (``work``: the failed work)."""

    rank: int
    group: str
    work: int | None
    enqueued: int | None
    completed: int | None
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class Desync:
    """One desync-debug report, by the rank that printed it."""

    reporter: int | None
    op: str | None
    seq: int | None
    missing: tuple[int, ...] = ()
    joined_not_finished: tuple[int, ...] = ()
    finished_not_joined: tuple[int, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    lag_seq: int | None = None
    """The collective number (count from 1) the joined/finished lists refer to."""


@dataclass(frozen=True, slots=True)
class ChildFailure:
    """One ``[i]:`` entry of a ``ChildFailedError`` summary."""

    rank: int | None
    local_rank: int | None
    host: str
    exitcode: int | None
    pid: int | None
    signal: str
    error_file: str
    time: str
    message: str
    root: bool
    evidence: tuple[Evidence, ...] = ()

    @property
    def state(self) -> str:
        if self.exitcode is None:
            return "failed"
        sig = self.signal or signal_name(self.exitcode)
        return f"exit {self.exitcode}" + (f" ({sig})" if sig else "")


@dataclass
class TorchLogEvents:
    """Everything :func:`scan` recognised (mutable while scanning)."""

    timeouts: list[Timeout] = field(default_factory=list)
    statuses: list[WorkStatus] = field(default_factory=list)
    desyncs: list[Desync] = field(default_factory=list)
    failures: list[ChildFailure] = field(default_factory=list)
    error_files: list[ErrorFile] = field(default_factory=list)
    aborted: dict[int, Evidence] = field(default_factory=dict)
    dump_from: dict[int, Evidence] = field(default_factory=dict)
    agent_failures: list[tuple[int, int, int, Evidence]] = field(default_factory=list)
    frames: dict[int | None, list[str]] = field(default_factory=dict)
    messages: TorchMessages = field(default_factory=TorchMessages)
    seen_ranks: set[int] = field(default_factory=set)
    prefix_ranks: bool = False  # a launcher prefix ([rank3]:) named a global rank (a watchdog's [Rank N] is its PG's)
    cut: dict[int, Evidence] = field(default_factory=dict)
    """Ranks with a line cut off (a watchdog message or a glog header that stops short): their first one."""
    lines_read: int = 0
    lines_skipped: int = 0

    @property
    def records(self) -> int:
        """Events recognised (timeouts, status lines, desync reports, failures, error files,
        abort and dump lines, C++ frames, the messages of :mod:`hangdbg.evidence.torch_log.messages`)."""
        return (len(self.timeouts) + len(self.statuses) + len(self.desyncs) + len(self.failures) + len(self.error_files)
                + len(self.messages)
                + len(self.aborted) + len(self.dump_from) + len(self.agent_failures)
                + sum(len(v) for v in self.frames.values()))


def _tag(text: str, end: int) -> tuple[int | None, str]:
    """The rank and group named by the last ``[PG ...]`` / ``[Rank N]`` tag before ``end``."""
    rank, group = None, ""
    for m in _PG_TAG.finditer(text, 0, end):
        if m.group("r") is not None:
            rank, group = int(m.group("r")), _group(m.group("id"), m.group("desc"))
        elif m.group("r2") is not None:
            rank, group = int(m.group("r2")), _group(m.group("id2"), m.group("desc2"))
        else:
            rank = int(m.group("r3"))
    return rank, group


def _group(pg_id: str, desc: str | None) -> str:
    return f"{pg_id} ({desc})" if desc and desc != "undefined" else pg_id


def _int(s: str | None) -> int | None:
    return int(s) if s is not None else None


class _Scanner:
    """Line-by-line state: the open ChildFailedError block and the open desync report."""

    def __init__(self, ev: TorchLogEvents) -> None:
        self.ev = ev
        self.cfe: list[dict] | None = None  # entries of the open ChildFailedError block
        self.cfe_root = False
        self.cfe_prefix = ""  # what precedes the block's first line (a launcher label), stripped from the rest
        self.cur: dict | None = None
        self.in_tb = False
        self.desync: dict | None = None

    # ChildFailedError block ------------------------------------------------------------------
    def _close_entry(self) -> None:
        if self.cur is not None and self.cfe is not None:
            self.cfe.append(self.cur)
        self.cur = None
        self.in_tb = False

    def _close_cfe(self) -> None:
        self._close_entry()
        for e in self.cfe or ():
            if e.get("headless") and "rank" not in e and "exitcode" not in e:
                continue  # a "time :" line and nothing of a failure after it
            self.ev.failures.append(_failure(e))
        self.cfe = None

    def _cfe_line(self, source: str, n: int, raw: str, text: str) -> bool:
        """Handle a line inside a ChildFailedError block; False when the block ended before it."""
        if self.cfe_prefix and text.startswith(self.cfe_prefix):  # srun --label "3: ", pdsh "node3: "
            text = text[len(self.cfe_prefix):]
        stripped = text.strip()
        if _CFE_RULE.match(stripped):
            if self.cur is not None and self.cur.get("root"):
                self._close_cfe()  # the closing ===== after the root cause
                return True
            self._close_entry()
            return True
        if stripped.startswith("Failures:"):
            self._close_entry()
            self.cfe_root = False
            return True
        if stripped.startswith("Root Cause"):
            self._close_entry()
            self.cfe_root = True
            return True
        if stripped == "<NO_OTHER_FAILURES>" or stripped.endswith(" FAILED") and self.cur is None:
            return True
        m = _CFE_ENTRY.match(stripped)
        if m:
            self._close_entry()
            self.cur = {"root": self.cfe_root, "ev": [Evidence(source, n, raw)], "tb": []}
            return True
        if self.cur is None:
            if not stripped:
                return True
            self._close_cfe()
            return False
        if self.in_tb:
            self.cur["tb"].append(stripped)
            return True
        if not stripped:
            return True  # a blank line a paste put between the fields: the next line says whether the block goes on
        m = _CFE_FIELD.match(stripped)
        if m is None and self.cur.get("headless"):
            self._close_cfe()
            return False
        if m:
            k, v = m.group("k"), m.group("v").strip()
            self.in_tb = k == "traceback"
            if self.in_tb:
                self.cur["tb"].append(v)
            else:
                self.cur[k] = v
            if k in ("rank", "exitcode", "host"):
                self.cur["ev"].append(Evidence(source, n, raw))
            return True
        self.ev.lines_skipped += 1
        return True

    # one line ----------------------------------------------------------------------------------
    def line(self, source: str, n: int, raw: str) -> None:
        ev = self.ev
        ev.lines_read += 1
        if self.cfe is None and not _KEYWORDS.search(raw):  # fast path: most lines of a log
            if "[rank" in raw:
                ev.seen_ranks.update(found := {int(x) for x in _RANK_PREFIX.findall(raw)})
                ev.prefix_ranks = ev.prefix_ranks or bool(found)
                m = _CUT_HEAD.search(raw)
                if m:
                    ev.cut.setdefault(int(m.group(1)), Evidence(source, n, raw))
            return
        m = _SRUN_LABEL.match(raw)
        if m:
            raw = raw[m.end():]
        if "\x00" in raw:
            raw = raw.replace("\x00", "")
        p = strip_prefix(raw)
        text = p.text
        if text.endswith(("│", "┃")):  # a terminal's right border (k9s)
            text = text.rstrip("│┃ ")
        if p.rank is not None:
            ev.seen_ranks.add(p.rank)
            ev.prefix_ranks = True
        if self.cfe is not None and self._cfe_line(source, n, raw, text):
            return
        m = _CFE_START.search(text)
        if m and ("errors.ChildFailedError" in text or text.startswith("ChildFailedError")):
            self._close_desync()
            self.cfe, self.cfe_root, self.cur = [], False, None
            start = text.find("torch.distributed.elastic")
            self.cfe_prefix = text[: start if start >= 0 else m.start()][:64]
            return
        stripped = text.strip()
        if stripped in _CFE_HEADLESS:  # a summary pasted without its ChildFailedError line
            self._close_desync()
            self.cfe, self.cfe_root, self.cur = [], stripped.startswith("Root"), None
            self.cfe_prefix = text[: text.find(stripped)][:64]
            return
        if _CFE_TIME.match(stripped):  # an entry cut above its "[0]:": it ends at its first line that is no field
            self._close_desync()
            self.cfe, self.cfe_root = [], False
            self.cur = {"root": False, "ev": [Evidence(source, n, raw)], "tb": [], "headless": True}
            self.cfe_prefix = text[: text.find(stripped)][:64]
            self._cfe_line(source, n, raw, text)
            return
        m = _TIMEOUT.search(text)
        if m:
            self._timeout(source, n, raw, text, m, p.rank)
            return
        m = _ENQ.search(text)
        if m:
            self._status(source, n, raw, text, m, p.rank)
            return
        if self._desync_line(source, n, raw, text, p.rank):
            return
        if torch_messages.HINT.search(text) and parse_message(text, p.rank, Evidence(source, n, raw), ev.messages):
            return
        if _ABORT.search(text):
            rank, _ = _tag(text, len(text))
            rank = p.rank if p.rank is not None else rank
            if rank is not None:
                ev.aborted.setdefault(rank, Evidence(source, n, raw))
                ev.seen_ranks.add(rank)
            return
        if text.startswith("frame #"):
            m = _FRAME.match(text)
            if m is None:
                ev.lines_skipped += 1
            else:
                ev.frames.setdefault(p.rank, []).append(m.group("func"))
            return
        m = _AGENT_FAILED.search(text)
        if m:
            ev.agent_failures.append((int(m.group("l")), int(m.group("p")), int(m.group("c")), Evidence(source, n, raw)))
            return
        if _TIMEOUT_HINT.search(text):
            ev.lines_skipped += 1  # looked like a watchdog line but did not parse: cut off or wrapped
            rank, _ = _tag(text, len(text))
            rank = p.rank if p.rank is not None else rank
            if rank is not None:
                ev.cut.setdefault(rank, Evidence(source, n, raw))

    def _timeout(self, source, n, raw, text, m, prefix_rank) -> None:
        rank, group = _tag(text, m.start())
        if prefix_rank is not None:
            rank = prefix_rank
        if rank is None:
            self.ev.lines_skipped += 1
            return
        self.ev.seen_ranks.add(rank)
        self.ev.timeouts.append(Timeout(rank, group, _int(m.group("seq")), m.group("op"), int(m.group("tmo")),
                                        _int(m.group("ran")), _int(m.group("nin")), _int(m.group("nout")),
                                        Evidence(source, n, raw), prefix_rank is not None))

    def _status(self, source, n, raw, text, m, prefix_rank) -> None:
        rank, group = _tag(text, m.start())
        if prefix_rank is not None:
            rank = prefix_rank
        fm = _DUMP_FROM.search(text)
        if rank is None:
            self.ev.lines_skipped += 1
            return
        self.ev.seen_ranks.add(rank)
        if fm and fm.group("r") is not None:
            self.ev.dump_from.setdefault(int(fm.group("r")), Evidence(source, n, raw))
        enq, done = int(m.group("enq")), int(m.group("done"))
        w = _AT_WORK.search(text)
        self.ev.statuses.append(WorkStatus(
            rank, group, int(w.group("w")) if w else None, enq if enq >= 0 else None,
            done if 0 <= done <= max(enq, 0) else None, Evidence(source, n, raw)))

    # desync report -----------------------------------------------------------------------------
    def _close_desync(self) -> None:
        d = self.desync
        if d is not None:
            self.ev.desyncs.append(Desync(d["reporter"], d["op"], d["seq"], d["missing"], d["joined"],
                                          d["finished"], tuple(d["ev"][:6]), d["lag"]))
        self.desync = None

    def _desync_line(self, source, n, raw, text, prefix_rank) -> bool:
        m = _DESYNC_AT.search(text)
        if m:
            self._close_desync()
            reporter = prefix_rank if prefix_rank is not None else int(m.group("r"))
            self.desync = {"reporter": reporter, "op": m.group("op"), "seq": int(m.group("seq")),
                           "missing": (), "joined": (), "finished": (), "ev": [Evidence(source, n, raw)], "lag": None}
            return True
        for rx, key in ((_DESYNC_MISSING, "missing"), (_DESYNC_JOINED, "joined"), (_DESYNC_FINISHED, "finished")):
            m = rx.search(text)
            if m:
                if self.desync is None:
                    self.desync = {"reporter": prefix_rank, "op": None, "seq": None, "missing": (), "joined": (),
                                   "finished": (), "ev": [], "lag": None}
                self.desync[key] = _ranks(m.group("ranks"))
                if key != "missing":
                    self.desync["lag"] = int(m.group("seq"))
                self.desync["ev"].append(Evidence(source, n, raw))
                return True
        return bool(_DESYNC_OTHER.search(text.strip()))

    def finish(self) -> None:
        if self.cfe is not None:
            self._close_cfe()
        self._close_desync()


def _failure(e: dict) -> ChildFailure:
    rank = local = exitcode = pid = None
    sig = ""
    m = _CFE_RANK.match(e.get("rank", ""))
    if m:
        rank, local = int(m.group("r")), int(m.group("l"))
    m = _CFE_EXIT.match(e.get("exitcode", ""))
    if m:
        exitcode, pid, sig = int(m.group("c")), int(m.group("p")), m.group("s") or ""
    tb = [t for t in e.get("tb", []) if t]
    # the message: a signal line, or the last line of a Python traceback ("RuntimeError: ...")
    message = tb[-1] if tb else ""
    return ChildFailure(rank, local, e.get("host", ""), exitcode, pid, sig or signal_name(exitcode),
                        e.get("error_file", ""), e.get("time", ""), message, bool(e.get("root")), tuple(e["ev"]))


# every line the scanner acts on holds one of these (the desync snapshot lines it merely recognises
# need not); few needles, because each is one pass over the data
_NEEDLES = (b"collective", b"timeout", b"WorkNCCL(", b"enqueued", b"operations have failed", b"entire process", b"frame #",
            b"ChildFailedError", b"exitcode", b"Failures:", b"Root Cause", b"time      : ") + torch_messages.NEEDLES
_RANK_PREFIX_B = re.compile(rb"\[rank(\d{1,9})\]:")
_CUT_HEAD_B = re.compile(rb"\[rank(\d{1,7})\]:[ \t]{0,8}\[[EWIF]\d{0,4}(?: [\d:.]{0,24})?[ \t\r]{0,8}$", re.MULTILINE)


def scan_file(path: str, source: str, events: TorchLogEvents | None = None) -> TorchLogEvents:
    """:func:`scan` on a file, skipping 1 MiB runs without a keyword at C speed (the ranks named by
    ``[rankN]:`` prefixes in them are still recorded).

    Raises:
        OSError: the file cannot be opened.
    """
    ev = events if events is not None else TorchLogEvents()
    sc = _Scanner(ev)
    joiner = _joiner()

    def skipped(count: int, data: bytes) -> None:
        ev.lines_read += count
        ev.seen_ranks.update(found := {int(x) for x in set(_RANK_PREFIX_B.findall(data))})
        ev.prefix_ranks = ev.prefix_ranks or bool(found)
        for m in _CUT_HEAD_B.finditer(data):
            ev.cut.setdefault(int(m.group(1)), Evidence(source, None, m.group(0).decode("utf-8", "replace")))

    with open_input(path) as f:
        return _scan(iter_lines_where(f, _NEEDLES, skipped, lambda: sc.cfe is not None or joiner.pending), source, ev, sc,
                     joiner)


def scan(lines: Iterable[tuple[int, str]], source: str, events: TorchLogEvents | None = None) -> TorchLogEvents:
    """Parse ``(line_number, text)`` pairs of one log into events (pure; never raises on content).

    Args:
        lines: as :func:`hangdbg.text.lines.iter_lines` yields them.
        source: the file name recorded in the evidence.
        events: add to these (several files of one job), or start new ones.
    """
    ev = events if events is not None else TorchLogEvents()
    return _scan(lines, source, ev, _Scanner(ev), _joiner())


def _scan(lines: Iterable[tuple[int, str]], source: str, ev: TorchLogEvents, sc: _Scanner, joiner: Joiner) -> TorchLogEvents:
    for n, raw in joiner(lines):
        try:
            sc.line(source, n, raw)
        except (ValueError, IndexError, KeyError):  # a garbled line never stops the scan
            ev.lines_skipped += 1
    ev.lines_read += joiner.joined
    sc.finish()
    return ev


def _has_rank(p_rank: int | None, text: str, end: int) -> bool:
    return p_rank is not None or _tag(text, end)[0] is not None


def _whole(raw: str) -> bool:
    """True when ``raw`` parses as a whole watchdog, status or :mod:`torch_messages` message with its rank."""
    p = strip_prefix(raw)
    text = p.text
    m = _TIMEOUT.search(text)
    if m:  # "... ran for 1807716 milliseconds before timi" is cut: its end is on the next line
        if m.group("ran") is None and text[m.end():].lstrip().startswith("ran"):
            return False
        return _has_rank(p.rank, text, m.start())
    m = _ENQ.search(text)
    if m:
        return _has_rank(p.rank, text, m.start())
    return torch_messages.complete(text)


def _joiner() -> Joiner:
    """The hard-wrap joiner for torch logs: a line holding a watchdog / status / mismatch message that does not parse
    whole is the head of a wrapped message, and so is an ``NCCL error in:`` line cut inside its result text."""
    return Joiner(lambda raw: bool(_WRAP_HINT.search(raw)) and not _whole(raw) or torch_messages.nccl_error_cut(
        strip_prefix(raw).text), _whole)


def sniff(head: bytes) -> bool:
    """True when the first bytes of a file look like a PyTorch distributed log or an ``error.json``.

    Looks for strings only ProcessGroupNCCL, torchelastic and torchrun print (see the module
    docstring); a NCCL_DEBUG log or a syslog without them is not taken.
    """
    if JSON_HEAD.match(head):
        return b"extraInfo" in head or b"py_callstack" in head or b'"timestamp"' in head
    return any(m in head for m in _MARKERS)
