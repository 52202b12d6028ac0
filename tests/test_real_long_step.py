"""Real control: a healthy job whose ranks compute torch.mm for seconds per step, staggered (the slowest
rank rotates; issue 28's false alarm). A plain ``hangdbg dump`` watches until a rank moves: nobody is
blamed, and it says so with exit 0."""

import pytest

from conftest import run_json, suspects

STEP_SECONDS = "4"  # the slowest rank's compute per step (1, 2, 3 and 4 s): shorter than the default window


@pytest.fixture(scope="module")
def long_step_job():
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    with DemoJob("long-step", args=["--step-seconds", STEP_SECONDS]) as job:
        job.wait_ready()
        yield job


def test_a_long_step_is_not_a_hang(long_step_job, tmp_path):
    rc, doc = run_json("dump", "--pid", long_step_job.pid, "-o", tmp_path)
    assert suspects(doc) == [], doc["headline"]
    assert rc == 0, doc["headline"]
    assert not [f for f in doc["findings"] if f["kind"] == "undecided"], doc["headline"]
