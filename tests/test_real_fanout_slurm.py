"""`dump --jobid` on real hung SLURM jobs (2 nodes x 2 ranks) of a real local cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conftest import ROOT, run_cli, run_json, suspects
from infra.slurm import srun_job_script, torchrun_job_script, wait_ready

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def jobs(cluster, tmp_path_factory):
    """Two hung mismatch jobs at once: ranks launched by srun, and by torchrun under srun."""
    out = {}
    for kind, build in (("srun", srun_job_script), ("torchrun", torchrun_job_script)):
        ready = tmp_path_factory.mktemp(kind)
        out[kind] = (cluster.sbatch(build(ready)), ready)
    for jobid, ready in out.values():
        wait_ready(ready, 4, timeout=240, cluster=cluster, jobid=jobid)
    time.sleep(1.5)
    return {k: v[0] for k, v in out.items()}


@pytest.mark.parametrize("kind", ["srun", "torchrun"])
def test_jobid_names_the_odd_rank_and_its_node(cluster, jobs, tmp_path, kind):
    rc, doc = run_json("dump", "--jobid", jobs[kind], "-o", tmp_path, env=cluster.env)
    assert rc == 3, doc["headline"]
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([3], "different-collective")], suspects(doc)
    hosts = {r["rank"]: r["host"] for r in doc["stacks"]["ranks"]}
    assert hosts == {0: "node1", 1: "node1", 2: "node2", 3: "node2"}
    assert [(n["host"], n["status"], n["ranks"]) for n in doc["nodes"]] == [("node1", "ok", [0, 1]), ("node2", "ok", [2, 3])]
    sources = {r["rank_source"] for r in doc["stacks"]["ranks"]}
    # srun ranks export RANK from SLURM_PROCID; torchrun workers have RANK (their SLURM_PROCID is the node index)
    assert sources == {"RANK"}
    assert "broadcast" in suspects(doc)[0]["summary"]
    assert suspects(doc)[0]["hosts"] == ["node2"]
    assert doc["headline"].startswith("suspect rank 3 on node2: different collective")


def test_text_report_names_rank_and_node(cluster, jobs, tmp_path):
    res = run_cli("dump", "--jobid", jobs["srun"], "-o", tmp_path, env=cluster.env)
    assert res.returncode == 3, res.stderr
    text = " ".join(res.stdout.split())
    assert "suspect rank 3 on node2: different collective: in broadcast" in text
    assert "node2" in text.split("Findings", 1)[1].split("Equivalence classes", 1)[0]  # the suspect's node in its row


def test_nodes_subset(cluster, jobs, tmp_path):
    rc, doc = run_json("dump", "--jobid", jobs["srun"], "-w", "node2", "-o", tmp_path, env=cluster.env)
    assert sorted(r["rank"] for r in doc["stacks"]["ranks"]) == [2, 3]
    assert doc["stacks"]["missing_ranks"] == []  # node1 was not asked: its ranks are not "missing"
    assert [n["host"] for n in doc["nodes"]] == ["node2"]


def test_one_failing_agent_keeps_the_other_node(cluster, jobs, tmp_path):
    broken = tmp_path / "python-broken-on-node2"
    broken.write_text(f'#!/bin/sh\n[ "$SLURMD_NODENAME" = node2 ] && exit 7\nexec {sys.executable} "$@"\n')
    broken.chmod(0o755)
    rc, doc = run_json("dump", "--jobid", jobs["srun"], "--remote-python", broken, "-o", tmp_path / "o", env=cluster.env)
    nodes = {n["host"]: n for n in doc["nodes"]}
    assert nodes["node1"]["status"] == "ok"
    assert nodes["node2"]["status"] in ("error", "no-answer") and nodes["node2"]["reason"]
    assert sorted(r["rank"] for r in doc["stacks"]["ranks"]) == [0, 1]
    # ranks 2-3 were not looked at: not blamed as "missing" (never started or exited), and no
    # all-clear either: node2 is a warning, and the job was not seen whole (exit 1)
    assert rc == 1 and doc["stacks"]["missing_ranks"] == [] and not doc["found"]
    (failed,) = [f for f in doc["findings"] if f["kind"] == "node-failed"]
    assert failed["hosts"] == ["node2"] and "node2" in doc["headline"] and "nodes not examined" in doc["headline"]


def test_unknown_job_id_is_a_usage_error(cluster):
    res = run_cli("dump", "--jobid", "999999", env=cluster.env)
    assert res.returncode == 2 and "does not exist" in res.stderr


def test_job_that_ends_mid_dump(cluster, tmp_path):
    ready = tmp_path / "ready"
    jobid = cluster.sbatch(srun_job_script(ready))
    wait_ready(ready, 4, timeout=240, cluster=cluster, jobid=jobid)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hangdbg", "dump", "--jobid", str(jobid), "--samples", "20", "--interval", "0.5",
         "--json", "-o", str(out)],
        env=dict(cluster.env, NO_COLOR="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    end = time.monotonic() + 60
    while not list(out.glob("raw/*/rank-*.txt")) and time.monotonic() < end:
        time.sleep(0.2)
    cluster.scancel(jobid)
    stdout, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr
    assert proc.returncode in (1, 3), stderr
    if stdout.strip():
        doc = json.loads(stdout)
        assert {n["host"] for n in doc["nodes"]} == {"node1", "node2"}
    assert list(out.glob("raw/*/rank-*.txt"))  # what arrived is kept


def test_collect_over_srun_reads_each_nodes_disk(cluster, jobs, tmp_path):
    disks = tmp_path / "disks"
    for host in ("node1", "node2"):
        (disks / host).mkdir(parents=True)
        (disks / host / "nccl.log").write_text(f"{host}:1:1 [0] NCCL INFO hello from {host}\n")
    out = tmp_path / "out"
    rc, doc = run_json("collect", "--jobid", jobs["srun"], "--logs", f"{disks}/{{host}}/*.log", "-o", out, env=cluster.env)
    assert rc == 0, doc
    assert [(n["host"], n["status"], n["files"]) for n in doc["nodes"]] == [
        ("node1", "ok", ["logs/nccl.log"]), ("node2", "ok", ["logs/nccl.log"])]
    assert (out / "node2" / "logs" / "nccl.log").read_text().startswith("node2:1:1")
