"""The coordinator on recorded agent output (FakeRunner): framing, interleaving, node failures.

The transports themselves are tested on a real sshd (test_real_fanout_ssh) and a real SLURM
cluster (test_real_fanout_slurm); these tests pin the merge logic.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import pytest

from hangdbg.outdir import OutDir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from fanout_scale import recorded_outputs  # noqa: E402

from hangdbg.stacks.analysis import analyze  # noqa: E402
from hangdbg.collect.fanout import fan_out  # noqa: E402
from hangdbg.transport.wire import FrameDecoder, encode_message  # noqa: E402
from hangdbg.transport.hosts import expand_hosts, read_hostfile  # noqa: E402
from hangdbg.transport.runners import FakeRunner, remote_command  # noqa: E402
from hangdbg.transport.slurm import parse_show_job  # noqa: E402
from hangdbg.errors import UsageError  # noqa: E402


def test_frames_roundtrip_in_any_order_with_prefixes_and_noise():
    big = {"type": "rank", "text": random.Random(0).randbytes(30_000).hex() + "é"}
    lines = list(encode_message("node1", 7, big)) + list(encode_message("node2", 1, {"type": "hello"}))
    assert len(lines) > 3 and all(len(line) < 4200 for line in lines)
    random.Random(1).shuffle(lines)
    dec = FrameDecoder()
    got = []
    for i, line in enumerate(lines):
        got += dec.feed(f"node{i % 2 + 1}: {line}" if i % 3 else line)
        dec.feed("Welcome to node1! (motd)")
    assert sorted(h for h, _ in got) == ["node1", "node2"]
    assert dict(got)["node1"] == big
    assert dec.other == len(lines) and dec.garbled == 0
    assert dec.feed("HANGDBG1 node1 3 1/1 !!!notbase64") == [] and dec.garbled == 1
    assert dec.feed("HANGDBG1 broken") == [] and dec.garbled == 2


def test_interleaved_nodes_merge_into_one_job(tmp_path):
    outputs = recorded_outputs(4, 2)
    lines = [x for x in itertools.chain(*itertools.zip_longest(*outputs.values())) if x]
    runner = FakeRunner({"all": lines})
    hosts = list(outputs)
    result = fan_out(runner, hosts, ["agent"], OutDir(tmp_path), timeout=10)
    assert [(n.host, n.status, n.ranks) for n in result.nodes] == [
        (h, "ok", (2 * i, 2 * i + 1)) for i, h in enumerate(hosts)
    ]
    a = analyze(result.dumps, whole_job=True)
    assert [s.ranks for s in a.suspects] == [(7,)]
    assert {d.rank: d.host for d in result.dumps}[7] == "node0004"
    assert (tmp_path / "raw" / "node0004" / "rank-0007.txt").read_text().startswith("# hangdbg rank=7")


def test_dead_and_silent_nodes_are_reported_and_their_ranks_missing(tmp_path):
    outputs = recorded_outputs(3, 2)
    hosts = list(outputs)
    cut = outputs[hosts[1]][:-1]  # node 2's agent died before its "done" message ended
    runner = FakeRunner({hosts[0]: outputs[hosts[0]], hosts[1]: cut},
                        failures={"node9": ("unreachable", "ssh: connect to host node9 port 22: No route to host")})
    result = fan_out(runner, hosts + ["node9"], ["agent"], OutDir(tmp_path), timeout=10)
    status = {n.host: (n.status, n.reason) for n in result.nodes}
    assert status["node0001"][0] == "ok"
    assert status["node0002"][0] == "error" and "stopped before it finished" in status["node0002"][1]
    assert status["node0003"] == ("no-answer", "the agent sent no result")
    assert status["node9"][0] == "unreachable"
    a = analyze(result.dumps, whole_job=True)
    assert a.missing_ranks == (4, 5)  # node 3 never answered; node 2's ranks did arrive before it died
    assert sorted(d.rank for d in result.dumps) == [0, 1, 2, 3]


def test_host_lists_and_hostfiles(tmp_path):
    assert expand_hosts("node[1-3,7],login") == ["node1", "node2", "node3", "node7", "login"]
    with pytest.raises(UsageError):
        expand_hosts("node[1-")
    hf = tmp_path / "hostfile"
    hf.write_text("# comment\nworker-0 slots=8\n\nworker-[1-2] slots=8  # tail\nworker-0 slots=8\n")
    assert read_hostfile(hf) == ["worker-0", "worker-1", "worker-2"]
    hf.write_text("worker-0 gpus=8\n")
    with pytest.raises(UsageError, match="slots=N"):
        read_hostfile(hf)


def test_remote_command_quotes_every_word():
    cmd = remote_command(["/opt/venv/bin/python", "-m", "hangdbg", "agent", "--match-env", "X=a b;rm -rf /"], "source ~/.pdshrc")
    assert cmd == "{\nsource ~/.pdshrc\n} && /opt/venv/bin/python -m hangdbg agent --match-env 'X=a b;rm -rf /'"


def test_parse_scontrol_show_job():
    text = ("JobId=42 JobName=train\n   UserId=root(0) GroupId=root(0)\n   JobState=RUNNING Reason=None\n"
            "   NodeList=node[1-2,5] BatchHost=node1\n   NumNodes=3 NumCPUs=6\n")
    job = parse_show_job(text, "42")
    assert (job.state, job.nodes) == ("RUNNING", ("node1", "node2", "node5"))


def test_slurm_job_filter():
    from hangdbg.collect.procs import slurm_job_filter

    keep = slurm_job_filter("42", "node2", own_step="3", cluster="c1")
    rank = {"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "node2", "SLURM_STEP_ID": "0", "SLURM_CLUSTER_NAME": "c1"}
    assert keep(rank)
    assert not keep(dict(rank, SLURMD_NODENAME="node1"))  # another node's rank (emulated nodes)
    assert not keep(dict(rank, SLURM_STEP_ID="3"))  # the agent's own step
    assert not keep(dict(rank, SLURM_STEP_ID="batch")) and not keep({k: v for k, v in rank.items() if k != "SLURM_STEP_ID"})
    assert not keep(dict(rank, SLURM_JOB_ID="421"))
    assert not keep(dict(rank, SLURM_CLUSTER_NAME="c2"))  # same job id on another cluster


def test_a_hangdbg_agent_of_another_run_is_not_a_rank(tmp_path):
    """Another hangdbg run on the same job (a `watch` sampling it over srun while its stall dump
    runs, or a second `dump --jobid`) has an agent with the job's SLURM_JOB_ID, a step id and
    SLURM_PROCID: the node scan must not take it for a rank (it listed node1 as ranks [0, 0])."""
    import os
    import subprocess

    from hangdbg.collect.procs import scan_node, slurm_job_filter

    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, SLURM_JOB_ID="987654", SLURMD_NODENAME="nodeX", SLURM_STEP_ID="1", SLURM_PROCID="0",
               PYTHONPATH=root)
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    # a real hangdbg process that lingers (it watches the sleeping rank), in step 2 of the same job
    agent = subprocess.Popen([sys.executable, "-m", "hangdbg", "watch", "--pid", str(rank.pid), "--log", str(tmp_path / "x"),
                              "--stall", "600", "-o", str(tmp_path / "w")], env=dict(env, SLURM_STEP_ID="2"), cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:  # both have exec'd: Popen returns once the child's exec succeeded (no sleep needed)
        found = scan_node(slurm_job_filter("987654", "nodeX", own_step="3"))
        assert [(r.pid, r.rank) for r in found] == [(rank.pid, 0)]
    finally:
        for p in (agent, rank):
            p.kill()
            p.wait()
    from hangdbg.launchers import is_hangdbg

    assert is_hangdbg([sys.executable, "-m", "hangdbg", "agent"]) and is_hangdbg(["/venv/bin/python", "/venv/bin/hangdbg", "agent"])
    assert not is_hangdbg([sys.executable, "/src/hangdbg/demo/job.py"]) and not is_hangdbg([sys.executable, "-m", "hangdbg.demo.job"])


def test_hostfile_slots_per_host_expressions_included(tmp_path):
    from hangdbg.transport.hosts import read_hostfile_slots

    hf = tmp_path / "hostfile"
    hf.write_text("node[1-2] slots=8\nnode3\nnode1 slots=2  # listed again: the first line wins\n")
    assert read_hostfile_slots(hf) == {"node1": 8, "node2": 8, "node3": 1}
    assert read_hostfile(hf) == ["node1", "node2", "node3"]
