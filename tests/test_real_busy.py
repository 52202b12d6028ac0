"""Real job: steps of 2 s; at step 5 rank 1 computes forever in pure Python while the others wait in all_reduce.

Progress before blame (hangdbg.stacks.window): rank 1 is named only after the dump watched it on CPU
for the window (``--min-window``, or the job's estimated step time x 1.5), and the finding says for
how long; a dump that may not watch that long (``--timeout``) says "undecided: still observing"."""

import re

from conftest import run_json, suspects

SCENARIO = "busy"
ARGS = ("--hang-step", "5", "--step-seconds", "2")


def test_busy_rank_is_named_after_the_window(hung_job, tmp_path):
    # --timeout 40: room for the step-time bound (age / step 5) of a job started on a loaded machine
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--timeout", "40", "-o", tmp_path)
    assert rc == 3, doc["headline"]
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([1], "outside-collective")]
    summary = suspects(doc)[0]["summary"]
    seen = re.search(r"seen there for ([0-9.]+) s over (\d+) samples", summary)
    assert seen is not None, summary
    assert float(seen.group(1)) >= 10.0 and int(seen.group(2)) >= 3  # the default --min-window
    assert "still running" in summary
    rank1 = next(r for r in doc["stacks"]["ranks"] if r["rank"] == 1)
    assert rank1["samples"] == int(seen.group(2)) and "resampled" in rank1["steps"]


def test_a_dump_that_may_not_watch_long_enough_is_undecided(hung_job, tmp_path):
    # the job's step time is bounded by its age / step 5 (2 s steps, and start-up): a 2 s window cannot cover it
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--timeout", "2", "--min-window", "2", "-o", tmp_path)
    assert rc == 1 and suspects(doc) == [], doc["headline"]
    [f] = [f for f in doc["findings"] if f["kind"] == "undecided"]
    assert f["ranks"] == [1] and f["summary"].startswith("still observing:") and f["severity"] == "warning"
    # how many samples fit in the 2 s depends on the machine's load: one sample ("1 sample"), or no sample times
    assert re.search(r"rank 1 computing in compute \(demo/job\.py:\d+\) (?:for [0-9.]+ s over|in) \d+ samples?", f["summary"])
    assert int(re.search(r"--min-window (\d+)", f["action"]).group(1)) > 2
    assert doc["headline"].startswith("undecided: still observing:")


def test_without_a_window_two_samples_decide(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--samples", "3", "--interval", "0.3", "--locals",
                       "--min-window", "0", "-o", tmp_path)
    assert rc == 3
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([1], "outside-collective")]
    assert "still running" in suspects(doc)[0]["summary"]
    assert 1 in doc["stacks"]["progressing_ranks"]
    assert all(r["samples"] == 3 for r in doc["stacks"]["ranks"])
    assert len(list((tmp_path / "raw").glob("rank-0001.sample-*.txt"))) == 3


def test_the_node_agent_sends_the_sample_times_the_coordinator_needs(hung_job, tmp_path):
    """The fan-out's coordinator gets each rank's sample times and process start in the agent's class
    messages (every sample of every rank, the first round's included), and the raw headers the agent
    keeps on its node carry them too (``unix=``, ``started=``)."""
    import subprocess
    import sys

    from hangdbg.stacks.saved import load_dumps
    from hangdbg.transport.classes import ClassMerger
    from hangdbg.transport.wire import FrameDecoder

    res = subprocess.run([sys.executable, "-m", "hangdbg", "agent", "--pid", str(hung_job.pid), "--node-name", "n1",
                          "--keep-raw", str(tmp_path)], capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    dec, merger = FrameDecoder(), ClassMerger()
    latest = {}
    for line in res.stdout.splitlines():
        for _, m in dec.feed(line):
            if m["type"] == "class":
                latest.update({d.rank: d for d in merger.add(m)})  # a rank sent again replaces its first dump
    kept, _ = load_dumps([tmp_path / "n1"])
    for dumps in (list(latest.values()), kept):
        assert sorted(d.rank for d in dumps) == [0, 1, 2, 3]
        for d in dumps:
            assert len(d.sample_times) == len(d.samples) >= 1 and d.started is not None, d.rank
            assert list(d.sample_times) == sorted(d.sample_times)
        busy = next(d for d in dumps if d.rank == 1)
        assert busy.sample_times[-1] - busy.sample_times[0] >= 10.0  # the agent watched it for the window
