"""Streaming parser of NCCL_DEBUG output (``NCCL_DEBUG=INFO|WARN|TRACE``).

Line format (NCCL 2.x, ``src/debug.cc``, ``ncclDebugLog``)::

    host:pid:tid [cudaDev] NCCL INFO msg
    host:pid:tid [cudaDev] file.cc:LINE NCCL WARN msg          (often after a blank line)
    host:pid:tid [cudaDev] 1234.567890 file.cc:LINE NCCL TRACE msg
    host:pid:tid NCCL CALL ncclAllReduce(...)
    host:pid:tid [0] INFO msg  /  host:pid:tid [0] file.cu:LINE WARN msg    (NCCL <= 2.2: no NCCL token)
    NCCL version 2.18.1+cuda12.1                                 (NCCL_DEBUG=VERSION: no host prefix)

Messages understood (NCCL 2.2 - 2.2x, ``init.cc``, ``enqueue.cc``, ``bootstrap.cc``,
``transport/net_socket.cc``, ``transport/net_ib.cc``, ``misc/socket.cc``, ``net.cc``):

* init: ``[ncclCommInitRank|ncclCommInitRankConfig|ncclCommSplit] comm 0x.. rank R nranks N
  cudaDev D [nvmlDev D] busId B [commId 0x..] [parent 0x..] - Init START|Init COMPLETE``,
  ``comm 0x.. rank R nRanks N nNodes M localRanks L localRank l``, ``- Abort COMPLETE``,
  ``- Destroy COMPLETE``;
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

Lines may carry launcher prefixes and timestamps (:func:`textlines.strip_prefix`), two records may
be spliced into one line by concurrent writers (every ``host:pid:tid [d] NCCL`` start in a line
begins a record), a record may be hard-wrapped onto the next line. Anything else (application
prints, progress bars, UCX backtraces) is ignored; a line that has the NCCL record shape but
cannot be parsed is skipped and counted.

Speed: files are read in newline-aligned chunks of bytes; one compiled bytes regex (``findall``)
separates the standard collective lines - the bulk of a big log - from the rest, and these are
aggregated with C-level ``Counter``/``dict`` operations without a Python loop per line. When the
optional C extension ``hangdbg._ncclscan`` is built (``setup.py``; ``HANGDBG_PURE=1`` turns it
off), it does that walk instead: same acceptance as the regex, counts kept per distinct key in C.
Chunks of big files are spread over worker processes. Only the other lines go through the
per-line parser; the totals of runs of chunks without other lines are applied once.
"""

from __future__ import annotations

import bisect
import gc
import mmap
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from itertools import compress, count
from operator import itemgetter, not_

from ..model import MAX_EVIDENCE_TEXT, Evidence
from .textlines import iter_lines, strip_prefix

__all__ = ["NcclLog", "Proc", "Comm", "ConnectFailure", "scan", "scan_path", "sniff", "record_starts", "records",
           "has_marker", "RECORD"]

CHUNK = 16 << 20
"""Bytes per chunk of the fast scan."""
TAIL_WINDOW = 1 << 20
"""Bytes at the end of a chunk searched first for each key's last opCount (widened x4 as needed)."""
PARALLEL_MIN = 64 << 20
"""Files (in total) at least this big are scanned by worker processes."""
MAX_EVIDENCE = 6
"""Evidence lines kept per process and kind (WARNs, error chains)."""

# --- regular expressions --------------------------------------------------------------------
# One record header (src/debug.cc). Host names: pods, hex container ids, IPs; no spaces, colons
# or brackets.
RECORD = re.compile(
    r"(?P<host>[^\s:\[\]()<>]+):(?P<pid>\d+):(?P<tid>\d+)"
    r"(?: \[(?P<dev>-?\d+)\])?"
    r"(?: (?P<ts>\d+\.\d+))?"
    r"(?: (?P<src>[\w./+-]+\.(?:cc|cu|cpp|cxx|c|h|hpp|hh)):(?P<srcline>\d+))?"
    r" (?:NCCL (?P<level>INFO|WARN|TRACE|CALL|ABORT)|(?P<old>INFO|WARN|TRACE))(?= |$) ?"
)
# The shape of a record: a line with this but no parsable header is skipped and counted.
_SHAPE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|CALL)\b|:\d+:\d+ \[-?\d+\] (?:[\w./+-]+:\d+ )?(?:INFO|WARN) ")
_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+\S*)")
_COLL = re.compile(r"^(?P<name>[A-Z][A-Za-z]+): opCount (?P<op>[0-9a-fA-F]+)\b(?P<rest>.*)$")
_COMM_PTR = re.compile(r"\bcomm (0x[0-9a-fA-F]+|\(nil\))")
_NRANKS_BR = re.compile(r"\[nranks=(\d+)\]")
_INIT = re.compile(
    r"^(?:(?P<fn>nccl\w+)(?::)?\s+)?comm (?P<ptr>0x[0-9a-fA-F]+|\(nil\)) rank (?P<rank>-?\d+) n[Rr]anks (?P<nranks>\d+)"
    r"(?P<rest>.*)$"
)
_INIT_TAIL = re.compile(r" - (?:(?P<what>Init|Abort|Destroy) )?(?P<state>START|COMPLETE)\b")
_COMMID = re.compile(r"\bcommId (0x[0-9a-fA-F]+)")
_PARENT = re.compile(r"\bparent (0x[0-9a-fA-F]+)")
_USING = re.compile(r"^(?P<what>NET/\w+|NET|Bootstrap)\s*:\s*Using\b(?: interface)?(?P<rest>.*)$")
_IFACE = re.compile(r"(?:\[\d+\])?(?P<name>[A-Za-z][\w.\-]*):(?P<ip>[0-9A-Fa-f.:]*[0-9A-Fa-f](?:%[\w.\-]+)?)<\d+>")
_IBDEV = re.compile(r"\[\d+\](?P<dev>[\w.\-]+:\d+/\w+)")
_PLUGIN_NONE = re.compile(
    r"NET/Plugin\s*:?\s*(?:Could not find|No plugin found|Plugin load returned|Failed to find|Plugin load \(.*\) returned)"
    r"|Using internal (?:network )?(?:plugin|implementation)", re.I)
_PLUGIN_LOADED = re.compile(
    r"(?:Loaded (?:net|coll|nccl)?\s*plugin|NET/Plugin\s*:\s*Loaded(?: net plugin)?|NET/Plugin: Using)\s*:?\s*(?P<name>[^(\n]*?)\s*(?:\(v\d+\))?\s*$"
    r"|NET/OFI Using (?P<ofi>\S+)", re.I)
_NETWORK = re.compile(r"^Using network (?P<net>.+?)\s*$")
_VIA = re.compile(r"\bvia (?P<t>[A-Za-z][\w/]*)")
_CONNECT = re.compile(r"Connect to (?P<peer>[^\s<>]+)<(?P<port>\d+)> failed\s*:?\s*(?P<why>.*)$")
_PEER = re.compile(r"\b(?:from peer|remote peer|peer)\s+(?P<peer>[^\s<>]+)<(?P<port>\d+)>")
_CHAIN = re.compile(r"^[\w./+-]+\.(?:cc|cu|cpp|c|h):\d+ -> \d+")

_PREFIX = re.compile(r"^(?P<host>[^\s:\[\]()<>]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\]$")
_HEAD = re.compile(r"^(?P<host>[^\s:\[\]()<>]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\] NCCL INFO (?P<name>[A-Za-z]+)$")

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
_MARKERS = ("NCCL", "INFO", "WARN", "TRACE")
_BMARKERS = tuple(m.encode() for m in _MARKERS)


def has_marker(line: str | bytes) -> bool:
    """The cheap pre-test for a record: ``line`` holds ``NCCL``, ``INFO``, ``WARN`` or ``TRACE``
    (:data:`RECORD` and :data:`_SHAPE` need one of them: ``NCCL`` levels and old-style levels;
    ``_ncclscan.c`` keeps its other lines by the same test)."""
    a, b, c, d = _BMARKERS if isinstance(line, bytes) else _MARKERS
    return a in line or b in line or c in line or d in line


def sniff(head: bytes) -> bool:
    """True when the first bytes of a file look like NCCL_DEBUG output.

    Needs ``NCCL`` and one of the levels ``INFO``/``WARN``/``TRACE`` somewhere (cheap tests first:
    report sniffs every file), then one record header (with the ``NCCL`` token, NCCL >= 2.3, or
    old-style ``host:pid:tid [0] INFO``) or a ``NCCL version`` line next to a ``NCCL INFO``.
    A head whose only records are ``NCCL CALL``/``NCCL ABORT`` lines is not taken.
    """
    if b"NCCL" not in head or not any(m in head for m in _BMARKERS[1:]):
        return False
    text = head.decode("utf-8", "replace")
    return RECORD.search(text) is not None or (_VERSION.search(text) is not None and "NCCL INFO" in text)


def record_starts(text: str) -> list[re.Match]:
    """Every record header in ``text`` (several when concurrent writers spliced records)."""
    return list(RECORD.finditer(text))


def records(text: str) -> list[tuple[re.Match, int]]:
    """The records of one line: ``(header, end)`` per record header in ``text``, each record
    ending where the next begins (concurrent writers spliced them) or at the end of the line."""
    starts = record_starts(text)
    return list(zip(starts, [m.start() for m in starts[1:]] + [len(text)]))


# --- the state ------------------------------------------------------------------------------
@dataclass(slots=True)
class Comm:
    """One NCCL communicator as one process saw it (``comm`` pointers are per process).

    ``key`` identifies the communicator across processes: ``commId`` when the init lines print
    it (NCCL >= 2.12), else ``n{nranks}#{k}`` - the k-th communicator of that size the process
    created (ranks create their communicators in the same order, as PyTorch process groups do).
    """

    ptr: str
    rank: int | None = None
    nranks: int | None = None
    comm_id: str | None = None
    parent: str | None = None
    key: str = ""
    state: str = ""  # "", "start", "complete", "aborted", "destroyed"
    counts: Counter = field(default_factory=Counter)
    last_op: int | None = None
    last_coll: str | None = None
    last_where: tuple[int, int] | None = None  # (file index, line number)
    last_text: str | None = None
    init_ev: Evidence | None = None
    order: int = 0
    slices: dict = field(default_factory=dict)  # slice -> Counter(collective)


@dataclass(slots=True)
class ConnectFailure:
    """A WARN naming a peer that could not be reached: ``Connect to IP<port> failed : why``."""

    peer: str
    port: int
    reason: str
    evidence: Evidence


@dataclass(slots=True)
class Proc:
    """One process (``host``, ``pid``) that wrote NCCL records."""

    host: str
    pid: int
    files: set = field(default_factory=set)
    devs: set = field(default_factory=set)
    launcher_rank: int | None = None
    version: str | None = None
    ifaces: set = field(default_factory=set)  # "ib0", "mlx5_0:1/IB"
    ips: set = field(default_factory=set)
    plugin: str | None = None  # "none" or "loaded: NAME"
    networks: set = field(default_factory=set)
    transports: set = field(default_factory=set)
    comms: dict = field(default_factory=dict)  # ptr -> Comm (latest incarnation)
    all_comms: list = field(default_factory=list)
    ncomms: int = 0
    warns: list = field(default_factory=list)
    nwarns: int = 0
    chains: list = field(default_factory=list)
    nchains: int = 0
    connects: list = field(default_factory=list)
    records: int = 0
    first_ev: Evidence | None = None
    slice: int = 0

    @property
    def label(self) -> str:
        return f"{self.host}.{self.pid}"

    @property
    def sort_key(self) -> tuple:
        """Processes in rank order, those without a rank last (by host, pid)."""
        r = self.rank
        return (r is None, r if r is not None else 0, self.host, self.pid)

    @property
    def rank(self) -> int | None:
        """The global rank: rank in the largest communicator (first created), else the launcher's."""
        best = None
        for c in self.all_comms:
            if c.rank is None or c.nranks is None:
                continue
            if best is None or (c.nranks, -c.order) > (best.nranks, -best.order):
                best = c
        if best is not None:
            return best.rank
        return self.launcher_rank


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
        self._chunks: dict[int, list[tuple[int, int]]] = {}  # file -> [(start line, byte offset)]
        self._file_procs: dict[int, set] = {}
        self._hosts: set[str] = set()
        # hard-wrap candidate: (fi, lineno, raw text, record header match, message, launcher rank)
        self._pending: tuple | None = None
        self._heads: dict[bytes, tuple | None] = {}  # fast-scan head -> (host, pid, dev, name): _parse_head

    # -- per-line parsing ------------------------------------------------------------------
    def proc(self, host: str, pid: int, fi: int) -> Proc:
        key = (host, pid)
        p = self.procs.get(key)
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

    def line(self, fi: int, lineno: int, raw: str) -> None:
        """Parse one physical line (line ending removed)."""
        pend = self._pending
        if pend is not None:
            self._pending = None
            pfi, plineno, praw, pm, pmsg, prank = pend
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
        if not has_marker(raw):
            return
        pre = strip_prefix(raw)
        text = pre.text
        recs = records(text)
        if not recs:
            m = _VERSION.search(text)
            if m:
                if pre.rank is not None:
                    self.version_by_launcher_rank[pre.rank] = m.group(1)
                else:
                    self.unattributed_versions.setdefault(fi, set()).add(m.group(1))
            elif _SHAPE.search(text):
                self.lines_skipped += 1
            return
        last = recs[-1][0]
        for m, end in recs:
            msg = text[m.end():end].rstrip()
            if m is last and _looks_cut(msg):
                self._pending = (fi, lineno, raw, m, msg, pre.rank)
                return
            if not self._record(fi, lineno, raw, m, msg, pre.rank):
                self.lines_skipped += 1

    def _record(self, fi: int, lineno: int, raw: str, m: re.Match, msg: str, launcher_rank: int | None,
                strict: bool = False) -> bool:
        host = m.group("host")
        p = self.proc(host, int(m.group("pid")), fi)
        if launcher_rank is not None:
            p.launcher_rank = launcher_rank
        if m.group("dev") is not None:
            p.devs.add(int(m.group("dev")))
        level = m.group("level") or m.group("old")
        ev = Evidence(self.files[fi], lineno, raw)
        if p.first_ev is None:
            p.first_ev = ev
        if level == "WARN":
            return self._warn(p, msg, ev)
        if level in ("CALL", "TRACE"):
            self._count_record(p)
            return True
        # INFO
        cm = _COLL.match(msg)
        if cm:
            ptr = _COMM_PTR.search(cm.group("rest"))
            if ptr is None:
                return False
            nr = _NRANKS_BR.search(cm.group("rest"))
            self._count_record(p)
            self.collective(p, cm.group("name"), int(cm.group("op"), 16), ptr.group(1),
                            int(nr.group(1)) if nr else None, (fi, lineno), raw[:MAX_EVIDENCE_TEXT], 1)
            return True
        if ": opCount " in msg:
            return False  # a collective line whose fields do not parse
        im = _INIT.match(msg)
        if im:
            self._count_record(p)
            self._init(p, im, ev)
            return True
        if strict:
            return False
        self._count_record(p)
        if _CHAIN.match(msg):
            p.nchains += 1
            if len(p.chains) < MAX_EVIDENCE:
                p.chains.append(ev)
            return True
        vm = _VERSION.search(msg)
        if vm:
            p.version = vm.group(1)
            return True
        um = _USING.match(msg)
        if um:
            self._using(p, um.group("what"), um.group("rest"))
            return True
        if "lugin" in msg or "NET/OFI" in msg:
            lm = _PLUGIN_LOADED.search(msg)
            if lm:
                p.plugin = "loaded: " + (lm.group("name") or lm.group("ofi") or "?").strip()
            elif _PLUGIN_NONE.search(msg) and (p.plugin is None or p.plugin == "none"):
                p.plugin = "none"
            return True
        nm = _NETWORK.match(msg)
        if nm:
            p.networks.add(nm.group("net"))
            return True
        if "via " in msg:
            vm = _VIA.search(msg)
            if vm:
                p.transports.add(_transport(vm.group("t")))
            return True
        pm = _PEER.search(msg) or _CONNECT.search(msg)
        if pm:  # INFO lines naming a failing peer (socket errors in newer NCCL)
            self._connect(p, pm, msg, ev)
        return True

    def _count_record(self, p: Proc) -> None:
        p.records += 1
        self.records += 1

    def _warn(self, p: Proc, msg: str, ev: Evidence) -> bool:
        self._count_record(p)
        p.nwarns += 1
        if len(p.warns) < MAX_EVIDENCE:
            p.warns.append(ev)
        cm = _CONNECT.search(msg) or _PEER.search(msg)
        if cm:
            self._connect(p, cm, msg, ev)
        return True

    def _connect(self, p: Proc, m: re.Match, msg: str, ev: Evidence) -> None:
        why = m.groupdict().get("why") or msg[m.end():].strip(" :,")
        if len(p.connects) < 64:
            p.connects.append(ConnectFailure(m.group("peer"), int(m.group("port")), why.strip(), ev))

    def _using(self, p: Proc, what: str, rest: str) -> None:
        for im in _IFACE.finditer(rest):
            ip = im.group("ip").split("%", 1)[0]
            if what.startswith("NET/IB") and "OOB" not in rest[:im.start()]:
                continue
            if what != "NET/IB":
                p.ifaces.add(im.group("name"))
            p.ips.add(ip)
            self.ip_hosts.setdefault(ip, p.host)
        if what.startswith("NET/IB"):
            for dm in _IBDEV.finditer(rest):
                p.ifaces.add(dm.group("dev"))

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
        tail = _INIT_TAIL.search(rest)
        c = p.comms.get(ptr)
        if c is not None and tail and tail.group("state") == "START" and c.state in ("complete", "destroyed", "aborted"):
            p.ncomms += 1  # pointer reused by a new communicator
            c = p.comms[ptr] = Comm(ptr, order=p.ncomms)
            p.all_comms.append(c)
        c = self._comm(p, ptr)
        c.rank = int(m.group("rank"))
        c.nranks = int(m.group("nranks"))
        idm = _COMMID.search(rest)
        if idm:
            c.comm_id = idm.group(1)
        pm = _PARENT.search(rest)
        if pm:
            c.parent = pm.group(1)
        if tail:
            what, state = tail.group("what") or "Init", tail.group("state")
            if what == "Init":
                if state == "START":
                    if c.state == "":
                        c.state = "start"
                    c.init_ev = c.init_ev or ev
                else:
                    c.state = "complete"
                    c.init_ev = ev
            elif what == "Abort":
                c.state = "aborted"
                c.init_ev = ev
            elif what == "Destroy":
                c.state = "destroyed"
        elif c.init_ev is None:
            c.init_ev = ev

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

    def last_collective(self, p: Proc, name: str, op: int, ptr: str, where: tuple[int, int], text: str | None) -> None:
        """Record a collective at ``where`` as the communicator's last one if nothing later was seen."""
        c = self._comm(p, ptr)
        if c.last_where is None or where >= c.last_where:
            c.last_where, c.last_op, c.last_coll, c.last_text = where, op, name, text

    def mark_slice(self, fi: int, raw: str) -> None:
        """A ``--split-on`` line: the process it names (launcher rank / header) starts a new slice,
        else every process of the file does."""
        pre = strip_prefix(raw)
        starts = record_starts(pre.text)
        targets: list[Proc] = []
        if starts:
            key = (starts[0].group("host"), int(starts[0].group("pid")))
            if key in self.procs:
                targets = [self.procs[key]]
        elif pre.rank is not None:
            targets = [p for p in self.procs.values() if p.launcher_rank == pre.rank]
            targets = targets or [p for p in self.procs.values() if p.rank == pre.rank]
        if not targets:
            targets = [self.procs[k] for k in self._file_procs.get(fi, ())]
        for p in targets:
            p.slice += 1
            self.nslices = max(self.nslices, p.slice + 1)

    def flush(self) -> None:
        """Parse a record still waiting for a hard-wrap continuation (end of file or chunk)."""
        if self._pending is not None:
            fi, lineno, raw, m, msg, rank = self._pending
            self._pending = None
            if not self._record(fi, lineno, raw, m, msg, rank):
                self.lines_skipped += 1

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
        """The raw text of one line (for evidence of lines the fast scan did not keep)."""
        marks = self._chunks.get(fi)
        path = self.files[fi]
        start_line, offset = 1, 0
        if marks:
            i = bisect.bisect_right([m[0] for m in marks], lineno) - 1
            if i >= 0:
                start_line, offset = marks[i]
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                n = start_line
                for rawb in f:
                    if n == lineno:
                        return rawb.decode("utf-8", "replace").rstrip("\r\n")[:MAX_EVIDENCE_TEXT]
                    n += 1
        except OSError:
            pass
        return ""

    def evidence_of_last(self, c: Comm) -> Evidence | None:
        if c.last_where is None:
            return None
        fi, lineno = c.last_where
        text = c.last_text if c.last_text is not None else self.fetch(fi, lineno)
        return Evidence(self.files[fi], lineno, text)


def _looks_cut(msg: str) -> bool:
    """A record that a hard wrap cut short: a collective line without its comm pointer, an init
    line with ``cudaDev`` but without its `` - Init ...`` tail."""
    if ": opCount " in msg:
        return _COMM_PTR.search(msg) is None
    if msg.startswith(("comm 0x", "ncclCommInit", "ncclCommSplit")) and " rank " in msg:
        return " - " not in msg and "nNodes" not in msg and "localRank" not in msg
    return False


def _transport(t: str) -> str:
    """``P2P/IPC/read`` -> ``P2P/IPC``; ``NET/IB/0`` -> ``NET/IB``; ``SHM/direct/direct`` -> ``SHM``."""
    parts = [x for x in t.split("/") if x and not x.isdigit()]
    if not parts:
        return t
    if parts[0] == "NET" and len(parts) > 1:
        return "/".join(parts[:2])
    if parts[0] == "P2P" and len(parts) > 1 and parts[1] in ("IPC", "CUMEM", "direct"):
        return "P2P/" + parts[1]
    return parts[0]


# --- the fast scan ----------------------------------------------------------------------------
def _ranges(size: int, path: str, chunk: int) -> list[tuple[int, int]]:
    """Newline-aligned byte ranges of about ``chunk`` bytes covering a file: each range ends after
    the first newline at or past ``start + chunk`` (read in pieces of 64 KiB: a line with no end
    costs no memory), or at ``size``."""
    out = []
    start = 0
    with open(path, "rb") as f:
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
    """The C scan (``hangdbg/_ncclscan.c``, built by setup.py when a compiler is there), or None
    when it is not built or ``HANGDBG_PURE=1`` asks for the pure-Python scan."""
    if os.environ.get("HANGDBG_PURE", "") not in ("", "0"):
        return None
    try:
        from .. import _ncclscan
    except ImportError:
        return None
    return _ncclscan


_cscan = _load_cscan()


def scan_path() -> str:
    """Which fast scan :func:`scan` uses: ``"c"`` (the ``hangdbg._ncclscan`` extension) or ``"python"``."""
    return "c" if _cscan is not None else "python"


def _scan_chunk(path: str, start: int, end: int) -> dict:
    """Scan one newline-aligned byte range: aggregated standard collective lines + other lines.

    Runs in a worker process for big inputs; returns small picklable data. With the C extension
    (:func:`scan_path`), ``_ncclscan.scan`` walks the mapped range once and returns the same data
    as the Python code below, which it replaces (``tests/test_nccl_cscan.py`` holds them equal).
    """
    if _cscan is not None:
        base = start - start % mmap.ALLOCATIONGRANULARITY  # map the range only, read ahead in one go
        if hasattr(mmap, "MAP_POPULATE"):  # Linux
            how = {"flags": mmap.MAP_SHARED | mmap.MAP_POPULATE, "prot": mmap.PROT_READ}
        else:
            how = {"access": mmap.ACCESS_READ}
        with open(path, "rb") as f, mmap.mmap(f.fileno(), end - base, offset=base, **how) as data:
            nlines, coll, lasts, other = _cscan.scan(data, start - base, end - base)
        return {"nlines": nlines, "coll": coll, "lasts": lasts, "other": other}
    return _scan_chunk_py(path, start, end)


def _scan_chunk_py(path: str, start: int, end: int) -> dict:
    """The pure-Python :func:`_scan_chunk`.

    The file is mapped (no copy); every line of the range is one ``_FAST`` match starting at the
    newline before it. Counts come from ``Counter`` over the ``(head, comm)`` pairs; the last
    opCount of each pair from a second match over the end of the range only (widened until every
    pair is seen).
    """
    with open(path, "rb") as f:
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
    enabled = gc.isenabled()
    gc.disable()  # ~100k short-lived tuples per chunk, no cycles: collections only cost time
    try:
        return _scan_chunk(*args)
    except (OSError, ValueError) as exc:  # the file shrank or vanished while being read
        return {"error": getattr(exc, "strerror", None) or str(exc)}
    finally:
        if enabled:
            gc.enable()


def scan(paths: list[str], split_on: re.Pattern[str] | None = None, workers: int | None = None,
         chunk: int | None = None) -> NcclLog:
    """Read NCCL_DEBUG logs into an :class:`NcclLog` (never raises for bad content).

    Args:
        paths: files (interleaved logs or ``NCCL_DEBUG_FILE=%h.%p`` files).
        split_on: a regex for ``--split-on``: a matching line starts a new slice (iteration); the
            per-line parser is used for the whole input then.
        workers: processes for the fast scan (default: the CPUs available, used only for inputs of
            at least :data:`PARALLEL_MIN` bytes); 1 scans in this process.
        chunk: bytes per chunk (tests use small chunks to exercise chunk boundaries).

    Unreadable files are recorded in ``errors``.
    """
    log = NcclLog(split_on)
    sizes = []
    for path in paths:
        try:
            st = os.stat(path)
            sizes.append(st.st_size)
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
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415 - only big inputs need it

    chunk = chunk or CHUNK
    tasks = []
    for path, size in zip(paths, sizes):
        if size < 0:
            continue
        fi = len(log.files)
        log.files.append(path)
        try:
            tasks.extend((fi, path, s, e) for s, e in _ranges(size, path, chunk))
        except OSError as exc:
            log.errors.append((path, exc.strerror or str(exc)))
    ex = ProcessPoolExecutor(workers) if workers > 1 and len(tasks) > 1 else None
    try:
        args = [t[1:] for t in tasks]
        results = ex.map(_scan_chunk_args, args) if ex else map(_scan_chunk_args, args)
        line0: dict[int, int] = {}
        failed: set[int] = set()
        pend = None
        for (fi, path, s, _e), res in zip(tasks, results):
            if "error" in res or fi in failed:
                if fi not in failed:
                    log.errors.append((path, res["error"]))
                    failed.add(fi)
                continue
            first = line0.get(fi, 1)
            log._chunks.setdefault(fi, []).append((first, s))
            pend = _merge(log, fi, first, res, pend)
            line0[fi] = first + res["nlines"]
            log.lines_read += res["nlines"]
        if pend is not None:
            _flush(log, pend)
    finally:
        if ex:
            ex.shutdown()
    log.finish()
    return log


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
        log.collective(p, name, None, ptr, int(nr[:-1]), None, None, n)
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
