"""`hangdbg check --hosts` over a real sshd on 127.0.0.1 (ssh pool and pdsh), healthy and with a
node that cannot reach the rendezvous (its own network namespace) or cannot be reached at all."""

from __future__ import annotations

import shutil
import time

import pytest

from conftest import run_cli, run_json, suspects
from infra.check_faults import node_python

pytest.importorskip("torch")

FAST = ("--timeout", "5", "--init-timeout", "10", "--size", "1M", "--iters", "3", "--connect-timeout", "3")
NEVER_JOINS = ("--init-timeout", "6")
"""For the checks where a node never joins the rendezvous: each trial with it waits this long for it.
The trials that pass there have one rank per node, started together (about 3 s each, torch's import
included)."""


def _check(sshd, *args, out, then=()):
    return run_json("check", *args, "--ssh-config", sshd.config_path, *FAST, *then, "-o", out, env=sshd.env)


def test_healthy_hosts_over_ssh(sshd, tmp_path):
    rc, doc = _check(sshd, "--hosts", "node[1-2]", "--nproc-per-node", "2", "--launcher", "ssh", out=tmp_path / "o")
    assert rc == 0, doc["headline"]
    assert [(n["host"], n["status"]) for n in doc["nodes"]] == [("node1", "ok"), ("node2", "ok")]
    assert [r["host"] for r in doc["ranks"]] == ["node1", "node1", "node2", "node2"]
    assert doc["trials"][0]["master"].startswith("127.0.0.1:")  # `ssh -G node1`: its HostName
    assert doc["bandwidth"]["world_size"] == 4


@pytest.mark.parametrize("bad", ["node2", "node1"])
def test_node_on_a_network_of_its_own(sshd, tmp_path, bad):
    """One node runs in a network namespace of its own: it works alone, not with the others.
    node2: it cannot reach node1's rendezvous (connection refused) and says so at the
    rendezvous step while the others only wait. node1: it hosts the rendezvous, whose address
    neither other node can reach, so its host is blamed. The interface retry does not help;
    the bad node alone and the other two together pass, and the whole set fails again (not an
    intermittent fault): "passes alone but the others fail with it"."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare (util-linux) and ip (iproute2) for a network namespace")
    wrapper = node_python(tmp_path / "python", bad, netns=True)
    start = time.monotonic()
    rc, doc = _check(sshd, "--hosts", "node[1-3]", "--launcher", "pdsh", "--remote-python", wrapper, out=tmp_path / "o",
                     then=NEVER_JOINS)
    assert rc == 3, doc["headline"]
    assert doc["bad_nodes"] == [bad] and doc["exclude"] == bad
    [suspect] = suspects(doc)
    assert suspect["summary"].startswith(f"{bad} passes alone but the others fail with it")
    if bad == "node2":
        assert "cannot reach the rendezvous at 127.0.0.1:" in suspect["summary"] and "Connection refused" in suspect["summary"]
    else:
        assert "hosts the rendezvous" in suspect["summary"] and "its address is unreachable from them" in suspect["summary"]
    rest = [h for h in ("node1", "node2", "node3") if h != bad]
    assert [(t["purpose"], t["layout"], t["passed"]) for t in doc["trials"]] == [
        ("all", ["node1:0", "node2:0", "node3:0"], False), ("interface", ["node1:0", "node2:0", "node3:0"], False),
        ("bisect nodes", [f"{bad}:0"], True), ("bisect nodes", [f"{h}:0" for h in rest], True),
        ("bisect nodes", ["node1:0", "node2:0", "node3:0"], False)]  # the whole set again: the failure repeats
    assert doc["trials"][0]["failed_step"] == "rendezvous"
    assert time.monotonic() - start < 150


def test_unreachable_node(sshd, tmp_path):
    """deadnode's ssh port is closed: the node is named, the other one passes alone."""
    rc, doc = _check(sshd, "--hosts", "node1,deadnode", "--launcher", "ssh", out=tmp_path / "o", then=NEVER_JOINS)
    assert rc == 3, doc["headline"]
    assert doc["bad_nodes"] == ["deadnode"]
    nodes = {n["host"]: n for n in doc["nodes"]}
    assert nodes["deadnode"]["status"] == "unreachable"
    assert suspects(doc)[0]["hosts"] == ["deadnode"] and "unreachable" in suspects(doc)[0]["summary"]


def test_nodes_without_hangdbg_are_a_setup_error_not_bad_nodes(sshd, tmp_path):
    """A --remote-python without hangdbg fails on every node alike: exit 1 with the remedy, no bisection."""
    res = run_cli("check", "--hosts", "node[1-2]", "--ssh-config", sshd.config_path, *FAST, "--launcher", "ssh",
                  "--remote-python", "/usr/bin/python3", "-o", tmp_path / "o", env=sshd.env)
    assert res.returncode == 1, res.stdout
    err = " ".join(res.stderr.split())
    assert "the check could not start on any node" in err and "--remote-python" in err
    assert "run 2" not in err  # no bisection of a setup error
