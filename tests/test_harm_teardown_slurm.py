"""Issue 31, "children outlive their parent", over srun: SIGINT, SIGTERM or SIGKILL of ``dump
--jobid`` while the agents sample the ranks on the nodes of a real local SLURM cluster leaves no
agent on the nodes. hangdbg's teardown sends srun SIGTERM (srun forwards it to the step's tasks)
before SIGKILL; a SIGKILLed hangdbg closes srun's standard input, which srun hands to the agents
(``HANGDBG_STOP_ON_EOF``). Before, srun was SIGKILLed at once and the step ran on."""

from __future__ import annotations

import signal
import sys
import time

import psutil
import pytest

from infra.slurm import srun_job_script, wait_ready
from test_harm_teardown import _hangdbg, _wait_for

pytestmark = pytest.mark.real

SLEEPER = """\
import argparse, os, pathlib, time
p = argparse.ArgumentParser(); p.add_argument("--scenario"); p.add_argument("--ready")
a = p.parse_args()
pathlib.Path(a.ready, f"rank-{os.environ['RANK']}").touch()
time.sleep(600)
"""


def _agents() -> list[psutil.Process]:
    """The node agents of dump --jobid (``hangdbg agent ... --samples``) running now."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if " agent " in cmd and "--samples" in cmd and "hangdbg" in cmd:
            out.append(p)
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_dump_jobid_interrupted_stops_the_agents_on_the_nodes(leftovers, cluster, tmp_path, sig):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    ready = tmp_path / "ready"
    jobid = cluster.sbatch(srun_job_script(ready, job_script=script, ntasks_per_node=1))
    try:
        wait_ready(ready, 2, timeout=240, cluster=cluster, jobid=jobid)
        d = _hangdbg("dump", "--jobid", jobid, "--samples", "60", "--interval", "2", "--remote-python", sys.executable,
                     "-o", tmp_path / "out", env=cluster.env, cwd=tmp_path)
        _wait_for("an agent on each node", lambda: len(_agents()) >= 2, d)
        d.send_signal(sig)
        _out, err = d.communicate(timeout=120)
        assert d.returncode != 0 and "Traceback" not in err, err[-2000:]
        deadline = time.monotonic() + 20  # within a teardown's GRACE (5 s) and the agent's own 2 x GRACE
        while _agents() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _agents(), [" ".join(p.cmdline()) for p in _agents()]
    finally:
        cluster.scancel(jobid)
