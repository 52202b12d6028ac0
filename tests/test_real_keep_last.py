"""``watch --keep-last`` on a real torchrun/gloo job that dies (issue 29, part 4): 3 ranks train,
a real ``hangdbg watch --keep-last 3`` samples their stacks every 0.5 s into ``OUT/last/``; rank 1
is killed with SIGKILL, torchrun stops the others, the job ends; ``hangdbg report OUT`` then shows
the last stacks of every rank, the killed one among them, with each sample's age before the end."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

import pytest
from _watch import finish, watcher
from conftest import ROOT, validate

pytest.importorskip("torch")


def _ring_ready(last, ranks: int, rounds: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(len(list(last.glob(f"rank-{r:04d}.s*.txt"))) >= rounds for r in range(ranks)):
            return
        time.sleep(0.2)
    pytest.fail(f"the ring never held {rounds} samples of each rank: {sorted(p.name for p in last.glob('*'))}")


def test_report_shows_every_ranks_last_stacks_after_a_rank_is_killed(tmp_path):
    from hangdbg.demo.launch import DemoJob

    out = tmp_path / "out"
    job = DemoJob("healthy", 3, workdir=tmp_path / "job", args=["--step-seconds", "0.3"]).start()
    try:
        job.wait_ready(timeout=120, settle=0)
        w = watcher("--pid", job.pid, "--keep-last", "3", "--interval", "0.5", "--stall", "120", "-o", out, "--json",
                    cwd=tmp_path)
        _ring_ready(out / "last", 3, 2)
        text = "".join(p.read_text() for p in (out / "last").glob("rank-0001.s*.txt"))
        victim = int(re.search(r"^# hangdbg rank=1 pid=(\d+)", text, re.M).group(1))
        os.kill(victim, signal.SIGKILL)
        killed_at = time.time()
        rc, watched, _err = finish(w, timeout=90)
        assert rc == 0 and json.loads(watched)["ended"] == "job-ended"
    finally:
        job.stop()
    last = out / "last"
    assert stat.S_IMODE(last.stat().st_mode) == 0o700 and (last / "end.txt").exists()
    assert not list(last.glob("*.part"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="200")
    res = subprocess.run([sys.executable, "-m", "hangdbg", "report", str(out), "--json"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]  # no suspect: the samples say where, not why
    doc = validate(json.loads(res.stdout))
    (src,) = [s for s in doc["sources"] if s["kind"] == "last-stacks"]
    facts = src["facts"]
    assert facts["end_source"] == "watch" and facts["end"] >= killed_at - 1
    ranks = {r["rank"]: r for r in facts["ranks"]}
    assert sorted(ranks) == [0, 1, 2] and ranks[1]["pid"] == victim
    for r in ranks.values():
        assert 0 <= r["age_seconds"] < 30 and r["place"] and r["samples"] >= 2
        where = r["place"] + r["frame"]  # the job's code (or, for a rank sampled while exiting, where it was before)
        assert "demo/job.py" in where or "torch" in where, r
    # the killed rank was never sampled after the kill: its last sample is the oldest, or as old as the others'
    assert ranks[1]["time"] <= killed_at and ranks[1]["round"] <= min(ranks[0]["round"], ranks[2]["round"])
    infos = [f for f in doc["findings"] if f["kind"] == "last-stacks" and f["severity"] == "info"]
    assert sorted(r for f in infos for r in f["ranks"]) == [0, 1, 2]
    assert all("before the end" in f["summary"] for f in infos)
    newest = max(r["round"] for r in ranks.values())
    for f in doc["findings"]:  # a rank that ran to the end is never named; the killed one is, if any is
        # (torchrun's SIGTERM can take a rank down within the same sampling round as the killed one:
        # the samples cannot tell them apart, and both are said to have stopped first)
        assert f["severity"] != "suspect", f
        if f["severity"] == "warning" and f["kind"] == "last-stacks":
            assert 1 in f["ranks"] and all(ranks[r]["round"] < newest for r in f["ranks"]), f
    human = subprocess.run([sys.executable, "-m", "hangdbg", "report", str(out)], env=env, capture_output=True,
                           text=True, timeout=120).stdout
    assert "last sample" in human and "before the end" in human
