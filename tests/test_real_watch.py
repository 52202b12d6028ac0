"""``hangdbg watch`` on real torchrun/gloo jobs (issue 15): a job that logs every step and then
hangs on a blocked read (rank 1 opens a FIFO nobody writes) is caught by its log and by its
stacks, the dump names rank 1 and the hook receives it; a slow but healthy job that ends is never
declared stalled and the watcher exits 0; ``--then kill`` ends the job.

The watchers run as real ``python -m hangdbg watch`` processes next to the job; the time limits
are hang guards (``--stall`` plus the dump plus generous slack on 2 shared cores), not speed
measurements (``bench/watch_latency.py`` measures those).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from _watch import finish, wait_for_line, watcher, webhook_sink
from conftest import validate

pytest.importorskip("torch")

STALL = 6.0


@pytest.fixture(scope="module")
def stuck_job(tmp_path_factory):
    """2 ranks that log a step every ~0.5 s; at step 6 rank 1 blocks reading a FIFO, rank 0 waits
    in all_reduce. Two watchers (log mode, stack mode) are started after the first steps, before the
    hang; their results are what the tests read. The job is left hung for the ``--then kill`` test."""
    from hangdbg.demo.launch import DemoJob

    base = tmp_path_factory.mktemp("watch-stuck")
    sink = webhook_sink()
    hooked = sink.__enter__()
    job = DemoJob("stuck-io", 2, workdir=base / "job",
                  args=["--hang-step", "6", "--step-seconds", "0.5", "--log-steps", "--steps", "100"]).start()
    try:
        wait_for_line(job.log_path, "step 1 ")
        hook_log, hook_stacks = base / "hook-log.txt", base / "hook-stacks.txt"
        hook = 'printf "%s|%s|%s" "$HANGDBG_SUSPECTS" "$HANGDBG_DUMP_DIR" "$HANGDBG_HEADLINE" > '
        started = time.monotonic()
        w_log = watcher("--pid", job.pid, "--log", job.log_path, "--log-pattern", r"^step \d+", "--stall", STALL,
                        "--interval", "1", "--once", "-o", base / "out-log", "--json",
                        "--on-hang", hook + str(hook_log), cwd=base)
        w_stacks = watcher("--pid", job.pid, "--stall", STALL, "--interval", "1", "--once", "-o", base / "out-stacks",
                           "--json", "--on-hang", hook + str(hook_stacks), "--notify-webhook", hooked.url, cwd=base)
        job.wait_ready(timeout=120, settle=0)
        hung_at = time.monotonic()
        results = {}
        for name, w in (("log", w_log), ("stacks", w_stacks)):
            rc, out, err = finish(w, timeout=STALL + 120)
            results[name] = {"rc": rc, "doc": json.loads(out), "err": err, "ended": time.monotonic(),
                             "hook": (hook_log if name == "log" else hook_stacks)}
        yield {"job": job, "hung_at": hung_at, "started": started, "base": base, "webhook": hooked.got, **results}
    finally:
        job.stop()
        sink.__exit__(None, None, None)


@pytest.mark.parametrize("mode", ["log", "stacks"])
def test_stall_is_caught_dumped_and_handed_to_the_hook(stuck_job, mode):
    r = stuck_job[mode]
    doc = validate(r["doc"])
    assert r["rc"] == 3, r["err"][-2000:]
    assert doc["command"] == "watch" and doc["ended"] == "once" and doc["found"]
    [stall] = doc["stalls"]
    assert stall["signal"] == mode
    assert stall["suspects"] == [1], stall
    assert "read_shard" in stall["headline"] and "rank 0 waits for it in all_reduce" in stall["headline"]
    # fired within --stall of the hang plus the dump, not before the hang
    assert stall["quiet_seconds"] >= STALL
    assert r["ended"] - stuck_job["hung_at"] < STALL + 90
    # the stall's dump is a complete `hangdbg dump` output
    dump = json.loads((Path(stall["dump_dir"]) / "hangdbg.json").read_text())
    validate(dump)
    assert dump["command"] == "dump" and [f["ranks"] for f in dump["findings"] if f["severity"] == "suspect"] == [[1]]
    assert Path(stall["dump_dir"]).parent == stuck_job["base"] / f"out-{mode}"
    # the hook got the suspects, the dump dir and the headline in its environment
    suspects, dump_dir, headline = r["hook"].read_text().split("|", 2)
    assert (suspects, dump_dir, headline) == ("1", stall["dump_dir"], stall["headline"])
    assert stall["on_hang_exit"] == 0
    # watch.json holds the same document
    assert validate(json.loads((stuck_job["base"] / f"out-{mode}" / "watch.json").read_text()))["stalls"] == doc["stalls"]
    [finding] = [f for f in doc["findings"] if f["kind"] == "stall"]
    assert finding["ranks"] == [1] and finding["severity"] == "suspect"


def test_the_stall_is_posted_to_the_webhook(stuck_job):
    """--notify-webhook (the stacks watcher): one POST of JSON that holds the stall as watch.json has it."""
    [stall] = stuck_job["stacks"]["doc"]["stalls"]
    [(ctype, body)] = stuck_job["webhook"]
    got = json.loads(body)
    assert ctype.startswith("application/json")
    assert got["headline"] == stall["headline"] and got["dump_dir"] == stall["dump_dir"]
    assert [s["rank"] for s in got["suspects"]] == [1] and all(s["host"] for s in got["suspects"])
    dump = json.loads((Path(stall["dump_dir"]) / "hangdbg.json").read_text())
    top = next(f["kind"] for f in dump["findings"] if f["severity"] == "suspect")
    assert (got["exit"], got["command"], got["kind"]) == (3, "watch", top)


def test_a_slow_healthy_job_is_never_a_stall_and_its_end_ends_the_watch(tmp_path):
    """Steps of ~2 s: longer than the sample interval, shorter than --stall. Neither the log
    watcher nor the stack watcher fires; both exit 0 when the job leaves."""
    from hangdbg.demo.launch import DemoJob

    job = DemoJob("healthy", 2, workdir=tmp_path / "job",
                  args=["--exit", "--steps", "6", "--step-seconds", "2", "--log-steps"]).start()
    try:
        wait_for_line(job.log_path, "step 0 ")
        w_log = watcher("--pid", job.pid, "--log", job.log_path, "--log-pattern", "^step ", "--stall", STALL,
                        "--interval", "1", "-o", tmp_path / "out-log", "--json", cwd=tmp_path)
        w_stacks = watcher("--pid", job.pid, "--stall", STALL, "--interval", "1", "-o", tmp_path / "out-stacks",
                           "--json", "-v", cwd=tmp_path)
        for w in (w_log, w_stacks):
            rc, out, err = finish(w, timeout=180)
            doc = validate(json.loads(out))
            assert (rc, doc["ended"], doc["stalls"], doc["found"]) == (0, "job-ended", [], False), err[-3000:]
            assert doc["observations"] >= 5
        assert job.proc is not None and job.proc.wait(timeout=30) == 0, job.log_tail()
        assert "step 5 " in job.log_path.read_text()
    finally:
        job.stop()


def test_then_kill_ends_the_job_after_the_dump(stuck_job, tmp_path):
    """A third watcher of the module's job, hung since the other two ended: ``--then kill`` ends it."""
    job = stuck_job["job"]
    w = watcher("--pid", job.pid, "--stall", "3", "--interval", "1", "--then", "kill", "-o", tmp_path / "out",
                "--json", cwd=tmp_path)
    rc, out, err = finish(w, timeout=120)
    doc = validate(json.loads(out))
    assert rc == 3, err[-2000:]
    assert doc["ended"] == "job-ended" and len(doc["stalls"]) == 1, doc  # killed, then seen gone
    assert doc["stalls"][0]["suspects"] == [1] and doc["stalls"][0]["then"].startswith("kill: SIGTERM")
    assert job.proc is not None and job.proc.wait(timeout=30) is not None
