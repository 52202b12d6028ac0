"""Real job that does not hang: every rank keeps training."""

from conftest import run_json, suspects

SCENARIO = "healthy"


def test_progressing_job_is_not_a_hang(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--samples", "3", "--interval", "0.3", "--locals", "-o", tmp_path)
    assert rc == 0
    assert suspects(doc) == []
    assert doc["stacks"]["progressing_ranks"] == [0, 1, 2, 3]
    assert doc["headline"].startswith("no hang")
