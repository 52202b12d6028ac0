"""Real job: rank 1 computes forever in pure Python while the others wait in all_reduce."""

from conftest import run_json, suspects

SCENARIO = "busy"


def test_busy_rank_is_progressing_suspect(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--samples", "3", "--interval", "0.3", "--locals", "-o", tmp_path)
    assert rc == 3
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([1], "outside-collective")]
    assert "still running" in suspects(doc)[0]["summary"]
    assert 1 in doc["stacks"]["progressing_ranks"]
    assert all(r["samples"] == 3 for r in doc["stacks"]["ranks"])
    assert len(list((tmp_path / "raw").glob("rank-0001.sample-*.txt"))) == 3
