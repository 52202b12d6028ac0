"""Real job: rank 1's main thread and its "data prefetcher" thread deadlock on two locks."""

from conftest import run_json, suspects

SCENARIO = "deadlock"


def test_thread_deadlock_named(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "-o", tmp_path)
    assert rc == 3
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([1], "deadlock")]
    assert "data prefetcher" in suspects(doc)[0]["summary"]
    r1 = next(r for r in doc["stacks"]["ranks"] if r["rank"] == 1)
    assert {t["name"] for t in r1["threads"]} >= {"MainThread", "data prefetcher"}


def test_thread_deadlock_from_native_frames(hung_job, tmp_path):
    rc, doc = run_json("dump", "--pid", hung_job.pid, "--native", "-o", tmp_path)
    assert rc == 3
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([1], "deadlock")]


def test_deadlock_seen_without_source_files(hung_job, tmp_path):
    """`analyze` elsewhere (source not readable): native lock frames still show the deadlock."""
    rc, _ = run_json("dump", "--pid", hung_job.pid, "--native", "-o", tmp_path / "d")
    raw = tmp_path / "d" / "raw"
    for f in raw.iterdir():  # make the paths unreadable, as on a laptop far from the cluster
        f.write_text(f.read_text().replace(" (/", " (/gone/"))
    rc, doc = run_json("analyze", raw)
    assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([1], "deadlock")]
