"""Real hung torchrun/gloo jobs of the two structured cases: a store barrier on the job's default
(prefixed) store, and a ring of isend/irecv with no collective between steps, whose rank 2 receives from the wrong neighbour (once blamed with rank 3, "a deadlock", and rank 1, "behind"). A plain
``hangdbg dump`` names exactly the culprit (exit 3), with the finding that says why."""

import json

import pytest

from _topology import check_culprits, check_steps, topology_dump  # noqa: F401 (fixture)
from conftest import suspects

pytestmark = pytest.mark.parametrize("topology_dump", ["store-barrier-default", "p2p-ring-steps"], indirect=True)


def test_names_exactly_the_culprit(topology_dump):
    scenario, rc, doc, out = topology_dump
    check_culprits(scenario, rc, doc)
    [finding] = suspects(doc)
    if scenario == "store-barrier-default":
        assert finding["kind"] == "store-key-missing" and "'step2/done/3'" in finding["summary"], finding
        store = json.loads((out / "store.json").read_text())
        # the keys were read where torch's default store writes them, the waiter's own key among them
        assert store["prefix"] == "default_pg/0//" and store["keys"]["step2/done/0"] is True, store
        assert [k for k, held in store["keys"].items() if not held] == ["step2/done/3"], store
    else:
        assert finding["kind"] == "p2p-mismatch", finding
        assert "receives from the wrong peer" in finding["summary"] and "recv from rank 3" in finding["summary"]
        assert "rank 1 sends to it" in finding["summary"], finding


def test_adaptive_steps_in_the_json(topology_dump):
    scenario, _rc, doc, out = topology_dump
    check_steps(scenario, doc, out)
