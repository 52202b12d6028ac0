"""Real job: rank 1 blocks opening a FIFO (stuck reading a file) while the others all_reduce."""

from conftest import run_json, suspects

SCENARIO = "stuck-io"


def test_rank_outside_collectives_is_the_suspect(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path)
    assert rc == 3
    assert [s["ranks"] for s in suspects(doc)] == [[1]]
    s = suspects(doc)[0]
    assert s["kind"] == "outside-collective"
    assert "read_shard" in s["summary"] and "all_reduce" in s["summary"]
    assert "ranks {0, 2-3} wait for it in all_reduce" in s["summary"]
    assert '`with open(path, "rb") as f:' in s["summary"]  # the source line, read on this node
