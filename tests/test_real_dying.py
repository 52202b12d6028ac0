"""Real torchrun/gloo job hung in mismatched collectives; rank 1 is killed between two samples of
``dump --samples 3`` while the launcher is stopped (so it neither reaps rank 1 nor stops the
others): the dump must say the job is dying, not hung (issue 14, item 7)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil

from conftest import ROOT, validate

SCENARIO = "mismatch"


def test_rank_killed_between_samples_is_gone_and_job_dying(hung_job, tmp_path):
    out = tmp_path / "out"
    launcher = psutil.Process(hung_job.pid)
    rank_pids = {}
    for child in launcher.children():
        env = child.environ()
        if "RANK" in env:
            rank_pids[int(env["RANK"])] = child.pid
    assert sorted(rank_pids) == [0, 1, 2, 3]
    os.kill(hung_job.pid, signal.SIGSTOP)
    try:
        env = dict(os.environ, NO_COLOR="1", COLUMNS="160")
        dump = subprocess.Popen(
            [sys.executable, "-m", "hangdbg", "dump", "--pid", str(hung_job.pid), "--samples", "3", "--interval", "3",
             "-o", str(out), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        first = out / "raw" / "rank-0001.sample-1.txt"
        deadline = time.monotonic() + 120
        while not first.exists() and time.monotonic() < deadline and dump.poll() is None:
            time.sleep(0.05)
        assert first.exists(), dump.communicate(timeout=60)
        os.kill(rank_pids[1], signal.SIGKILL)
        stdout, stderr = dump.communicate(timeout=300)
    finally:
        os.kill(hung_job.pid, signal.SIGCONT)
    assert "Traceback" not in stderr, stderr
    doc = validate(json.loads(stdout))
    assert dump.returncode == 3, stderr
    assert 1 in doc["stacks"]["missing_ranks"]
    gone = [f for f in doc["findings"] if f["kind"] == "missing"]
    # rank 1 died; the others may follow it (gloo drops their connections) or still wait
    assert gone and 1 in gone[0]["ranks"] and "dying" in gone[0]["summary"], doc["findings"]
    assert "dying" in doc["headline"], doc["headline"]
    # re-analysing the saved dump says the same
    res = subprocess.run([sys.executable, "-m", "hangdbg", "analyze", str(out), "--json"], capture_output=True,
                         text=True, timeout=180, env=env, cwd=ROOT)
    again = validate(json.loads(res.stdout))
    assert 1 in again["stacks"]["missing_ranks"] and "dying" in again["headline"], again["headline"]
