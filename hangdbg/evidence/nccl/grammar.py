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

The fast scan that feeds :class:`NcclLog` from files is :mod:`hangdbg.evidence.nccl.scan`.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter

from ...model import MAX_EVIDENCE_TEXT, Evidence
from ...rankset import rank_number
from .records import (_BENIGN_WARN, _CHAIN_FILE, _CHECKED_IN, _INIT_ALL, _INTERNAL_NETS, _NET_ERROR, _NNODES, _P2P_ENV,
    _RETRY, Comm, ConnectFailure, Proc, _plugin, _small, _transport, _Unspliced, add_op, op_fields)
from ...text.lines import MAX_LINE, open_input, strip_prefix

__all__ = ["RECORD", "Comm", "ConnectFailure", "NcclLog", "Proc", "has_marker", "record_starts", "records", "sniff"]

MAX_EVIDENCE = 6
"""Evidence lines kept per process and kind (WARNs, error chains)."""

# --- regular expressions --------------------------------------------------------------------
# One record header (src/debug.cc). Host names: pods, hex container ids, IPs; no spaces, colons
# or brackets; bounded lengths keep a search linear on a long line without a colon.
RECORD = re.compile(
    r"(?P<host>[^\s:\[\]()<>]{1,128}):(?P<pid>\d{1,10}):(?P<tid>\d{1,10})"
    r"(?: \[(?P<dev>-?\d{1,6})\])?"
    r"(?: (?P<ts>\d{1,12}\.\d{1,12}))?"
    r"(?: (?P<src>[\w./+-]{1,200}\.(?:cc|cu|cpp|cxx|c|h|hpp|hh)):(?P<srcline>\d{1,7}))?"
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
_IFACE = re.compile(r"(?:\[\d{1,4}\])?(?<![\w.\-])(?P<name>[A-Za-z][\w.\-]{0,63}):(?P<ip>[0-9A-Fa-f.:]{0,45}[0-9A-Fa-f](?:%[\w.\-]{1,63})?)<\d{1,6}>")
_NETWORK = re.compile(r"^Using (?:internal )?[Nn]etwork (?P<net>.+?)\s*$")
_IBDEV = re.compile(r"\[\d+\](?P<dev>[\w.\-]+:\d+/\w+)")
_VIA = re.compile(r"\bvia (?P<t>[A-Za-z][\w/]*)")
_RING = re.compile(r"^Channel \d{1,3}/\d{1,3} :(?P<ranks>(?: {1,8}\d{1,6}){2,4096}) *$")  # graph/connect.cc ring order
_CONNECT = re.compile(r"Connect to (?P<peer>[^\s<>]+)<(?P<port>\d+)> failed\s*:?\s*(?P<why>.*)$")
_PEER = re.compile(r"\b(?:from peer|remote peer|peer)\s+(?P<peer>[^\s<>]+)<(?P<port>\d+)>")
_CHAIN = re.compile(r"^[\w./+-]+\.(?:cc|cu|cpp|c|h):\d+ -> \d+")

_MARKERS = ("NCCL", "INFO", "WARN", "TRACE")
_BMARKERS = tuple(m.encode() for m in _MARKERS)


def has_marker(line: str | bytes) -> bool:
    """The cheap pre-test for a record: ``line`` holds ``NCCL``, ``INFO``, ``WARN`` or ``TRACE``
    (:data:`RECORD` and :data:`_SHAPE` need one of them: ``NCCL`` levels and old-style levels;
    ``_cscan.c`` keeps its other lines by the same test)."""
    if isinstance(line, bytes):
        a, b, c, d = _BMARKERS
        return a in line or b in line or c in line or d in line
    s, t, u, v = _MARKERS
    return s in line or t in line or u in line or v in line


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
        line_hosts = {r.group("host") for r, _ in recs}
        for rm, end in recs:
            hm: re.Match | _Unspliced = rm
            if rm.start():  # a record after another one's (cut) text: its host may have swallowed a tail
                hm = _Unspliced(rm, self._unsplice_line(rm.group("host"), line_hosts))
            msg = text[hm.end():end].rstrip()
            if rm is last and _looks_cut(msg):
                self._pending = (fi, lineno, raw, hm, msg, pre.rank)
                return
            if not self._record(fi, lineno, raw, hm, msg, pre.rank):
                self.lines_skipped += 1

    def _record(self, fi: int, lineno: int, raw: str, m: re.Match | _Unspliced, msg: str, launcher_rank: int | None,
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
            return self._warn(p, msg, ev, fi)
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
            opv = int(cm.group("op"), 16)
            self.collective(p, cm.group("name"), opv, ptr.group(1),
                            rank_number(nr.group(1), 1) if nr else None, (fi, lineno), raw[:MAX_EVIDENCE_TEXT], 1)
            sig = op_fields(cm.group("name"), cm.group("rest"))
            if sig is not None:
                add_op(self._comm(p, ptr.group(1)), opv, sig, (fi, lineno), raw[:MAX_EVIDENCE_TEXT])
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
            self._chain(p, msg, ev)
            return True
        vm = _VERSION.search(msg)
        if vm:
            p.version = vm.group(1)
            return True
        if "lugin" in msg or "NET/OFI" in msg or "PLUGIN" in msg:
            _plugin(p, msg)
            return True
        um = _USING.match(msg)
        if um:
            self._using(p, um.group("what"), um.group("rest"))
            return True
        nm = _NETWORK.match(msg)
        if nm:
            net = nm.group("net")
            p.networks.add(net)
            if net.lower() not in _INTERNAL_NETS and not (p.plugin or "").startswith("loaded"):
                p.plugin = "loaded: network " + net  # a network name NCCL does not have is a plugin's
            return True
        if msg.startswith("Call to connect"):
            rm = _RETRY.match(msg)
            if rm:
                p.retries += 1
                if p.retry_ev is None:
                    p.retry_ev = ev
                return True
        am = _INIT_ALL.match(msg)
        if am:
            p.init_all = _small(am.group("n"))
            return True
        em = _P2P_ENV.match(msg)
        if em:
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
        pm = _PEER.search(msg) or _CONNECT.search(msg)
        if pm:  # INFO lines naming a failing peer (socket errors in newer NCCL)
            self._connect(p, pm, msg, ev)
        return True

    def _count_record(self, p: Proc) -> None:
        p.records += 1
        self.records += 1

    def _warn(self, p: Proc, msg: str, ev: Evidence, fi: int = 0) -> bool:
        self._count_record(p)
        if _BENIGN_WARN.search(msg):
            p.benign_warns += 1
        p.nwarns += 1
        if len(p.warns) < MAX_EVIDENCE:
            p.warns.append(ev)
        cm = _CONNECT.search(msg) or _PEER.search(msg)
        if cm:
            self._connect(p, cm, msg, ev)
        elif (nm := _NET_ERROR.search(msg)) is not None and len(p.net_errors) < MAX_EVIDENCE:
            p.net_errors.append((msg[:nm.start()].strip(" :") + " " + nm.group(0).strip(), ev))
        if "checked in" in msg and _CHECKED_IN.search(msg) and len(p.checked_in) < MAX_EVIDENCE:
            p.checked_in.append(ev)
        return True

    def _chain(self, p: Proc, msg: str, ev: Evidence) -> None:
        """An error chain line ``file.cc:LINE -> CODE [(why)] [Async thread]`` (NCCLCHECK in
        ``include/checks.h``): the first one of a process is the root, one through ``init.cc``/``init.cu``
        means communicator init returned the error, one through ``bootstrap.cc`` that bootstrap failed."""
        p.nchains += 1
        if len(p.chains) < MAX_EVIDENCE:
            p.chains.append(ev)
        cm = _CHAIN_FILE.match(msg)
        if cm is None:
            return
        base = cm.group("file").rsplit("/", 1)[-1]
        if p.chain_first is None:
            p.chain_first = (cm.group("file"), int(cm.group("code")), cm.group("rest").strip(), ev)
        if base in ("init.cc", "init.cu") and p.init_fail is None:
            p.init_fail = ev
        elif base == "bootstrap.cc":
            p.boot_chain = True

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
            if what == "Bootstrap":
                p.boot_ifaces.add(im.group("name"))
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
        c.rank = rank_number(m.group("rank"))
        c.nranks = rank_number(m.group("nranks"), 1)
        idm = _COMMID.search(rest)
        if idm:
            c.comm_id = idm.group(1)
        pm = _PARENT.search(rest)
        if pm:
            c.parent = pm.group(1)
        nn = _NNODES.search(rest)
        if nn:
            p.nnodes = _small(nn.group("n"))
        if tail is None or (tail.group("what") or "Init") == "Init":
            c.had_init = True
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

    def last_collective(self, p: Proc, name: str, op: int | None, ptr: str, where: tuple[int, int],
                        text: str | None) -> None:
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
        """The raw text of one line (for evidence of lines the fast scan did not keep)."""
        marks = self._chunks.get(fi)
        path = self.files[fi]
        start_line, offset = 1, 0
        if marks:
            i = bisect.bisect_right([m[0] for m in marks], lineno) - 1
            if i >= 0:
                start_line, offset = marks[i]
        try:
            with open_input(path) as f:
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

