"""Stragglers on real torchrun/gloo jobs (issue 29, part 3): 3 ranks compute 0.3 s per step and
meet in an ``all_reduce``; in the ``straggler`` demo the last rank computes 1.3 times as long. Two
real ``hangdbg watch --straggler-every N`` processes watch each job to its end: one reads the
heartbeat hook's step ring (``--heartbeat``), one the ranks' CPU time between stack samples
(``--stacks`` mode, no heartbeat). The slow rank is named, with its lag; the healthy job gets nothing.
The timings are those of the job (a busy loop for a wall-clock time), not of the loaded test machine."""

from __future__ import annotations

import json

import pytest
from _watch import finish, watcher
from conftest import validate

pytest.importorskip("torch")

STEPS = "40"


def _watch_job(scenario: str, base):
    from hangdbg.demo.launch import DemoJob

    beat = base / "hb"
    job = DemoJob(scenario, 3, workdir=base / "job",
                  args=["--heartbeat", str(beat), "--exit", "--steps", STEPS, "--step-seconds", "0.3"]).start()
    try:
        w_beat = watcher("--pid", job.pid, "--heartbeat", beat, "--straggler-every", "10", "--interval", "1",
                         "--stall", "120", "-o", base / "out-beat", "--json", cwd=base)
        job.wait_ready(timeout=120, settle=0)  # training (step 3): the CPU-time watcher measures steps, not start-up
        w_cpu = watcher("--pid", job.pid, "--straggler-every", "5", "--interval", "1", "--stall", "120",
                        "-o", base / "out-cpu", "--json", cwd=base)
        docs = {}
        for name, w in (("beat", w_beat), ("cpu", w_cpu)):
            rc, out, _err = finish(w, timeout=150)
            docs[name] = validate(json.loads(out))
            assert rc == 0 and docs[name]["ended"] == "job-ended" and not docs[name]["stalls"]
        return docs
    finally:
        job.stop()


def test_the_slow_rank_is_a_straggler_with_its_lag(tmp_path):
    docs = _watch_job("straggler", tmp_path)
    rep = docs["beat"]["stragglers"]
    assert rep["basis"] == "compute" and rep["step"] >= 30
    assert [f["ranks"] for f in rep["findings"]] == [[2]] and rep["findings"][0]["kind"] == "straggler"
    (slow,) = [r for r in rep["ranks"] if r["chronic"]]
    # 0.3 s against 0.39 s of compute: 0.09 s, 30 %
    assert 0.06 <= slow["lag_seconds"] <= 0.12 and 20 <= slow["lag_percent"] <= 40 and slow["since_step"] <= 5
    assert "rank 2 is a straggler" in docs["beat"]["headline"]
    assert [f["ranks"] for f in docs["beat"]["findings"]] == [[2]]
    assert list((tmp_path / "out-beat" / "straggler").glob("step-*.json"))
    cpu = docs["cpu"]["stragglers"]
    # CPU time is indirect evidence: the report may stay silent on a loaded machine, but it is made and never wrong
    assert cpu is not None and cpu["basis"] == "cpu-time" and all(f["ranks"] == [2] for f in cpu["findings"])


def test_a_healthy_job_gets_no_straggler(tmp_path):
    docs = _watch_job("healthy", tmp_path)
    rep = docs["beat"]["stragglers"]
    assert rep is not None and rep["basis"] == "compute" and rep["steps"] >= 20
    assert rep["findings"] == [] and not any(r["chronic"] for r in rep["ranks"])
    for name in ("beat", "cpu"):
        assert not [f for f in docs[name]["findings"] if f["kind"] == "straggler"], name
    assert docs["beat"]["headline"] == "the job ended without a stall"
