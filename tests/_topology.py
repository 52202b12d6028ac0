"""Shared by the real topology tests: each scenario of ``hangdbg/demo/topology.py``, its truth,
and what a plain ``hangdbg dump`` (no flags) must find and collect."""

from __future__ import annotations

import pytest

from conftest import run_json, suspects

TRUTH = {
    # scenario: (culprits, {waiting ranks: ranks they wait for directly}, {rank: adaptive steps it must get})
    "tp-dp": ({5}, {(4, 6, 7): (5,), (0, 1, 2, 3): (4, 5, 6, 7)}, {}),
    "pipeline": ({1}, {(2,): (1,), (3,): (2,)}, {2: "locals", 3: "locals"}),
    "p2p-ring": ({2}, {(1,): (2,)}, {1: "native", 2: "native"}),
    "store-barrier": ({3}, {(0,): (3,), (1, 2): (0,)}, {0: "locals"}),
    "store-barrier-default": ({3}, {(0,): (3,), (1, 2): (0,)}, {0: "locals"}),
    "p2p-ring-steps": ({2}, {(0,): (1,), (1,): (2,), (3,): (2,)}, {0: "native", 1: "native", 2: "native", 3: "native"}),
    "ddp-unused": ({3}, {(0, 1, 2): (3,)}, {0: "native", 1: "native", 2: "native"}),
    "healthy-midstep": (set(), {}, None),  # resampled only when the first round caught a rank computing
    "pollers": (set(), {}, {}),
}


@pytest.fixture(scope="module")
def topology_dump(request, tmp_path_factory):
    """``(scenario, exit status, document, out dir)`` of a plain ``hangdbg dump`` of a real job hung
    in the scenario ``request.param`` (started and torn down here)."""
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    scenario = request.param
    out = tmp_path_factory.mktemp(scenario)
    with DemoJob(scenario) as job:
        job.wait_ready()
        rc, doc = run_json("dump", "--pid", job.pid, "-o", out)
    return scenario, rc, doc, out


def check_culprits(scenario: str, rc: int, doc: dict) -> None:
    """Exactly the culprits are suspects; every other rank waits for the ranks of the truth."""
    culprits, waiting, _steps = TRUTH[scenario]
    named = {r for s in suspects(doc) for r in s["ranks"]}
    assert named == culprits, f"{scenario}: named {named}, truth {culprits}: {doc['headline']}"
    assert rc == (3 if culprits else 0), doc["headline"]
    got = {tuple(f["ranks"]): tuple(f["waits_for"]) for f in doc["findings"] if f["kind"] == "waiting"}
    for ranks, targets in waiting.items():
        assert got.get(ranks) == targets, f"{scenario}: waiting findings {got}"
    for f in doc["findings"]:
        if f["severity"] == "waiting":
            assert not culprits & set(f["ranks"]), f"{scenario}: a culprit reported as waiting: {f}"


def check_steps(scenario: str, doc: dict, out) -> None:
    """The adaptive steps the truth calls for were taken (``steps`` of each rank in the JSON)."""
    steps = {r["rank"]: r["steps"] for r in doc["stacks"]["ranks"]}
    want = TRUTH[scenario][2]
    if want is None:  # every rank alike: all resampled, or none
        assert len({tuple(v) for v in steps.values()}) == 1 and set(next(iter(steps.values()))) <= {"resampled"}, steps
        return
    for rank, step in want.items():
        assert step in steps[rank], f"{scenario}: rank {rank} steps {steps[rank]}"
    if not want:
        assert not any(steps.values()), f"{scenario}: nothing to add, yet {steps}"
    if scenario.startswith("store-barrier"):
        assert (out / "store.json").is_file()
