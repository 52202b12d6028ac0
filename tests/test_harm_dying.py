"""Issue 31, item 8: a job that dies while ``dump`` reads it is "the job ended", never a hang with
every rank missing; a ``--pid`` that gives no rank is reported, never dropped. Real processes (a
launcher and its Python ranks) read by the real py-spy; the death is a py-spy wrapper that kills
the rank it was asked to read, then runs py-spy on it: the job ends between discovery and py-spy."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli, run_json

pytestmark = pytest.mark.real  # real processes, real py-spy

PYSPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))

LAUNCHER = """\
import os, subprocess, sys
n = int(sys.argv[1])
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
        env=dict(os.environ, RANK=str(i), WORLD_SIZE=str(n), LOCAL_RANK=str(i), LOCAL_WORLD_SIZE=str(n)))
        for i in range(n)]
print("ready", flush=True)
for k in kids:
    k.wait()
"""


@pytest.fixture
def job(tmp_path):
    """A launcher with 3 Python ranks (RANK set) that sleep; killed with its ranks at the end."""
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    proc = subprocess.Popen([sys.executable, str(script), "3"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _killing_pyspy(path: Path) -> Path:
    """A py-spy that first kills the process it was asked to read (the job dying now), then runs
    the real py-spy on it, which fails as it does on a pid that is gone."""
    path.write_text(f"""#!/bin/sh
pid=""
prev=""
for a in "$@"; do
  [ "$prev" = "-p" ] || [ "$prev" = "--pid" ] && pid="$a"
  prev="$a"
done
kill -9 "$pid" 2>/dev/null
while [ -e /proc/$pid ] && ! grep -q '^State:.*[ZX]' /proc/$pid/status 2>/dev/null; do sleep 0.05; done
exec {PYSPY} "$@"
""")
    path.chmod(0o755)
    return path


def test_a_job_that_ends_during_the_dump_is_the_job_ended_not_a_hang(tmp_path, job, leftovers):
    """Before: "hang found: suspect ranks {0-2}: no process for ranks {0-2}" (exit 3)."""
    wrapper = _killing_pyspy(tmp_path / "py-spy")
    rc, doc = run_json("dump", "--pid", str(job.pid), "--py-spy", str(wrapper), "-o", tmp_path / "o")
    assert rc == 1, doc["headline"]
    assert doc["headline"].startswith("the job ended while hangdbg was dumping: ranks {0-2}")
    assert not [f for f in doc["findings"] if f["severity"] == "suspect"]
    [ended] = [f for f in doc["findings"] if f["kind"] == "job-ended"]
    assert ended["ranks"] == [0, 1, 2] and ended["severity"] == "warning"


def test_a_pid_that_gives_no_rank_is_reported(tmp_path, job, leftovers):
    """Before: the sleep's pid was dropped without a word, and the dump read the ranks as if asked for them only."""
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        res = run_cli("dump", "--pid", str(job.pid), "--pid", str(sleeper.pid), "--json", "-o", tmp_path / "o")
        err = " ".join(res.stderr.split())
        assert res.returncode in (0, 3), res.stderr
        assert f"--pid {sleeper.pid} ignored: sleep: not a Python process, no process under it" in err
        assert f"(--pid {sleeper.pid} ignored: no rank there)" in res.stdout
        # only pids that give no rank: exit 1, and the error says what each one is
        res = run_cli("dump", "--pid", str(sleeper.pid), "-o", tmp_path / "o2")
        err = " ".join(res.stderr.split())
        assert res.returncode == 1 and f"pid {sleeper.pid} is sleep: not a Python process" in err
    finally:
        sleeper.kill()
        sleeper.wait()
