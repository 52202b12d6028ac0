"""The records of a scanned NCCL_DEBUG log (:class:`Proc`, :class:`Comm`, :class:`ConnectFailure`)
and the grammars of single messages: net/tuner/profiler plugin lines, connect retries, socket
errors, error-chain frames (NCCL 2.x ``src/net.cc``, ``src/plugin/*.cc``, ``misc/socket.cc``,
``bootstrap.cc``, ``include/checks.h``). Used by :mod:`hangdbg.evidence.nccl.grammar`.

Communicator init lines (``src/init.cc``; ``%s`` is the calling function: ``ncclCommInitRank``, ``ncclCommInitRankConfig``,
``ncclCommInitAll``, ``ncclCommInitRankScalable``, ``ncclCommSplit``, ``ncclCommShrink``, ``ncclCommGrow``):

======================  ====================================================================================
NCCL                    ``INFO(NCCL_INIT, ...)`` format
======================  ====================================================================================
2.3                     ``comm %p rank %d nranks %d - COMPLETE``
2.4                     ``comm %p rank %d nranks %d cudaDev %d nvmlDev %d - Init COMPLETE``
2.5 - 2.15              ``comm %p rank %d nranks %d cudaDev %d busId %x - Init COMPLETE`` (``%lx`` from 2.8.4)
2.16 - 2.18.1           ``comm %p rank %d nranks %d cudaDev %d busId %lx commId 0x%llx - Init COMPLETE``
2.18.3 - 2.20           ``comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START``
                        (and ``- Init COMPLETE``)
2.21 - 2.22             ``ncclCommInitRank comm %p ... commId 0x%llx - Init START|COMPLETE``;
                        ``ncclCommSplit comm %p ... busId %lx parent %p color %d key %d commId 0x%llx - Init ..``
2.23 - 2.28             ``%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START``
                        (and ``COMPLETE``); a split: ``%s comm %p ... parent %p [splitCount %d] color %d key %d- Init
                        START`` (no space before the dash) and ``... key %d - Init COMPLETE``
2.29 - 2.30             ``[Rank %d] %s comm %p ... commId 0x%llx - Init START``; a split or grow:
                        ``%s comm %p ... parent %p childCount %d color %d key %d- Init START``
2.12 - 2.30             ``comm %p rank %d nranks %d cudaDev %d busId %lx - Destroy COMPLETE|Abort COMPLETE``
                        (``- %s COMPLETE`` from 2.22)
2.28+                   ``comm %p rank %d nRanks %d cudaDev %d busId %lx - Abort START``; ``... - Revoke START``,
                        ``... - Revoke COMPLETE, result %d`` (2.28.7+, ``ncclCommRevoke``)
2.20+                   ``comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d``
======================  ====================================================================================

Read as: ``[[Rank R] ][FUNCTION ]comm 0x.. rank R nranks N ...[ ]- [Init|Abort|Destroy|Revoke ]START|COMPLETE``
(:data:`_INIT`, :data:`_INIT_TAIL`); a ``Destroy`` after ``Init COMPLETE`` leaves the init complete
(``Comm.ended`` says how the communicator ended);
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections import Counter
from dataclasses import dataclass, field

from ...model import Evidence

__all__ = ["MAX_OPS", "P2P_OPS", "Comm", "ConnectFailure", "Proc", "add_op", "op_fields", "op_sig"]

_PLUGIN_NONE = re.compile(
    r"NET/Plugin ?:? ?(?:Could not find|No plugin found|Plugin load returned|Failed to find|Plugin load \([^)]*\) returned)"
    r"|Using internal (?:network )?(?:plugin|implementation)", re.IGNORECASE)
_PLUGIN_LOADED = re.compile(
    r"(?:Loaded (?:net|coll|nccl)? ?plugin|NET/Plugin ?: ?Loaded(?: net plugin)?|NET/Plugin: Using) ?:? ?(?P<name>[^(\n]{0,200}?)\s{0,8}(?:\(v\d+\))?\s{0,8}$"
    r"|NET/OFI Using (?P<ofi>\S+)", re.IGNORECASE)
# Net plugin lines, by NCCL version (src/net.cc 2.4-2.18, src/plugin/net.cc and plugin_open.cc 2.19+)
# and by plugins themselves (nccl-rdma-sharp-plugins: "Plugin Path : PATH", aws-ofi-nccl: "NET/OFI").
_PLUGIN_PATH = re.compile(r"^Plugin Path {0,8}: {0,8}(?P<path>\S+)")
_PLUGIN_EXT = re.compile(r"^Successfully loaded external (?:network )?plugin\s+(?P<path>\S+)")
_PLUGIN_INIT = re.compile(r"^(?:Initialized|Assigned) NET plugin (?P<name>\S+)")
_PLUGIN_ENV = re.compile(r"^NCCL_NET_PLUGIN set by environment to (?P<name>\S+)")
_PLUGIN_OTHER = re.compile(r"^(?P<kind>TUNER|PROFILER|ENV|GIN)/Plugin\s*:\s*(?P<rest>.*)$")
_INTERNAL_NETS = frozenset({"ib", "socket", "ib_sharp", "collnet"})
# Single-node and P2P evidence (init.cc): "nranks N" is printed by ncclCommInitAll (<= 2.4, one
# process drives every GPU), "comm .. nRanks N nNodes M localRanks L" by newer init.cc.
_INIT_ALL = re.compile(r"^nranks (?P<n>\d+)\s*$")
_NNODES = re.compile(r"\bnNodes (?P<n>\d+)\b")
_P2P_ENV = re.compile(r"^NCCL_P2P_(?:DISABLE|LEVEL) set by environment to (?P<v>\S+)")
# Connectivity (misc/socket.cc, include/socket.h, bootstrap.cc).
_RETRY = re.compile(r"^Call to connect returned (?P<why>.+?),? retrying\b")
_NET_ERROR = re.compile(
    r"(?:Socket creation failed|Call to connect failed|socketStartConnect|socketProgress|connect failed|bind failed)"
    r"\s*:?\s*(?P<why>.*)$")
_CHECKED_IN = re.compile(r"Bootstrap Root\s*:\s*rank (?P<rank>\d+) of (?P<n>\d+) ranks has already checked in")
_CHAIN_FILE = re.compile(r"^(?P<file>[\w./+-]{1,200}\.(?:cc|cu|cpp|c|h)):\d{1,7} -> (?P<code>\d{1,9})(?P<rest>.*)$")
_BENIGN_WARN = re.compile(r"Failed to open libibverbs|NET/IB : No device found|libnccl-net|ncclNetPlugin", re.IGNORECASE)


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
    state: str = ""  # "", "start", "complete", "aborted", "destroyed" (a Destroy after Init COMPLETE stays "complete")
    counts: Counter = field(default_factory=Counter)
    last_op: int | None = None
    last_coll: str | None = None
    last_where: tuple[int, int] | None = None  # (file index, line number)
    last_text: str | None = None
    init_ev: Evidence | None = None
    had_init: bool = False  # an init record (Init START/COMPLETE, nRanks/nNodes line), not only Abort/Destroy
    order: int = 0
    slices: dict = field(default_factory=dict)  # slice -> Counter(collective)
    ops: dict = field(default_factory=dict)  # opCount -> [(OpSig, (file index, line), text)]: the last MAX_OPS
    ended: str = ""  # "", "destroyed", "aborted", "revoked": the last Destroy/Abort/Revoke line of the communicator
    init_time: str | None = None  # the timestamp of the init_ev line, as written (NCCL_DEBUG_TIMESTAMP_*, a collector's)


MAX_OPS = 256
"""opCounts kept per communicator for the cross-rank comparison (the last ones: where a job hangs)."""
MAX_OPS_PER_COUNT = 64
"""Operations kept per opCount (NCCL >= 2.12 gives every operation of one group the same opCount)."""
P2P_OPS = frozenset({"Send", "Recv", "SendRecv"})
_ROOTED = frozenset({"Broadcast", "Reduce"})
_REDUCING = frozenset({"AllReduce", "Reduce", "ReduceScatter"})
# The fields of a collective line after ``opCount N`` (NCCL 2.x ``enqueue.cc`` ``ncclEnqueueCheck``:
# ``sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p``;
# RCCL appends ``task %d globalrank %d``).
_OP_FIELDS = re.compile(r"\bcount (?P<count>\d{1,20}) datatype (?P<dt>\d{1,4}) op (?P<redop>\d{1,6}) root (?P<root>-?\d{1,9}) comm ")


def op_sig(name: str, count: int, datatype: int, redop: int, root: int) -> tuple:
    """What every rank of a communicator must pass alike for one collective (NCCL's rule: same
    type, count, datatype, reduction and, for Broadcast/Reduce, root): ``(name, count, datatype,
    redop or None, root or None)``; the reduction only of reducing collectives, the root only of
    rooted ones (NCCL prints 0 or the peer in the other fields). Send/Recv -> ``("p2p",)``: their
    count and peer (printed as ``root``) legitimately differ between the two sides."""
    if name in P2P_OPS:
        return ("p2p",)
    return (name, count, datatype, redop if name in _REDUCING else None, root if name in _ROOTED else None)


def op_fields(name: str, rest: str) -> tuple | None:
    """The :func:`op_sig` of a collective line's fields after ``opCount N``, None when they do not
    parse or hold numbers no job has (a count above 2**62)."""
    m = _OP_FIELDS.search(rest)
    if m is None:
        return None
    count = int(m.group("count"))
    if count > 1 << 62:
        return None
    return op_sig(name, count, int(m.group("dt")), int(m.group("redop")), int(m.group("root")))


def add_op(c: Comm, op: int, sig: tuple, where: tuple[int, int], text: str | None) -> None:
    """Keep one operation of ``c`` at opCount ``op`` (the last :data:`MAX_OPS` opCounts)."""
    lst = c.ops.get(op)
    if lst is None:
        if len(c.ops) >= MAX_OPS:
            low = min(c.ops)
            if op < low:
                return
            del c.ops[low]
        lst = c.ops[op] = []
    if len(lst) < MAX_OPS_PER_COUNT:
        lst.append((sig, where, text))


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
    other_plugins: set = field(default_factory=set)  # "TUNER: internal", "PROFILER: loaded NAME"
    boot_ifaces: set = field(default_factory=set)  # interfaces of "Bootstrap : Using" lines
    link_local: set = field(default_factory=set)  # socket interfaces whose address is link-local (fe80::/10, 169.254/16)
    init_fail: Evidence | None = None  # first error-chain line through init.cc / init.cu
    chain_first: tuple | None = None  # (file, code, rest, Evidence) of the first error-chain line
    boot_chain: bool = False  # an error chain went through bootstrap.cc
    retries: int = 0  # "Call to connect returned X, retrying" lines
    retry_ev: Evidence | None = None
    net_errors: list = field(default_factory=list)  # (why, Evidence): socket creation/connect errors
    checked_in: list = field(default_factory=list)  # Evidence of "rank R of N ranks has already checked in"
    init_all: int | None = None  # "nranks N" of ncclCommInitAll: one process drives N GPUs
    nnodes: int | None = None  # "nNodes M" of an init line
    p2p_env: str | None = None  # NCCL_P2P_DISABLE / NCCL_P2P_LEVEL as logged
    benign_warns: int = 0  # WARNs that say nothing about a failure (no libibverbs on a socket-only host)
    networks: set = field(default_factory=set)
    transports: set = field(default_factory=set)
    ring_size: int = 0  # ranks listed by a ring line "Channel 00/02 :    0   1   2   3" (every rank of that communicator)
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
    first_time: str | None = None  # the timestamp of the first / last record with one, as written
    last_time: str | None = None

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


# --- single messages -------------------------------------------------------------------------
_COLL = re.compile(r"^(?P<name>[A-Z][A-Za-z]+): opCount (?P<op>[0-9a-fA-F]+)\b(?P<rest>.*)$")
_COMM_PTR = re.compile(r"\bcomm (0x[0-9a-fA-F]+|\(nil\))")
_NRANKS_BR = re.compile(r"\[nranks=(\d+)\]")
# init.cc (the table in this module's docstring): "[Rank R] " from 2.29, the calling function from 2.21;
# the tail "- Init START" comes without the space before the dash after a split's "key %d" (2.23+).
_INIT = re.compile(
    r"^(?:\[Rank -?\d{1,10}\] )?(?:(?P<fn>nccl\w+)(?::)?\s+)?comm (?P<ptr>0x[0-9a-fA-F]+|\(nil\)) rank (?P<rank>-?\d+)"
    r" n[Rr]anks (?P<nranks>\d+)(?P<rest>.*)$"
)
_INIT_TAIL = re.compile(r" ?- (?:(?P<what>Init|Abort|Destroy|Revoke) )?(?P<state>START|COMPLETE)\b")
_COMMID = re.compile(r"\bcommId (0x[0-9a-fA-F]+)")
_PARENT = re.compile(r"\bparent (0x[0-9a-fA-F]+)")
_USING = re.compile(r"^(?P<what>NET/\w+|NET|Bootstrap)\s*:\s*Using\b(?: interface)?(?P<rest>.*)$")
_IFACE = re.compile(r"(?:\[\d{1,4}\])?(?<![\w.\-])(?P<name>[A-Za-z][\w.\-]{0,63}):(?P<ip>[0-9A-Fa-f.:]{0,45}[0-9A-Fa-f](?:%[\w.\-]{1,63})?)<\d{1,6}>")
_NETWORK = re.compile(r"^Using (?:internal )?[Nn]etwork (?P<net>.*\S)\s*$")  # not .+?\s*$: quadratic on a long blank run (fuzz seed 14:488)
_IBDEV = re.compile(r"\[\d+\](?P<dev>[\w.\-]+:\d+/\w+)")
_VIA = re.compile(r"\bvia (?P<t>[A-Za-z][\w/]*)")
_RING = re.compile(r"^Channel \d{1,3}/\d{1,3} :(?P<ranks>(?: {1,8}\d{1,6}){2,4096}) *$")  # graph/connect.cc ring order
_CONNECT = re.compile(r"Connect to (?P<peer>[^\s<>]+)<(?P<port>\d+)> failed\s*:?\s*(?P<why>.*)$")
_PEER = re.compile(r"\b(?:from peer|remote peer|peer)\s+(?P<peer>[^\s<>]+)<(?P<port>\d+)>")
_CHAIN = re.compile(r"^[\w./+-]+\.(?:cc|cu|cpp|c|h):\d+ -> \d+")


_INIT_STARTS = ("comm 0x", "ncclCommInit", "ncclCommSplit", "ncclCommShrink", "ncclCommGrow", "[Rank ")


def _looks_cut(msg: str) -> bool:
    """A record that a hard wrap cut short: a collective line without its comm pointer, an init
    line without its ``- Init START|COMPLETE`` tail (:data:`_INIT_TAIL`) nor ``nNodes``/``localRank``."""
    if ": opCount " in msg:
        return _COMM_PTR.search(msg) is None
    if msg.startswith(_INIT_STARTS) and " rank " in msg:
        return _INIT_TAIL.search(msg) is None and "nNodes" not in msg and "localRank" not in msg
    return False


MAX_EVIDENCE = 6
"""Evidence lines kept per process and kind (WARNs, error chains)."""


def warn(p: Proc, msg: str, ev: Evidence) -> None:
    """A WARN record of ``p`` (counted by the caller): kept as evidence, a peer it names, a socket
    error, a bootstrap root's "already checked in"."""
    if _BENIGN_WARN.search(msg):
        p.benign_warns += 1
    p.nwarns += 1
    if len(p.warns) < MAX_EVIDENCE:
        p.warns.append(ev)
    cm = _CONNECT.search(msg) or _PEER.search(msg)
    if cm:
        connect(p, cm, msg, ev)
    elif (nm := _NET_ERROR.search(msg)) is not None and len(p.net_errors) < MAX_EVIDENCE:
        p.net_errors.append((msg[:nm.start()].strip(" :") + " " + nm.group(0).strip(), ev))
    if "checked in" in msg and _CHECKED_IN.search(msg) and len(p.checked_in) < MAX_EVIDENCE:
        p.checked_in.append(ev)


def chain(p: Proc, msg: str, ev: Evidence) -> None:
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


def connect(p: Proc, m: re.Match, msg: str, ev: Evidence) -> None:
    """A peer that could not be reached (:data:`_CONNECT`, :data:`_PEER`)."""
    why = m.groupdict().get("why") or msg[m.end():].strip(" :,")
    if len(p.connects) < 64:
        p.connects.append(ConnectFailure(m.group("peer"), int(m.group("port")), why.strip(), ev))


def using(p: Proc, what: str, rest: str, ip_hosts: dict[str, str]) -> None:
    """An interface line ``NET/Socket|NET/IB|Bootstrap : Using ...``: interfaces, IPs (-> ``ip_hosts``)."""
    for im in _IFACE.finditer(rest):
        ip = im.group("ip").split("%", 1)[0]
        if what.startswith("NET/IB") and "OOB" not in rest[:im.start()]:
            continue
        if what != "NET/IB":
            p.ifaces.add(im.group("name"))
        if what == "Bootstrap" or what.startswith("NET/IB"):  # NET/IB's OOB interface is the bootstrap's
            p.boot_ifaces.add(im.group("name"))
        p.ips.add(ip)
        ip_hosts.setdefault(ip, p.host)
        if not what.startswith("NET/IB") and _link_local(ip):
            p.link_local.add(im.group("name"))
    if what.startswith("NET/IB"):
        for dm in _IBDEV.finditer(rest):
            p.ifaces.add(dm.group("dev"))


# --- one line read back (NcclLog.fetch) -------------------------------------------------------

def line_ahead(f, offset: int, line: int, lineno: int) -> int | None:
    """Where line ``lineno`` starts in binary file ``f``, line ``line`` starting at ``offset`` (for
    :meth:`~hangdbg.evidence.nccl.grammar.NcclLog.fetch`): newlines counted forward
    a block at a time (C speed). None past the end of the file."""
    f.seek(offset)
    while line < lineno:
        block = f.read(1 << 20)
        if not block:
            return None
        k = block.count(b"\n")
        if line + k < lineno:
            line += k
            offset += len(block)
            continue
        pos = 0
        while line < lineno:
            pos = block.index(b"\n", pos) + 1
            line += 1
        return offset + pos
    return offset


def _newline_back(f, lo: int, hi: int, k: int) -> int | None:
    """The offset of the ``k``-th newline before ``hi`` (not before ``lo``), None when there are fewer."""
    while hi > lo:
        begin = max(lo, hi - (1 << 20))
        f.seek(begin)
        block = f.read(hi - begin)
        n = block.count(b"\n")
        if n < k:
            k -= n
            hi = begin
            continue
        j = len(block)
        for _ in range(k):
            j = block.rindex(b"\n", 0, j)
        return begin + j
    return None


def line_back(f, offset: int, after: tuple[int, int], lineno: int) -> int | None:
    """Where line ``lineno`` starts, searched back from the mark ``after`` (the line starting at
    an offset: the next chunk's first line, or the line after the file's last, at its size), not
    before ``offset`` (where the chunk holding ``lineno`` starts)."""
    line, pos = after
    f.seek(max(0, pos - 1))
    if pos > offset and f.read(1) != b"\n":  # the file's last line has no newline: it is line - 1
        j = _newline_back(f, offset, pos, 1)
        line, pos = line - 1, offset if j is None else j + 1
    if line == lineno:
        return pos
    j = _newline_back(f, offset, pos - 1, line - lineno)
    return offset if j is None else j + 1

class _Unspliced:
    """A record header match whose host was corrected (:meth:`NcclLog._unsplice_line`)."""

    __slots__ = ("_host", "_m")

    def __init__(self, m: re.Match, host: str) -> None:
        self._m, self._host = m, host

    def group(self, name: str):
        return self._host if name == "host" else self._m.group(name)

    def start(self) -> int:
        return self._m.start()

    def end(self) -> int:
        return self._m.end()


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


BARE_COLL = re.compile(rb"(?m)^[ \t]{0,8}(?:>[ \t]?)?(?P<msg>[A-Z][A-Za-z]{2,30}: opCount [0-9a-fA-F]{1,16} sendbuff "
                       rb"(?:0x[0-9a-fA-F]{1,16}|\(nil\)) )")
"""A collective record pasted without its ``host:pid:tid [dev] NCCL INFO`` header (a grep's output, a paste cut at
the message): ``AllReduce: opCount 0 sendbuff 0x7f.. recvbuff ...`` (NCCL src/enqueue.cc INFO(NCCL_COLL, "%s: opCount
%lx sendbuff %p ...")). A file of such lines is one process, named after the file (:func:`bare_host`)."""


def bare_host(path: str, fi: int) -> str:
    """The host that stands for the one process of a file whose collective lines carry no header: the file's name
    without its suffix (``rank-a-coll.txt`` -> ``rank-a-coll``)."""
    return os.path.splitext(os.path.basename(path))[0] or f"file{fi}"


class _Bare:
    """The header a headerless collective line lacks: its file's process (pid 0), level INFO, no device."""

    __slots__ = ("_host",)

    def __init__(self, host: str) -> None:
        self._host = host

    def group(self, name: str):
        return {"host": self._host, "pid": "0", "level": "INFO"}.get(name)

    def start(self) -> int:
        return 0

    def end(self) -> int:
        return 0


def _small(text: str, limit: int = 1 << 20) -> int | None:
    """A count from a log line, ``None`` when it is garbage (a number no job has)."""
    n = int(text)
    return n if 0 <= n <= limit else None


def _plugin(p: Proc, msg: str) -> None:
    """A plugin-loading line -> ``p.plugin`` (net plugin: ``"none"`` or ``"loaded: NAME"``) or
    ``p.other_plugins`` (tuner, profiler, env, gin).

    Formats: NCCL 2.4-2.18 ``src/net.cc`` (``NET/Plugin : No plugin found (libnccl-net.so)[, using
    internal implementation]``, ``NET/Plugin : Plugin load (libnccl-net.so) returned 2 : ...``,
    ``NET/Plugin: Loaded net plugin NAME (vN)``, ``NET/Plugin: Failed to find ncclNetPlugin_vN symbol``);
    2.19+ ``src/plugin/plugin_open.cc`` / ``net.cc`` (``NET/Plugin: Could not find: libnccl-net.so.
    Using internal network plugin.``, ``Successfully loaded external network plugin PATH``,
    ``Initialized NET plugin NAME``, ``NCCL_NET_PLUGIN set by environment to NAME``, ``TUNER/Plugin:
    ...``, ``PROFILER/Plugin: ...``); plugins' own lines (nccl-rdma-sharp-plugins ``Plugin Path : PATH``,
    aws-ofi-nccl ``NET/OFI Using aws-ofi-nccl VERSION``). A net plugin once seen loaded stays loaded
    (the internal fall-back lines come first)."""
    om = _PLUGIN_OTHER.match(msg)
    if om:
        rest = om.group("rest")
        low = rest.lower()
        state = "internal" if ("could not find" in low or "internal" in low or "no plugin" in low) else rest.strip()[:80]
        p.other_plugins.add(f"{om.group('kind')}: {state}")
        return
    loaded = p.plugin is not None and p.plugin.startswith("loaded")
    for rx in (_PLUGIN_PATH, _PLUGIN_EXT):
        m = rx.match(msg)
        if m:
            p.plugin = "loaded: " + m.group("path")
            return
    m = _PLUGIN_ENV.match(msg)
    if m:
        if m.group("name").lower() == "none" and not loaded:
            p.plugin = "none"
        return
    m = _PLUGIN_INIT.match(msg)
    if m:
        if m.group("name").lower() not in _INTERNAL_NETS and not loaded:
            p.plugin = "loaded: " + m.group("name")
        return
    if _PLUGIN_NONE.search(msg):
        if not loaded:
            p.plugin = "none"
        return
    lm = _PLUGIN_LOADED.search(msg)
    if lm and not loaded:
        name = (lm.group("name") or lm.group("ofi") or "?").strip()
        p.plugin = "loaded: " + name


def _link_local(ip: str) -> bool:
    """True for an IPv6 link-local (fe80::/10) or IPv4 link-local (169.254.0.0/16, RFC 3927) address: one no
    other node can reach (the kernel routes it on its own link only)."""
    try:
        return ipaddress.ip_address(ip).is_link_local
    except ValueError:
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
