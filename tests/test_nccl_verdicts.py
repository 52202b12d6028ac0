"""Verdicts of the NCCL reader on short logs written from NCCL's documented line formats
(``src/debug.cc`` header, ``init.cc``, ``src/net.cc`` / ``src/plugin/*.cc``, ``misc/socket.cc``,
``bootstrap.cc``, nccl-rdma-sharp-plugins' ``Plugin Path``)."""

from __future__ import annotations

import pytest

from hangdbg.evidence.registry import headline_of
from hangdbg.evidence.nccl.grammar import NcclLog
from hangdbg.evidence.nccl.reader import NcclReader

COLL = ("{h}:{pid}:{pid} [{d}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f00 recvbuff 0x7f00 count 8 "
        "datatype 7 op 0 root 0 comm 0x55{d}0 [nranks={n}] stream 0x56{d}0")


def read(tmp_path, text: str, name: str = "nccl.log"):
    path = tmp_path / name
    path.write_text(text)
    return NcclReader().read_split([str(path)])


def suspects(rep, kind=None):
    return [f for f in rep.findings if f.severity == "suspect" and (kind is None or f.kind == kind)]


def test_net_plugin_on_part_of_the_hosts_is_a_suspect_naming_both_hosts(tmp_path):
    rep = read(tmp_path, "nodeA:100:101 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
                         "nodeB:200:201 [0] NCCL INFO Plugin Path : /opt/hpcx/sharp/lib/libnccl-net.so\n")
    [f] = suspects(rep, "nccl-setup-differs")
    assert set(f.hosts) == {"nodeA", "nodeB"}
    assert "net plugin" in f.summary and "/opt/hpcx/sharp/lib/libnccl-net.so" in f.summary
    assert "net plugin differs" in f.action
    assert "same on every host" not in headline_of(rep)


def test_the_same_plugin_named_by_two_line_variants_is_not_a_difference(tmp_path):
    rep = read(tmp_path, "nodeA:100:101 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v7 (v7)\n"
                         "nodeB:200:201 [0] NCCL INFO Plugin Path : /opt/hpcx/sharp/lib/libnccl-net.so\n")
    assert not suspects(rep, "nccl-setup-differs")


@pytest.mark.parametrize("msg, plugin", [
    ("NET/Plugin : No plugin found (libnccl-net.so), using internal implementation", "none"),
    ("NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file", "none"),
    ("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.", "none"),
    ("NET/Plugin: Using internal network plugin.", "none"),
    ("NCCL_NET_PLUGIN set by environment to none", "none"),
    ("NET/Plugin: Loaded net plugin NCCL RDMA Plugin v7 (v7)", "loaded: NCCL RDMA Plugin v7"),
    ("Plugin Path : /opt/x/lib/libnccl-net.so", "loaded: /opt/x/lib/libnccl-net.so"),
    ("Successfully loaded external network plugin /usr/lib/libnccl-net-ofi.so", "loaded: /usr/lib/libnccl-net-ofi.so"),
    ("Initialized NET plugin AWS Libfabric", "loaded: AWS"),
    ("Initialized NET plugin IB", None),
    ("NET/OFI Using aws-ofi-nccl 1.7.1", "loaded: aws-ofi-nccl"),
    ("Using network AWS Libfabric", "loaded: network AWS Libfabric"),
    ("Using network IB", None),
    ("TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.", None),
])
def test_plugin_line_variants(msg, plugin):
    log = NcclLog()
    log.files.append("x.log")
    log.line(0, 1, f"node1:1:1 [0] NCCL INFO {msg}")
    log.finish()
    assert log.procs[("node1", 1)].plugin == plugin


def test_a_loaded_plugin_is_not_undone_by_the_fallback_lines_of_other_versions():
    log = NcclLog()
    log.files.append("x.log")
    for i, msg in enumerate(["NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
                             "NET/Plugin: Loaded net plugin IBext (v7)",
                             "NET/Plugin: Failed to find ncclCollNetPlugin_v8 symbol."]):
        log.line(0, i + 1, f"node1:1:1 [0] NCCL INFO {msg}")
    assert log.procs[("node1", 1)].plugin == "loaded: IBext"


SINGLE = ("box:7:7 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.1<0>\n"
          "box:7:7 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).\n"
          "box:7:7 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
          "box:7:7 [0] NCCL INFO nranks 4\n"
          "box:7:7 [0] NCCL INFO Setting affinity for GPU 0 to ff\n"
          "box:7:7 [1] NCCL INFO Setting affinity for GPU 1 to ff\n")


def test_single_process_on_one_node_that_stops_in_set_up_points_at_p2p_acs(tmp_path):
    rep = read(tmp_path, SINGLE)
    [f] = suspects(rep)
    assert f.kind == "nccl-p2p-blocked" and f.ranks == () and f.hosts == ("box",)
    assert "ACS" in f.summary and "NCCL_P2P_DISABLE=1" in f.action


@pytest.mark.parametrize("extra", [
    COLL.format(h="box", pid=7, d=0, op=5, n=4) + "\n",  # progress
    "box:7:7 [0] NCCL INFO init.cc:100 -> 2\n",  # an error
    "box:7:7 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n",  # P2P off
    "other:9:9 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.2<0>\n",  # a second node
])
def test_no_p2p_verdict_with_progress_an_error_p2p_off_or_two_nodes(tmp_path, extra):
    rep = read(tmp_path, SINGLE + extra)
    assert not [f for f in rep.findings if f.kind == "nccl-p2p-blocked"]


def test_several_processes_without_p2p_lines_are_not_enough(tmp_path):
    rep = read(tmp_path, "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n"
                         "h:2:2 [1] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0\n")
    assert not suspects(rep)
    rep = read(tmp_path, "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n"
                         "h:2:2 [1] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0\n"
                         "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                         "h:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n", "b.log")
    assert [f.kind for f in suspects(rep)] == ["nccl-p2p-blocked"]


HEALTHY_ONE_NODE = ("n:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                    "n:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n"
                    "n:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0xab - Init COMPLETE\n"
                    "n:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2000 commId 0xab - Init COMPLETE\n")


def test_a_completed_init_with_no_collective_lines_is_no_p2p_verdict(tmp_path):
    """Plain NCCL_DEBUG=INFO prints no collective lines: a healthy one-node log ends like this."""
    rep = read(tmp_path, HEALTHY_ONE_NODE)
    assert not [f for f in rep.findings if f.kind == "nccl-p2p-blocked"]


def test_collective_lines_stuck_at_opcount_0_after_init_are_only_a_p2p_warning(tmp_path):
    rep = read(tmp_path, HEALTHY_ONE_NODE + COLL.format(h="n", pid=1, d=0, op=0, n=2) + "\n"
               + COLL.format(h="n", pid=2, d=1, op=0, n=2) + "\n")
    [f] = [f for f in rep.findings if f.kind == "nccl-p2p-blocked"]
    assert f.severity == "warning" and "excerpt" in f.summary


def test_an_error_chain_ending_in_init_is_an_init_failure_and_no_all_clear(tmp_path):
    rep = read(tmp_path, "[1,4]<stdout>:n7:41:43 [0] include/socket.h:318 NCCL WARN Net : Socket creation failed : "
                         "Address family not supported by protocol\n"
                         "[1,4]<stdout>:n7:41:43 [0] NCCL INFO transport/net_ib.cu:407 -> 2\n"
                         "[1,4]<stdout>:n7:41:43 [0] NCCL INFO init.cu:915 -> 2\n"
                         "[1,0]<stdout>:n6:11:13 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC\n")
    [f] = suspects(rep, "nccl-init-failed")
    assert f.ranks == (4,) and f.hosts == ("n7",) and "Socket creation failed" in f.summary
    assert "init completed" not in headline_of(rep)


def test_a_bootstrap_chain_names_bootstrap(tmp_path):
    rep = read(tmp_path, "g1:5:6 [0] NCCL INFO misc/socket.cc:505 -> 2 (Operation now in progress)\n"
                         "g1:5:6 [0] NCCL INFO bootstrap.cc:275 -> 2\n"
                         "g1:5:6 [0] NCCL INFO init.cc:1493 -> 2\n"
                         "g1:5:6 [0] NCCL INFO group.cc:64 -> 2 [Async thread]\n")
    [f] = suspects(rep, "nccl-init-failed")
    assert "bootstrap" in f.summary and "Operation now in progress" in f.summary and f.hosts == ("g1",)


def test_an_abort_line_does_not_make_the_other_ranks_suspects(tmp_path):
    rep = read(tmp_path, "m:3:3 [3] NCCL INFO comm 0x12fd rank 3 nranks 4 cudaDev 3 busId 70 - Abort COMPLETE\n")
    assert not suspects(rep)
    assert not [f for f in rep.findings if f.kind == "nccl-init-incomplete"]


def test_ranks_without_init_line_next_to_completed_ones_are_not_blamed(tmp_path):
    rep = read(tmp_path, "t:73:91 [1] NCCL INFO comm 0x7f53 rank 3 nranks 8 cudaDev 1 busId 51000 - Init COMPLETE\n"
                         "t:72:90 [0] NCCL INFO comm 0x7ff4 rank 2 nranks 8 cudaDev 0 busId 4b000 - Init COMPLETE\n")
    assert not suspects(rep)


def test_ranks_stuck_in_init_wait_for_the_ranks_that_never_started(tmp_path):
    rep = read(tmp_path, "a:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 3 cudaDev 0 busId 1000 - Init START\n"
                         "a:2:2 [1] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 3 cudaDev 1 busId 2000 - Init START\n")
    [f] = suspects(rep)
    assert f.ranks == (2,)
    [w] = [f for f in rep.findings if f.severity == "waiting"]
    assert w.ranks == (0, 1) and w.waits_for == (2,)


def test_a_cut_last_line_makes_a_lag_only_a_warning(tmp_path):
    lines = [COLL.format(h="n", pid=10 + d, d=d, op=op, n=4) for d, op in ((0, 0), (1, 0), (2, 0), (3, 1))]
    whole = "\n".join(lines) + "\n"
    assert [f.kind for f in suspects(read(tmp_path, whole))] == ["nccl-lagging"]
    cut = whole + "n:13:13 [3] NCCL INFO AllReduce: opCount 2 sendbuff 0x7fc9e00"
    rep = read(tmp_path, cut, "cut.log")
    assert not suspects(rep)
    assert [f.severity for f in rep.findings if f.kind == "nccl-lagging"] == ["warning"]


def test_spliced_records_do_not_make_bogus_hosts(tmp_path):
    rep = read(tmp_path, "g183:161264:166015 [7] NCCL INFO Connected NVLS tree\n"
                         "g183:161258:166018 [1] NCCL INFO ncclCommSplit comm 0x7fe5 rank 1 nranks 16 cudaDev 1 parent "
                         "0x55cd375g183:161262:166017 [5] NCCL INFO ncclCommSplit comm 0x7f83 rank 5 nranks 16 cudaDev 5\n"
                         "g183:161260:166045 [3] NCCL INFO [Service thread] Conneg183:161262:162335 [5] NCCL INFO x\n")
    assert {p.host for p in rep.facts.processes} == {"g183"}


def test_connect_refused_retries_are_the_retrying_hosts_wait_not_its_fault(tmp_path):
    """The process that retries waits for the one that does not listen: a warning naming where it was
    seen, never a suspect (misc/socket.cc retries while the peer or the bootstrap root is not up)."""
    rep = read(tmp_path, "lr1:23:24 [1] NCCL INFO Bootstrap : Using ib0:10.1.1.1<0>\n"
                         + "lr1:23:25 [1] NCCL INFO Call to connect returned Connection refused, retrying\n" * 3)
    assert not suspects(rep, "nccl-connect-failed")
    [f] = [f for f in rep.findings if f.kind == "nccl-connect-failed"]
    assert f.severity == "warning" and f.hosts == ("lr1",) and "refused 3 times" in f.summary and f.action


def test_a_rank_checked_in_twice_is_a_launch_problem(tmp_path):
    rep = read(tmp_path, "h14:18:18 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 ranks has already checked in\n")
    [f] = suspects(rep, "nccl-bootstrap")
    assert f.hosts == ("h14",) and "same rank" in f.summary and f.ranks == ()


def test_bootstrap_on_a_virtual_interface_is_a_warning_with_the_physical_one_suggested(tmp_path):
    rep = read(tmp_path, "h:1:1 [0] NCCL INFO Bootstrap : Using [0]eno4:10.3.6.1<0> [1]vethe94a:fe80::a8%vethe94a<0>\n")
    [f] = [f for f in rep.findings if f.kind == "nccl-bootstrap"]
    assert f.severity == "warning" and "NCCL_SOCKET_IFNAME=eno4" in f.action and "vethe94a" in f.summary


def test_a_virtual_interface_with_failed_connections_is_the_suspect(tmp_path):
    rep = read(tmp_path, "h:1:1 [0] NCCL INFO Bootstrap : Using [0]eno4:10.3.6.1<0> [1]vethe94a:fe80::a8%vethe94a<0>\n"
                         + "h:1:2 [0] NCCL INFO Call to connect returned Connection refused, retrying\n" * 2)
    [f] = [f for f in rep.findings if f.kind == "nccl-bootstrap"]
    assert f.severity == "suspect" and "connections failed" in f.summary and "NCCL_SOCKET_IFNAME=eno4" in f.action
    assert f.ranks == ()


def test_a_link_local_virtual_interface_on_a_job_between_nodes_is_the_suspect(tmp_path):
    boot = ("h:1:1 [0] NCCL INFO Bootstrap : Using [0]eno4:10.3.6.1<0> [1]vethe94a:fe80::a8%vethe94a<0>\n"
            "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eno4:10.3.6.1<0> [1]vethe94a:fe80::a8%vethe94a<0>\n")
    ring = "h:1:2 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] [receive] via NET/Socket/0\n"
    [f] = [f for f in read(tmp_path, boot + ring).findings if f.kind == "nccl-bootstrap"]
    assert f.severity == "suspect" and "link-local" in f.summary and "NCCL_SOCKET_IFNAME=eno4" in f.action
    # on one node (no NET/ transport) a link-local interface carries nothing between nodes: still a remark
    ring = "h:1:2 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] via P2P/IPC\n"
    [f] = [f for f in read(tmp_path, boot + ring).findings if f.kind == "nccl-bootstrap"]
    assert f.severity == "warning"


def test_the_first_ib_completion_error_is_quoted(tmp_path):
    warn = ("h:9:9 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 172.3.1.5<44206> with "
            "status={s} opcode=129 len=0 vendor err {v} (Recv)\n")
    rep = read(tmp_path, warn.format(s=12, v=129) + warn.format(s=5, v=249) + warn.format(s=5, v=249))
    [f] = suspects(rep, "nccl-connect-failed")
    assert "status=12" in f.summary and "status=5" not in f.summary


def test_all_clear_says_only_what_the_log_shows(tmp_path):
    rep = read(tmp_path, "n1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                         "n2:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n")
    text = headline_of(rep)
    assert "init completed" not in text and "opCounts agree" not in text and "no process wrote an init line" in text


def test_a_bootstrap_chain_cut_before_init_names_the_oob_interface(tmp_path):
    rep = read(tmp_path, "n3:7:8 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ibp75s0:192.168.0.103<0>\n"
                         "n3:9:9 [2] NCCL INFO misc/socket.cc:567 -> 2\n"
                         "n3:9:9 [2] NCCL INFO bootstrap.cc:270 -> 2\n"
                         "n3:9:9 [2] NCCL INFO init.cc:1350 ->")
    [f] = suspects(rep, "nccl-init-failed")
    assert "bootstrap failed" in f.summary and "ibp75s0" in f.summary and "not in these lines" in f.summary
    assert "NCCL_SOCKET_IFNAME" in f.action


_PEER_CLOSED = ("vm1:7389:7453 [0] include/socket.h:421 NCCL WARN Call to recv failed : Broken pipe\n"
                "vm1:7389:7453 [0] NCCL INFO include/socket.h:438 -> 2\n"
                "vm1:7389:7453 [0] NCCL INFO bootstrap.cc:128 -> 2\n"
                "vm1:7389:7453 [0] NCCL INFO init.cc:665 -> 2\n")


def test_an_init_failed_because_the_peer_closed_is_its_echo_unless_nothing_else_failed(tmp_path):
    """The peer's end of the bootstrap socket closed (EPIPE): with the peer's own failure in the logs (a rank's
    ncclInvalidUsage) that failure is the suspect; alone, the broken connection is (evidence/chain.py)."""
    from conftest import main_json

    d = tmp_path / "job"
    d.mkdir()
    (d / "nccl.log").write_text(_PEER_CLOSED)
    rc, doc = main_json("report", str(d))
    [sus] = [f for f in doc["findings"] if f["severity"] == "suspect"]
    assert sus["kind"] == "nccl-init-failed" and "connection broke first" in sus["summary"]
    (d / "rank1.log").write_text(
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, invalid usage, NCCL version 2.7.8\n")
    rc, doc = main_json("report", str(d))
    [sus] = [f for f in doc["findings"] if f["severity"] == "suspect"]
    assert "invalid usage" in sus["summary"]
    assert any(f["kind"] == "nccl-init-failed" and f["severity"] == "warning" for f in doc["findings"])


def test_collective_lines_pasted_without_their_header_are_read_one_process_per_file(tmp_path):
    """``AllReduce: opCount 0 sendbuff ...`` without ``host:pid:tid [d] NCCL INFO`` (a maintainer's grep of two ranks'
    COLL lines): each file is one process named after it, and the two ranks' different AllReduce at opCount 0 show."""
    from conftest import main_json

    coll = ("AllGather: opCount 0 sendbuff 0x7f27f724fa00 recvbuff 0x7f27f724f800 count 8 datatype 0 op 0 root 0 comm "
            "0x7f27a30bbb70 [nranks=2] stream 0x7f2c34000d30\nAllReduce: opCount 0 sendbuff 0x7f27f7250200 recvbuff "
            "0x7f27f7250000 count {n} datatype 7 op 0 root 0 comm 0x7f27b400be70 [nranks=2] stream 0x7f2c34000d30\n")
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank-a.txt").write_text(coll.format(n=3))
    (d / "rank-b.txt").write_text(coll.format(n=2))
    rc, doc = main_json("report", str(d))
    assert rc == 3 and not doc["headline"].startswith("nothing could be read")
    f = next(f for f in doc["findings"] if f["kind"] == "nccl-op-mismatch")
    assert "rank-a" in f["summary"] and "count 3" in f["summary"] and "count 2" in f["summary"]
    assert f["ranks"] == [] and f["hosts"] == []
