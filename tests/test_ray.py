"""``dump --ray`` on a real local Ray cluster (tests/infra/ray_cluster.py, 127.0.0.1 only): a plain-actor
gloo job whose last rank hangs outside the collective (tests/ray_job.py), and a cluster whose actors run
no torch.distributed. The tests of one module share the head; the no-rank test runs first, before any
rank actor exists."""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

JOB = str(ROOT / "tests" / "ray_job.py")


def _wait_for(ready: Path, names: list[str], driver, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all((ready / n).exists() for n in names):
            return
        if driver.poll() is not None:
            pytest.fail(f"the Ray driver exited with {driver.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"the Ray job did not reach {names} in {timeout} s:\n{log.read_text()[-3000:]}")


def _end(driver) -> None:
    driver.send_signal(signal.SIGTERM)  # the driver's actors end with it (Ray kills an owner's actors)
    try:
        driver.wait(timeout=20)
    except Exception:
        driver.kill()


def test_dump_ray_cluster_without_torch_workers_finds_no_rank(ray_head, tmp_path):
    ready = tmp_path / "ready"
    ready.mkdir()
    log = tmp_path / "driver.log"
    driver = ray_head.driver(JOB, "--ready", str(ready), "--idle", log=log)
    try:
        deadline = time.monotonic() + 90
        while len(list(ready.glob("idle-*"))) < 2 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.2)
        assert len(list(ready.glob("idle-*"))) == 2, log.read_text()[-3000:]
        res = run_cli("dump", "--ray", ray_head.address, "--json", "-o", tmp_path / "out", timeout=120)
        assert res.returncode == 1, res.stdout + res.stderr
        assert re.search(r"no training process found among the \d+ alive actors", res.stderr), res.stderr
        assert "Traceback" not in res.stderr
    finally:
        _end(driver)


def test_dump_ray_names_the_rank_that_hangs_outside_the_collective(ray_head, tmp_path):
    ready = tmp_path / "ready"
    ready.mkdir()
    log = tmp_path / "driver.log"
    driver = ray_head.driver(JOB, "--ready", str(ready), log=log)
    try:
        _wait_for(ready, [f"rank-{r}" for r in range(4)], driver, log)
        out = tmp_path / "out"
        res = run_cli("dump", "--ray", ray_head.address, "--json", "-o", out, timeout=150)
        assert res.returncode == 3, res.stdout + res.stderr
        doc = json.loads(res.stdout)
        suspects = {r for f in doc["findings"] if f["severity"] == "suspect" for r in f["ranks"]}
        assert suspects == {3}, doc["headline"]
        waiting = [f for f in doc["findings"] if f["kind"] == "waiting"]
        assert waiting and set(waiting[0]["ranks"]) == {0, 1, 2}
        procs = json.loads((out / "processes.json").read_text())["processes"]
        assert sorted(p["rank"] for p in procs) == [0, 1, 2, 3]  # the driver and Ray's own processes are no ranks
        assert {p["rank_source"] for p in procs} == {"ray-runtime_env:RANK"}
        # watch --ray: the same discovery for each stack sample; the stall's dump names the same rank
        res = run_cli("watch", "--ray", ray_head.address, "--stall", "2", "--interval", "1", "--once", "--json",
                      "-o", tmp_path / "watch", timeout=150)
        assert res.returncode == 3, res.stdout + res.stderr
        [stall] = json.loads(res.stdout)["stalls"]
        assert stall["signal"] == "stacks" and stall["suspects"] == [3], stall
        _agent_on_a_node_finds_its_ranks(ray_head.address, tmp_path)
    finally:
        _end(driver)


def _agent_on_a_node_finds_its_ranks(address: str, tmp_path: Path) -> None:
    """What every node runs when the ranks span several nodes (``hangdbg agent --ray``, through the
    transport seam; here the LocalRunner for this node instead of ssh): the node's ranks found by the
    agent itself, sent back as classes, analysed by the coordinator as the fan-out does."""
    from hangdbg.collect.fanout import agent_argv, fan_out
    from hangdbg.collect.plan import DumpPlan
    from hangdbg.outdir import OutDir
    from hangdbg.stacks.analysis import analyze
    from hangdbg.transport.runners import LocalRunner
    from hangdbg.transport.targets import TargetSpec

    plan = DumpPlan(target=TargetSpec(ray=address), timeout=20)
    argv = agent_argv(sys.executable, plan.agent_argv(with_host=True))
    assert "--ray" in argv
    out = tmp_path / "agent"
    out.mkdir()
    fan = fan_out(LocalRunner("raynode"), ["raynode"], argv, OutDir(out), plan.node_budget())
    assert [n.status.value for n in fan.nodes] == ["ok"], fan.nodes
    assert sorted(d.rank for d in fan.dumps) == [0, 1, 2, 3]
    a = analyze(fan.dumps, whole_job=True, window=plan.window)
    assert {r for f in a.findings if f.severity.value == "suspect" for r in f.ranks} == {3}


def test_dump_ray_train_job_takes_the_ranks_from_train_metadata(ray_head, tmp_path):
    """A Ray Train ``TorchTrainer`` (gloo) job: Train sets ``RANK`` inside its workers, so only its own
    metadata (the dashboard's Train routes) says which actor is which rank. Needs ``ray[train]``
    (pandas, pyarrow): skipped without it."""
    pytest.importorskip("ray.train.torch", exc_type=ImportError)
    ready = tmp_path / "ready"
    ready.mkdir()
    log = tmp_path / "driver.log"
    driver = ray_head.driver(JOB, "--ready", str(ready), "--train", log=log)
    try:
        _wait_for(ready, [f"rank-{r}" for r in range(4)], driver, log, timeout=120)
        out = tmp_path / "out"
        res = run_cli("dump", "--ray", ray_head.address, "--json", "-o", out, timeout=150)
        assert res.returncode == 3, res.stdout + res.stderr
        doc = json.loads(res.stdout)
        assert {r for f in doc["findings"] if f["severity"] == "suspect" for r in f["ranks"]} == {3}, doc["headline"]
        procs = json.loads((out / "processes.json").read_text())["processes"]
        assert sorted(p["rank"] for p in procs) == [0, 1, 2, 3]
        assert {p["rank_source"] for p in procs} == {"ray-train"}
    finally:
        _end(driver)
