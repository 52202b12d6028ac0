"""``hangdbg watch --jobid`` on real jobs of the local 2-node SLURM cluster (issue 15).

A stuck-io job (2 nodes x 1 rank, rank 0 logs a step every ~0.5 s, at step 6 rank 1 on node2
blocks reading a FIFO) is watched by its SLURM output file (log mode) and by its stacks, sampled
with one srun fan-out per observation (stack mode); both watchers dump it, name rank 1 on node2
and hand the suspects to the hook. ``--then scancel`` really cancels a job, and a watcher on a
job that ends cleanly exits 0 when SLURM says the job is no longer running.

The time limits are hang guards, not speed measurements (``bench/watch_latency.py`` measures).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import _watch
import pytest
from _watch import wait_for_line
from conftest import validate
from infra.slurm import TERMINAL_STATES, srun_job_script, wait_ready

pytest.importorskip("torch")

STALL = 6.0
HOOK = 'printf "%s|%s|%s" "$HANGDBG_SUSPECTS" "$HANGDBG_DUMP_DIR" "$HANGDBG_HEADLINE" > '


def watcher(cluster, *args: object, cwd: Path) -> subprocess.Popen:
    return _watch.watcher(*args, cwd=cwd, env=cluster.env)


def finish(p: subprocess.Popen, timeout: float) -> tuple[int, dict, str]:
    """:func:`_watch.finish`, and the watch document it printed (``--json``), validated."""
    rc, out, err = _watch.finish(p, timeout)
    assert out.strip(), f"no JSON printed:\n{err[-3000:]}"
    return rc, validate(json.loads(out)), err


def submit(cluster, ready: Path, scenario: str, args: list[str]) -> tuple[int, Path]:
    jobid = cluster.sbatch(srun_job_script(ready, scenario, ntasks_per_node=1, job_args=args))
    return jobid, ready / f"slurm-{jobid}.out"


@pytest.fixture(scope="module")
def stuck(cluster, tmp_path_factory):
    """The stuck-io job, watched from before its hang by a log watcher and a stack watcher; both
    results (exit status, document, stderr, hook file) are what the tests read."""
    base = tmp_path_factory.mktemp("watch-slurm")
    jobid, log = submit(cluster, base / "ready", "stuck-io",
                        ["--log-steps", "--step-seconds", "0.5", "--hang-step", "6", "--steps", "100"])
    try:
        wait_for_line(log, "step 1 ")
        common = ["--jobid", jobid, "--stall", STALL, "--interval", "1", "--once", "--json"]
        w_log = watcher(cluster, *common, "--log", log, "--log-pattern", "^step ", "-o", base / "out-log",
                        "--on-hang", HOOK + str(base / "hook-log.txt"), cwd=base)
        w_stacks = watcher(cluster, *common, "-o", base / "out-stacks", "--on-hang", HOOK + str(base / "hook-stacks.txt"),
                           cwd=base)
        wait_ready(base / "ready", 2, timeout=120, cluster=cluster, jobid=jobid)
        results = {}
        for name, w in (("log", w_log), ("stacks", w_stacks)):
            rc, doc, err = finish(w, timeout=STALL + 150)
            results[name] = {"rc": rc, "doc": doc, "err": err, "hook": base / f"hook-{name}.txt"}
        yield {"jobid": jobid, "base": base, **results}
    finally:
        cluster.scancel(jobid)


@pytest.mark.parametrize("mode", ["log", "stacks"])
def test_stall_of_a_slurm_job_names_rank_and_node(stuck, mode):
    r = stuck[mode]
    doc = r["doc"]
    assert r["rc"] == 3, r["err"][-3000:]
    assert doc["command"] == "watch" and doc["ended"] == "once" and doc["found"]
    assert doc["targets"] == f"--jobid {stuck['jobid']}" and doc["signals"] == [mode]
    [stall] = doc["stalls"]
    assert stall["signal"] == mode and stall["quiet_seconds"] >= STALL
    assert stall["suspects"] == [1], stall
    assert stall["headline"].startswith("suspect rank 1 on node2"), stall["headline"]
    assert "read_shard" in stall["headline"]
    # the stall's dump is a `hangdbg dump --jobid` output: both nodes answered, rank 1 is on node2
    dump = json.loads((Path(stall["dump_dir"]) / "hangdbg.json").read_text())
    validate(dump)
    assert dump["command"] == "dump"
    assert [(n["host"], n["status"], n["ranks"]) for n in dump["nodes"]] == [("node1", "ok", [0]), ("node2", "ok", [1])]
    [suspect] = [f for f in dump["findings"] if f["severity"] == "suspect"]
    assert (suspect["ranks"], suspect["hosts"]) == ([1], ["node2"])
    assert Path(stall["dump_dir"]).parent == stuck["base"] / f"out-{mode}"
    # the hook got the suspects, the dump dir and the headline
    suspects, dump_dir, headline = r["hook"].read_text().split("|", 2)
    assert (suspects, dump_dir, headline) == ("1", stall["dump_dir"], stall["headline"])
    assert stall["on_hang_exit"] == 0


def test_then_scancel_cancels_the_job_and_the_watch_sees_it_end(cluster, tmp_path):
    jobid, log = submit(cluster, tmp_path / "ready", "stuck-io", ["--log-steps", "--hang-step", "2", "--steps", "100"])
    try:
        wait_ready(tmp_path / "ready", 2, timeout=120, cluster=cluster, jobid=jobid)
        w = watcher(cluster, "--jobid", jobid, "--log", log, "--stall", "3", "--interval", "1", "--then", "scancel",
                    "-o", tmp_path / "out", "--json", cwd=tmp_path)
        rc, doc, err = finish(w, timeout=150)
        assert rc == 3, err[-3000:]
        # no --once: after the scancel the watcher goes on until SLURM says the job is over
        assert doc["ended"] == "job-ended" and len(doc["stalls"]) == 1, doc
        [stall] = doc["stalls"]
        assert stall["suspects"] == [1] and stall["then"].startswith(f"scancel: scancel {jobid} exited 0"), stall
        assert cluster.wait_state(jobid, TERMINAL_STATES, timeout=30) == "CANCELLED"
    finally:
        if cluster.job_state(jobid) not in TERMINAL_STATES:
            cluster.scancel(jobid)


def test_a_job_that_ends_cleanly_ends_the_watch_with_status_0(cluster, tmp_path):
    """The stack watcher starts as soon as SLURM says RUNNING, while the batch script still sets
    up (no rank anywhere for ~5 s): that is not the job's end. Both watchers exit 0 when the job
    has really completed, having seen its steps."""
    script = srun_job_script(tmp_path / "ready", "healthy", ntasks_per_node=1,
                             job_args=["--exit", "--steps", "10", "--step-seconds", "1", "--log-steps"])
    jobid = cluster.sbatch(script.replace("\nsrun ", "\nsleep 5\nsrun ", 1))
    log = tmp_path / "ready" / f"slurm-{jobid}.out"
    try:
        cluster.wait_state(jobid, "RUNNING", timeout=60)
        w_stacks = watcher(cluster, "--jobid", jobid, "--stall", STALL, "--interval", "1", "-o", tmp_path / "out-stacks",
                           "--json", "-v", cwd=tmp_path)
        wait_for_line(log, "step 0 ")
        w_log = watcher(cluster, "--jobid", jobid, "--log", log, "--log-pattern", "^step ", "--stall", STALL,
                        "--interval", "1", "-o", tmp_path / "out-log", "--json", cwd=tmp_path)
        for w in (w_stacks, w_log):
            rc, doc, err = finish(w, timeout=180)
            assert (rc, doc["ended"], doc["stalls"], doc["found"]) == (0, "job-ended", [], False), err[-3000:]
            # COMPLETING: every step ended, SLURM runs the epilog (the watch says so and ends)
            assert cluster.job_state(jobid) in TERMINAL_STATES | {"COMPLETING"}, \
                f"the watch ended while the job runs:\n{err[-3000:]}"
            assert doc["observations"] >= 5, doc
        assert cluster.wait_state(jobid, TERMINAL_STATES, timeout=30) == "COMPLETED"
        assert "step 9 " in log.read_text()
    finally:
        if cluster.job_state(jobid) not in TERMINAL_STATES:
            cluster.scancel(jobid)


def test_a_pending_job_is_waited_for_not_refused(cluster, tmp_path):
    """`sbatch job.sh; hangdbg watch --jobid ID` right away: the job is PENDING (held here), the
    watcher says so and waits; when the job is cancelled before it ever ran, the watcher stops with
    a usage error naming the state."""
    jobid, log = submit(cluster, tmp_path / "ready", "healthy", ["--exit", "--steps", "1"])
    cluster.run(["scontrol", "hold", str(jobid)], check=True)
    try:
        w = watcher(cluster, "--jobid", jobid, "--log", log, "--stall", STALL, "--interval", "1", "-o", tmp_path / "out",
                    cwd=tmp_path)
        time.sleep(4)
        assert w.poll() is None, w.communicate()[1][-3000:]  # still waiting
    finally:
        cluster.scancel(jobid)
    out, err = w.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    assert f"SLURM job {jobid} is PENDING; waiting for it to run" in " ".join(err.split()), err[-3000:]
    assert w.returncode == 2 and "CANCELLED, not RUNNING" in " ".join(err.split()), err[-3000:]
