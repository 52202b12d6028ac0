"""Issue 14's promises under injected faults, through the real command line (``tests/faults.py``):
a py-spy, ssh, pdsh or scontrol that hangs, prints junk, lies or fails; a full disk and a
read-only ``-o``; FIFOs, symlink loops and symlinks pointing out of ``-o``.

Every run is a :func:`faults.guarded_run` (memory limit, timeout) checked by
:func:`faults.assert_clean`: no traceback, an exit status in {0,1,2,3}, nothing written outside
``-o`` in the test's directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import faults as F
from faults import ROOT_ONLY

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TIMEOUT = 2
MARGIN = 20  # seconds over --timeout a run may take (interpreter start-up, analysis) on a busy 2-core box


@pytest.fixture
def rank_process():
    """A sleeping Python process with RANK/WORLD_SIZE set: a rank to dump; its pid."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    try:
        time.sleep(0.3)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def job(tmp_path):
    """The watched directory (``-o`` goes inside it); fake tools live next to it, in ``tmp_path/bin``."""
    d = tmp_path / "job"
    d.mkdir()
    return d


def _doc(res: subprocess.CompletedProcess) -> dict:
    return json.loads(res.stdout)


# --- a fake py-spy: dump --pid ----------------------------------------------------------------

STACK = ("Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
         'Thread {pid} (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2050)\n'
         "    <module> (train.py:20)\n")

PYSPY_FAULTS = {
    "hangs": (F.hang(b"Process {pid}: python train.py\n"), "timed out"),
    "junk": (F.junk(seed=14), "py-spy printed"),
    "junk-fails": (F.junk(seed=7, code=1), ""),
    "other-pid": (F.lie(STACK.replace("{pid}", "1")), "pid 1"),
    "header-only": (F.lie("Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"), "no stack"),
    "fails": (F.fail("Error: [/yellow] \x1b]0;pwned\x07\x1b[2J failed to attach\n", 1), "failed to attach"),
}


@pytest.mark.parametrize("fault", list(PYSPY_FAULTS))
def test_dump_pid_with_a_hostile_pyspy_reports_the_rank_unread(tmp_path, job, rank_process, fault):
    behaviour, reason = PYSPY_FAULTS[fault]
    exe = F.fake_tool(tmp_path / "bin", "py-spy", behaviour)
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--pid", rank_process, "--py-spy", exe, "--timeout", TIMEOUT, "--no-adapt",
                         "-o", out, "--json"], timeout=TIMEOUT + MARGIN + 30, env=F.env_with_path(tmp_path / "bin"))
    F.assert_clean(res, out, job, before)
    assert res.seconds < TIMEOUT + MARGIN, res.seconds  # bounded: a hanging py-spy is killed (SIGTERM ignored)
    assert F.calls(tmp_path / "bin", "py-spy"), "the fake py-spy was not run"
    doc = _doc(res)
    # never "healthy" when no stack of the rank was read
    assert res.returncode == 1, (res.returncode, doc["headline"])
    assert doc["stacks"]["unreadable_ranks"] == [0]
    unread = [f for f in doc["findings"] if f["kind"] == "unreadable"]
    assert unread and reason in unread[0]["summary"], unread
    raw = (out / "raw" / "rank-0000.txt").read_bytes()  # what py-spy printed is kept
    if behaviour.stdout and not behaviour.stdout.startswith(b"\x00"):
        first = behaviour.stdout.replace(b"{pid}", str(rank_process).encode()).split(b"\n")[0]
        assert first.decode("utf-8", "replace").encode() in raw
    assert F.parts(out) == []


@pytest.mark.parametrize("fault", ["hangs", "fails"])
def test_dump_pid_console_never_passes_escapes_or_markup(tmp_path, job, rank_process, fault):
    behaviour, _ = PYSPY_FAULTS[fault]
    exe = F.fake_tool(tmp_path / "bin", "py-spy", behaviour)
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--pid", rank_process, "--py-spy", exe, "--timeout", TIMEOUT, "--no-adapt", "-o", out],
                        timeout=TIMEOUT + MARGIN + 30)
    F.assert_clean(res, out, job, before)
    F.assert_no_raw_escapes(res)
    assert res.returncode == 1 and b"rank 0" in res.stdout + res.stderr
