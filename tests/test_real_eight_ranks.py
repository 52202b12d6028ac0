"""Real 8-rank job, several collectives: rank 7 calls all_reduce twice, the others barrier."""

from conftest import run_json, suspects

SCENARIO = "extra-collective"
NPROC = 8


def test_eight_ranks_extra_collective(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path)
    assert rc == 3
    assert len(doc["stacks"]["ranks"]) == 8
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([7], "different-collective")]
    reason = suspects(doc)[0]["summary"]
    assert "all_reduce" in reason and "ranks {0-6} wait in barrier" in reason
