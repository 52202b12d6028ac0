"""Act only on what was identified (issue 31): ``watch --then kill`` refuses pid 1, hangdbg and its
ancestors, and signals a process only while it is the one the run identified (pid and start time),
on real child processes."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from hangdbg.errors import UsageError
from hangdbg.transport.targets import TargetSpec
from hangdbg.watch.identity import Identity, children_of, identify, kill_identified, launchers_of, refused_target
from hangdbg.watch.plan import WatchPlan


@pytest.fixture
def child():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def test_refused_targets():
    assert "init" in refused_target(1)
    assert "hangdbg itself" in refused_target(os.getpid())
    assert "ancestor" in refused_target(os.getppid())
    assert refused_target(2**22 + 12345) is None


@pytest.mark.parametrize("who", ["init", "self", "parent"])
def test_watch_then_kill_refuses_them_with_exit_2(who, tmp_path):
    from hangdbg.api._watch import _Watcher
    from hangdbg.events import Events

    pid = {"init": 1, "self": os.getpid(), "parent": os.getppid()}[who]
    plan = WatchPlan(target=TargetSpec(pids=(pid,)), then="kill", out=tmp_path / "w")
    with pytest.raises(UsageError, match="--then kill --pid"):
        _Watcher(plan, Events())
    assert not (tmp_path / "w").exists()  # refused before anything was written


def test_an_identified_process_is_killed(child):
    ident = identify(child.pid, "rank 0")
    said = kill_identified([ident], grace=5)
    assert child.wait(timeout=10) is not None
    assert "SIGTERM to 1 identified process(es) (rank 0)" in said


def test_a_pid_held_by_another_process_is_never_signalled(child):
    real = identify(child.pid)
    stale = Identity(child.pid, real.started - 3600.0, "rank 3")  # the pid's earlier holder
    said = kill_identified([stale], grace=1)
    assert child.poll() is None, "a process the run never identified was signalled"
    assert "pid reused" in said and "rank 3" in said


def test_the_children_of_a_rank_are_identified_and_killed_with_it():
    """A rank with a forked child (torch's debug-server frontend, a data-loader worker): ``--then
    kill`` signals both, so no part of the job is left reparented to init."""
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print('ready', flush=True); time.sleep(60)")
    rank = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout.readline() == "ready\n"
        ident = identify(rank.pid, "rank 0")
        kids = children_of([ident])
        assert [k.what for k in kids] == ["child of rank 0"]
        said = kill_identified([ident, *kids], grace=5)
        assert "SIGTERM to 2 identified process(es) (rank 0, child of rank 0)" in said
        assert not psutil.pid_exists(kids[0].pid) or psutil.Process(kids[0].pid).status() == psutil.STATUS_ZOMBIE
        assert children_of([Identity(rank.pid, ident.started - 3600.0, "rank 0")]) == []  # not the same process
    finally:
        rank.kill()
        rank.wait()


def test_a_launcher_counts_only_when_its_tree_holds_a_rank(child):
    me = identify(os.getpid(), "launcher")
    rank = identify(child.pid, "rank 0")
    assert launchers_of([me], [rank]) == [me]
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert launchers_of([identify(other.pid, "launcher")], [rank]) == []
    finally:
        other.kill()
        other.wait()


def _result(ended, stalls=()):
    from hangdbg.watch.plan import WatchResult

    return WatchResult("--pid 5", "/tmp/w", ("stacks",), 300.0, 10.0, 3, ended, tuple(stalls))


def _stall():
    from hangdbg.watch.records import StallRecord

    return StallRecord("2026-11-28T20:00:00+00:00", "stacks", 301.0, "stacks unchanged", "/tmp/w/stall-1", 3,
                       "suspect rank 3: ...", (3,), 2.0, None, None)


@pytest.mark.parametrize("ended, stalls, code", [
    ("interrupted", [_stall()], 1),   # interrupted after a stall: never 0, the stall in the document
    ("interrupted", [], 1),           # interrupted before any: not an all-clear either
    ("job-ended", [], 0),
    ("job-ended", [_stall()], 3),
])
def test_watch_exits_truthfully(ended, stalls, code, monkeypatch):
    import json

    from conftest import run_main
    import hangdbg.cli.watch_cmd as watch_cmd

    monkeypatch.setattr(watch_cmd, "watch", lambda plan, events: _result(ended, stalls))
    res = run_main("watch", "--pid", str(os.getpid()), "--json")
    assert res.returncode == code, res.stderr
    doc = json.loads(res.stdout)
    assert len(doc["stalls"]) == len(stalls)
    if ended == "interrupted" and stalls:
        assert doc["headline"].startswith("watch interrupted after 1 stall(s)")


def test_watch_of_a_pid_that_is_no_process_is_a_usage_error(tmp_path):
    from conftest import run_main

    res = run_main("watch", "--pid", "999999999", "-o", tmp_path / "w")
    assert res.returncode == 2 and "no process with pid 999999999" in res.stderr
    assert not (tmp_path / "w").exists()
