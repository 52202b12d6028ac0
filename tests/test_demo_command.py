"""The README's run command: `hangdbg demo` starts, dumps and tears down a real job."""

import re

import psutil
import pytest

from conftest import check_golden, read_json, run_cli, suspects

pytest.importorskip("torch")
pytestmark = pytest.mark.real  # `hangdbg demo` starts a real torchrun/gloo job


def test_demo_names_rank3_in_broadcast_and_cleans_up(tmp_path):
    res = run_cli("demo", "-o", tmp_path, timeout=300)
    assert res.returncode == 3, res.stderr
    verdict = " ".join(res.stdout.split())
    assert "suspect rank 3: different collective: in broadcast at demo/job.py" in verdict
    assert "ranks {0-2} wait in all_reduce" in verdict
    doc = read_json(tmp_path / "hangdbg.json")
    assert doc["command"] == "demo" and [s["ranks"] for s in suspects(doc)] == [[3]]
    check_golden(doc, "demo")
    # the job was torn down: launcher and ranks are gone
    launcher = int(re.search(r"torchrun pid (\d+)", res.stderr).group(1))
    for pid in [launcher] + [r["pid"] for r in doc["stacks"]["ranks"]]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
