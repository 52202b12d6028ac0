"""Issue 31, "children outlive their parent": no hangdbg command leaves a child behind after
SIGINT, SIGTERM (or, for the local check launcher, SIGKILL).

Each test runs a real ``python -m hangdbg ...`` process, waits (polling with psutil, never a
blind sleep) until the child in question runs (the ``--on-hang`` hook, the check's ranks, the
remote agent, the stdin spool), sends the signal, and lets the ``leftovers`` fixture check that
none of the test's processes (remote ones included: ``sshd.session_pids``) and no temporary file
is left. Its end (:func:`_watch.finish`) fails the test on a traceback or a hangdbg still running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest

from _watch import finish
from conftest import ROOT
from infra.leftovers import MARK

pytest.importorskip("torch")
pytestmark = pytest.mark.real  # real hangdbg processes, real jobs and real signals: not the fast lane


def _hangdbg(*args: object, stdin: int | None = subprocess.DEVNULL, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.Popen:
    env = dict(env or os.environ, NO_COLOR="1", COLUMNS="160", PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "hangdbg", *map(str, args)], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd or ROOT, text=True, errors="replace")


def _wait_for(what: str, found: Callable[[], bool], proc: subprocess.Popen, timeout: float = 240.0) -> None:
    """Poll ``found`` until true; fail if ``proc`` ends first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found():
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"hangdbg ended (status {proc.returncode}) before {what}:\n{err[-3000:]!r}")
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:g} s")


def _descendants(pid: int, needle: str) -> list[psutil.Process]:
    """The descendants of ``pid`` whose command line holds ``needle``."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            if needle in " ".join(k.cmdline()):
                out.append(k)
        except psutil.Error:
            continue
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_watch_stops_its_on_hang_hook(leftovers, tmp_path, sig):
    """SIGTERM or Ctrl-C of `watch` while its --on-hang hook runs: the hook (in a session of its
    own, so the terminal's Ctrl-C never reaches it) is stopped with the watcher."""
    from hangdbg.demo.launch import DemoJob

    (tmp_path / "jobtmp").mkdir()  # torchrun's own files, left by its SIGKILL in job.stop()
    job = DemoJob("stuck-io", 2, workdir=tmp_path / "job", env={"TMPDIR": str(tmp_path / "jobtmp")}).start()
    try:
        job.wait_ready(timeout=180, settle=0)
        w = _hangdbg("watch", "--pid", job.pid, "--stall", "3", "--interval", "1", "-o", tmp_path / "out",
                     "--on-hang", "sleep 1000 && echo never", cwd=tmp_path)
        _wait_for("the hook runs", lambda: bool(_descendants(w.pid, "sleep 1000")), w)
        w.send_signal(sig)
        rc, _out, err = finish(w, 120, "hangdbg")
        assert rc == 1, err[-2000:]
    finally:
        job.stop()


CHECK = ("check", "--nproc-per-node", "2", "--backend", "gloo", "--size", "16M", "--iters", "100000",
         "--timeout", "600", "--no-bisect")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_check_launcher_and_ranks_die_with_check(leftovers, tmp_path, sig):
    """Ctrl-C, SIGTERM or SIGKILL of `check` on this node while its ranks run: the node launcher
    and its ranks end with it (SIGKILL: PR_SET_PDEATHSIG), not after their own timeouts."""
    c = _hangdbg(*CHECK, "-o", tmp_path / "out")
    _wait_for("both ranks run", lambda: len(_descendants(c.pid, "rank.py")) >= 2, c)
    c.send_signal(sig)
    rc, _out, err = finish(c, 120, "hangdbg")
    if sig != signal.SIGKILL:
        assert rc == 1, err[-2000:]


def test_report_stdin_spool_is_removed_on_sigterm(leftovers, tmp_path):
    """SIGTERM of `report -` while it spools standard input: the spool leaves the TMPDIR."""
    r = _hangdbg("report", "-", stdin=subprocess.PIPE, cwd=tmp_path)
    assert r.stdin is not None
    r.stdin.write("NCCL WARN some line\n" * 200_000)  # 4 MB: whole 1 MiB chunks reach the spool
    r.stdin.flush()

    def spooled() -> bool:
        return any(p.name == "stdin" and p.stat().st_size > 0 for p in leftovers.tmp.rglob("stdin"))

    _wait_for("the spool is written", spooled, r)
    r.send_signal(signal.SIGTERM)
    rc, _out, err = finish(r, 120, "hangdbg")
    r.stdin.close()
    assert rc == 1, err[-2000:]


@pytest.fixture
def sleeping_rank(leftovers):
    """A Python process with RANK/WORLD_SIZE set (a rank to dump), killed after the test."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    yield proc.pid
    proc.kill()
    proc.wait()


def _remote(sshd, needle: str) -> list[int]:
    """The pids of the sshd's sessions whose command line holds ``needle``."""
    out = []
    for pid in sshd.session_pids():
        try:
            if needle in " ".join(psutil.Process(pid).cmdline()):
                out.append(pid)
        except psutil.Error:
            continue
    return out


@pytest.mark.parametrize("launcher", ["ssh", "pdsh"])
def test_dump_hosts_interrupted_stops_the_remote_agent(leftovers, sshd, sleeping_rank, tmp_path, launcher):
    """Ctrl-C of `dump --hosts` while the agent samples the ranks on the node: the agent sees its
    standard input end, stops its py-spy and exits; nothing keeps running on the node."""
    leftovers.extra = sshd.session_pids
    d = _hangdbg("dump", "--hosts", "node1", "--launcher", launcher, "--ssh-config", sshd.config_path,
                 "--remote-python", sys.executable, "--match-env", f"{MARK}={leftovers.mark}", "--samples", "60", "--interval", "2",
                 "-o", tmp_path / "out", env=sshd.env, cwd=tmp_path)
    # its first sample on disk (OUT/raw/node1/, written as each arrives): the agent is in its sampling
    # loop (a py-spy run itself lasts a few ms of every 2 s: a poll for it waited up to a minute)
    raw = tmp_path / "out" / "raw"
    _wait_for("the agent samples the rank", lambda: any(p.is_file() for p in raw.rglob("*")), d)
    d.send_signal(signal.SIGINT)
    rc, _out, err = finish(d, 120, "hangdbg")
    assert rc == 1, err[-2000:]


def test_check_hosts_interrupted_stops_the_remote_ranks(leftovers, sshd, tmp_path):
    """Ctrl-C of `check --hosts` while the ranks run on the nodes: the launchers see their
    standard input end and stop their ranks."""
    leftovers.extra = sshd.session_pids
    c = _hangdbg("check", "--hosts", "node[1-2]", "--launcher", "ssh", "--ssh-config", sshd.config_path,
                 "--remote-python", sys.executable, *CHECK[3:], "--nproc-per-node", "1", "-o", tmp_path / "out",
                 env=sshd.env, cwd=tmp_path)
    _wait_for("the ranks run on both nodes", lambda: len(_remote(sshd, "rank.py")) >= 2, c)
    c.send_signal(signal.SIGINT)
    rc, _out, err = finish(c, 120, "hangdbg")
    assert rc == 1, err[-2000:]


def _deaf_python(path: Path) -> Path:
    """A ``--remote-python`` whose hangdbg never sees its standard input end (a pipe it holds the
    other end of): an agent that cannot notice its coordinator going away."""
    code = ("import os, runpy, sys; r, w = os.pipe(); os.dup2(r, 0); sys.argv = ['hangdbg', *sys.argv[3:]]; "
            "runpy.run_module('hangdbg', run_name='__main__', alter_sys=True)")
    path.write_text(f"#!/bin/sh\nexec {sys.executable} -c \"{code}\" \"$@\"\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("launcher", ["ssh", "pdsh"])
def test_a_node_timed_out_gets_a_remote_stop(leftovers, sshd, tmp_path, launcher):
    """A node that does not answer within --node-timeout is given up on: its ssh is killed and its
    run is stopped over the same transport (`hangdbg agent --stop-run TOKEN`), even when the agent
    there cannot see its standard input end."""
    leftovers.extra = sshd.session_pids
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    try:
        d = _hangdbg("dump", "--hosts", "node1", "--launcher", launcher, "--ssh-config", sshd.config_path,
                     "--remote-python", _deaf_python(tmp_path / "python"), "--match-env", f"{MARK}={leftovers.mark}",
                     "--samples", "60", "--interval", "2", "--node-timeout", "10", "-o", tmp_path / "out",
                     env=sshd.env, cwd=tmp_path)
        _wait_for("the agent runs", lambda: bool(_remote(sshd, "--samples")), d)
        finish(d, 240, "hangdbg")
    finally:
        rank.kill()
        rank.wait()


def test_collect_hosts_interrupted_stops_the_remote_agent_and_its_gdb(leftovers, sshd, sleeping_rank, tmp_path):
    """Ctrl-C of `collect --hosts` while the agent on the node turns a core file into backtraces
    with a gdb that takes long (a large core: here a gdb that waits 60 s before it starts): the agent
    sees its standard input end, stops its gdb and exits; nothing keeps running on the node.
    Before, the agent went on until its gdb ended and it wrote to the closed ssh."""
    leftovers.extra = sshd.session_pids
    cores = tmp_path / "cores"
    cores.mkdir()
    made = subprocess.run(["gcore", "-o", str(cores / "core"), str(sleeping_rank)], capture_output=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"gcore failed: {made.stderr[-300:]!r}")
    slow = tmp_path / "slow-gdb"
    slow.mkdir()
    (slow / "gdb").write_text(f"#!/bin/sh\nsleep 60\nexec {shutil.which('gdb') or 'gdb'} \"$@\"\n")
    (slow / "gdb").chmod(0o755)
    c = _hangdbg("collect", "--hosts", "node1", "--launcher", "ssh", "--ssh-config", sshd.config_path,
                 "--remote-python", sys.executable, "--remote-setup", f"export PATH={slow}:$PATH",
                 "--cores", f"{cores}/core*", "--exe", sys.executable, "-o", tmp_path / "out", env=sshd.env, cwd=tmp_path)
    _wait_for("the agent reads a core with gdb", lambda: bool(_remote(sshd, "gdb")), c)
    c.send_signal(signal.SIGINT)
    rc, _out, err = finish(c, 120, "hangdbg")
    assert rc == 1, err[-2000:]
