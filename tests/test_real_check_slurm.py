"""`hangdbg check --jobid` inside a real allocation of the local SLURM cluster (2 nodes x 2 ranks,
srun --overlap into the job), healthy and with real faults on node2."""

from __future__ import annotations

import time

import pytest

from conftest import of_kind, run_json, suspects
from infra.check_faults import node_python, stop_at_all_reduce

pytest.importorskip("torch")

FAST = ("--nproc-per-node", "2", "--timeout", "5", "--init-timeout", "15", "--size", "1M", "--iters", "3")


@pytest.fixture(scope="module")
def allocation(cluster):
    """A 2-node job that only holds its nodes (what `salloc -N 2` gives a user)."""
    job = cluster.sbatch("#!/bin/sh\nsleep 900\n", "-N", "2", "--ntasks-per-node=1", "--output=/dev/null")
    cluster.wait_state(job, "RUNNING", timeout=60)
    yield str(job)
    cluster.scancel(job)


def test_healthy_allocation(cluster, allocation, tmp_path):
    rc, doc = run_json("check", "--jobid", allocation, *FAST, "-o", tmp_path / "o", env=cluster.env)
    assert rc == 0, doc["headline"]
    assert doc["targets"] == f"--jobid {allocation}"
    assert [(n["host"], n["status"], n["slots"]) for n in doc["nodes"]] == [("node1", "ok", [0, 1]), ("node2", "ok", [0, 1])]
    assert [(r["rank"], r["host"], r["slot"]) for r in doc["ranks"]] == [
        (0, "node1", 0), (1, "node1", 1), (2, "node2", 0), (3, "node2", 1)]
    assert all(r["state"] == "exited" and r["exit_status"] == 0 for r in doc["ranks"])
    bw = doc["bandwidth"]
    assert bw["world_size"] == 4 and bw["busbw_gbps"] == pytest.approx(bw["algbw_gbps"] * 1.5)
    assert doc["trials"][0]["master"].startswith("127.0.0.1:")  # node1's NodeAddr, from scontrol


def test_wrong_interface_on_one_node(cluster, allocation, tmp_path):
    """node2 has GLOO_SOCKET_IFNAME=bogus0: its ranks fail on their own (the interface step, before
    gloo would fail in init), check in with their failure, and node1's ranks stop waiting at once.
    The retry on the interface that routes to the rendezvous passes; the bisection names node2."""
    wrapper = node_python(tmp_path / "python", "node2", env={"GLOO_SOCKET_IFNAME": "bogus0"})
    start = time.monotonic()
    rc, doc = run_json("check", "--jobid", allocation, *FAST, "--remote-python", wrapper, "-o", tmp_path / "o",
                       env=cluster.env)
    assert rc == 3, doc["headline"]
    assert doc["bad_nodes"] == ["node2"] and doc["exclude"] == "node2"
    [bad] = suspects(doc)
    assert bad["hosts"] == ["node2"] and "GLOO_SOCKET_IFNAME=bogus0 names no interface of this node" in bad["summary"]
    assert "--exclude=node2" in bad["action"]
    [iface] = of_kind(doc, "check-interface")
    assert iface["severity"] == "warning" and "passes" in iface["summary"] and "node2: bogus0" in iface["summary"]
    [waiting] = of_kind(doc, "waiting")
    assert waiting["ranks"] == [0, 1] and waiting["waits_for"] == [2, 3]
    assert [(t["purpose"], t["ifname"], t["passed"]) for t in doc["trials"]] == [
        ("all", None, False), ("interface", "auto", True), ("bisect nodes", None, False), ("bisect nodes", None, True)]
    assert doc["headline"].endswith("run with --exclude=node2")
    assert doc["trials"][0]["failed_step"] == "interface"
    # node1's ranks stopped waiting because node2's checked in with their failure, not because the
    # 15 s rendezvous budget ran out (the wall time is not asserted: it depends on the machine's load)
    for r in doc["ranks"][:2]:
        [waited] = [s for s in r["steps"] if not s["ok"]]
        assert waited["step"] == "rendezvous" and waited["timeout"] is True
        assert "stopped waiting: rank 2 failed interface" in waited["error"] or \
            "stopped waiting: rank 3 failed interface" in waited["error"], waited["error"]
    assert time.monotonic() - start < 120


def test_stopped_rank_on_one_node(cluster, allocation, tmp_path):
    """GPU (slot) 1 of node2 stops itself in all_reduce: bisection over the nodes, then over node2's slots."""
    site = stop_at_all_reduce(tmp_path / "site", 1)
    wrapper = node_python(tmp_path / "python", "node2", env={"PYTHONPATH": str(site)})
    start = time.monotonic()
    rc, doc = run_json("check", "--jobid", allocation, *FAST, "--remote-python", wrapper, "-o", tmp_path / "o",
                       env=cluster.env)
    assert rc == 3, doc["headline"]
    assert doc["bad_gpus"] == ["node2:1"] and doc["bad_nodes"] == []
    assert "stopped (state T, SIGSTOP)" in suspects(doc)[0]["summary"]
    layouts = sorted((t["layout"], t["passed"]) for t in doc["trials"][1:])
    assert layouts == [(["node1:0-1"], True), (["node2:0"], True), (["node2:0-1"], False), (["node2:1"], False)]
    assert time.monotonic() - start < 120
