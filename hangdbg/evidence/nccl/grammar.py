"""Streaming parser of NCCL_DEBUG output (``NCCL_DEBUG=INFO|WARN|TRACE``).

Line format (NCCL 2.x, ``src/debug.cc``, ``ncclDebugLog``)::

    host:pid:tid [cudaDev] NCCL INFO msg
    host:pid:tid [cudaDev] file.cc:LINE NCCL WARN msg          (often after a blank line)
    host:pid:tid [cudaDev] file.cc:LINE (function) NCCL WARN msg            (2.30+)
    host:pid:tid [cudaDev] 1234.567890 function:LINE NCCL TRACE msg     (TRACE passes __func__)
    host:pid:tid NCCL CALL ncclAllReduce(...)
    host:pid:tid [0] INFO msg  /  host:pid:tid [0] file.cu:LINE WARN msg    (NCCL <= 2.2: no NCCL token)
    NCCL version 2.18.1+cuda12.1                                 (NCCL_DEBUG=VERSION: no host prefix)
    [2026-11-26 00:32:07] host:pid:tid [cudaDev] file.cc:LINE NCCL WARN msg   (2.26+, see below)

Timestamps (NCCL 2.26+, ``src/debug.cc``): a ``strftime`` timestamp before ``host:pid:tid`` on the
levels of ``NCCL_DEBUG_TIMESTAMP_LEVELS`` (default ``WARN`` only; ``ALL``, ``^INFO``...), in the format
``NCCL_DEBUG_TIMESTAMP_FORMAT`` (default ``"[%F %T] "``; ``%Nf`` adds N digits of subseconds, ``_``
stands for a space). Log collectors add their own decorations before that: ``2024-05-11 14:10:52.227 ``,
``[rank3]:``, ``[default0]:`` (torchrun ``--tee``), ``(RayWorkerWrapper pid=N, ip=..) `` (Ray),
``[1,3]<stdout>:`` (mpirun ``--tag-output``). :func:`line_prefix` peels them off (anchored, bounded
regexes: :func:`~hangdbg.text.lines.strip_prefix` for the launchers and ISO times, :data:`TIME_PREFIX` for
the other timestamp shapes, glued to the host or not) and keeps the time, which the records keep
(:attr:`Proc.first_time <hangdbg.evidence.nccl.records.Proc>`, ``last_time``, ``Comm.init_time``).

Messages understood (NCCL 2.2 - 2.30, ``init.cc``, ``enqueue.cc``, ``bootstrap.cc``,
``transport/net_socket.cc``, ``transport/net_ib.cc``, ``misc/socket.cc``, ``net.cc``):

* init: ``[[Rank R] ][FUNCTION ]comm 0x.. rank R nranks N ...[ ]- [Init|Abort|Destroy|Revoke ]START|COMPLETE``,
  ``comm 0x.. rank R nRanks N nNodes M localRanks L localRank l``: every format of NCCL 2.3 - 2.30
  ``src/init.cc`` is listed in :mod:`hangdbg.evidence.nccl.records` (``_INIT``); a ``Destroy`` after
  ``Init COMPLETE`` leaves the init complete (``Comm.ended`` says how the communicator ended);
* collectives (``NCCL_DEBUG_SUBSYS=COLL``): ``AllReduce: opCount 1f sendbuff 0x.. recvbuff 0x..
  count N datatype D op O root R comm 0x.. [nranks=8] stream 0x..`` - ``opCount`` is printed
  with ``%lx``: always hexadecimal;
* interfaces: ``NET/Socket : Using [0]ib0:10.0.0.5<0> [1]eth0:..``, ``Bootstrap : Using
  eth0:10.1.2.3<0>`` (IPv6 with ``%scope``), ``NET/IB : Using [0]mlx5_0:1/IB ... ; OOB ib0:IP<0>``;
* net plugin: ``NET/Plugin: Could not find: libnccl-net.so``, ``NET/Plugin : Plugin load returned
  ...``, ``No plugin found``, ``Loaded net plugin NAME``, ``NET/OFI Using aws-ofi-nccl``;
  ``Using network IB|Socket|NAME``;
* transports: ``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC|NET/IB/0|SHM``;
* failures: ``Connect to IP<port> failed : Connection refused`` (WARN), IB completion errors and
  socket errors naming ``peer IP<port>``, error chains ``file.cc:LINE -> N [Async thread]``.

Two records may be spliced into one line by concurrent writers (every ``host:pid:tid [d] NCCL``
start in a line begins a record), a record may be hard-wrapped onto the next line. Anything else
(application prints, progress bars, UCX backtraces) is ignored; a line that has the NCCL record
shape but cannot be parsed is skipped and counted.

The fast scan that feeds :class:`NcclLog` from files is :mod:`hangdbg.evidence.nccl.scan`.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter

from ...model import MAX_EVIDENCE_TEXT, Evidence
from ...rankset import rank_number
from .records import (_CHAIN, _COLL, _COMM_PTR, _COMMID, _CONNECT, _INIT, _INIT_ALL, _INIT_TAIL, _INTERNAL_NETS,
    _NETWORK, _NNODES, _NRANKS_BR, _P2P_ENV, _PARENT, _PEER, _RETRY, _RING, _USING, _VIA, Comm, ConnectFailure, Proc,
    BARE_COLL, _BMARKERS, _Bare, _looks_cut, _plugin, _small, _transport, _Unspliced, add_op, bare_host, chain,
    connect, has_marker, line_ahead, line_back, op_fields, using, warn)
from ...text.lines import MAX_LINE, open_input, strip_ansi, strip_prefix

__all__ = ["RECORD", "TIME_PREFIX", "Comm", "ConnectFailure", "NcclLog", "Proc", "has_marker", "line_prefix", "record_starts",
           "records", "sniff"]


# --- regular expressions --------------------------------------------------------------------
# One record header (src/debug.cc). Host names: pods, hex container ids, IPs; no spaces, colons
# or brackets; bounded lengths keep a search linear on a long line without a colon.
RECORD = re.compile(
    r"(?P<host>[^\s:\[\]()<>]{1,128}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10})"
    r"(?: \[(?P<dev>-?\d{1,6})\])?"
    r"(?: (?P<ts>\d{1,12}\.\d{1,12}))?"
    # WARN: __FILE__:__LINE__; TRACE: __func__:__LINE__ (a lambda's is "operator()"; "<unknown>" in 2.30)
    r"(?: (?P<src>[\w./+-]{1,200}\.(?:cc|cu|cpp|cxx|c|h|hpp|hh)|[A-Za-z_~]\w{0,127}(?:\(\))?|<unknown>):(?P<srcline>\d{1,7}))?"
    r"(?: \((?P<func>[A-Za-z_~]\w{0,127}(?:\(\))?|<unknown>)\))?"  # 2.30 WARN: "file.cc:LINE (function) NCCL WARN"
    r" (?:NCCL (?P<level>INFO|WARN|TRACE|CALL|ABORT)|(?P<old>INFO|WARN|TRACE))(?= |$) ?"
)
# The shape of a record: a line with this but no parsable header is skipped and counted.
_SHAPE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|CALL)\b|:\d+:\d+ \[-?\d+\] (?:[\w./+-]+:\d+ )?(?:INFO|WARN) ")
_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+\S*)")
def sniff(head: bytes) -> bool:
    """True when the first bytes of a file look like NCCL_DEBUG output: ``NCCL`` and a level (``INFO``/``WARN``/
    ``TRACE``; cheap tests first: report sniffs every file), then one record header (the ``NCCL`` token, NCCL >= 2.3,
    or old-style ``host:pid:tid [0] INFO``) or a ``NCCL version`` line next to a ``NCCL INFO`` (a head of ``NCCL
    CALL``/``NCCL ABORT`` records only is not taken); or collective lines without their header (``BARE_COLL``)."""
    if b": opCount " in head and BARE_COLL.search(head) is not None:
        return True
    if b"NCCL" not in head or not any(m in head for m in _BMARKERS[1:]):
        return False
    text = head.decode("utf-8", "replace")
    return RECORD.search(text) is not None or (_VERSION.search(text) is not None and "NCCL INFO" in text)


# Where a header can be: its ":pid:tid" (a literal colon: the regex engine skips to it at C speed).
_PIDTID = re.compile(r":\d{1,10}:\d{1,10}(?=[ ])")
_HOST_RUN = re.compile(r"[^\s:\[\]()<>]{1,128}")  # matched on the reversed text before a candidate


def record_starts(text: str) -> list[re.Match]:
    """Every record header in ``text`` (several when concurrent writers spliced records): the
    matches of ``RECORD.finditer``, found from the ``:pid:tid`` candidates only, so a long run
    without one (NUL padding, a 200 MB line) costs one C-speed search, not 128 steps per byte."""
    out: list[re.Match] = []
    pos = 0  # where the previous match ended
    at = 0  # where to look for the next candidate
    m = RECORD.match(text)  # the usual line: one header at its start (what the first candidate finds then)
    if m is not None:
        out.append(m)
        pos = at = m.end()
    while True:
        c = _PIDTID.search(text, at)
        if c is None:
            return out
        at = c.start() + 1
        lo = max(pos, c.start() - 128)
        h = _HOST_RUN.match(text[lo:c.start()][::-1])  # the host: the run of host characters before the colon
        if h is None:
            continue
        m = RECORD.match(text, c.start() - h.end())
        if m is not None:
            out.append(m)
            pos = at = m.end()


# A timestamp before a record header (NCCL_DEBUG_TIMESTAMP_FORMAT, any strftime format; log collectors'
# own): ISO 8601 / "%F %T" (with "%Nf" subseconds, a zone), syslog and "%c" ("Nov 26 00:32:07", "Wed Nov
# 26 00:32:07 2026"), "%T", "%s" (epoch seconds, subseconds), optionally in brackets. Every part is
# bounded and the alternatives start differently: an anchored match costs a few steps, whatever the line.
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_CLOCK = r"\d\d:\d\d:\d\d(?:[.,]\d{1,9})?"
_END = r"(?=[\s\]]|$)"  # an optional part that could also start a host name must end there
_ISO = rf"\d{{4}}-\d\d-\d\d[T ]{_CLOCK}(?: ?(?:Z|[+-]\d\d:?\d\d|UTC){_END})?"
_TIME_COLON = (rf"{_ISO}"
               rf"|(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),? )?{_MONTH} {{1,2}}\d{{1,2}} {_CLOCK}(?: \d{{4}}{_END})?"
               rf"|{_CLOCK}")
_EPOCH = r"\d{9,10}(?:\.\d{1,9})?"
# Glued to the host (a format without a trailing space) only after a bracket or a time with colons
# (no host has one), and only when a header follows; a bare number needs a separator.
_HEADER_AHEAD = r"(?=[^\s:\[\]()<>]{1,128}:\d{1,10}:\d{1,10}[ ])"
TIME_PREFIX = re.compile(
    rf"\[(?P<btime>{_TIME_COLON}|{_EPOCH})\][ \t]{{0,8}}"
    rf"|(?P<time>{_TIME_COLON})(?:[ \t]{{1,8}}|{_HEADER_AHEAD})"
    rf"|(?P<etime>{_EPOCH})[ \t]{{1,8}}",
    re.ASCII,
)
"""One timestamp at the start of a line's text (used anchored, after :func:`~hangdbg.text.lines.strip_prefix`)."""
# The times among the decorations strip_prefix removes: ISO ones, and "[1795653127.123]" (its pattern of
# a dmesg time "[  12.345]" takes an epoch time in brackets too).
_TIME_IN = re.compile(rf"{_ISO}|(?<=\[)\s*{_EPOCH}(?=\])", re.ASCII)
_TIME_FIRST = frozenset("0123456789[JFMASONDTW")  # what a TIME_PREFIX match can start with
# What a strip_prefix decoration can start with besides whitespace and digits ("HOST [stdout] " needs "[std").
_DECOR_FIRST = frozenset("│┃|[(")


def line_prefix(raw: str) -> tuple[str, int | None, str | None]:
    """``(text, launcher rank, time)`` of one line: ``text`` is ``raw`` without its launcher prefixes
    and timestamps (where a record header should start), ``time`` the timestamp nearest the header
    (NCCL's own when there is one; the text as written, ``None`` without one)."""
    c = raw[:1]
    if c and not c.isspace() and not c.isdecimal() and c not in _DECOR_FIRST and c not in _TIME_FIRST and "[std" not in raw:
        return raw, None, None  # what strip_prefix and TIME_PREFIX would leave: the usual "host:pid:tid ..." line
    pre = strip_prefix(raw)
    text, rank, time = pre.text, pre.rank, None
    if text is not raw:
        for tm in _TIME_IN.finditer(raw, 0, len(raw) - len(text)):
            time = tm.group(0).strip()
    for _ in range(4):  # "[rank3]:Nov 26 00:32:07 [default0]: host..." - a few rounds, never a loop
        if not text or text[0] not in _TIME_FIRST:
            break
        m = TIME_PREFIX.match(text)
        if m is None:
            break
        time = m.group("btime") or m.group("time") or m.group("etime")
        pre = strip_prefix(text[m.end():])
        text = pre.text
        if pre.rank is not None:
            rank = pre.rank
    return text, rank, time


def records(text: str) -> list[tuple[re.Match, int]]:
    """The records of one line: ``(header, end)`` per record header in ``text``, each record
    ending where the next begins (concurrent writers spliced them) or at the end of the line."""
    starts = record_starts(text)
    return list(zip(starts, [m.start() for m in starts[1:]] + [len(text)]))


# --- the state ------------------------------------------------------------------------------
class NcclLog:
    """Everything read from a set of NCCL_DEBUG logs (mutable while scanning).

    Attributes:
        files: the paths read, in order.
        procs: ``(host, pid)`` -> :class:`Proc`.
        lines_read / lines_skipped / records: counters.
        errors: ``(path, reason)`` for files that could not be read.
        ip_hosts: IP address -> host, from the logs' own interface lines.
        unattributed_versions: ``NCCL version`` lines without a host prefix, per file index.
        nslices: number of ``--split-on`` slices (1 + the most slice marks any process got).
    """

    def __init__(self, split_on: re.Pattern[str] | None = None) -> None:
        self.files: list[str] = []
        self.procs: dict[tuple[str, int], Proc] = {}
        self.lines_read = 0
        self.lines_skipped = 0
        self.records = 0
        self.errors: list[tuple[str, str]] = []
        self.ip_hosts: dict[str, str] = {}
        self.unattributed_versions: dict[int, set] = {}
        self.version_by_launcher_rank: dict[int, str] = {}
        self.split_on = split_on
        self.nslices = 1
        self.cut_files: set[int] = set()  # files whose last record is cut mid-line (an excerpt)
        self._chunks: dict[int, list[tuple[int, int]]] = {}  # file -> [(start line, byte offset)]
        self._file_procs: dict[int, set] = {}
        self._hosts: set[str] = set()
        # hard-wrap candidate: (fi, lineno, raw text, record header match, message, launcher rank, time)
        self._pending: tuple | None = None
        self._time: str | None = None  # the timestamp of the line being parsed (line_prefix)
        self._heads: dict[bytes, tuple | None] = {}  # fast-scan head -> (host, pid, dev, name): _parse_head

    # -- per-line parsing ------------------------------------------------------------------
    def proc(self, host: str, pid: int, fi: int) -> Proc:
        key = (host, pid)
        p = self.procs.get(key)
        if p is not None and fi in p.files:  # known in this file already (p.files and _file_procs go together)
            return p
        if p is None:
            if host not in self._hosts and self._hosts:
                host = self._unsplice_host(host, pid)
                key = (host, pid)
                p = self.procs.get(key)
            if p is None:
                p = self.procs[key] = Proc(host, pid)
                self._hosts.add(host)
        p.files.add(fi)
        self._file_procs.setdefault(fi, set()).add(key)
        return p

    def _unsplice_host(self, host: str, pid: int) -> str:
        """``sendbunode-004`` (a record spliced after a cut one) -> ``node-004`` when process
        ``node-004:pid`` is known (the pid check keeps ``210.0.0.5`` apart from ``10.0.0.5``)."""
        best = ""
        for h in self._hosts:
            if len(h) > len(best) and host.endswith(h) and (h, pid) in self.procs:
                best = h
        return best or host

    def _unsplice_line(self, host: str, line_hosts: set) -> str:
        """The host of a record spliced right after another one's cut text (``Conneg183``,
        ``0x55cd375g183``): the longest known host, or host of the same line, that ends it."""
        best = ""
        for h in self._hosts | line_hosts:
            if h != host and len(h) > len(best) and host.endswith(h):
                best = h
        return best or host

    def line(self, fi: int, lineno: int, raw: str) -> None:
        """Parse one physical line (line ending removed); beyond :data:`~.textlines.MAX_LINE`
        characters the rest of the line is dropped (no record is that long)."""
        if len(raw) > MAX_LINE:
            raw = raw[:MAX_LINE]
        raw = strip_ansi(raw) if "\x1b" in raw or "#033[" in raw else raw  # colours around a record (a coloured launcher)
        pend = self._pending
        if pend is not None:
            self._pending = None
            pfi, plineno, praw, pm, pmsg, prank, self._time = pend
            if (pfi == fi and plineno == lineno - 1 and raw.strip() and not RECORD.search(raw)
                    and not _SHAPE.search(raw) and not _VERSION.search(raw)):
                for joined in (pmsg + raw, pmsg.rstrip() + " " + raw.lstrip()):
                    if self._record(fi, plineno, praw + raw, pm, joined, prank, strict=True):
                        return
            if not self._record(pfi, plineno, praw, pm, pmsg, prank):
                self.lines_skipped += 1
        self._text(fi, lineno, raw)

    def _text(self, fi: int, lineno: int, raw: str) -> None:
        """Parse the records of one line; a record a hard wrap cut short waits for the next line."""
        if not has_marker(raw):  # a collective line without its header (a quoted paste's > too): its file is its process
            bare = BARE_COLL.match(raw.encode("utf-8", "replace")) if ": opCount " in raw else None
            msg = raw[bare.start("msg"):].strip() if bare else ""
            if bare and not self._record(fi, lineno, raw, _Bare(bare_host(self.files[fi], fi)), msg, None):
                self.lines_skipped += 1
            return
        text, rank, self._time = line_prefix(raw)
        recs = records(text)
        if not recs:
            m = _VERSION.search(text)
            if m:
                if rank is not None:
                    self.version_by_launcher_rank[rank] = m.group(1)
                else:
                    self.unattributed_versions.setdefault(fi, set()).add(m.group(1))
            elif _SHAPE.search(text):
                self.lines_skipped += 1
            return
        last = recs[-1][0]
        line_hosts = {r.group("host") for r, _ in recs}  # once per line, not once per record
        for rm, end in recs:
            hm: re.Match | _Unspliced = rm
            if rm.start():  # a record after another one's (cut) text: its host may have swallowed a tail
                hm = _Unspliced(rm, self._unsplice_line(rm.group("host"), line_hosts))
            msg = text[hm.end():end].rstrip()
            if rm is last and _looks_cut(msg):
                self._pending = (fi, lineno, raw, hm, msg, rank, self._time)
                return
            if not self._record(fi, lineno, raw, hm, msg, rank):
                self.lines_skipped += 1

    def _record(self, fi: int, lineno: int, raw: str, m: re.Match | _Unspliced | _Bare, msg: str, launcher_rank: int | None,
                strict: bool = False) -> bool:
        """One record: False when it does not parse (the caller counts it skipped). Each message
        grammar is tried in a fixed order; a regex runs only when a substring it needs is there."""
        p = self.proc(m.group("host"), int(m.group("pid")), fi)
        if launcher_rank is not None:
            p.launcher_rank = launcher_rank
        if self._time is not None:
            if p.first_time is None:
                p.first_time = self._time
            p.last_time = self._time
        dev = m.group("dev")
        if dev is not None:
            p.devs.add(int(dev))
        level = m.group("level") or m.group("old")
        if p.first_ev is None:
            p.first_ev = Evidence(self.files[fi], lineno, raw)
        if level == "WARN":
            return self._warn(p, msg, Evidence(self.files[fi], lineno, raw), fi)
        if level in ("CALL", "TRACE"):
            self._count_record(p)
            return True
        # INFO
        if ": opCount " in msg:
            cm = _COLL.match(msg)
            if cm is None:
                return False  # a collective line whose fields do not parse
            return self._collective_line(p, fi, lineno, raw, cm)
        im = _INIT.match(msg) if "comm " in msg else None
        if im:
            self._count_record(p)
            self._init(p, im, Evidence(self.files[fi], lineno, raw))
            return True
        if strict:
            return False
        self._count_record(p)
        if " -> " in msg and _CHAIN.match(msg):
            chain(p, msg, Evidence(self.files[fi], lineno, raw))
            return True
        vm = _VERSION.search(msg) if "NCCL version" in msg else None
        if vm:
            p.version = vm.group(1)
            return True
        if "lugin" in msg or "NET/OFI" in msg or "PLUGIN" in msg:
            _plugin(p, msg)
            return True
        if "Using" in msg:
            if msg.startswith(("NET", "Bootstrap")):
                um = _USING.match(msg)
                if um:
                    using(p, um.group("what"), um.group("rest"), self.ip_hosts)
                    return True
            nm = _NETWORK.match(msg) if msg.startswith("Using ") else None
            if nm:
                net = nm.group("net")
                p.networks.add(net)
                if net.lower() not in _INTERNAL_NETS and not (p.plugin or "").startswith("loaded"):
                    p.plugin = "loaded: network " + net  # a network name NCCL does not have is a plugin's
                return True
        return self._info_rest(p, fi, lineno, raw, msg)

    def _collective_line(self, p: Proc, fi: int, lineno: int, raw: str, cm: re.Match) -> bool:
        """A collective line (``Name: opCount ...``) the fast scan did not take."""
        rest = cm.group("rest")
        ptr = _COMM_PTR.search(rest)
        if ptr is None:
            return False
        nr = _NRANKS_BR.search(rest)
        self._count_record(p)
        opv = int(cm.group("op"), 16)
        name = cm.group("name")
        self.collective(p, name, opv, ptr.group(1), rank_number(nr.group(1), 1) if nr else None, (fi, lineno),
                        raw[:MAX_EVIDENCE_TEXT], 1)
        sig = op_fields(name, rest)
        if sig is not None:
            add_op(self._comm(p, ptr.group(1)), opv, sig, (fi, lineno), raw[:MAX_EVIDENCE_TEXT])
        return True

    def _info_rest(self, p: Proc, fi: int, lineno: int, raw: str, msg: str) -> bool:
        """The INFO messages after the interface lines in :meth:`_record`'s order (counted already)."""
        if msg.startswith("Call to connect"):
            rm = _RETRY.match(msg)
            if rm:
                p.retries += 1
                if p.retry_ev is None:
                    p.retry_ev = Evidence(self.files[fi], lineno, raw)
                return True
        am = _INIT_ALL.match(msg) if msg.startswith("nranks ") else None
        if am:
            p.init_all = _small(am.group("n"))
            return True
        if msg.startswith("NCCL_P2P_") and _P2P_ENV.match(msg):
            p.p2p_env = msg
            return True
        if msg.startswith("Channel ") and " : " in msg and "->" not in msg:
            rg = _RING.match(msg)
            if rg:
                p.ring_size = max(p.ring_size, min(len(rg.group("ranks").split()), 4096))
                return True
        if "via " in msg:
            vm = _VIA.search(msg)
            if vm:
                p.transports.add(_transport(vm.group("t")))
            return True
        pm = (_PEER.search(msg) if "peer" in msg else None) or (_CONNECT.search(msg) if "Connect to " in msg else None)
        if pm:  # INFO lines naming a failing peer (socket errors in newer NCCL)
            connect(p, pm, msg, Evidence(self.files[fi], lineno, raw))
        return True

    def _count_record(self, p: Proc) -> None:
        p.records += 1
        self.records += 1

    def _warn(self, p: Proc, msg: str, ev: Evidence, fi: int = 0) -> bool:
        self._count_record(p)
        warn(p, msg, ev)
        return True

    def _comm(self, p: Proc, ptr: str) -> Comm:
        c = p.comms.get(ptr)
        if c is None:
            p.ncomms += 1
            c = p.comms[ptr] = Comm(ptr, order=p.ncomms)
            p.all_comms.append(c)
        return c

    def _init(self, p: Proc, m: re.Match, ev: Evidence) -> None:
        ptr = m.group("ptr")
        rest = m.group("rest")
        tail = _INIT_TAIL.search(rest) if "- " in rest else None
        what = (tail.group("what") or "Init") if tail else None
        state = tail.group("state") if tail else None
        c = p.comms.get(ptr)
        if c is not None and what == "Init" and state == "START" and c.state in ("complete", "destroyed", "aborted"):
            p.ncomms += 1  # pointer reused by a new communicator
            c = p.comms[ptr] = Comm(ptr, order=p.ncomms)
            p.all_comms.append(c)
        c = self._comm(p, ptr)
        c.rank = rank_number(m.group("rank"))
        c.nranks = rank_number(m.group("nranks"), 1)
        idm = _COMMID.search(rest) if "commId " in rest else None
        if idm:
            c.comm_id = idm.group(1)
        pm = _PARENT.search(rest) if "parent " in rest else None
        if pm:
            c.parent = pm.group(1)
        nn = _NNODES.search(rest) if "nNodes " in rest else None
        if nn:
            p.nnodes = _small(nn.group("n"))
        if tail is None or what == "Init":
            c.had_init = True
        if tail:
            if what == "Init":
                if state == "START":
                    if c.state == "":
                        c.state = "start"
                    if c.init_ev is None:
                        c.init_ev, c.init_time = ev, self._time
                else:
                    c.state = "complete"
                    c.init_ev, c.init_time = ev, self._time
            elif what == "Abort":
                c.state = "aborted"
                c.ended = "aborted"
                c.init_ev, c.init_time = ev, self._time
            elif what == "Destroy":
                if c.state != "complete":  # a destroyed communicator whose init completed stays complete
                    c.state = "destroyed"
                c.ended = "destroyed"
            elif what == "Revoke":  # ncclCommRevoke (2.28.7+): its operations cancelled, init unchanged
                c.ended = "revoked"
        elif c.init_ev is None:
            c.init_ev, c.init_time = ev, self._time

    def collective(self, p: Proc, name: str, op: int | None, ptr: str, nranks: int | None,
                   where: tuple[int, int] | None, text: str | None, n: int) -> None:
        """Count ``n`` collectives of type ``name`` on communicator ``ptr`` of ``p``; when ``where``
        is given, the last of them is there with opCount ``op``."""
        c = self._comm(p, ptr)
        if c.nranks is None and nranks is not None:
            c.nranks = nranks
        c.counts[name] += n
        if self.split_on is not None:
            c.slices.setdefault(p.slice, Counter())[name] += n
        if where is not None:
            self.last_collective(p, name, op, ptr, where, text)

    def last_collective(self, p: Proc, name: str, op: int | None, ptr: str, where: tuple[int, int],
                        text: str | None) -> None:
        """Record a collective at ``where`` as the communicator's last one if nothing later was seen."""
        c = self._comm(p, ptr)
        if c.last_where is None or where >= c.last_where:
            c.last_where, c.last_op, c.last_coll, c.last_text = where, op, name, text

    def mark_slice(self, fi: int, raw: str) -> None:
        """A ``--split-on`` line: the process it names (launcher rank / header) starts a new slice,
        else every process of the file does."""
        text, rank, _ = line_prefix(raw)
        starts = record_starts(text)
        targets: list[Proc] = []
        if starts:
            key = (starts[0].group("host"), int(starts[0].group("pid")))
            if key in self.procs:
                targets = [self.procs[key]]
        elif rank is not None:
            targets = [p for p in self.procs.values() if p.launcher_rank == rank]
            targets = targets or [p for p in self.procs.values() if p.rank == rank]
        if not targets:
            targets = [self.procs[k] for k in self._file_procs.get(fi, ())]
        for p in targets:
            p.slice += 1
            self.nslices = max(self.nslices, p.slice + 1)

    def flush(self) -> None:
        """Parse a record still waiting for a hard-wrap continuation (end of file or chunk)."""
        if self._pending is not None:
            fi, lineno, raw, m, msg, rank, self._time = self._pending
            self._pending = None
            if not self._record(fi, lineno, raw, m, msg, rank):
                self.lines_skipped += 1
                self.cut_files.add(fi)

    # -- the end ---------------------------------------------------------------------------
    def finish(self) -> None:
        """Resolve what needs the whole input: versions printed without a host, communicator keys."""
        self.flush()
        for p in self.procs.values():
            if p.version is None and p.launcher_rank in self.version_by_launcher_rank:
                p.version = self.version_by_launcher_rank[p.launcher_rank]
        for fi, versions in self.unattributed_versions.items():
            if len(versions) != 1:
                continue
            v = next(iter(versions))
            for key in self._file_procs.get(fi, ()):
                if self.procs[key].version is None:
                    self.procs[key].version = v
        for p in self.procs.values():
            seen: Counter = Counter()
            for c in p.all_comms:
                if c.comm_id:
                    c.key = c.comm_id
                else:
                    seen[c.nranks] += 1
                    c.key = f"n{c.nranks if c.nranks is not None else '?'}#{seen[c.nranks]}"

    def fetch(self, fi: int, lineno: int) -> str:
        """The raw text of one line (for evidence of lines the fast scan did not keep): read from
        the nearest chunk mark before it or after it (the last collectives are near a file's end)."""
        marks = self._chunks.get(fi) or [(1, 0)]
        i = max(0, bisect.bisect_right([m[0] for m in marks], lineno) - 1)
        (start_line, offset), after = marks[i], marks[i + 1] if i + 1 < len(marks) else None
        try:
            with open_input(self.files[fi]) as f:
                if after is not None and after[0] - lineno < lineno - start_line:
                    where = line_back(f, offset, after, lineno)
                else:
                    where = line_ahead(f, offset, start_line, lineno)
                if where is None:
                    return ""
                f.seek(where)
                parts = [f.read(1 << 16)]
                while b"\n" not in parts[-1] and (more := f.read(1 << 20)):
                    parts.append(more)
                line = b"".join(parts).split(b"\n", 1)[0]
                return line.decode("utf-8", "replace").rstrip("\r\n")[:MAX_EVIDENCE_TEXT]
        except OSError:
            pass
        return ""

    def evidence_of_last(self, c: Comm) -> Evidence | None:
        if c.last_where is None:
            return None
        fi, lineno = c.last_where
        text = c.last_text if c.last_text is not None else self.fetch(fi, lineno)
        return Evidence(self.files[fi], lineno, text)
