"""`hangdbg check --nproc-per-node N` on this node: real gloo ranks, a real SIGSTOPped rank."""

from __future__ import annotations

import json
import os
import time

import pytest

from conftest import check_golden, of_kind, read_json, run_cli, run_json, suspects
from infra.check_faults import stop_at_all_reduce

pytest.importorskip("torch")

FAST = ("--timeout", "5", "--init-timeout", "20", "--size", "1M", "--iters", "3")


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    out = tmp_path_factory.mktemp("healthy") / "o"
    start = time.monotonic()
    # --slow 0.01: loopback figures on 2 shared cores vary; a noise "slow" warning would change the shape
    rc, doc = run_json("check", "--nproc-per-node", "3", *FAST, "--slow", "0.01", "-o", out)
    return rc, doc, out, time.monotonic() - start


def test_healthy_node_passes_every_step(healthy):
    rc, doc, out, _ = healthy
    assert rc == 0, doc["headline"]
    assert doc["found"] is False and doc["bad_nodes"] == [] and doc["exclude"] is None
    assert doc["headline"].startswith("healthy: 3 ranks on 1 node(s) passed every check")
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2]
    assert [r["slot"] for r in doc["ranks"]] == [0, 1, 2]
    steps = {s["step"] for r in doc["ranks"] for s in r["steps"] if s["ok"]}
    assert steps == {"facts", "alloc", "interface", "rendezvous", "init", "barrier", "all_reduce", "all_gather", "broadcast",
                     "send_recv", "bandwidth", "node_bandwidth", "matmul", "copy", "host_copy"}
    assert [(t["purpose"], t["passed"]) for t in doc["trials"]] == [("all", True)]
    assert read_json(out / "check.json")["headline"] == doc["headline"]
    check_golden(doc, "check")


def test_healthy_facts_and_figures_are_sane(healthy):
    _, doc, _, _ = healthy
    for r in doc["ranks"]:
        assert r["device"] == "cpu" and r["hostname"] and r["state"] == "exited" and r["exit_status"] == 0
        assert r["alloc_bytes"] == 64 << 20
        if os.path.isdir("/sys/devices/system/node"):
            assert r["numa"], "the NUMA node of the rank's CPUs (sysfs)"
        assert r["recv_from"] == (r["rank"] - 1) % 3 and 0 < r["recv_gbps"] < 1000
    bw = doc["bandwidth"]
    assert bw["trial"] == 1 and bw["bytes"] == 1 << 20 and bw["iters"] == 3 and bw["world_size"] == 3
    assert 0 < bw["time_s"] < 5
    assert bw["algbw_gbps"] == pytest.approx((1 << 20) / bw["time_s"] / 1e9)
    assert bw["busbw_gbps"] == pytest.approx(bw["algbw_gbps"] * 2 * 2 / 3)  # nccl-tests: algbw x 2(n-1)/n
    assert 0 < bw["algbw_gbps"] < 1000  # loopback on one machine: far from 0, far from impossible
    node = doc["nodes"][0]
    assert node["status"] == "ok" and node["route_interface"] == "lo"
    assert any(i.startswith("lo=127.0.0.1") for i in node["interfaces"])


def test_every_message_is_on_disk(healthy):
    _, doc, out, _ = healthy
    lines = [json.loads(x) for x in (out / doc["trials"][0]["log"]).read_text().splitlines()]
    assert lines[0]["type"] == "trial" and lines[0]["argv"][2:4] == ["hangdbg", "check-node"]
    kinds = [m["type"] for m in lines[1:]]
    assert kinds[0] == "node" and kinds[-1] == "done" and kinds.count("rank-end") == 3
    assert kinds.count("step") == 45  # 3 ranks x 15 steps


def test_text_report(tmp_path):
    res = run_cli("check", "--nproc-per-node", "2", *FAST, "-o", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "healthy: 2 ranks on 1 node(s) passed every check" in text
    for word in ("all_reduce", "all_gather", "broadcast", "send_recv", "algbw", "busbw", "2/2"):
        assert word in text
    assert "run 1 (all)" in res.stderr and "passed" in res.stderr


def test_a_stopped_rank_is_bisected_to_its_slot(tmp_path):
    """Slot 1 stops itself (SIGSTOP) in its first all_reduce: the others time out waiting for it
    (never suspects), the launcher sees state T, and the bisection runs slot 1 alone (fails) and
    slots 0,2 (pass) at once."""
    faults = stop_at_all_reduce(tmp_path / "site", 1)
    env = dict(os.environ, PYTHONPATH=str(faults))
    start = time.monotonic()
    rc, doc = run_json("check", "--nproc-per-node", "3", *FAST, "-o", tmp_path / "o", env=env)
    took = time.monotonic() - start
    assert rc == 3, doc["headline"]
    host = doc["nodes"][0]["host"]
    assert doc["bad_gpus"] == [f"{host}:1"] and doc["bad_nodes"] == []
    [bad] = suspects(doc)
    assert bad["kind"] == "check-failed" and bad["gpus"] == [f"{host}:1"]
    assert "stopped (state T, SIGSTOP)" in bad["summary"] and "all_reduce" in bad["summary"]
    assert "CUDA_VISIBLE_DEVICES=0,2" in bad["action"]
    [waiting] = of_kind(doc, "waiting")
    assert waiting["ranks"] == [0, 2] and waiting["waits_for"] == [1] and waiting["severity"] == "waiting"
    first = {r["rank"]: r for r in doc["ranks"]}
    assert first[1]["state"] == "stopped"
    assert [s["step"] for s in first[0]["steps"] if not s["ok"]] == ["all_reduce"]
    assert [(t["layout"], t["passed"]) for t in doc["trials"]] == [
        ([f"{host}:0-2"], False), ([f"{host}:1"], False), ([f"{host}:0,2"], True)]
    assert doc["bandwidth"]["trial"] == 3 and doc["bandwidth"]["world_size"] == 2  # the figures of the run that passed
    # within the budget: the first run ends when the others' 5 s timeout fires, not at a node deadline
    assert doc["trials"][0]["seconds"] < 5 + 20 + 15
    assert took < 90


def test_no_bisect_runs_once(tmp_path):
    faults = stop_at_all_reduce(tmp_path / "site", 0)
    env = dict(os.environ, PYTHONPATH=str(faults))
    rc, doc = run_json("check", "--nproc-per-node", "2", *FAST, "--no-bisect", "-o", tmp_path / "o", env=env)
    assert rc == 3 and len(doc["trials"]) == 1
    assert suspects(doc)[0]["ranks"] == [0]


def test_check_node_outside_its_layout_says_so(tmp_path):
    res = run_cli("check-node", "--node-name", "elsewhere", "--layout", "node1=0", "--master-addr", "127.0.0.1",
                  "--master-port", "1")
    assert res.returncode == 1
    assert "HANGDBG1" in res.stdout  # the error goes to the coordinator as a frame


def test_nccl_without_a_visible_gpu_is_a_setup_error(tmp_path):
    """No GPU here: --backend nccl is refused before any rank starts (exit 1, the numbers and the
    remedy), and nothing is written."""
    res = run_cli("check", "--backend", "nccl", "--nproc-per-node", "1", *FAST, "-o", tmp_path / "o")
    assert res.returncode == 1, res.stdout
    err = " ".join(res.stderr.split())
    assert "1 rank with nccl needs 1 GPU" in err and "0 GPUs" in err and "--backend gloo" in err
    assert not (tmp_path / "o").exists()


def test_out_dir_of_an_earlier_run_needs_force(healthy):
    _, _, out, _ = healthy
    res = run_cli("check", "--nproc-per-node", "1", *FAST, "-o", out)
    assert res.returncode == 2 and "already holds the output of another hangdbg run" in " ".join(res.stderr.split())
