"""Unit tests of `hangdbg check`'s analysis: blame of one run, bisection, verdict, document, view.

The runs here are built from the very messages the node launcher sends (hand-written); the real
runs are in test_real_check_*.py.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from rich.console import Console

from conftest import validate
from hangdbg.check.bisection import Outcome, isolate
from hangdbg.check.blame import STEPS, Trial, blame, check_node, rank_result, slots_text, slow_nodes, slow_ranks
from hangdbg.check.verdict import check_verdict
from hangdbg.cli.check_cmd import parse_size
from hangdbg.check.node import NodeCheckOptions, parse_layout
from hangdbg.check.plan import CheckResult
from hangdbg.enums import NodeStatus
from hangdbg.report.build import check_document
from hangdbg.report.check_view import render_check
from hangdbg.report.schema import to_json


def _steps(rank: int, upto: str | None, fail: dict | None = None, recv: float = 1.0) -> list[dict]:
    """Step messages of a rank that passed every step before ``upto`` (all when None), then ``fail``."""
    out = []
    for step in STEPS:
        if step == upto:
            if fail is not None:
                out.append({"step": step, "rank": rank, "ok": False, "seconds": 5.0, **fail})
            break
        msg = {"step": step, "rank": rank, "ok": True, "seconds": 0.01}
        if step == "facts":
            msg.update(hostname="vm", device="cpu", numa=[0])
        if step == "bandwidth":
            msg.update(bytes=1 << 20, iters=3, time_s=0.01, algbw_gbps=0.1, busbw_gbps=0.15, recv_gbps=recv, recv_from=rank - 1)
        out.append(msg)
    return out


def _trial(layout, per_rank, number=1, purpose="all", statuses=None, states=None) -> Trial:
    """``per_rank``: rank -> (upto, fail) of :func:`_steps` (absent: passed everything)."""
    ranks, nodes, base = [], [], 0
    for host, slots in layout:
        for local, slot in enumerate(slots):
            r = base + local
            upto, fail, *rest = per_rank.get(r, (None, None))
            state = (states or {}).get(r, "exited")
            end = None if state == "not-started" else {"state": state, "exit": 0 if upto is None else 1}
            ranks.append(rank_result(r, host, slot, local, _steps(r, upto, fail, *rest), end))
        base += len(slots)
        status, reason = (statuses or {}).get(host, ("ok", None))
        nodes.append(check_node(host, tuple(slots), {"hostname": host, "route_interface": "lo"}, NodeStatus(status), reason,
                                "gloo"))
    return Trial(number, purpose, tuple((h, tuple(s)) for h, s in layout), None, "127.0.0.1:29500", tuple(nodes),
                 tuple(ranks), 10.0)


TWO = (("node1", (0, 1)), ("node2", (0, 1)))
TIMEOUT = {"timeout": True, "error": "DistStoreError: wait timeout after 15000ms, keys: /default_pg/0//cpu//0/2"}
IFACE = {"error": "RuntimeError: [enforce fail at device.cc:84] ifa != nullptr. Unable to find address for: bogus0"}


def test_own_error_at_init_is_the_cause_and_timeouts_only_wait():
    t = _trial(TWO, {0: ("init", TIMEOUT), 1: ("init", TIMEOUT), 2: ("init", IFACE), 3: ("init", IFACE)})
    b = blame(t)
    assert (b.step, b.ranks, b.hosts, b.waiting, b.bootstrap) == ("init", (2, 3), ("node2",), (0, 1), True)
    assert b.slots == (("node2", 0), ("node2", 1))
    assert "rank 2 (node2 slot 0) failed init: RuntimeError" in b.why[0] and "bogus0" in b.why[0]


def test_a_stopped_rank_is_the_cause_its_peers_only_wait():
    t = _trial(TWO, {0: ("all_reduce", TIMEOUT), 1: ("all_reduce", TIMEOUT), 2: ("all_reduce", TIMEOUT),
                     3: ("all_reduce", None)}, states={3: "stopped"})
    b = blame(t)
    assert (b.ranks, b.waiting, b.bootstrap) == ((3,), (0, 1, 2), False)
    assert "was stopped (state T, SIGSTOP) before it finished all_reduce" in b.why[0]


def test_peers_that_lost_a_dead_rank_are_not_blamed():
    lost = {"error": "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242"}
    t = _trial(TWO, {0: ("barrier", lost), 1: ("barrier", lost), 2: ("barrier", lost), 3: ("barrier", None)},
               states={3: "exited"})
    t = Trial(t.number, t.purpose, t.layout, None, t.master, t.nodes,
              t.ranks[:3] + (rank_result(3, "node2", 1, 1, _steps(3, "barrier"), {"state": "exited", "exit": -9}),), 1.0)
    b = blame(t)
    assert b.ranks == (3,) and set(b.waiting) == {0, 1, 2}
    assert "was killed by signal 9 before it finished barrier" in b.why[0]


def test_every_rank_timing_out_names_nobody():
    t = _trial(TWO, {r: ("barrier", TIMEOUT) for r in range(4)})
    b = blame(t)
    assert b.ranks == () and b.hosts == () and b.waiting == (0, 1, 2, 3)
    assert b.why == ("every rank timed out at barrier: no rank stands out",)


def test_a_wrong_result_names_the_step_not_a_rank():
    wrong = {"error": "3 of 1024 values differ from 10", "wrong_result": True}
    t = _trial(TWO, {r: ("all_reduce", wrong) for r in range(4)})
    b = blame(t)
    assert b.ranks == () and "all_reduce returned a wrong result on ranks {0-3}" in b.why[0]


def test_a_node_the_transport_could_not_run_is_the_cause():
    t = _trial(TWO, {0: ("init", TIMEOUT), 1: ("init", TIMEOUT)}, statuses={"node2": ("unreachable", "ssh: connect refused")},
               states={2: "not-started", 3: "not-started"})
    b = blame(t)
    assert b.hosts == ("node2",) and b.ranks == () and "node2: unreachable: ssh: connect refused" in b.why
    assert b.waiting == (0, 1)


def test_a_trial_that_passed_blames_nobody():
    t = _trial(TWO, {})
    assert t.passed and blame(t).ranks == () and t.failed_step is None


def _fake(bad_alone=(), bad_with_others=(), calls=None):
    """A check over units: fails when it holds a unit bad alone, or a bad-with-others unit among others."""
    def run_many(subsets):
        out = []
        for s in subsets:
            if calls is not None:
                calls.append(s)
            hit = [u for u in s if u in bad_alone] + ([u for u in s if u in bad_with_others] if len(s) > 1 else [])
            out.append(Outcome(not hit, tuple(hit)))
        return out
    return run_many


@pytest.mark.parametrize("n", [2, 3, 8, 64])
def test_bisection_without_evidence_finds_one_bad_unit_in_log_rounds(n):
    calls: list = []
    units = [f"n{i}" for i in range(n)]
    iso = isolate(units, _fake(bad_alone={f"n{n - 1}"}, calls=calls))
    assert iso.bad == [f"n{n - 1}"] and iso.alone == [f"n{n - 1}"]
    assert len(calls) <= 2 * math.ceil(math.log2(n))


def test_bisection_with_evidence_takes_one_round():
    calls: list = []
    iso = isolate([f"n{i}" for i in range(64)], _fake(bad_alone={"n17"}, calls=calls), blamed=["n17"])
    assert iso.bad == ["n17"] and calls == [("n17",), tuple(f"n{i}" for i in range(64) if i != 17)]


def test_bisection_finds_two_bad_units():
    iso = isolate([f"n{i}" for i in range(8)], _fake(bad_alone={"n1", "n6"}))
    assert sorted(iso.alone) == ["n1", "n6"]


def test_a_unit_that_fails_only_with_others():
    iso = isolate(["a", "b", "c"], _fake(bad_with_others={"b"}), blamed=["b"])
    assert iso.with_others == ["b"] and iso.alone == [] and iso.bad == ["b"]
    assert iso.runs == [(("b",), True), (("a", "c"), True), (("a", "b", "c"), False)]  # the whole set fails again
    # the same without evidence: nothing to single out, the set fails only together
    iso = isolate(["a", "b"], _fake(bad_with_others={"b"}))
    assert iso.together == [("a", "b")] and iso.bad == []


def test_verdict_names_nodes_and_the_exclude_hostlist():
    layout = tuple((f"node{i}", (0,)) for i in range(1, 7))
    first = _trial(layout, {1: ("init", IFACE), 4: ("init", IFACE), 0: ("init", TIMEOUT)})
    iso = isolate([h for h, _ in layout], _fake(bad_alone={"node2", "node5"}), blamed=["node2", "node5"])
    v = check_verdict([first], None, iso, {}, "gloo")
    assert v.bad_nodes == ("node2", "node5") and v.exclude == "node[2,5]"
    assert v.headline.startswith("bad node(s) node2, node5: node2 fails the check by itself: rank 1 (node2 slot 0) failed init")
    assert v.headline.endswith("run with --exclude=node[2,5]")
    assert [f.kind.value for f in v.findings] == ["check-failed", "check-failed", "waiting"]


def test_verdict_of_a_failure_no_subset_repeats_is_intermittent_names_nobody_and_is_no_all_clear():
    """Both halves pass and the whole set passes again: the first failure did not repeat. Even with
    evidence naming node2 (its ranks failed on their own), nobody is named: a warning, exit 1."""
    first = _trial(TWO, {0: ("barrier", TIMEOUT), 1: ("barrier", TIMEOUT), 2: ("barrier", IFACE), 3: ("barrier", IFACE)})
    calls: list = []
    iso = isolate(["node1", "node2"], _fake(calls=calls), blamed=["node2"])
    assert iso.intermittent == [("node1", "node2")] and iso.bad == [] and iso.together == []
    assert calls == [("node2",), ("node1",), ("node1", "node2")]
    v = check_verdict([first], None, iso, {}, "gloo")
    assert v.bad_nodes == () and v.bad_gpus == () and v.exclude is None
    assert not any(f.is_suspect for f in v.findings) and not any(f.hosts for f in v.findings)
    assert "an intermittent fault; no node is named" in v.findings[0].summary
    assert "passed when run again" in v.findings[0].summary
    result = CheckResult("--hosts node[1-2]", "gloo", ".", (first,), v)
    assert result.status == 1  # never an all-clear for a run that failed


def test_halves_that_pass_while_the_whole_fails_again_fail_only_together():
    first = _trial(TWO, {r: ("barrier", TIMEOUT) for r in range(4)})
    iso = isolate(["node1", "node2"], _fake(bad_with_others={"node1"}))
    assert iso.together == [("node1", "node2")] and iso.intermittent == []
    v = check_verdict([first], None, iso, {}, "gloo")
    assert v.bad_nodes == () and "fail the check only together" in v.findings[0].summary


def test_slow_ranks_and_nodes():
    layout = tuple((f"node{i}", (0, 1)) for i in range(1, 4))
    t = _trial(layout, {r: (None, None, 0.1 if r in (4, 5) else 1.0) for r in range(6)})
    assert [r.rank for r in slow_ranks(t.ranks, 0.5)] == [4, 5]
    assert slow_nodes(t.ranks, 0.5) == [("node3", 0.1, 1.0)]
    v = check_verdict([t], None, None, {}, "gloo")
    assert v.bad_nodes == () and not any(f.is_suspect for f in v.findings)
    assert [f.kind.value for f in v.findings] == ["check-slow", "check-slow"]
    assert "node3 is slow: its ranks receive at 0.1 GB/s, the nodes' median is 1 GB/s" in v.findings[0].summary
    assert v.headline.startswith("healthy: 6 ranks on 3 node(s) passed every check; all_reduce of 1048576 bytes")


def test_document_follows_the_schema_and_the_view_says_it(tmp_path):
    first = _trial(TWO, {0: ("init", TIMEOUT), 1: ("init", TIMEOUT), 2: ("init", IFACE), 3: ("init", IFACE)})
    alone = _trial((TWO[1],), {0: ("init", IFACE), 1: ("init", IFACE)}, number=3, purpose="bisect nodes")
    rest = _trial((TWO[0],), {}, number=4, purpose="bisect nodes")
    retry = _trial(TWO, {}, number=2, purpose="interface")
    iso = isolate(["node1", "node2"], lambda subsets: [Outcome(s != ("node2",), ("node2",) if s == ("node2",) else ())
                                                       for s in subsets], blamed=["node2"])
    v = check_verdict([first, retry, alone, rest], retry, iso, {}, "gloo")
    doc = check_document(CheckResult("--jobid 7", "auto", str(tmp_path), (first, retry, alone, rest), v))
    data = validate(json.loads(to_json(doc)))
    assert data["command"] == "check" and data["found"] and data["exclude"] == "node2"
    assert [t["purpose"] for t in data["trials"]] == ["all", "interface", "bisect nodes", "bisect nodes"]
    assert data["trials"][0]["log"] == "trials/01-all/messages.jsonl"
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(render_check(doc))
    text = console.file.getvalue()
    for want in ("bad node(s) node2", "sbatch --exclude=node2", "failed: {2-3}", "timed out (waiting): {0-1}",
                 "check-interface", "bisect nodes"):
        assert want in text, want


def test_sizes_layouts_and_slot_lists():
    assert parse_size("64M") == 64 << 20 and parse_size("1G") == 1 << 30 and parse_size("4096") == 4096
    assert parse_size("8KiB") == 8192
    for bad in ("", "x", "1T", "-5", "2"):
        with pytest.raises(Exception):
            parse_size(bad)
    assert parse_layout(["node1=0,1", "node2=0-3"]) == (("node1", (0, 1)), ("node2", (0, 1, 2, 3)))
    for bad in ("node1", "=0", "node1=a", "node1=0-"):
        with pytest.raises(ValueError):
            parse_layout([bad])
    assert slots_text((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"
    opts = NodeCheckOptions("node2", parse_layout(["node1=0-3", "node2=1,3"]), "127.0.0.1", 1)
    assert opts.world_size == 6 and opts.my_ranks() == [(4, 0, 1), (5, 1, 3)]
    with pytest.raises(ValueError):
        NodeCheckOptions("node9", opts.layout, "127.0.0.1", 1).my_ranks()


def test_plan_of_a_hostfile_takes_slots_and_the_address_ssh_uses(tmp_path):
    import shutil

    from hangdbg.api._check import setup
    from hangdbg.cli.check_cmd import check_plan
    from hangdbg.cli.main import build_parser

    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    (tmp_path / "hostfile").write_text("# the job's nodes\nnodeA slots=4\nnodeB slots=2  # older\n")
    (tmp_path / "ssh_config").write_text("Host nodeA\n    HostName 127.0.0.7\n")
    args = build_parser(["check"]).parse_args(["check", "--hostfile", str(tmp_path / "hostfile"), "--ssh-config",
                                               str(tmp_path / "ssh_config"), "--launcher", "ssh", "-o", str(tmp_path / "o")])
    plan, targets = setup(check_plan(args))
    assert plan.layout == (("nodeA", (0, 1, 2, 3)), ("nodeB", (0, 1)))
    assert plan.addresses == {"nodeA": "127.0.0.7", "nodeB": "nodeb"}  # ssh -G lower-cases a name it cannot map
    assert targets == f"--hostfile {tmp_path / 'hostfile'}" and plan.node_name_arg


UNREACH = {"error": "ConnectionError: cannot reach the rendezvous at 127.0.0.1:29500 within 10 s: "
                    "ConnectionRefusedError: Connection refused"}
WAITED = {"timeout": True, "error": "TimeoutError: ranks [1, 2] did not check in within 10 s"}


def test_unreachable_rendezvous_host_is_blamed_when_no_other_node_reaches_it():
    three = (("node1", (0,)), ("node2", (0,)), ("node3", (0,)))
    b = blame(_trial(three, {0: ("rendezvous", WAITED), 1: ("rendezvous", UNREACH), 2: ("rendezvous", UNREACH)}))
    assert b.hosts == ("node1",) and b.ranks == (0,)
    assert "no rank of the 2 other nodes can reach: its address is unreachable from them" in b.why[-1]
    # one node of three cannot reach it: that node is the cause
    b = blame(_trial(three, {0: ("rendezvous", WAITED), 1: ("rendezvous", UNREACH), 2: ("rendezvous", WAITED)}))
    assert b.hosts == ("node2",) and b.waiting == (0, 2)
    # two nodes: either side may be at fault, bisection decides
    b = blame(_trial(three[:2], {0: ("rendezvous", WAITED), 1: ("rendezvous", UNREACH)}))
    assert b.hosts == () and "either side may be at fault" in b.why[-1]
