"""Real hung torchrun/gloo jobs that wait point to point or on the job's store (and sleeping
pollers, a control): a plain ``hangdbg dump`` names exactly the culprit."""

import pytest

from _topology import check_culprits, check_steps, topology_dump  # noqa: F401 (fixture)

pytestmark = pytest.mark.parametrize("topology_dump", ["pipeline", "p2p-ring", "store-barrier", "pollers"], indirect=True)


def test_names_exactly_the_culprit(topology_dump):
    scenario, rc, doc, _out = topology_dump
    check_culprits(scenario, rc, doc)
    if scenario == "store-barrier":
        assert "step2/done/3" in suspects_summary(doc)


def test_adaptive_steps_in_the_json(topology_dump):
    scenario, _rc, doc, out = topology_dump
    check_steps(scenario, doc, out)


def suspects_summary(doc: dict) -> str:
    return " ".join(f["summary"] for f in doc["findings"] if f["severity"] == "suspect")
