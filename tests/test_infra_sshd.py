"""The test sshd (tests/infra/sshd.py): real ssh logins and pdsh through it on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.procs import alive as _alive
from infra.procs import descendants as _descendants
from infra.sshd import LocalSshd, SshdUnavailable


def _run(argv, env=None, timeout=30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def _procs_mentioning(text: str) -> list[str]:
    """Command lines of live processes whose argv mentions ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{entry}: {cmdline}")
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""




@pytest.fixture
def pdsh():
    path = shutil.which("pdsh")
    if path is None:
        pytest.skip("pdsh not installed")
    return path


def test_ssh_echo(sshd):
    res = _run(sshd.ssh_argv("node1", "echo", "hi"))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "hi\n"
    assert res.stderr == ""


def test_ssh_argv_quotes_remote_words(sshd):
    res = _run(sshd.ssh_argv("node2", "printf", "%s|", "a b", "$HOME", "it's"))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "a b|$HOME|it's|"


def test_remote_sees_ssh_connection(sshd):
    res = _run(sshd.ssh_argv("node1", "sh", "-c", 'echo "$SSH_CONNECTION"'))
    assert res.returncode == 0, res.stderr
    client_ip, _client_port, server_ip, server_port = res.stdout.split()
    assert (client_ip, server_ip, int(server_port)) == ("127.0.0.1", "127.0.0.1", sshd.port)


def test_remote_python_by_absolute_path(sshd):
    res = _run(sshd.ssh_argv("node3", sys.executable, "-c", "print(1)"))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "1\n"


def test_remote_exit_code_is_propagated(sshd):
    res = _run(sshd.ssh_argv("node1", "sh", "-c", "exit 7"))
    assert res.returncode == 7


def test_plain_ssh_uses_config_via_env(sshd):
    # sshd.env puts an `ssh` wrapper (ssh -F <config>) first on PATH
    res = _run(["ssh", "node2", "--", "echo", "wrapped"], env=sshd.env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "wrapped\n"


def test_dead_node_fails_fast_with_255(sshd):
    t0 = time.monotonic()
    res = _run(sshd.ssh_argv("deadnode", "true"), timeout=20)
    elapsed = time.monotonic() - t0
    assert res.returncode == 255
    assert f"ssh: connect to host 127.0.0.1 port {sshd.dead_port}: Connection refused" in res.stderr
    assert elapsed < 5, elapsed


def test_host_key_checking_is_on(sshd, tmp_path):
    config = sshd.config_path.read_text()
    assert "StrictHostKeyChecking yes" in config
    assert "StrictHostKeyChecking no" not in config
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    argv = sshd.ssh_argv("node1", "true")
    argv[1:1] = ["-o", f"UserKnownHostsFile={empty}"]  # -o beats the config file
    res = _run(argv)
    assert res.returncode == 255
    assert f"No ED25519 host key is known for [127.0.0.1]:{sshd.port}" in res.stderr
    assert "Host key verification failed." in res.stderr
    assert empty.read_text() == ""  # nothing was learned


def test_wrong_host_key_is_refused(sshd, tmp_path):
    other = tmp_path / "other_key"
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)])
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    argv = sshd.ssh_argv("node1", "true")
    argv[1:1] = ["-o", f"UserKnownHostsFile={wrong}"]
    res = _run(argv)
    assert res.returncode == 255
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in res.stderr


def test_pdsh_prefixes_lines(sshd, pdsh):
    res = _run([pdsh, "-R", "ssh", "-S", "-w", "node1,node2", "printf", "'a\\nb\\n'"],
               env=sshd.pdsh_env)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.splitlines()) == ["node1: a", "node1: b", "node2: a", "node2: b"]
    assert res.stderr == ""


def test_pdsh_with_full_env_no_R(sshd, pdsh):
    # PDSH_RCMD_TYPE=ssh replaces -R ssh; the PATH wrapper and PDSH_SSH_ARGS_APPEND both add -F
    res = _run([pdsh, "-S", "-w", "node1,node2", sys.executable, "-c", "'print(42)'"],
               env=sshd.env)
    assert res.returncode == 0, res.stderr
    assert sorted(res.stdout.splitlines()) == ["node1: 42", "node2: 42"]


def test_pdsh_S_returns_largest_remote_rc(sshd, pdsh):
    res = _run([pdsh, "-S", "-w", "node1,node2", "exit", "3"], env=sshd.env)
    assert res.returncode == 3
    assert "pdsh@" in res.stderr and "ssh exited with exit code 3" in res.stderr


def test_pdsh_S_dead_node(sshd, pdsh):
    t0 = time.monotonic()
    res = _run([pdsh, "-S", "-w", "node1,deadnode", "true"], env=sshd.env)
    assert time.monotonic() - t0 < 10
    assert res.returncode == 255
    assert (f"deadnode: ssh: connect to host 127.0.0.1 port {sshd.dead_port}: "
            "Connection refused") in res.stderr
    assert "deadnode: ssh exited with exit code 255" in res.stderr
    assert "node1:" not in res.stderr


def test_pdsh_without_S_dead_node_exits_zero(sshd, pdsh):
    # Surprise (pdsh 2.34, ssh module): without -S an unreachable node still gives exit 0;
    # only stderr tells. Use -S (or parse stderr) to notice unreachable nodes.
    res = _run([pdsh, "-w", "node1,deadnode", "true"], env=sshd.env)
    assert res.returncode == 0
    assert "deadnode: ssh exited with exit code 255" in res.stderr


def test_stop_cleans_up_everything():
    try:
        server = LocalSshd(hosts=("a1",)).start()
    except SshdUnavailable as exc:
        pytest.skip(f"no local sshd: {exc}")
    tmpdir, pid = server.tmpdir, server._proc.pid
    # a session still running when stop() is called
    busy = subprocess.Popen(server.ssh_argv("a1", "sleep", "60"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            session = _descendants(pid)  # per-connection sshd processes, shell, sleep
            if any(_comm(p) == "sleep" for p in session):
                break
            assert time.monotonic() < deadline, "remote sleep never started"
            time.sleep(0.05)
        server.stop()
        busy.wait(timeout=10)
    finally:
        if busy.poll() is None:
            busy.kill()
            busy.wait()
    assert not tmpdir.exists()
    assert not _alive(pid)
    assert _procs_mentioning(str(tmpdir)) == []
    assert [p for p in session if _alive(p)] == []
    server.stop()  # idempotent
