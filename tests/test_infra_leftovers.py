"""The ``leftovers`` fixture (tests/infra/leftovers.py) sees a process the test started in a session
of its own, and a file left in the test's TMPDIR: the issue-31 tests rest on it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_a_process_in_its_own_session_is_seen_and_killed(leftovers):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    with pytest.raises(AssertionError, match=rf"processes left behind:\n{proc.pid}: .*time.sleep"):
        leftovers.assert_none(grace=0.5)
    leftovers.kill()
    proc.wait(timeout=10)
    leftovers.assert_none(grace=1)


def test_a_file_left_in_tmpdir_is_seen(leftovers):
    assert os.environ["TMPDIR"] == str(leftovers.tmp)
    (leftovers.tmp / "spool").write_bytes(b"x")
    assert leftovers.temp_files() == ["spool"]
    (leftovers.tmp / "spool").unlink()


def test_processes_that_ended_are_not_left(leftovers):
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert leftovers.processes() == []
