"""Issue 14, item 9: a host name that ssh or pdsh could read as an option (``-oProxyCommand=...``)
or that holds characters no host name has is refused before any transport command is built,
with a usage error (exit 2) naming it; ssh gets ``--`` before the host."""

from __future__ import annotations

import os
import stat

import pytest

from conftest import run_main
from hangdbg.transport.hosts import check_host, expand_hosts, read_hostfile
from hangdbg.transport.runners import PdshRunner, SrunRunner, SshRunner, ssh_argv
from hangdbg.transport.slurm import parse_show_job
from hangdbg.errors import UsageError

BAD = ["-oProxyCommand=touch /tmp/pwned", "-n", "node1;id", "$(id)", "a b", "..", "../x", "/etc", "n`id`",
       "user@-oX", "node\x1b[2J", "x" * 300, ""]
GOOD = ["node1", "gpu-node-01.cluster.local", "gpu_01", "10.1.2.3", "::1", "[fe80::1]", "alice@node7", "n1."]


@pytest.mark.parametrize("host", GOOD)
def test_good_hosts(host):
    assert check_host(host) == host


@pytest.mark.parametrize("host", BAD)
def test_bad_hosts_are_refused(host):
    with pytest.raises(UsageError) as exc:
        check_host(host)
    assert repr(host[:20])[1:-1][:10] in str(exc.value) and exc.value.help


def test_every_host_list_is_checked(tmp_path):
    with pytest.raises(UsageError, match="oProxyCommand"):
        expand_hosts("node1,-oProxyCommand=x")
    hf = tmp_path / "hostfile"
    hf.write_text("node1 slots=8\n-oProxyCommand=x slots=8\n")
    with pytest.raises(UsageError, match="oProxyCommand"):
        read_hostfile(hf)
    with pytest.raises(UsageError, match="oProxyCommand"):
        parse_show_job("JobId=1 JobState=RUNNING NodeList=-oProxyCommand=x NumNodes=1", "1")


@pytest.mark.parametrize("make", [
    lambda hosts: SshRunner(hosts),
    lambda hosts: PdshRunner(hosts),
    lambda hosts: SrunRunner("12", hosts),
])
def test_runners_never_build_argv_for_a_bad_host(make):
    with pytest.raises(UsageError, match="oProxyCommand"):
        make(["node1", "-oProxyCommand=touch /tmp/pwned"])
    r = make(["node1"])  # a good runner still refuses a bad host handed to argv() later
    if isinstance(r, SshRunner):
        with pytest.raises(UsageError):
            r.argv("-oProxyCommand=x", ["python", "-m", "hangdbg", "agent"])


def test_ssh_gets_double_dash_before_the_host():
    argv = ssh_argv("node1", ["-F", "cfg"], 10, "python -m hangdbg agent")
    assert argv[-3:] == ["--", "node1", "python -m hangdbg agent"]
    pd = PdshRunner(["node1", "node2"]).argv(["python"], 30)
    assert pd[pd.index("%h") - 1] == "--"


@pytest.fixture
def fake_transports(tmp_path):
    """ssh, pdsh and srun that only record that they ran."""
    bindir, marker = tmp_path / "bin", tmp_path / "ran"
    bindir.mkdir()
    for name in ("ssh", "pdsh", "srun"):
        p = bindir / name
        p.write_text(f"#!/bin/sh\necho {name} \"$@\" >> {marker}\nexit 255\n")
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    return env, marker


@pytest.mark.parametrize("how", ["hosts", "hostfile", "collect", "pdsh"])
def test_cli_refuses_a_bad_host_with_exit_2(tmp_path, fake_transports, how):
    env, marker = fake_transports
    bad = "-oProxyCommand=touch " + str(tmp_path / "pwned")
    out = tmp_path / "out"
    if how == "hostfile":
        hf = tmp_path / "hostfile"
        hf.write_text(f"node1 slots=1\n{bad.replace(' ', '_')} slots=1\n")
        args = ["dump", "--hostfile", hf, "--launcher", "ssh"]
    elif how == "collect":
        args = ["collect", f"--hosts=node1,{bad}", "--launcher", "ssh", "--logs", "/nonexistent"]
    else:
        args = ["dump", f"--hosts=node1,{bad}", "--launcher", "ssh" if how == "hosts" else "pdsh"]
    res = run_main(*args, "-o", out, env=env)
    assert res.returncode == 2, res.stderr
    assert "-oProxyCommand" in res.stderr and "Traceback" not in res.stderr
    assert not marker.exists(), marker.read_text()
    assert not (tmp_path / "pwned").exists() and not out.exists()
