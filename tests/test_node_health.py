"""A rank in D state (uninterruptible sleep) is a finding about its node: drain the host.

Built dumps: a real D-state process cannot be made on demand (it needs a wedged driver or file
system), so the /proc facts are given as hangdbg.collect.proc_facts would read them (proc(5))."""

from __future__ import annotations

import shlex

from hangdbg.enums import ThreadStatus
from hangdbg.frames import Frame
from hangdbg.kinds import Kind
from hangdbg.model import RankDump, Severity, Thread
from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.node_health import drain_command
from hangdbg.waits import ProcFacts, TaskState
from hangdbg.watch.notify import suspect_hosts

DIST = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
TRAIN = "/w/train.py"


def _job(state: str, wchan: str = "nfs_wait_bit_killable") -> list[RankDump]:
    """Ranks 0-3 on node1 (0, 1) and node2 (2, 3); rank 3 reads a shard, its thread in ``state``; the others in all_reduce."""
    waiting = (Frame("all_reduce", DIST, 2806), Frame("step", TRAIN, 40), Frame("<module>", TRAIN, 90))
    reading = (Frame("read_shard", TRAIN, 12), Frame("<module>", TRAIN, 90))
    out = []
    for rank in range(4):
        main = Thread(300 + rank, "MainThread", ThreadStatus.IDLE, reading if rank == 3 else waiting)
        proc = ProcFacts(tasks=(TaskState(303, state, wchan, "read", fd=7),)) if rank == 3 else None
        out.append(RankDump(rank, pid=100 + rank, host=f"node{1 + rank // 2}", world_size=4, threads=(main,),
                            samples=((main,),), proc=proc))
    return out


def test_d_state_rank_names_its_node_with_the_drain_line():
    a = analyze(_job("D"))
    [node] = [f for f in a.findings if f.is_suspect]
    assert node.kind is Kind.NODE_UNHEALTHY and node.hosts == ("node2",) and node.ranks == (3,)
    assert "drain the host" in node.summary and "nfs_wait_bit_killable" in node.summary
    assert ("scontrol update NodeName=node2 State=DRAIN 'Reason=hangdbg: rank 3 in D state (nfs_wait_bit_killable)'"
            in node.action)
    assert a.headline.startswith("suspect node node2: rank 3 in uninterruptible sleep (D state)")
    assert "drain the host" in a.headline
    [waiting] = [f for f in a.findings if f.severity is Severity.WAITING]
    assert waiting.ranks == (0, 1, 2) and waiting.waits_for == (3,)  # they wait for rank 3, on node2: never named
    assert suspect_hosts(a.findings, a.ranks) == ("node2",)


def test_other_states_keep_the_rank_finding():
    a = analyze(_job("S", "wait_woken"))
    [rank] = [f for f in a.findings if f.is_suspect]
    assert rank.kind is Kind.OUTSIDE_COLLECTIVE and rank.ranks == (3,)
    assert "DRAIN" not in rank.action


def test_drain_line_quotes_what_it_is_given():
    line = drain_command("node2; rm -rf ~", 3, "x$(reboot)'\"")
    assert shlex.split(line) == ["scontrol", "update", "NodeName=node2; rm -rf ~", "State=DRAIN",
                                 "Reason=hangdbg: rank 3 in D state (xreboot)"]
    assert drain_command("n1", 0, "0") == "scontrol update NodeName=n1 State=DRAIN 'Reason=hangdbg: rank 0 in D state'"
