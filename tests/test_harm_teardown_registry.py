"""Issue 31, "one teardown for every child": the registry of children (hangdbg/tools/children.py)
on real short-lived processes (fast lane); the whole commands under real signals are in
``test_harm_teardown.py``."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from conftest import ROOT
from hangdbg.tools import children
from hangdbg.tools.subproc import Popen
from hangdbg.transport.runners import remote_command


def _sleeps_under(pid: int) -> int:
    try:
        return sum("sleep" in " ".join(p.cmdline()) for p in psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return 0


def test_stop_ends_each_group_with_what_it_left_in_the_background(leftovers):
    """A child in a group of its own is tracked from its start; stop() ends the group, the
    background process its shell left included, and forgets it."""
    since = children.mark()
    proc = Popen(["/bin/sh", "-c", "sleep 300 & sleep 300"], start_new_session=True)
    assert proc in children.tracked()
    deadline = time.monotonic() + 60
    while _sleeps_under(proc.pid) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children.stop(since, grace=5) == 1
    assert proc.returncode is not None and proc not in children.tracked()


def test_a_reaped_child_is_forgotten(leftovers):
    proc = Popen(["/bin/true"], start_new_session=True)
    proc.wait(timeout=30)
    assert proc not in children.tracked()


def test_after_close_no_child_starts(leftovers):
    """Once the process is exiting (close()), a child a worker thread starts is killed at once
    and the start fails (in a process of its own: close() would stop this test process's children)."""
    code = ("from hangdbg.tools import children; from hangdbg.tools.subproc import Popen\n"
            "children.close()\n"
            "try:\n    Popen(['sleep', '300'], start_new_session=True)\nexcept children.ChildrenClosed:\n    print('refused')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.stdout.strip() == "refused", res.stderr


def test_remote_commands_carry_the_stop_marks():
    cmd = remote_command(["/opt/py", "-m", "hangdbg", "agent"], "source ~/venv", stop_on_eof=True, run="abc123")
    assert cmd.endswith("} && env HANGDBG_STOP_ON_EOF=1 HANGDBG_RUN=abc123 /opt/py -m hangdbg agent")
    assert remote_command(["/opt/py", "x y"]) == "/opt/py 'x y'"
