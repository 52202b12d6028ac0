"""Real jobs (issue 28, item 4): rank 1 of a 3-rank torchrun/gloo job is blocked on something outside the job while
ranks 0 and 2 wait in all_reduce. A plain ``dump --pid`` names rank 1 alone, with exit 3, and its finding names
the blocker: pdb at its line, the child's pid and command line, the full pipe and who holds its read end, the Event
nobody can set, the lock file and its holder that is gone."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from conftest import run_json, suspects

from hangdbg.demo import job as demo_job

pytest.importorskip("torch")


@pytest.fixture
def blocked(request, tmp_path):
    """A real demo job of a ``BLOCKED`` scenario with 3 ranks, every rank at its hang; its ``hangdbg dump --pid
    LAUNCHER --json`` (raw dumps kept in ``tmp_path/out``): ``(job, exit status, document, suspect findings)``."""
    from hangdbg.demo.launch import DemoJob

    job = DemoJob(request.param, 3).start()
    try:
        job.wait_ready()
        rc, doc = run_json("dump", "--pid", job.pid, "-o", tmp_path / "out")
        found = suspects(doc)
        yield job, rc, doc, found
    finally:
        job.stop()


def _common(rc: int, found: list[dict]) -> dict:
    assert rc == 3
    assert [f["ranks"] for f in found] == [[1]]
    f = found[0]
    assert f["kind"] == "outside-collective"
    assert "ranks {0, 2} wait for it in all_reduce" in f["summary"]
    return f


def _wait(doc: dict, rank: int) -> dict:
    return next(r["wait"] for r in doc["stacks"]["ranks"] if r["rank"] == rank)


def _saved(tmp_path) -> dict:
    """``hangdbg analyze`` of the raw dumps the dump kept: the stacks alone, no /proc facts."""
    rc, doc = run_json("analyze", tmp_path / "out")
    assert rc == 3
    assert all(r.get("proc") is None for r in doc["stacks"]["ranks"])
    return suspects(doc)[0]


def _line_of(marker: str) -> int:
    lines = Path(demo_job.__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def _sleepers(root: int | None = None) -> list[psutil.Process]:
    procs = psutil.Process(root).children(recursive=True) if root else list(psutil.process_iter())
    out = []
    for p in procs:
        try:
            if p.cmdline() == ["sleep", "1000"]:
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.mark.parametrize("blocked", ["pdb"], indirect=True)
def test_a_rank_in_pdb_is_named_with_its_line(blocked, tmp_path):
    _job, rc, doc, found = blocked
    f = _common(rc, found)
    assert f"sits in pdb at demo/job.py:{_line_of('# pdb stops here')} in block()" in f["summary"]
    assert "waiting on stdin (pipe:[" in f["summary"]
    assert "`c`" in f["action"]
    assert _wait(doc, 1)["blocker"] == "debugger"
    saved = _saved(tmp_path)
    assert saved["ranks"] == [1] and "sits in pdb at demo/job.py:" in saved["summary"]

@pytest.mark.parametrize("blocked", ["child-process"], indirect=True)
def test_a_rank_waiting_for_its_child_names_the_child(blocked, tmp_path):
    job, rc, doc, found = blocked
    f = _common(rc, found)
    child = _sleepers(job.pid)
    assert len(child) == 1
    assert f"waits for its child process pid {child[0].pid} (`sleep 1000`)" in f["summary"]
    assert _wait(doc, 1)["blocker"] == "child process"
    saved = _saved(tmp_path)
    assert saved["ranks"] == [1] and "waits for its child process at demo/job.py:" in saved["summary"]


@pytest.mark.parametrize("blocked", ["full-pipe"], indirect=True)
def test_a_rank_blocked_on_a_full_stdout_pipe_names_the_pipe_and_its_reader(blocked):
    _job, rc, doc, found = blocked
    f = _common(rc, found)
    assert "blocked writing to its stdout, a full pipe (pipe:[" in f["summary"]
    assert "its read end is held by this rank itself, which never reads it" in f["summary"]
    rank = next(r for r in doc["stacks"]["ranks"] if r["rank"] == 1)
    out = next(x for x in rank["proc"]["files"] if x["fd"] == 1)
    assert out["target"].startswith("pipe:[") and out["unread"] + 4096 > out["capacity"]
    assert [r["pid"] for r in out["readers"]] == [rank["pid"]]
    main = next(t for t in rank["threads"] if t["name"] == "MainThread")
    task = next(t for t in rank["proc"]["tasks"] if t["tid"] == main["thread_id"])  # py-spy's id is the OS tid
    assert (task["syscall"], task["fd"]) in (("write", 1), ("writev", 1))


@pytest.mark.parametrize("blocked", ["dead-setter"], indirect=True)
def test_an_event_whose_setter_died_is_named(blocked):
    _job, rc, doc, found = blocked
    f = _common(rc, found)
    assert "waits on a threading.Event at demo/job.py" in f["summary"]
    assert "no thread can set it" in f["summary"]
    assert _wait(doc, 1)["blocker"] == "event"


@pytest.mark.parametrize("blocked", ["stale-lock"], indirect=True)
def test_a_stale_flock_names_the_file_and_its_gone_holder(blocked):
    job, rc, doc, found = blocked
    f = _common(rc, found)
    path = os.path.realpath(job.ready_dir / "train.lock")
    assert f"waits for a file lock (flock) on {path}" in f["summary"]
    assert "a stale lock: held by pid " in f["summary"] and "which has exited" in f["summary"]
    keeper = [p for p in _sleepers() if any(x.path == path for x in p.open_files())]
    assert len(keeper) == 1
    assert f"the lock lives on in pid {keeper[0].pid} (`sleep 1000`)" in f["summary"]
    lock = next(r for r in doc["stacks"]["ranks"] if r["rank"] == 1)["proc"]["locks"][0]
    assert lock["waiting"] and lock["kind"] == "FLOCK" and not any(h["alive"] for h in lock["holders"])


@pytest.mark.parametrize("blocked", ["stale-filelock"], indirect=True)
def test_filelock_polling_a_stale_lock_names_the_file_from_its_locals(blocked):
    job, rc, doc, found = blocked
    f = _common(rc, found)
    path = str(job.ready_dir / "train.lock")
    assert f"waits for a file lock (filelock, polling) on {path}" in f["summary"]
    assert "a stale lock: held by pid " in f["summary"] and "which has exited" in f["summary"]
    assert "(`sleep 1000`), which inherited its descriptor" in f["summary"]
    rank = next(r for r in doc["stacks"]["ranks"] if r["rank"] == 1)
    # an adaptive pass with --locals read filelock's lock_filename: the locals pass, or the resampling
    # (also with --locals) when the first sample caught rank 1 on CPU between two polls
    assert {"locals", "resampled"} & set(rank["steps"]), rank["steps"]
