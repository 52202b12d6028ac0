"""Real gloo jobs whose ranks have identical stacks, named by the flight recorder (issue 29).

- ``group-order`` (hangdbg/demo/topology.py): every rank all_reduces over two process groups in one
  line; at step 2 rank 3 takes them in the other order, so ranks 0-2 wait in group 1 for rank 3 and
  rank 3 waits in group 2 for them.
- ``behind`` (hangdbg/demo/job.py): the steps alternate between the world and a second group; rank 2
  retries step 4 (one all_reduce on the world too many), so it waits in the world while the others
  wait for it in the second group.

The stacks see four ranks in the same place (one equivalence class); the flight recorder, which a
plain ``hangdbg dump`` fetches from each rank's torch debug server worker (``fr_trace_json``, its URL
under ``debug_server/rank{i}`` in the job's TCPStore) into ``DIR/fr/``, tells the culprit apart:
the dump names it alone, and so do ``analyze DIR`` / ``report DIR`` afterwards.
"""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import run_json, suspects

from hangdbg.rankset import ranks_text

WORLD = 4
CULPRIT = {"group-order": 3, "behind": 2}


def _store(pid: int):
    """A client of the job's TCPStore (MASTER_ADDR/MASTER_PORT of a rank's environment)."""
    import psutil
    import torch.distributed as dist

    env = next(p.environ() for p in psutil.Process(pid).children(recursive=True) if "RANK" in p.environ())
    return dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=20))


def _fetch_fr(store, rank: int) -> bytes:
    """POST ``URL/handler/fr_trace_json`` of the rank's debug server worker."""
    url = store.get(f"debug_server/rank{rank}").decode()
    req = urllib.request.Request(f"{url}/handler/fr_trace_json", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=20) as resp:
        return resp.read()


def _pending(doc: dict) -> bool:
    """The rank's record holds a collective not yet retired: it is in its hanging call."""
    return any(e.get("retired") is False for e in doc.get("entries", []))


@pytest.fixture(scope="module", params=sorted(CULPRIT))
def fr_dump_dir(request, tmp_path_factory) -> tuple[str, int, dict, Path]:
    """``(scenario, exit status, document, DIR)`` of a plain ``hangdbg dump -o DIR`` of a real job
    hung in the scenario, taken once every rank's flight recorder holds its hanging collective, with
    those records saved into ``DIR/fr/rank_N.json`` (the record no longer changes: the job is hung)."""
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    out = tmp_path_factory.mktemp(request.param)
    with DemoJob(request.param, WORLD) as job:
        job.wait_ready()
        rc, doc = _dump_with_fr(job.pid, out)
    return request.param, rc, doc, out


def _dump_with_fr(pid: int, out: Path, hung: bool = True) -> tuple[int, dict]:
    """Wait for every rank's hanging collective in its flight recorder (``hung``; the test reads it
    only to know the job is hung), then a plain ``dump``, which fetches the records itself."""
    store = _store(pid)
    deadline = time.monotonic() + (60 if hung else 0)
    bodies = {}
    for r in range(WORLD):  # every rank in its hanging collective (recorded when called) before the dump
        bodies[r] = _fetch_fr(store, r)
        while not _pending(json.loads(bodies[r])) and time.monotonic() < deadline:
            time.sleep(0.5)
            bodies[r] = _fetch_fr(store, r)
    return run_json("dump", "--pid", pid, "-o", out)


def test_real_plain_dump_names_the_culprit_its_stacks_cannot_tell_apart(fr_dump_dir):
    """issue 29's "Done when": identical stacks, the FR one rank behind, a plain ``dump`` names it."""
    scenario, rc, doc, out = fr_dump_dir
    classes = doc["stacks"]["classes"]
    assert len(classes) == 1 and sorted(classes[0]["ranks"]) == list(range(WORLD)), classes
    odd = CULPRIT[scenario]
    named = {r for s in suspects(doc) for r in s["ranks"]}
    assert named == {odd}, (doc["headline"], [(f["severity"], f["kind"], f["ranks"], f["summary"]) for f in doc["findings"]])
    assert rc == 3, doc["headline"]
    lead = suspects(doc)[0]
    assert lead["source"] == "flight-recorder" and "its stack is the same as theirs" in lead["summary"], lead
    used = {s["rank"] for s in doc["sources"] if s["source"] == "debug-server-fr" and s["status"] == "ok"}
    assert used == set(range(WORLD)), doc["sources"]
    assert len(list((out / "fr").iterdir())) == WORLD


def test_real_flight_recorder_shows_the_culprit_in_the_other_group(fr_dump_dir):
    scenario, _, _, out = fr_dump_dir
    last = {}
    for r in range(WORLD):
        ents = json.loads(next((out / "fr").glob(f"*_rank_{r}.json")).read_text())["entries"]
        open_ = [e for e in ents if e["retired"] is False]
        assert len(open_) == 1, ents
        last[r] = (open_[0]["process_group"][0], open_[0]["collective_seq_id"])
    odd = CULPRIT[scenario]
    rest = {last[r] for r in range(WORLD) if r != odd}
    assert len(rest) == 1 and last[odd] not in rest and last[odd][0] != next(iter(rest))[0], last


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_real_joint_verdict_names_the_culprit_alone(fr_dump_dir, command):
    scenario, _, _, out = fr_dump_dir
    odd = CULPRIT[scenario]
    rc, doc = run_json(command, out)
    named = {r for s in suspects(doc) for r in s["ranks"]}
    assert named == {odd}, [(f["kind"], f["ranks"], f["summary"]) for f in suspects(doc)]
    assert rc == 3, doc["headline"]
    lead = suspects(doc)[0]
    assert lead["source"] == "flight-recorder" and lead["kind"] == "fr-mismatch", lead
    assert "its stack is the same as theirs" in lead["summary"] and "the flight recorder decided" in lead["summary"]
    others = sorted(set(range(WORLD)) - {odd})
    assert f"another order than {ranks_text(others)}" in lead["summary"]
    assert doc["headline"].startswith((f"suspect rank {odd}", f"rank {odd}")), doc["headline"]
    waiting = [f for f in doc["findings"] if f["severity"] == "waiting" and set(f["ranks"]) & set(others)]
    assert waiting and all(f["waits_for"] == [odd] for f in waiting), waiting


def test_real_healthy_job_with_its_flight_recorder_names_nobody(tmp_path):
    """The control: ``healthy-midstep`` records and serves its flight recorder too; a snapshot of a
    running job always finds some rank a collective ahead, which must not be blamed."""
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    with DemoJob("healthy-midstep", WORLD) as job:
        job.wait_ready()
        rc, doc = _dump_with_fr(job.pid, tmp_path, hung=False)
    # nobody is blamed; when the records and the stacks were taken at different moments of the moving
    # job (ranks pending in a gloo collective by the FR while their stacks compute), "undecided" (exit 1)
    # is the truthful answer, never a suspect
    undecided = doc["headline"].startswith("undecided:")
    assert not suspects(doc) and (rc == 0 or (rc == 1 and undecided)), doc["headline"]
    for command in ("analyze", "report"):
        rc, doc = run_json(command, tmp_path)
        assert not suspects(doc), (command, [(f["kind"], f["ranks"], f["summary"]) for f in suspects(doc)])
        assert rc == 0 or (rc == 1 and undecided), (command, doc["headline"])
