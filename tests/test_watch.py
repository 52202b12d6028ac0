"""``hangdbg watch``'s parts (issue 15): the stall decision, the log and heartbeat probes, the
heartbeat hook, the loop, the command line; and a real heartbeat stall of a real process dumped
with real py-spy. The real torchrun/gloo jobs are in ``test_real_watch.py``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, run_main, validate
from hangdbg.watch.stall import Observation, StallDetector, stacks_signature, waiting_or_idle
from hangdbg.watch.probes import HeartbeatProbe, LogProbe, pids_alive, watch_loop
from hangdbg.hooks.heartbeat import heartbeat
from hangdbg.model import RankDump, Thread
from hangdbg.frames import Frame


# --- the decision ------------------------------------------------------------------------------

def test_a_log_that_stops_growing_is_one_stall_after_stall_seconds_then_rearms_on_progress():
    d = StallDetector(stall=10, grace=0, start=0)
    assert d.observe(Observation(0, log=5)) is None
    assert d.observe(Observation(5, log=6)) is None       # progress at t=5
    assert d.observe(Observation(14, log=6)) is None      # quiet 9 s
    s = d.observe(Observation(15, log=6))
    assert s is not None and s.signal == "log" and s.seconds == 10 and "has not grown for 10 s" in s.reason
    assert d.observe(Observation(40, log=6)) is None      # fired: once per stall
    assert d.observe(Observation(41, log=7)) is None      # progress resumes: re-armed
    assert d.observe(Observation(50, log=7)) is None
    assert d.observe(Observation(51, log=7)).signal == "log"


def test_no_stall_within_the_grace_period():
    d = StallDetector(stall=5, grace=30, start=100)
    assert all(d.observe(Observation(t, log=0)) is None for t in range(100, 130))
    assert d.observe(Observation(130, log=0)) is not None  # quiet since 100, grace over


def test_unchanged_stacks_are_a_stall_only_while_ranks_wait_or_all_idle():
    d = StallDetector(stall=5)
    for t in range(0, 20):
        assert d.observe(Observation(t, stacks=("same",), waiting=False)) is None  # a long forward pass
    s = d.observe(Observation(20, stacks=("same",), waiting=True))
    assert s is not None and s.signal == "stacks" and s.seconds == 20


def test_heartbeats_that_stop_changing_are_a_stall():
    d = StallDetector(stall=3)
    assert d.observe(Observation(0, heartbeat=(("heartbeat.rank0", b"1"),))) is None
    assert d.observe(Observation(2, heartbeat=(("heartbeat.rank0", b"2"),))) is None
    assert d.observe(Observation(4, heartbeat=(("heartbeat.rank0", b"2"),))) is None
    assert d.observe(Observation(5, heartbeat=(("heartbeat.rank0", b"2"),))).signal == "heartbeat"


def _dump(rank: int, function: str, file: str = "train.py", status: str = "active", line: int = 1) -> RankDump:
    frames = (Frame(function, file, line), Frame("main", "train.py", 10))
    return RankDump(rank=rank, pid=100 + rank, host="h", local_rank=rank, world_size=2, local_world_size=2,
                    threads=(Thread(1, "MainThread", status, frames),))


def test_waiting_or_idle_and_the_signature():
    c10d = "/x/torch/distributed/distributed_c10d.py"
    computing = [_dump(0, "forward"), _dump(1, "forward")]
    waiting = [_dump(0, "all_reduce", c10d, "idle"), _dump(1, "forward")]
    idle = [_dump(0, "read", status="idle"), _dump(1, "sleep", status="idle")]
    assert not waiting_or_idle(computing) and waiting_or_idle(waiting) and waiting_or_idle(idle)
    assert not waiting_or_idle([])
    assert stacks_signature(computing) == stacks_signature(list(reversed(computing)))
    assert stacks_signature(computing) != stacks_signature([_dump(0, "forward", line=2), _dump(1, "forward")])


# --- the probes --------------------------------------------------------------------------------

def test_log_probe_follows_the_last_matching_line_and_distrusts_a_truncated_log(tmp_path):
    log = tmp_path / "train.log"
    probe = LogProbe([str(tmp_path / "*.log")], re.compile(r"^step \d+"))
    assert probe.progress() is None and probe.blind  # no file yet
    assert any("no file matches" in w for w in probe.take_warnings()[0])
    log.write_text("loading\nstep 1 loss 3\nstep 2 lo")
    assert probe.progress() is None and probe.blind  # a file that appeared later: trusted once it moves
    with log.open("a") as f:
        f.write("ss 2\nwarning: slow\n")
    at = len("loading\nstep 1 loss 3\nstep 2 loss 2\n")
    assert probe.progress() == ((str(log), at),) and not probe.blind
    assert probe.take_warnings()[1]  # "trusted again"
    with log.open("a") as f:
        f.write("warning: still slow\n" * 3)
    assert probe.progress() == ((str(log), at),)  # warnings are no progress
    log.write_text("step 9\n")          # truncated: shorter than what was read
    assert probe.progress() is None and probe.blind
    assert any("truncated" in w for w in probe.take_warnings()[0])
    with log.open("a") as f:
        f.write("step 10\n")
    assert probe.progress() == ((str(log), len("step 9\nstep 10\n")),)
    sizes = LogProbe([str(log)])
    assert sizes.progress() == ((str(log), log.stat().st_size),)


def test_log_probe_skips_a_fifo_and_a_directory(tmp_path):
    os.mkfifo(tmp_path / "fifo.log")
    (tmp_path / "dir.log").mkdir()
    assert LogProbe([str(tmp_path / "*.log")], re.compile("x")).progress() is None


def test_heartbeat_writes_one_file_per_rank_at_most_once_per_interval(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    assert heartbeat(7, str(tmp_path), min_interval=60)
    assert not heartbeat(8, str(tmp_path), min_interval=60)  # too soon: nothing written
    text = (tmp_path / "heartbeat.rank3").read_text().split()
    assert text[1] == "7" and abs(float(text[0]) - time.time()) < 60
    picture = HeartbeatProbe(str(tmp_path)).picture()
    assert picture is not None and picture[0][0] == "heartbeat.rank3"
    assert heartbeat(9, str(tmp_path), min_interval=0)
    assert HeartbeatProbe(str(tmp_path)).picture() != picture
    assert HeartbeatProbe(str(tmp_path / "none")).picture() is None
    (tmp_path / "afile").write_text("x")
    assert not heartbeat(1, str(tmp_path / "afile" / "x"), min_interval=0)  # cannot be written: skipped, no raise


def test_pids_alive_ignores_zombies():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    time.sleep(0.5)  # exited, not reaped: a zombie
    try:
        assert not pids_alive([p.pid])
        assert pids_alive([os.getpid()])
    finally:
        p.wait()


def test_the_loop_ends_with_the_job_and_stops_after_one_stall_with_once():
    clock = [0.0]
    observed = []

    def observe(now):
        observed.append(now)
        return Observation(now, log=0)

    stalls = []
    end = watch_loop(StallDetector(3), observe, lambda: clock[0] < 10, stalls.append, interval=1,
                     clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    assert end.reason == "job-ended" and len(stalls) == 1 and end.observations == 10
    clock[0] = 0.0
    end = watch_loop(StallDetector(3), observe, lambda: True, stalls.append, interval=1, once=True,
                     clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    assert end.reason == "once" and end.observations == 4


# --- the command line --------------------------------------------------------------------------

@pytest.mark.parametrize("argv,said", [
    ([], "watch what?"),
    (["--pid", "1", "--jobid", "5"], "give one target"),
    (["--pid", "1", "--then", "scancel"], "--then scancel needs --jobid"),
    (["--hosts", "a", "--then", "kill"], "--then kill needs --pid or --jobid"),
    (["--pid", "1", "--log-pattern", "x"], "--log-pattern goes with --log"),
    (["--pid", "1", "--log", "x", "--log-pattern", "("], "not a regular expression"),
])
def test_usage_errors(argv, said, tmp_path):
    res = run_main("watch", *argv, "-o", tmp_path / "out")
    assert res.returncode == 2 and said in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.real
def test_a_real_heartbeat_stall_is_dumped_with_real_pyspy(tmp_path):
    """A process that beats every 0.2 s for 2 s, then blocks: the watcher declares a heartbeat
    stall, takes a real py-spy dump of it and writes the watch document."""
    beats = tmp_path / "beats"
    code = ("import time\nfrom hangdbg.hooks import heartbeat\n"
            "for step in range(10):\n    heartbeat(step, min_interval=0)\n    time.sleep(0.2)\n"
            "time.sleep(300)  # stuck\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), RANK="0", WORLD_SIZE="1", HANGDBG_HEARTBEAT_DIR=str(beats))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        res = run_cli("watch", "--pid", proc.pid, "--heartbeat", beats, "--stall", "3", "--interval", "0.5",
                      "--once", "--json", "-o", tmp_path / "out", "--on-hang", "echo hook-said-this", timeout=120)
        assert res.returncode == 3, res.stderr
        doc = validate(json.loads(res.stdout))
        [stall] = doc["stalls"]
        assert stall["signal"] == "heartbeat" and stall["quiet_seconds"] >= 3
        raw = (Path(stall["dump_dir"]) / "raw" / "rank-0000.txt").read_text()
        assert "<module>" in raw and "Thread" in raw, raw  # a real py-spy dump of the stuck process
        assert doc["signals"] == ["heartbeat"] and proc.poll() is None  # the watcher never stops the job
        # the hook's output goes to stderr: stdout holds the JSON document alone
        assert "hook-said-this" in res.stderr and stall["on_hang_exit"] == 0
    finally:
        proc.kill()
        proc.wait()


def test_over_ssh_a_job_ends_only_after_its_ranks_were_seen(tmp_path):
    """A stack watcher started before the job's ranks exist must not call the job ended."""
    from hangdbg.api._watch import _Watcher
    from hangdbg.events import Events
    from hangdbg.transport.targets import TargetSpec
    from hangdbg.watch.plan import WatchPlan

    cmd = _Watcher(WatchPlan(target=TargetSpec(hosts="node[1-2]"), out=tmp_path / "w"), Events())
    assert cmd.plan.samples_stacks
    cmd.seen_ranks, cmd.no_ranks = False, 5
    assert cmd.alive()
    cmd.seen_ranks = True
    assert not cmd.alive()
    cmd.no_ranks = 1
    assert cmd.alive()


def test_log_probe_reads_at_most_the_cap_per_observation_and_skips_no_step(tmp_path, monkeypatch):
    """A large log seen for the first time is searched from its end only (LOG_TAIL_CAP); a burst
    bigger than LOG_SCAN_CAP is scanned over several observations, never skipped, so a step line
    followed by a flood of warnings still moves progress."""
    import hangdbg.watch.logtail as logtail

    monkeypatch.setattr(logtail, "LOG_SCAN_CAP", 64)
    monkeypatch.setattr(logtail, "LOG_TAIL_CAP", 40)
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i}\n" for i in range(100)))
    probe = LogProbe([str(log)], re.compile(r"^step \d+"))
    size = log.stat().st_size
    assert probe.progress() == ((str(log), size),)
    with log.open("a") as f:
        f.write("step 100\n" + "warning: a flood\n" * 20)  # the step line, then 340 bytes of warnings
    assert probe.progress() == ((str(log), size + len("step 100\n")),)
    assert probe.progress() == ((str(log), size + len("step 100\n")),)  # the flood goes on: no progress
    with log.open("a") as f:
        f.write("warning: more\n" * 20 + "step 101\n")
    assert probe.progress() == ((str(log), log.stat().st_size),)  # behind: found from the end at once


def test_time_the_job_was_seen_stopped_is_no_quiet_time():
    d = StallDetector(stall=10)
    assert d.observe(Observation(0, log=1)) is None
    assert d.observe(Observation(5, log=1, stopped=True)) is None  # 0..5 not counted (stopped at its end)
    assert d.observe(Observation(100, log=1, stopped=True)) is None  # stopped: never a stall
    assert d.observe(Observation(101, log=1)) is None  # 100..101 not counted (stopped at its start)
    assert d.quiet_for("log", 101) == 0
    assert d.observe(Observation(110, log=1)) is None
    assert d.observe(Observation(111, log=1)).seconds == 10
    assert d.paused == 101


def test_stalls_are_rate_limited_by_min_gap():
    d = StallDetector(stall=2, min_gap=30)
    assert d.observe(Observation(0, log=1)) is None
    assert d.observe(Observation(2, log=1)) is not None
    assert d.observe(Observation(3, log=2)) is None  # progress: re-armed
    assert all(d.observe(Observation(t, log=2)) is None for t in range(4, 32))  # due at 5, held until 32
    s = d.observe(Observation(32, log=2))
    assert s is not None and s.seconds == 29  # the quiet time counted all along


def test_the_watch_clock_stands_still_while_the_process_is_stopped():
    """A stop of the process is simulated by a clock thread that cannot run (its lock held)."""
    from hangdbg.watch.clock import FROZEN_GAP, WatchClock

    with WatchClock() as clock:
        before = clock.now()
        with clock._lock:  # the thread cannot tick: as when the process is stopped
            time.sleep(FROZEN_GAP + 1.5)
        assert clock.now() - before < FROZEN_GAP + 1.0
        assert clock.frozen > 0


def test_a_suspended_slurm_job_is_stopped_not_ended(tmp_path, monkeypatch):
    """``scontrol suspend``: the watch goes on (the job has not ended) and counts no stall time."""
    from faults import fake_tool, lie
    from hangdbg.api._watch import _Watcher
    from hangdbg.events import Events
    from hangdbg.transport.targets import TargetSpec
    from hangdbg.watch.plan import WatchPlan

    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cmd = _Watcher(WatchPlan(target=TargetSpec(jobid="42"), logs=("x.log",), out=tmp_path / "w"), Events())
    for now, alive, stopped in (("SUSPENDED", True, True), ("RUNNING", True, False), ("COMPLETED", False, False)):
        fake_tool(bin_dir, "scontrol", lie(f"JobId=42 JobState={now} NodeList=node1\n"))
        assert (cmd.alive(), cmd._job_stopped()) == (alive, stopped), now
