"""``dump --ray`` on a real local Ray cluster (tests/infra/ray_cluster.py, 127.0.0.1 only): a plain-actor
gloo job whose last rank hangs outside the collective (tests/ray_job.py), and a cluster whose actors run
no torch.distributed. The tests of one module share the head; the no-rank test runs first, before any
rank actor exists."""

from __future__ import annotations

import json
import signal
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
        assert "no training process found among the 2 alive actors" in res.stderr
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
    finally:
        _end(driver)
