"""Real torchrun/gloo job: rank 3 calls broadcast while ranks 0-2 call all_reduce."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil

from conftest import frames_of, check_golden, read_json, run_cli, run_json, suspects

SCENARIO = "mismatch"


def test_dump_names_rank3_in_broadcast(hung_job, tmp_path):
    out = tmp_path / "out"
    rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", out)
    assert rc == 3
    assert doc["schema_version"] == 4
    assert [s["ranks"] for s in suspects(doc)] == [[3]]
    assert suspects(doc)[0]["kind"] == "different-collective"
    assert "broadcast" in suspects(doc)[0]["summary"] and "all_reduce" in suspects(doc)[0]["summary"]
    assert doc["stacks"]["missing_ranks"] == []
    assert sorted(r["rank"] for r in doc["stacks"]["ranks"]) == [0, 1, 2, 3]
    for r in doc["stacks"]["ranks"]:
        assert r["error"] is None and r["world_size"] == 4 and r["local_rank"] == r["rank"]
        assert psutil.Process(r["pid"]).ppid() == hung_job.pid  # workers, not the torchrun agent
        assert frames_of(doc, r["threads"][0])[0]["function"] in ("all_reduce", "broadcast")
    classes = {tuple(c["ranks"]): c for c in doc["stacks"]["classes"]}
    assert set(classes) == {(0, 1, 2), (3,)}
    assert classes[(3,)]["place"]["collective"] == "broadcast"
    assert classes[(3,)]["place"]["call_site"]["function"] == "train_step"
    # raw outputs and the JSON are on disk
    raw = sorted(p.name for p in (out / "raw").iterdir())
    assert raw == [f"rank-000{i}.txt" for i in range(4)]
    assert (out / "raw" / "rank-0003.txt").read_text().startswith("# hangdbg rank=3 pid=")
    assert suspects(read_json(out / "hangdbg.json")) == suspects(doc)
    check_golden(doc, "dump")
    assert len(read_json(out / "processes.json")["processes"]) == 4
    # the ranks that wait are never suspects: they say whom they wait for
    (waiting,) = [f for f in doc["findings"] if f["kind"] == "waiting"]
    assert (waiting["ranks"], waiting["waits_for"], waiting["severity"]) == ([0, 1, 2], [3], "waiting")
    assert {f["source"] for f in doc["findings"]} == {"stacks"}

    # `analyze` on the saved directory gives the same verdict
    rc2, again = run_json("analyze", out)
    assert rc2 == 3
    assert suspects(again) == suspects(doc)
    assert [g["ranks"] for g in again["stacks"]["classes"]] == [g["ranks"] for g in doc["stacks"]["classes"]]


def test_text_report(hung_job):
    res = run_cli("dump", "--pid", hung_job.pid, "-o", hung_job.workdir / "text")
    assert res.returncode == 3, res.stderr
    text = res.stdout
    assert text.index("hang found") < text.index("Findings") < text.index("Equivalence classes") < text.index("merged call tree")
    assert "suspect rank 3: different collective: in broadcast at demo/job.py:" in " ".join(text.split())
    assert "3 ranks {0-2}" in text and "rank {3}" in text and "4 ranks {0-3}" in text


def test_node_scan_finds_workers_not_launcher(hung_job):
    from hangdbg.collect.procs import scan_node

    workers = {c.pid for c in psutil.Process(hung_job.pid).children()}
    found = {r.pid: r for r in scan_node()}
    assert workers <= set(found)
    assert hung_job.pid not in found
    assert sorted(found[p].rank for p in workers) == [0, 1, 2, 3]
    assert all(found[p].rank_source == "RANK" for p in workers)


def test_stopped_rank_is_reported_and_the_rest_kept(hung_job, tmp_path):
    victim = next(c for c in psutil.Process(hung_job.pid).children() if "RANK" in c.environ() and c.environ()["RANK"] == "1")
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        time.sleep(0.3)
        rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path / "a", "--timeout", "5", "--no-adapt")
        by_rank = {r["rank"]: r for r in doc["stacks"]["ranks"]}
        assert "--nonblocking" in by_rank[1]["error"] and "stopped" in by_rank[1]["error"]
        assert all(by_rank[r]["error"] is None for r in (0, 2, 3))
        assert doc["stacks"]["unreadable_ranks"] == [1]
        assert [s["ranks"] for s in suspects(doc)] == [[3]]
        assert "could not read the stacks of rank 1" in doc["headline"]
        (unreadable,) = [f for f in doc["findings"] if f["kind"] == "unreadable"]
        assert unreadable["ranks"] == [1] and unreadable["severity"] == "warning" and "--nonblocking" in unreadable["summary"]
        assert rc == 3
        # the default dump retries, then reads the stopped rank with pystack remote
        rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path / "c", "--timeout", "5")
        by_rank = {r["rank"]: r for r in doc["stacks"]["ranks"]}
        assert by_rank[1]["steps"] == ["retried", "pystack"] and by_rank[1]["error"] is None
        assert [s["ranks"] for s in suspects(doc)] == [[3]] and rc == 3
        # the remedy works: --nonblocking reads the stopped rank too
        rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path / "b", "--nonblocking")
        assert all(r["error"] is None for r in doc["stacks"]["ranks"])
    finally:
        os.kill(victim.pid, signal.SIGCONT)


def test_permission_denied_names_the_fix(hung_job, tmp_path):
    res = run_cli("dump", "--pid", hung_job.pid, "--json", "-o", tmp_path, prefix=["setpriv", "--bounding-set=-sys_ptrace"])
    doc = json.loads(res.stdout)
    assert res.returncode == 1  # nothing could be read: a tool failure, not a verdict
    for r in doc["stacks"]["ranks"]:
        assert "permission denied" in r["error"] and "CAP_SYS_PTRACE" in r["error"]


def test_native_and_locals_pass_through(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--native", "--locals", "-o", tmp_path)
    assert rc == 3 and [s["ranks"] for s in suspects(doc)] == [[3]]
    r3 = next(r for r in doc["stacks"]["ranks"] if r["rank"] == 3)
    frames = frames_of(doc, r3["threads"][0])
    assert any(f.get("native") for f in frames)
    bcast = next(f for f in frames if f["function"] == "broadcast")
    assert dict(bcast["locals"])["src"] == "0"  # (name, repr) pairs, in order
