"""``hangdbg run -- torchrun ...`` on real torchrun/gloo jobs (issue 30): the demo's hang (rank 3
calls ``broadcast`` while the others call ``all_reduce``) is caught with no option but ``-o``,
dumped into ``OUT/stall-DATE/``, and the report written when the job ends names rank 3; a healthy
job that ends by itself exits 0 with nothing found.

``--then kill`` ends the hung job and ``run`` exits 3 by itself. ``run`` runs as a real ``python -m
hangdbg run`` process; the time limits are hang guards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _watch import finish as _watch_finish
from conftest import ROOT, suspects, validate

pytest.importorskip("torch")


def _run(out: Path, *job: str, cwd: Path, options: tuple[str, ...] = ()) -> subprocess.Popen:
    """``python -m hangdbg run -o OUT OPTIONS -- torchrun --nproc-per-node 4 -m hangdbg.demo.job JOB...``."""
    env = dict(os.environ, NO_COLOR="1", COLUMNS="160", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    for name in [n for n in env if n.startswith(("TORCH_FR_", "TORCH_NCCL_", "PET_", "HANGDBG_"))]:
        del env[name]  # the test's own environment must not decide what run sets
    argv = [sys.executable, "-m", "hangdbg", "run", "-o", str(out), *options, "--",
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", "--monitor-interval", "1",
            "-m", "hangdbg.demo.job", *job]
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    """run's exit status, stdout and stderr (:func:`_watch.finish`: the job's tracebacks are the job's)."""
    return _watch_finish(p, timeout, what="run", job_output=True)


def _wait_for(pattern: str, base: Path, proc: subprocess.Popen, timeout: float) -> list[Path]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(base.glob(pattern))
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"run exited ({proc.returncode}) before {pattern} appeared:\n{proc.stderr.read()[-3000:]}")
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _rc, _out, err = finish(proc, 90)
    pytest.fail(f"{pattern} never appeared within {timeout:g} s:\n{err[-3000:]}")


def test_run_catches_the_demo_hang_with_no_option_and_reports_rank_3(tmp_path, leftovers):
    out = tmp_path / "out"
    proc = _run(out, "--scenario", "mismatch", cwd=tmp_path)
    t0 = time.monotonic()
    try:
        stall_json = _wait_for("stall-*/hangdbg.json", out, proc, 150)[0]
    finally:
        caught = time.monotonic() - t0
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # no --then: the job is left running until the user stops it
    rc, stdout, err = finish(proc, 90)
    assert rc == 3, err[-3000:]
    assert caught < 120, f"the stall took {caught:.0f} s"
    stall = validate(json.loads(stall_json.read_text()))
    assert [f["ranks"] for f in suspects(stall)] == [[3]]
    # the stall dump fetched every rank's flight recorder from torch's debug server (gloo has no
    # dump pipe and no dump on timeout: NCCL's watchdog only), and the heartbeat threshold was used
    fr = sorted(p.name for p in (stall_json.parent / "fr").iterdir())
    assert fr == [f"debug_server_fr_rank_{r}.json" for r in range(4)]
    assert sorted(p.name for p in (out / "heartbeat").iterdir()) == [f"heartbeat.rank{r}" for r in range(4)]
    watch_doc = json.loads((out / "watch.json").read_text())
    assert watch_doc["stalls"] and watch_doc["stalls"][0]["signal"] in ("heartbeat", "stacks")
    # torchrun's per-rank logs (PET_LOG_DIR, PET_TEE) under OUT/logs
    logs = sorted(out.glob("logs/*/attempt_0/*/stderr.log"))
    assert [p.parent.name for p in logs] == ["0", "1", "2", "3"]
    # the final report of OUT names rank 3, and is the document of `hangdbg report`
    report = validate(json.loads((out / "report.json").read_text()))
    assert report["command"] == "report" and report["found"]
    assert {tuple(f["ranks"]) for f in suspects(report)} == {(3,)}  # stacks and flight recorder agree
    assert "rank 3" in report["headline"]
    assert "TORCH_FR_BUFFER_SIZE" in err  # the console names the variables set


def test_run_of_a_healthy_job_that_ends_exits_0_with_nothing_found(tmp_path, leftovers):
    out = tmp_path / "out"
    proc = _run(out, "--scenario", "healthy", "--exit", "--steps", "20", cwd=tmp_path)
    rc, stdout, err = finish(proc, 150)
    assert rc == 0, err[-3000:]
    assert not list(out.glob("stall-*"))
    report = validate(json.loads((out / "report.json").read_text()))
    assert not report["found"] and not suspects(report)
    assert "exited with status 0" in err


def test_then_kill_ends_the_hung_job_and_run_exits_3_by_itself(tmp_path, leftovers):
    out = tmp_path / "out"
    # a fixed --stall: the automatic one (its 30 s floor) is the test above's
    proc = _run(out, "--scenario", "mismatch", cwd=tmp_path, options=("--then", "kill", "--interval", "3", "--stall", "10"))
    rc, stdout, err = finish(proc, 180)
    assert rc == 3, err[-3000:]
    watch_doc = json.loads((out / "watch.json").read_text())
    assert watch_doc["ended"] == "job-ended" and watch_doc["stalls"][0]["then"].startswith("kill: SIGTERM")
    assert watch_doc["stalls"][0]["suspects"] == [3]
    report = validate(json.loads((out / "report.json").read_text()))
    assert {tuple(f["ranks"]) for f in suspects(report)} == {(3,)}
