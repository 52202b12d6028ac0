"""A job that opts in to the in-job op recorder (``hangdbg.hooks.record_collectives``): ``dump``
reads each rank's op record without attaching and the wait-for graph uses the exact process
groups, sequence numbers and peers."""

import pytest

from conftest import run_json, suspects


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    out = tmp_path_factory.mktemp("pipeline-recorded")
    with DemoJob("pipeline", env={"HANGDBG_DEMO_RECORD": "1", "HANGDBG_RECORD_DIR": str(out / "records")}) as job:
        job.wait_ready()
        rc, doc = run_json("dump", "--pid", job.pid, "-o", out / "dump", "--no-adapt")
        rc2, doc2 = run_json("dump", "--pid", job.pid, "-o", out / "dump2")
    return (rc, doc), (rc2, doc2), out


def test_records_give_peers_without_locals(recorded):
    (_rc, _plain), (rc, doc), out = recorded
    waits = {r["rank"]: r["wait"] for r in doc["stacks"]["ranks"]}
    assert "record" in waits[2]["evidence"] and waits[2]["peer"] == 1 and waits[3]["peer"] == 2
    assert waits[0]["group"] == [0, 1, 2, 3] and waits[0]["seq"] is not None
    assert (out / "dump2" / "ops.json").is_file()
    steps = {r["rank"]: r["steps"] for r in doc["stacks"]["ranks"]}
    assert "locals" not in steps[2] + steps[3]  # the records named the peers: no --locals pass needed
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([1], "p2p-mismatch")] and rc == 3


def test_without_adaptive_steps_the_records_are_not_read(recorded):
    (rc, doc), _adaptive, _out = recorded
    waits = {r["rank"]: r["wait"] for r in doc["stacks"]["ranks"]}
    assert "record" not in waits[2]["evidence"] and rc == 1  # the peers are unknown: undecided
