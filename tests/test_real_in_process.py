"""Real hung torchrun/gloo jobs whose cause is inside one rank's process, not in its main thread's
place (hangdbg/demo/in_process.py): a plain ``hangdbg dump`` names exactly the culprit and says why."""

from __future__ import annotations

import pytest

from conftest import run_json, suspects

TRUTH = {
    # scenario: (culprit, kind of its finding, words its finding must hold, the ranks that wait for it)
    "gil-thread": (1, "gil-holder", ('thread "log filter" holds the GIL in filter_logs', "in all_reduce"), (0, 2, 3)),
    "pickle-gather": (2, "outside-collective", ("still pickling its object for all_gather_object",
                                                 "RemoteHandle.__reduce__"), (0, 1, 3)),
    "pickle-broadcast": (1, "outside-collective", ("still pickling its object for broadcast_object_list",
                                                    "RemoteHandle.__reduce__"), (0, 2, 3)),
}


@pytest.fixture(scope="module", params=sorted(TRUTH))
def in_process_dump(request, tmp_path_factory):
    """``(scenario, exit status, document)`` of a plain ``hangdbg dump --json`` of the real hung job."""
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    with DemoJob(request.param) as job:
        job.wait_ready()
        rc, doc = run_json("dump", "--pid", job.pid, "-o", tmp_path_factory.mktemp(request.param))
    return request.param, rc, doc


def test_names_exactly_the_culprit_and_why(in_process_dump):
    scenario, rc, doc = in_process_dump
    culprit, kind, words, waiters = TRUTH[scenario]
    found = suspects(doc)
    assert [(f["ranks"], f["kind"]) for f in found] == [([culprit], kind)], doc["headline"]
    assert rc == 3
    for w in words:
        assert w in found[0]["summary"], found[0]["summary"]
    waiting = [(tuple(f["ranks"]), tuple(f["waits_for"])) for f in doc["findings"] if f["kind"] == "waiting"]
    assert waiting == [(waiters, (culprit,))], waiting


def test_the_json_agrees_with_the_headline(in_process_dump):
    scenario, _rc, doc = in_process_dump
    culprit = TRUTH[scenario][0]
    assert doc["headline"].startswith(f"suspect rank {culprit}")
    places = {r["rank"]: r["place"] for r in doc["stacks"]["ranks"]}
    if scenario.startswith("pickle"):
        assert (places[culprit]["kind"], places[culprit]["phase"]) == ("outside", "pickle")
        assert {places[r]["phase"] for r in TRUTH[scenario][3]} == {"exchange"}
    else:  # every main thread in the same all_reduce line: only the threads tell
        assert len({(p["kind"], p["collective"], p["call_site"]["line"]) for p in places.values()}) == 1
        assert "resampled" in {s for r in doc["stacks"]["ranks"] if r["rank"] == culprit for s in r["steps"]}
