"""Issue 31, item 7: ``check`` tells the user's mistake from the node's. Impossible sizes and a busy
``--master-port`` are set-up errors (exit 2, no node named), and a failure that no subset repeats
and that does not repeat when the whole set runs again is "intermittent" (a warning, exit 1, no
node or GPU named). Real check runs with real gloo ranks; the port held by a real listening socket;
the allocation failure by a real address-space limit (prlimit); the intermittent fault by a rank
that SIGSTOPs itself in the first run only."""

from __future__ import annotations

import os
import socket

import pytest

from conftest import run_cli, run_json
from infra.check_faults import stop_at_all_reduce

pytestmark = pytest.mark.real  # the command line as a child process, real ranks

pytest.importorskip("torch")

FAST = ("--timeout", "5", "--init-timeout", "15", "--iters", "2")


def _listener() -> tuple[socket.socket, int]:
    """A socket listening on all addresses (as TCPStore binds) on a free port in the range check picks from."""
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen()
    return s, s.getsockname()[1]


def test_a_size_larger_than_the_node_is_refused_before_the_run(tmp_path, leftovers):
    """Before: the ranks ran, failed to allocate 1000 GiB, and check blamed the node (exit 1)."""
    res = run_cli("check", "--nproc-per-node", "2", "--backend", "gloo", *FAST, "--size", "1000G", "-o", tmp_path / "o")
    err = " ".join(res.stderr.split())
    assert res.returncode == 2, res.stderr
    assert "--size 1000.0 GiB" in err and "this node has" in err and "give a smaller --size" in err
    assert not (tmp_path / "o" / "trials").exists()  # nothing ran


def test_a_size_no_rank_can_allocate_is_a_setup_error_not_a_bad_node(tmp_path, leftovers):
    """The node's memory would hold it, but every rank's allocation fails (an address-space limit
    the ranks inherit): after the first run, exit 2 with the option to change; no bisection."""
    if not os.path.exists("/usr/bin/prlimit"):
        pytest.skip("needs prlimit (util-linux)")
    res = run_cli("check", "--nproc-per-node", "2", "--backend", "gloo", *FAST, "--size", "1500M", "-o", tmp_path / "o",
                  prefix=["/usr/bin/prlimit", f"--as={2200 << 20}"])
    err = " ".join(res.stderr.split())
    assert res.returncode == 2, res.stderr
    assert "--size 1.5 GiB: no rank could allocate it (every rank failed bandwidth" in err
    assert "can't allocate memory" in err and "no node is at fault" in err
    assert sorted(os.listdir(tmp_path / "o" / "trials")) == ["01-all"]  # no bisection


def test_a_busy_master_port_here_is_refused_naming_its_holder(tmp_path, leftovers):
    """Before: rank 0 failed the rendezvous (EADDRINUSE), the retry reused the same port, and the
    bisection named "bad GPU(s) vm:0" (exit 3)."""
    held, port = _listener()
    with held:
        res = run_cli("check", "--nproc-per-node", "2", "--backend", "gloo", *FAST, "--size", "1M",
                      "--master-port", str(port), "-o", tmp_path / "o")
    err = " ".join(res.stderr.split())
    assert res.returncode == 2, res.stderr
    assert f"--master-port {port}: it is in use by pid {os.getpid()}" in err
    assert "bad" not in err and "leave --master-port out" in err


def test_a_busy_master_port_on_the_first_node_is_a_setup_error(sshd, tmp_path, leftovers):
    """Over ssh the port cannot be tried from here: rank 0 on node1 says EADDRINUSE at the
    rendezvous, and that is the user's port, not node1 (exit 2, one run, no node named). One rank
    on one node: no other rank waits out its rendezvous timeout on the held socket."""
    leftovers.extra = sshd.session_pids
    held, port = _listener()
    with held:
        res = run_cli("check", "--hosts", "node1", "--nproc-per-node", "1", "--launcher", "ssh", "--ssh-config",
                      sshd.config_path, "--connect-timeout", "3", "--backend", "gloo", *FAST, "--size", "1M",
                      "--master-port", str(port), "-o", tmp_path / "o", env=sshd.env)
    err = " ".join(res.stderr.split())
    assert res.returncode == 2, res.stderr + res.stdout
    assert f"--master-port {port} is in use on node1" in err and "EADDRINUSE" in err and "no node is at fault" in err
    assert sorted(os.listdir(tmp_path / "o" / "trials")) == ["01-all"]


def test_a_failure_that_does_not_repeat_is_intermittent_and_names_nothing(tmp_path, leftovers):
    """Slot 1 stops itself in the first run only. Before: the bisection's halves passed and the GPU
    the first run blamed was named (exit 3). Now the whole set runs again, passes, and the verdict
    is an intermittent fault: a warning, exit 1 (never an all-clear), no GPU or node to exclude."""
    site = stop_at_all_reduce(tmp_path / "site", 1, once=tmp_path / "stopped-once")
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    rc, doc = run_json("check", "--nproc-per-node", "3", "--backend", "gloo", *FAST, "--size", "1M", "-o", tmp_path / "o",
                       env=env)
    assert (tmp_path / "stopped-once").exists()
    assert rc == 1, doc["headline"]
    assert doc["bad_nodes"] == [] and doc["bad_gpus"] == [] and doc["exclude"] is None
    assert not [f for f in doc["findings"] if f["severity"] == "suspect"]
    [f] = [f for f in doc["findings"] if "intermittent" in f["summary"]]
    assert f["severity"] == "warning" and not f["gpus"]
    host = doc["nodes"][0]["host"]
    assert [(t["layout"], t["passed"]) for t in doc["trials"]] == [
        ([f"{host}:0-2"], False), ([f"{host}:1"], True), ([f"{host}:0,2"], True), ([f"{host}:0-2"], True)]
