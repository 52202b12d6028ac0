"""Real job: rank 2 exits before init_process_group; the others wait in rendezvous."""

from conftest import run_json, suspects

SCENARIO = "missing"


def test_missing_rank_named_and_rendezvous_not_blamed(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path)
    assert rc == 3
    assert doc["stacks"]["missing_ranks"] == [2]
    assert sorted(r["rank"] for r in doc["stacks"]["ranks"]) == [0, 1, 3]
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([2], "missing")]
    assert all(r["place"]["kind"] == "init" for r in doc["stacks"]["ranks"])
    assert "init_process_group" in suspects(doc)[0]["summary"]
