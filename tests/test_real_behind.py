"""Real job: rank 2 retries step 4, so it waits in the same all_reduce line one step behind."""

from conftest import run_json, suspects

SCENARIO = "behind"


def test_same_place_without_locals_the_flight_recorder_decides(hung_job, tmp_path):
    """Without --locals the four stacks are one equivalence class; the job serves its flight
    recorder (torch's debug server), which the plain dump fetches and which tells rank 2 apart."""
    rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path)
    assert [g["ranks"] for g in doc["stacks"]["classes"]] == [[0, 1, 2, 3]]
    assert rc == 3, doc["headline"]
    assert [(s["ranks"], s["source"]) for s in suspects(doc)] == [([2], "flight-recorder")], doc["headline"]
    assert "its stack is the same as theirs" in suspects(doc)[0]["summary"]


def test_loop_variables_find_the_rank_behind(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--locals", "-o", tmp_path)
    assert rc == 3
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([2], "behind")]
    assert "step=4" in suspects(doc)[0]["summary"] and "step=5" in suspects(doc)[0]["summary"]
