"""Real hung torchrun/gloo jobs with structure (process groups, DDP, a healthy control): a plain
``hangdbg dump`` names exactly the culprit and says whom every other rank waits for."""

import pytest

from _topology import check_culprits, check_steps, topology_dump  # noqa: F401 (fixture)

pytestmark = pytest.mark.parametrize("topology_dump", ["tp-dp", "ddp-unused", "healthy-midstep"], indirect=True)


def test_names_exactly_the_culprit(topology_dump):
    scenario, rc, doc, _out = topology_dump
    check_culprits(scenario, rc, doc)


def test_adaptive_steps_in_the_json(topology_dump):
    scenario, _rc, doc, out = topology_dump
    check_steps(scenario, doc, out)
