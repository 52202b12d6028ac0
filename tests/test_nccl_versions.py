"""NCCL lines of every version, built from NVIDIA/nccl's own format strings: the init/destroy/abort/
revoke lines of ``src/init.cc`` (NCCL 2.3 - 2.30), the record headers of ``src/debug.cc``
(``ncclDebugLog``: WARN ``file:line (function)`` from 2.30, TRACE ``function:line``), NCCL's own
timestamps (``NCCL_DEBUG_TIMESTAMP_FORMAT``, 2.26+, default ``"[%F %T] "`` on WARN lines) and the
prefixes log collectors add (torchrun, Ray, mpirun, a timestamping collector). Also the real
NCCL 2.28.9 log of one healthy rank on an H200 (``ncclCommInitRankConfig``, then ``Destroy COMPLETE``).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hangdbg.evidence.nccl.grammar import (
    RECORD,
    TIME_PREFIX,
    line_prefix,
    record_starts,
)
from hangdbg.evidence.nccl.reader import NcclReader
from hangdbg.evidence.nccl.scan import scan

PTR, COMMID, PARENT, BUSID = 0x55D8C8B3D000, 0x7C3A5E91D2F04B68, 0x55D8C8B3E000, 0x1C000


def printf(fmt: str, *args) -> str:
    """C printf of the conversions NCCL uses (``%p`` ``%d`` ``%x`` ``%lx`` ``%llx`` ``%s`` ``%f``)."""
    fmt = fmt.replace("%llx", "%x").replace("%lx", "%x").replace("%p", "0x%x")
    return fmt % args


def write(tmp_path: Path, lines: list[str], name: str = "nccl.log") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def comms(tmp_path: Path, lines: list[str]):
    """The one process of ``lines`` (none skipped) and its communicators."""
    log = scan([write(tmp_path, lines)])
    assert log.lines_skipped == 0
    (p,) = log.procs.values()
    return p, p.all_comms


# --- src/init.cc, every version -----------------------------------------------------------------
# (first and last NCCL release with the format, format, printf arguments after the comm pointer)
HEAD = "node-0:4242:4300 [1] NCCL INFO "
START = [
    ("2.18.3", "2.20.5", "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START",
     (3, 8, 1, 1, BUSID, COMMID)),
    ("2.21.5", "2.22.3", "ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START",
     (3, 8, 1, 1, BUSID, COMMID)),
    ("2.23.4", "2.28.9", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START",
     (3, 8, 1, 1, BUSID, COMMID)),
    ("2.29.2", "2.30.7", "[Rank %d] %s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START",
     (3, 8, 1, 1, BUSID, COMMID)),
]
COMPLETE = [
    ("2.3.7", "2.3.7", "comm %p rank %d nranks %d - COMPLETE", (3, 8)),
    ("2.4.2", "2.4.8", "comm %p rank %d nranks %d cudaDev %d nvmlDev %d - Init COMPLETE", (3, 8, 1, 1)),
    ("2.5.6", "2.8.3", "comm %p rank %d nranks %d cudaDev %d busId %x - Init COMPLETE", (3, 8, 1, BUSID)),
    ("2.8.4", "2.15.5", "comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE", (3, 8, 1, BUSID)),
    ("2.16.2", "2.18.1", "comm %p rank %d nranks %d cudaDev %d busId %lx commId 0x%llx - Init COMPLETE", (3, 8, 1, BUSID, COMMID)),
    ("2.18.3", "2.20.5", "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE",
     (3, 8, 1, 1, BUSID, COMMID)),
    ("2.21.5", "2.22.3", "ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE",
     (3, 8, 1, 1, BUSID, COMMID)),
    ("2.23.4", "2.30.7", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE",
     (3, 8, 1, 1, BUSID, COMMID)),
]
# ncclCommSplit / Shrink / Grow: the child's "parent %p ... key %d- Init START" (no space before the dash from 2.23)
SPLIT_START = [
    ("2.21.5", "ncclCommSplit comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p color %d key %d commId 0x%llx - Init START",
     (3, 8, 1, 1, BUSID, PARENT, 1, 3, COMMID)),
    ("2.23.4", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p color %d key %d- Init START",
     (3, 8, 1, 1, BUSID, PARENT, 1, 3)),
    ("2.24.3", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p splitCount %d color %d key %d- Init START",
     (3, 8, 1, 1, BUSID, PARENT, 1, 1, 3)),
    ("2.29.2", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p childCount %d color %d key %d- Init START",
     (3, 8, 1, 1, BUSID, PARENT, 1, 1, 3)),
]
SPLIT_COMPLETE = [
    ("2.21.5", "ncclCommSplit comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p color %d key %d commId 0x%llx - Init COMPLETE",
     (3, 8, 1, 1, BUSID, PARENT, 1, 3, COMMID)),
    ("2.23.4", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p color %d key %d - Init COMPLETE",
     (3, 8, 1, 1, BUSID, PARENT, 1, 3)),
    ("2.24.3", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p splitCount %d color %d key %d - Init COMPLETE",
     (3, 8, 1, 1, BUSID, PARENT, 1, 1, 3)),
    ("2.29.2", "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx parent %p childCount %d color %d key %d - Init COMPLETE",
     (3, 8, 1, 1, BUSID, PARENT, 1, 1, 3)),
]
DESTROY = "comm %p rank %d nranks %d cudaDev %d busId %lx - %s COMPLETE"  # 2.12 - 2.30 ("Destroy"/"Abort" inline before 2.22)
ABORT_START = "comm %p rank %d nRanks %d cudaDev %d busId %lx - Abort START"  # 2.28+
REVOKE = ["comm %p rank %d nRanks %d cudaDev %d busId %lx - Revoke START",  # 2.28.7+
          "comm %p rank %d nRanks %d cudaDev %d busId %lx - Revoke COMPLETE, result %d"]
NNODES = "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"  # 2.20+


def init_line(fmt: str, args: tuple, fn: str = "ncclCommInitRankConfig", ptr: int = PTR, rank_prefix: bool = True) -> str:
    """``fmt`` of init.cc with its arguments: ``[Rank %d]`` and ``%s`` (the function) come first."""
    pre: tuple = ()
    if fmt.startswith("[Rank %d]"):
        pre += (args[0],)
    if "%s comm" in fmt:
        pre += (fn,)
    return HEAD + printf(fmt, *pre, ptr, *args)


@pytest.mark.parametrize("first,last,fmt,args", START, ids=[s[0] for s in START])
def test_init_start_of_every_version(tmp_path, first, last, fmt, args):
    _, (c,) = comms(tmp_path, [init_line(fmt, args)])
    assert (c.state, c.rank, c.nranks, c.comm_id, c.had_init) == ("start", 3, 8, f"0x{COMMID:x}", True)


@pytest.mark.parametrize("first,last,fmt,args", COMPLETE, ids=[s[0] for s in COMPLETE])
def test_init_complete_of_every_version(tmp_path, first, last, fmt, args):
    _, (c,) = comms(tmp_path, [init_line(fmt, args)])
    assert (c.state, c.rank, c.nranks) == ("complete", 3, 8)
    assert c.comm_id == (f"0x{COMMID:x}" if "commId" in fmt else None)


@pytest.mark.parametrize("fn", ["ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitAll", "ncclCommInitRankScalable"])
def test_start_then_complete_with_each_init_function(tmp_path, fn):
    lines = [init_line(START[2][2], START[2][3], fn=fn), init_line(COMPLETE[-1][2], COMPLETE[-1][3], fn=fn)]
    p, (c,) = comms(tmp_path, lines)
    assert c.state == "complete" and p.rank == 3


@pytest.mark.parametrize("n", range(len(SPLIT_START)), ids=[s[0] for s in SPLIT_START])
@pytest.mark.parametrize("fn", ["ncclCommSplit", "ncclCommShrink", "ncclCommGrow"])
def test_split_child_start_and_complete(tmp_path, n, fn):
    """The split's "key %d- Init START" (no space before the dash) is an Init START, not a line
    waiting for the rest of a hard wrap; its COMPLETE completes it."""
    (_, sfmt, sargs), (_, cfmt, cargs) = SPLIT_START[n], SPLIT_COMPLETE[n]
    start = init_line(sfmt, sargs, fn=fn, ptr=PTR + 0x10)
    _, (c,) = comms(tmp_path, [start, "an application print after it"])
    assert (c.state, c.parent) == ("start", f"0x{PARENT:x}")
    _, (c,) = comms(tmp_path, [start, init_line(cfmt, cargs, fn=fn, ptr=PTR + 0x10)])
    assert (c.state, c.parent) == ("complete", f"0x{PARENT:x}")


def test_destroy_after_complete_leaves_the_init_complete(tmp_path):
    lines = [init_line(START[2][2], START[2][3]), init_line(COMPLETE[-1][2], COMPLETE[-1][3]),
             HEAD + printf(DESTROY, PTR, 3, 8, 1, BUSID, "Destroy")]
    _, (c,) = comms(tmp_path, lines)
    assert (c.state, c.ended, c.had_init) == ("complete", "destroyed", True)
    # a pointer reused by a new communicator after the destroy is a new communicator
    _, cs = comms(tmp_path, lines + [init_line(START[2][2], START[2][3])])
    assert [(c.state, c.ended) for c in cs] == [("complete", "destroyed"), ("start", "")]


def test_destroy_without_complete_is_destroyed(tmp_path):
    _, (c,) = comms(tmp_path, [init_line(START[2][2], START[2][3]), HEAD + printf(DESTROY, PTR, 3, 8, 1, BUSID, "Destroy")])
    assert (c.state, c.ended) == ("destroyed", "destroyed")


@pytest.mark.parametrize("abort", [ABORT_START, DESTROY])
def test_abort_after_complete_is_the_same_communicator(tmp_path, abort):
    """``Abort START`` (2.28+) is not an ``Init START``: no new communicator for the same pointer."""
    args = (PTR, 3, 8, 1, BUSID) + (("Abort",) if "%s" in abort else ())
    lines = [init_line(START[2][2], START[2][3]), init_line(COMPLETE[-1][2], COMPLETE[-1][3]), HEAD + printf(abort, *args)]
    _, (c,) = comms(tmp_path, lines)
    assert (c.state, c.ended, c.key) == ("aborted", "aborted", f"0x{COMMID:x}")


def test_revoke_is_no_init_line(tmp_path):
    lines = [HEAD + printf(REVOKE[0], PTR, 3, 8, 1, BUSID), HEAD + printf(REVOKE[1], PTR, 3, 8, 1, BUSID, 0)]
    _, (c,) = comms(tmp_path, lines)
    assert (c.state, c.ended, c.had_init) == ("", "revoked", False)
    _, (c,) = comms(tmp_path, [init_line(COMPLETE[-1][2], COMPLETE[-1][3])] + lines)
    assert (c.state, c.ended, c.had_init) == ("complete", "revoked", True)


def test_nnodes_line(tmp_path):
    p, (c,) = comms(tmp_path, [HEAD + printf(NNODES, PTR, 3, 8, 2, 4, 3, 0)])
    assert (p.nnodes, c.rank, c.nranks, c.state, c.had_init) == (2, 3, 8, "", True)


def test_hard_wrapped_init_line_still_joins(tmp_path):
    """An init line cut before its tail waits for the next line; "[Rank R]" lines too."""
    full = init_line(START[3][2], START[3][3])
    cut = full.index(" - Init START")
    _, (c,) = comms(tmp_path, [full[:cut], full[cut:].lstrip()])
    assert c.state == "start"


# --- the real NCCL 2.28.9 log (H200, one rank, a healthy run) ------------------------------------
H200_OK = """\
vm:586:586 [0] NCCL INFO Bootstrap: Using eth0:192.0.2.2<0>
vm:586:586 [0] NCCL INFO cudaDriverVersion 13000
vm:586:586 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
vm:586:586 [0] NCCL INFO Comm config Blocking set to 1
vm:586:586 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so
vm:586:586 [0] NCCL INFO Initialized NET plugin Socket
vm:586:586 [0] NCCL INFO ncclCommInitRankConfig comm 0x430103a0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 60 commId 0xf0b17e043af40bf1 - Init START
vm:586:586 [0] NCCL INFO ncclCommInitRankConfig comm 0x430103a0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 60 commId 0xf0b17e043af40bf1 - Init COMPLETE
vm:586:586 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 1 total 1.16 (kernels 1.00, alloc 0.00, bootstrap 0.00, allgathers 0.00, topo 0.00, graphs 0.00, connections 0.15, rest 0.00)
vm:586:586 [0] NCCL INFO comm 0x430103a0 rank 0 nranks 1 cudaDev 0 busId 60 - Destroy COMPLETE
"""


def test_real_2_28_log_reads_as_a_completed_init(tmp_path):
    path = tmp_path / "nccl.vm.586.log"
    path.write_text(H200_OK)
    reader = NcclReader()
    rep = reader.read_split([str(path)])
    said = reader.all_clear(rep)
    assert "init completed," in said and "without COMPLETE" not in said
    (proc,) = rep.facts.processes
    assert (proc.state, proc.version, [c.state for c in proc.comms]) == ("ok", "2.28.9+cuda13.0", ["complete"])


# --- src/debug.cc record headers -----------------------------------------------------------------
def test_warn_with_function_and_trace_with_function_names(tmp_path):
    """2.30 WARN ``[%d] %s:%d (%s) NCCL WARN``; TRACE ``[%d] %f %s:%d NCCL TRACE`` prints ``__func__``."""
    lines = [HEAD + "ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 1 busId 1c000 - Init COMPLETE",
             "node-0:4242:4300 [1] init.cc:904 (initTransportsRank) NCCL WARN Duplicate GPU detected : rank 0 and rank 1",
             "node-0:4242:4300 [1] misc/socket.cc:50 (operator()) NCCL WARN Call to connect returned Connection refused",
             "node-0:4242:4300 [1] 1234.567890 ncclEnqueueCheck:1520 NCCL TRACE launch kernel",
             "node-0:4242:4300 [1] 12.5 <unknown>:0 NCCL TRACE from nowhere",
             "node-0:4242:4300 NCCL CALL ncclGroupEnd()"]
    log = scan([write(tmp_path, lines)])
    (p,) = log.procs.values()
    assert (log.lines_skipped, p.records, p.nwarns) == (0, 6, 2)
    m = RECORD.match(lines[1])
    assert (m.group("src"), m.group("srcline"), m.group("func"), m.group("level")) == ("init.cc", "904", "initTransportsRank", "WARN")
    assert RECORD.match(lines[3]).group("src") == "ncclEnqueueCheck"


# --- timestamps and collectors' prefixes -----------------------------------------------------------
WHEN = datetime(2026, 11, 26, 0, 32, 7, 123456)
# NCCL_DEBUG_TIMESTAMP_FORMAT values ("%Nf": N digits of subseconds; "_" is a space) -> the time kept
FORMATS = [
    ("[%F %T] ", "2026-11-26 00:32:07"),  # the default
    ("[%F_%T.%6f] ", "2026-11-26 00:32:07.123456"),
    ("%F %T.%3f ", "2026-11-26 00:32:07.123"),
    ("%FT%T%z ", "2026-11-26T00:32:07+0000"),
    ("[%T] ", "00:32:07"),
    ("%T.%3f ", "00:32:07.123"),
    ("%T", "00:32:07"),  # no separator: glued to the host name
    ("[%T]", "00:32:07"),
    ("%b %d %H:%M:%S ", "Nov 26 00:32:07"),
    ("%c ", "Thu Nov 26 00:32:07 2026"),
    ("%s ", "1795653127"),
    ("[%s.%3f] ", "1795653127.123"),
]


def strftime(fmt: str) -> str:
    """NCCL's formatting of the time: "_" -> " ", "%Nf" -> N subsecond digits, then strftime (UTC)."""
    fmt = fmt.replace("_", " ")
    fmt = re.sub(r"%([1-9])f", lambda m: f"{WHEN.microsecond:06d}"[: int(m.group(1))], fmt)
    fmt = fmt.replace("%s", str(int(WHEN.replace(tzinfo=timezone.utc).timestamp())))
    fmt = fmt.replace("%z", "+0000")
    return WHEN.strftime(fmt)


# the record line after the timestamp (ncclDebugLog: "%s:%d:%d " then the level's part)
RECORDS = [
    "vm:626:626 [0] init.cc:904 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60",
    "vm:626:626 [0] NCCL INFO ncclCommInitRankConfig comm 0x134ed0e0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 commId 0x4fab82a21cf53e2e - Init START",
    "vm:626:626 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x7f00 recvbuff 0x7f00 count 8 datatype 7 op 0 root 0 comm 0x134ed0e0 [nranks=2] stream 0x5",
    "vm:626:626 [0] 1234.567890 ncclEnqueueCheck:1520 NCCL TRACE launch kernel",
]
# what log collectors put before that -> the launcher rank they name
COLLECTORS = [("", None), ("2024-05-11 14:10:52.227 ", None), ("[rank3]:", 3), ("[rank3]: ", 3), ("[default0]:", None),
              ("(train_rft pid=2657296) ", None), ("(RayWorkerWrapper pid=41119, ip=10.1.0.6) ", None),
              ("[1,3]<stdout>:", 3), ("[1,3]<stderr>: ", 3), ("[rank3]:2024-05-11T14:10:52.227Z ", 3)]


@pytest.mark.parametrize("fmt,want", FORMATS, ids=[f[0] for f in FORMATS])
@pytest.mark.parametrize("collector,rank", COLLECTORS, ids=[c[0] or "-" for c in COLLECTORS])
def test_timestamped_and_prefixed_lines(tmp_path, fmt, want, collector, rank):
    ts = strftime(fmt)
    assert want in ts
    lines = [collector + ts + r for r in RECORDS]
    for line in lines:
        text, r, time_ = line_prefix(line)
        assert text.startswith("vm:626:626 "), (line, text)
        assert (r, time_) == (rank, want), line
        assert [m.group("host") for m in record_starts(text)] == ["vm"]
    log = scan([write(tmp_path, ["", *lines])])
    (p,) = log.procs.values()
    assert (log.lines_skipped, log.records, p.host, p.pid, p.launcher_rank) == (0, 4, "vm", 626, rank)
    assert (p.first_time, p.last_time, p.all_comms[0].init_time) == (want, want, want)
    assert p.all_comms[0].counts["AllReduce"] == 1 and p.nwarns == 1


def test_default_timestamp_on_warn_lines_only(tmp_path):
    """NCCL 2.26+ default: NCCL_DEBUG_TIMESTAMP_LEVELS=WARN, so only WARN lines have a time (the H200
    log of two ranks on one GPU)."""
    lines = [RECORDS[1], "", "[2026-11-26 00:32:07] " + RECORDS[0], "vm:626:626 [0] NCCL INFO init.cc:1582 -> 5"]
    log = scan([write(tmp_path, lines)])
    (p,) = log.procs.values()
    assert (log.lines_skipped, p.nwarns, p.first_time, p.last_time, p.all_comms[0].init_time) == (
        0, 1, "2026-11-26 00:32:07", "2026-11-26 00:32:07", None)


def test_a_line_without_prefix_keeps_no_time():
    line = RECORDS[1]
    assert line_prefix(line) == (line, None, None)
    assert line_prefix("10.0.0.5:1:2 [0] NCCL INFO x") == ("10.0.0.5:1:2 [0] NCCL INFO x", None, None)
    assert line_prefix("Nov-host:1:2 [0] NCCL INFO x")[0] == "Nov-host:1:2 [0] NCCL INFO x"  # a host, not a month
    assert line_prefix("123456789 :1:2 [0] NCCL INFO x")[2] == "123456789"  # a number then a space: a time
    assert line_prefix("1234567890ab:1:2 [0] NCCL INFO x")[0] == "1234567890ab:1:2 [0] NCCL INFO x"  # glued digits: a host


@pytest.mark.parametrize("text", ["1" * 200_000, "[" * 200_000, "00:00:00" * 30_000, "Nov 26 " * 30_000,
                                  "2024-05-11 " * 20_000, "[00:00:00]" * 20_000, "[rank1]:" * 30_000])
def test_prefix_grammar_is_linear(text):
    """Anchored, bounded: a long line of near-prefixes costs a few steps, not a backtracking search."""
    t = time.perf_counter()
    TIME_PREFIX.match(text)
    line_prefix(text + " node:1:2 [0] NCCL INFO x")
    assert time.perf_counter() - t < 0.5


def test_split_takes_timestamped_lines(tmp_path):
    """``nccl split`` reads the same prefixes: each process's lines go to its rank's file, the time
    glued to the host name ("%T" without a space) included."""
    from hangdbg.evidence.nccl.split import split_logs
    from hangdbg.outdir import OutDir

    a = "node-0:100:101 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"
    b = "node-1:200:201 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"
    lines = ["00:32:07" + a, "[rank1]:00:32:08" + b, "[rank1]:an application print of rank 1",
             "(train_rft pid=100) Nov 26 00:32:09 " + a.replace("ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
                                                               "Connected all rings")]
    res = split_logs([write(tmp_path, lines)], OutDir(tmp_path / "out"))
    assert res.written == {"rank0.log": 2, "rank1.log": 2}
    assert (tmp_path / "out" / "rank1.log").read_text().splitlines() == lines[1:3]


# --- IB completion errors: the status number decides whom they blame (catalog, ibv_wc_status) --------
@pytest.mark.parametrize("status, says, host_setup", [
    (4, "local protection error", True),   # this host's memory registration / GPUDirect RDMA
    (12, "could not reach peer", False),   # retry exceeded: the link or the peer
])
def test_ib_completion_error_reads_the_status(tmp_path, status, says, host_setup):
    path = tmp_path / "nccl.log"
    path.write_text("".join(
        f"H{h}:{100 + h}:{200 + h} [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
        f"fe80::966d:ae03:8b:df7{h}%ib0<5324{h}> with error {status}, opcode 0, len 0, vendor err 81 (Send)\n"
        for h in (1, 2)))
    rep = NcclReader().read_split([str(path)])
    (f, *_) = [f for f in rep.findings if f.kind.value == "nccl-connect-failed"]
    assert says in f.summary
    assert ("could not reach" not in f.summary) is host_setup
    assert (f.hosts == ("H1",) or f.hosts == ("H2",)) if host_setup else not f.hosts
