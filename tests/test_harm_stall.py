"""A stall is real (issue 31): ``hangdbg watch`` declares a stall only when the job itself made no
progress for ``--stall`` seconds of its own time.

Each test runs a real job (a small Python program that writes step lines to its log) and a real
``python -m hangdbg watch`` next to it, and acts on them as the hostile cases did: a flood of
70 MiB of warnings after each step line, the log deleted, never created or swapped for another
file while the watch runs, SIGSTOP/SIGCONT of the job alone and of the job and the watcher
together, a job that stalls again and again (``--max-stalls``, ``--stall-gap``). The waits are
bounded hang guards, never speed measurements.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _watch import finish, wait_for_line, watcher
from conftest import validate

WRITER = r"""
import os, sys, time
log, steps, period, flood, pause_every, pause, mode, until = sys.argv[1:9]
steps, period, flood, pause_every, pause = int(steps), float(period), int(flood), int(pause_every), float(pause)
line = b"warning: a deprecated call, said again " + b"x" * 4000 + b"\n"
warnings = line * (flood // len(line))
with open(log, "ab", buffering=0) as f:
    for i in range(steps):
        if until and os.path.exists(until):  # the test has seen what it waited for: the job ends
            break
        f.write(b"step %d loss 1.0\n" % i)
        if warnings:
            f.write(warnings)
        wait = pause if pause_every and i % pause_every == pause_every - 1 else period
        if mode == "cpu":  # a step is CPU work: it does not advance while the process is stopped
            end = time.process_time() + wait
            while time.process_time() < end:
                sum(range(1000))
            continue
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if mode == "busy":
                sum(range(1000))  # a rank computing: never idle
            else:
                time.sleep(0.05)
"""

MiB = 1 << 20

pytestmark = pytest.mark.real  # real jobs and watchers, about 1.5 minutes: not the fast lane


def _job(log: Path, steps: int, period: float, *, flood: int = 0, pause_every: int = 0, pause: float = 0.0,
         mode: str = "idle", rank: bool = False, until: Path | None = None) -> subprocess.Popen:
    """The writer: ``steps`` step lines ``period`` seconds apart (each followed by ``flood`` bytes of
    warnings; every ``pause_every``-th step followed by ``pause`` seconds without a line). ``mode``:
    between two lines it sleeps (``idle``), computes (``busy``), or computes for ``period`` seconds
    of its own CPU time (``cpu``). ``until``: it also ends, before its next line, once this file
    exists (the test ends it as soon as it has what it waited for)."""
    env = dict(os.environ)
    if rank:  # a rank to hangdbg (its stacks can be sampled)
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    return subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(steps), str(period), str(flood),
                             str(pause_every), str(pause), mode, str(until or "")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _end(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
        p.wait(timeout=30)


def _watch(job: subprocess.Popen, log: Path, out: Path, *extra: object) -> subprocess.Popen:
    return watcher("--pid", job.pid, "--log", log, "--log-pattern", r"^step \d+", "--interval", "0.5",
                   "-o", out, "--json", "-v", *extra, cwd=out.parent)


def _doc(out: str) -> dict:
    return validate(json.loads(out))


@contextmanager
def _watched(tmp_path: Path, stall: float, on_start: Callable[[subprocess.Popen], object] = lambda job: None,
             **job_kw: Any) -> Iterator[tuple[subprocess.Popen, subprocess.Popen, Path]]:
    """A writer (:func:`_job`, ``job_kw``) on ``tmp_path/train.log`` and, once it has written step 2, a
    watcher of it (``--stall stall``, output ``tmp_path/out``) that has made a few observations of the
    running job: (job, watcher, log). ``on_start(job)`` runs first (before the job's step 2). The job
    ends after its steps or at :func:`_let_end`; both are ended on exit."""
    log = tmp_path / "train.log"
    procs = [_job(log, until=tmp_path / "enough", **job_kw)]
    try:
        on_start(procs[0])
        wait_for_line(log, "step 2 ", timeout=120)
        procs.append(_watch(procs[0], log, tmp_path / "out", "--stall", stall))
        wait_for_line(tmp_path / "out" / "watch.json", '"observations"', timeout=120)
        time.sleep(1.5)  # a few observations of the running job (not a measurement)
        yield procs[0], procs[1], log
    finally:
        _end(*procs)


def _let_end(tmp_path: Path, after: float = 0.0) -> None:
    """After ``after`` seconds more of watching (not a measurement), let :func:`_watched`'s job end
    before its next step line."""
    time.sleep(after)
    (tmp_path / "enough").touch()


def test_a_flood_of_warnings_after_each_step_is_no_stall(tmp_path, leftovers):
    """Each step line is followed at once by 70 MiB of warnings (written to a tmpfs in a few tens of
    milliseconds), then 2 s of work: at almost every observation more than one read's worth (the
    old 64 MiB cap) lies after the last step line. The step lines are still found (progress is the
    last matching line, scanned without skipping), so the healthy job is never declared stalled
    and ``--then kill`` never fires."""
    from faults import tmpfs

    with tmpfs(tmp_path / "fs", "600m") as fs:
        _flood(fs / "train.log", tmp_path)


def _flood(log: Path, tmp_path: Path) -> None:
    job = _job(log, steps=6, period=2.0, flood=70 * MiB)
    w = None
    try:
        wait_for_line(log, "step 0 ", timeout=120)
        w = _watch(job, log, tmp_path / "out", "--stall", "5", "--then", "kill")
        rc, out, err = finish(w, timeout=240)
        doc = _doc(out)
        assert (rc, doc["ended"], doc["stalls"]) == (0, "job-ended", []), err[-3000:]
        assert job.wait(timeout=60) == 0  # ran all its steps: nothing killed it
    finally:
        _end(*(p for p in (job, w) if p is not None))
        log.unlink(missing_ok=True)


def test_a_never_created_log_is_a_warning_and_the_stacks_are_watched(tmp_path, leftovers):
    log = tmp_path / "train.log"
    job = _job(tmp_path / "elsewhere.log", steps=12, period=0.3, mode="busy", rank=True)
    w = None
    try:
        w = _watch(job, log, tmp_path / "out", "--stall", "3")
        rc, out, err = finish(w, timeout=180)
        doc = _doc(out)
        assert rc == 0 and doc["ended"] == "job-ended", err[-3000:]
        assert any(f"{log} does not exist" in x and "watching the stacks" in x for x in doc["warnings"]), doc
        assert f"{log} does not exist" in err
        assert "observed: stacks quiet" in err  # the stacks were sampled instead
    finally:
        _end(*(p for p in (job, w) if p is not None))


@pytest.mark.parametrize("how", ["deleted", "swapped", "truncated"])
def test_a_deleted_swapped_or_truncated_log_is_a_warning_not_a_stall(tmp_path, leftovers, how):
    """The job keeps writing its steps to the file it opened; its path is deleted, made to name a
    file nobody writes, or truncated (the job, appending, writes on). The watcher says so, watches
    the stacks, and never declares the silence of that path a stall."""
    with _watched(tmp_path, 2, steps=40, period=0.3, mode="busy", rank=True) as (_, w, log):
        if how == "deleted":
            log.unlink()
        elif how == "swapped":  # in one step: the job writes on into its file, now train.log.1
            os.link(log, tmp_path / "train.log.1")
            (tmp_path / "decoy").write_text("step 0 loss 9\nstep 1 loss 9\n")
            os.replace(tmp_path / "decoy", log)
        else:
            os.truncate(log, 0)  # copytruncate: the job, appending, writes on from the start
        _let_end(tmp_path, after=2 * 2)  # twice --stall of silence on the path
        rc, out, err = finish(w, timeout=240)
        doc = _doc(out)
        assert [s for s in doc["stalls"] if s["signal"] == "log"] == [], (doc["stalls"], err[-3000:])
        assert rc == 0 and doc["ended"] == "job-ended", err[-3000:]
        said = {"deleted": "was deleted", "swapped": "now names another file", "truncated": "shrank (truncated)"}[how]
        assert any(said in x for x in doc["warnings"]), doc["warnings"]
        assert "observed: log quiet" in err and "stacks quiet" in err.split(said, 1)[1]
        if how == "truncated":  # the job's own lines come back: the log is trusted (observed) again
            assert "observed: log quiet" in err.split(said, 1)[1]


def test_a_job_stopped_alone_is_no_stall(tmp_path, leftovers):
    """SIGSTOP of the job (every process in state T) for twice --stall, then SIGCONT: the time it was
    stopped is not stall time."""
    with _watched(tmp_path, 3, steps=100, period=0.3) as (job, w, _):
        job.send_signal(signal.SIGSTOP)
        time.sleep(2 * 3)
        job.send_signal(signal.SIGCONT)
        _let_end(tmp_path, after=1.5)  # a few observations of the resumed job
        rc, out, err = finish(w, timeout=180)
        doc = _doc(out)
        assert (rc, doc["stalls"]) == (0, []), err[-3000:]
        assert "the job is stopped: no stall time" in err


def _cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` on a v2 host,
    ``/sys/fs/cgroup/unified`` on a hybrid one); mounted there by this test when it is not yet
    (root only). None when there is none."""
    def mounted() -> Path | None:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2" and parts[1] in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                return Path(parts[1])
        return None

    found = mounted()
    if found is None and os.geteuid() == 0 and Path("/sys/fs/cgroup/freezer").exists():  # hybrid: add the v2 hierarchy
        unified = Path("/sys/fs/cgroup/unified")
        try:
            unified.mkdir(exist_ok=True)
        except OSError:
            return None
        subprocess.run(["mount", "-t", "cgroup2", "none", str(unified)], capture_output=True, timeout=30)
        found = mounted()
    return found


FREEZERS = {  # version -> (the group's parent, the file that freezes it, frozen, thawed): the kernel's cgroup docs
    "v1": (lambda: Path("/sys/fs/cgroup/freezer"), "freezer.state", "FROZEN", "THAWED"),
    "v2": (_cgroup2_root, "cgroup.freeze", "1", "0"),
}


@pytest.mark.parametrize("version", sorted(FREEZERS))
def test_a_job_frozen_by_the_cgroup_freezer_is_no_stall(tmp_path, leftovers, version):
    """The job alone frozen by the cgroup freezer (``docker pause``; v1: its process shows state D,
    v2: still S, only the group's ``cgroup.events`` says ``frozen 1``) for twice --stall, then thawed:
    its frozen time is not stall time."""
    where, control, frozen, thawed = FREEZERS[version]
    root = where() if os.geteuid() == 0 else None
    if root is None or not (root / "cgroup.procs").exists():
        pytest.skip(f"needs root and the cgroup {version} freezer")
    group = root / f"hangdbg-test-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        with _watched(tmp_path, 3, lambda job: (group / "cgroup.procs").write_text(str(job.pid)),
                      steps=100, period=0.3) as (_, w, _):
            try:
                (group / control).write_text(frozen)
                time.sleep(2 * 3)
            finally:
                (group / control).write_text(thawed)  # before the job is killed: a frozen one cannot die
            _let_end(tmp_path, after=1.5)
            rc, out, err = finish(w, timeout=180)
            doc = _doc(out)
            assert (rc, doc["stalls"]) == (0, []), err[-3000:]
            assert "the job is stopped: no stall time" in err
    finally:
        group.rmdir()


def test_a_job_and_its_watcher_stopped_together_is_no_stall(tmp_path, leftovers):
    """SIGSTOP of the job and of the watcher together (SLURM suspend, docker pause), then SIGCONT:
    the watcher's clock stood still, so the pause is no stall. The job's steps are CPU work, so its
    next line comes a while after the resume, and it is resumed first: the watcher never sees it
    stopped, only its own clock tells the pause."""
    with _watched(tmp_path, 3, steps=100, period=0.4, mode="cpu") as (job, w, _):
        for p in (job, w):
            p.send_signal(signal.SIGSTOP)
        time.sleep(2 * 3)
        for p in (job, w):
            p.send_signal(signal.SIGCONT)
        _let_end(tmp_path, after=1.5)
        rc, out, err = finish(w, timeout=180)
        doc = _doc(out)
        assert (rc, doc["stalls"]) == (0, []), err[-3000:]


def test_stall_dumps_are_capped_and_rate_limited(tmp_path, leftovers):
    """A job that stalls three times (a 3 s pause after every 3 steps): ``--max-stalls 2`` ends the
    watch after its second stall, saying so; ``--stall-gap 1000`` lets one stall through."""
    log = tmp_path / "train.log"
    job = _job(log, steps=9, period=0.2, pause_every=3, pause=3.0)
    capped = gapped = None
    try:
        wait_for_line(log, "step 0 ", timeout=120)
        capped = _watch(job, log, tmp_path / "capped", "--stall", "1.5", "--max-stalls", "2", "--stall-gap", "0")
        gapped = _watch(job, log, tmp_path / "gapped", "--stall", "1.5", "--stall-gap", "1000")
        rc, out, err = finish(capped, timeout=240)
        doc = _doc(out)
        assert (rc, doc["ended"], len(doc["stalls"])) == (3, "max-stalls", 2), err[-3000:]
        assert any("--max-stalls 2" in x for x in doc["warnings"]) and "--max-stalls" in doc["headline"]
        assert json.loads((tmp_path / "capped" / "watch.json").read_text())["ended"] == "max-stalls"
        rc, out, err = finish(gapped, timeout=240)
        doc = _doc(out)
        assert (rc, doc["ended"], len(doc["stalls"])) == (3, "job-ended", 1), err[-3000:]
    finally:
        _end(*(p for p in (job, capped, gapped) if p is not None))
