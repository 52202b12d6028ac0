"""A real OpenSSH server on 127.0.0.1 for tests (standard library only).

``LocalSshd`` starts ``/usr/sbin/sshd`` as a child process on a free port, with its own host key,
its own ``authorized_keys`` and a client ``ssh_config`` in which a few host aliases (``node1``,
``node2``, ``node3`` by default) all point at that one sshd, plus ``deadnode``, which points at a
port nobody listens on (for "node unreachable" tests)::

    from infra.sshd import LocalSshd, SshdUnavailable

    try:
        sshd = LocalSshd().start()
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    try:
        subprocess.run(sshd.ssh_argv("node1", sys.executable, "-c", "print(1)"), ...)
        subprocess.run(["pdsh", "-S", "-w", "node1,node2", "hostname"], env=sshd.env, ...)
        subprocess.run(["ssh", "node1", "--", "hostname"], env=sshd.env, ...)
    finally:
        sshd.stop()

Host key checking stays ON: ``StrictHostKeyChecking yes`` with a private ``known_hosts`` that is
pre-filled with the server's key for ``[127.0.0.1]:<port>`` (every alias resolves to that
HostName/Port, so that is the name ssh looks up; ``CheckHostIP no`` and no global known_hosts).
``BatchMode yes``: nothing ever prompts; a missing/wrong host key fails with exit 255.

How other programs use this config (ssh has no environment variable for ``-F``):

* ``env`` = ``os.environ`` plus

  - ``PATH`` prefixed with ``bin_dir``, which holds an ``ssh`` wrapper script
    (``exec /usr/bin/ssh -F <config> "$@"``), so a plain ``ssh node1 ...`` run by any program
    started with this env goes through this sshd;
  - ``PDSH_RCMD_TYPE=ssh`` (same as ``pdsh -R ssh``; pdsh's compiled-in default is rsh);
  - ``PDSH_SSH_ARGS_APPEND=-F <config>``: pdsh's ssh module runs ``ssh`` from PATH as
    ``ssh <PDSH_SSH_ARGS_APPEND> -2 -a -x -l<user> <host> <cmd>`` (the "append" args are really
    put first). This variable alone is enough for pdsh (no wrapper needed); pdsh splits it on
    whitespace, so the config path must not contain spaces (the temp dir never does).

* ``pdsh_env`` = ``os.environ`` plus only the two ``PDSH_*`` variables (no PATH wrapper).

Remote environment: sshd runs the command as ``$SHELL -c '<cmd>'`` for the login user in a fresh
environment (PATH is sshd's compiled-in default, not the test's venv/pyenv; nothing is forwarded:
the sshd accepts no ``AcceptEnv`` variables; it sets only ``PYTHONPATH`` to this checkout, so that
a remote hangdbg is the one under test). Callers must therefore use ABSOLUTE paths for remote
programs, e.g. ``sys.executable``. (On Debian, bash additionally sources ``~/.bashrc`` for commands
run by sshd, so the remote PATH depends on the login user's ``.bashrc``: do not rely on it.)

Several instances may run at once (pytest-xdist): each has its own temp dir and port, and
``stop()`` kills only its own sshd (by PID) and that sshd's per-connection children.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .procs import alive, descendants

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"


class SshdUnavailable(RuntimeError):
    """sshd (or ssh/ssh-keygen) cannot be started/used here; ``str(exc)`` is the reason."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _terminate(pids: list[int], grace: float = 3) -> None:
    """SIGTERM each of ``pids``, then SIGKILL what is still alive after ``grace`` seconds."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    for pid in pids:
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.02)
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class LocalSshd:
    """A private sshd on 127.0.0.1:<free port> plus a matching client ssh_config.

    Attributes (valid after ``start()``):
      ``port``        the sshd's TCP port on 127.0.0.1
      ``dead_port``   a port on 127.0.0.1 that refuses connections (used by ``deadnode``)
      ``config_path`` the client ssh_config (``ssh -F config_path node1``)
      ``known_hosts`` the client known_hosts file (pre-filled with the host key)
      ``bin_dir``     holds the ``ssh`` wrapper that applies ``-F config_path``
      ``env`` / ``pdsh_env``  environments for subprocesses (see module docstring)
      ``tmpdir``      the temp directory holding everything (removed by ``stop()``)
      ``hosts``       the host aliases; ``user`` the remote login user
    """

    def __init__(self, hosts: tuple[str, ...] | list[str] = ("node1", "node2", "node3"),
                 dead_host: str = "deadnode", user: str | None = None,
                 connect_timeout: int = 3, start_timeout: float = 15.0) -> None:
        self.hosts = tuple(hosts)
        self.dead_host = dead_host
        self.user = user or pwd.getpwuid(os.getuid()).pw_name
        self.connect_timeout = connect_timeout
        self.start_timeout = start_timeout
        self.port: int | None = None
        self.dead_port: int | None = None
        self.tmpdir: Path | None = None
        self.config_path: Path | None = None
        self.known_hosts: Path | None = None
        self.bin_dir: Path | None = None
        self.log_path: Path | None = None
        self.env: dict[str, str] = {}
        self.pdsh_env: dict[str, str] = {}
        self._proc: subprocess.Popen | None = None
        self._dead_sock: socket.socket | None = None
        self._log_file = None
        self._ssh = "ssh"

    # ----------------------------------------------------------------- public API
    def ssh_argv(self, host: str, *remote_argv: str) -> list[str]:
        """``[ssh, -F, config, host, --, *quoted remote_argv]``.

        ssh joins the remote words with spaces and the remote shell re-parses them, so every
        element is ``shlex.quote``-d: the remote program sees exactly ``remote_argv``. For a shell
        command line pass ``"sh", "-c", "cmd1 && cmd2"``. Use absolute program paths (the remote
        PATH is not the test's PATH).
        """
        assert self.config_path is not None, "start() first"
        return [self._ssh, "-F", str(self.config_path), host, "--",
                *(shlex.quote(str(a)) for a in remote_argv)]

    def log_text(self) -> str:
        """What sshd has logged so far (``-e``: to stderr, redirected to a file)."""
        try:
            return self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def start(self) -> "LocalSshd":
        for tool in ("ssh", "ssh-keygen"):
            if shutil.which(tool) is None:
                raise SshdUnavailable(f"{tool} not found on PATH")
        if not os.access(SSHD, os.X_OK):
            raise SshdUnavailable(f"{SSHD} not installed")
        self._ssh = shutil.which("ssh")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def session_pids(self) -> list[int]:
        """PIDs of what this sshd's sessions run, or ran and left behind: the per-connection sshd
        children, and every process whose environment says it came in through this server's port
        (``SSH_CONNECTION=... 127.0.0.1 <port>``; a remote command outlives its session when the
        client is killed, as a node timeout does), with their descendants."""
        if self._proc is None or self.port is None:
            return []
        pids = set(descendants(self._proc.pid))  # per-connection sshd children (they setsid())
        tail = f" 127.0.0.1 {self.port}".encode()
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if any(v.startswith(b"SSH_CONNECTION=") and v.endswith(tail) for v in env):
                pids.add(int(entry))
                pids.update(descendants(int(entry)))
        return sorted(pid for pid in pids if alive(pid))

    def end_sessions(self) -> list[int]:
        """End what this sshd's sessions run (:meth:`session_pids`: SIGTERM, then SIGKILL after
        3 s); the sshd itself keeps listening. For the next user of a server that stays up (one
        per pytest worker, shared by the test modules). Returns the PIDs that were signalled."""
        victims = self.session_pids()
        _terminate(victims)
        return victims

    def stop(self) -> None:
        """Stop the sshd and what its sessions run (:meth:`session_pids`), remove the temp dir."""
        victims = self.session_pids()
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            _terminate(victims)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._dead_sock is not None:
            self._dead_sock.close()
            self._dead_sock = None
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def __enter__(self) -> "LocalSshd":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ----------------------------------------------------------------- internals
    def _run(self, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def _start(self) -> None:
        self.tmpdir = tmp = Path(tempfile.mkdtemp(prefix="hangdbg-sshd-"))
        host_key, client_key = tmp / "ssh_host_ed25519_key", tmp / "id_ed25519"
        for key, comment in ((host_key, "hangdbg-test-host"), (client_key, "hangdbg-test-client")):
            res = self._run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                             "-f", str(key)])
            if res.returncode != 0:
                raise SshdUnavailable(f"ssh-keygen failed: {res.stderr.strip()}")
        authorized = tmp / "authorized_keys"
        authorized.write_text((tmp / "id_ed25519.pub").read_text())
        authorized.chmod(0o600)

        if not os.path.isdir(PRIVSEP_DIR):
            try:
                os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
            except OSError as exc:
                raise SshdUnavailable(f"cannot create {PRIVSEP_DIR}: {exc}") from exc

        # A bound but never listen()ing socket: connecting to it is refused at once, and nobody
        # else can take the port while we hold it (unlike a merely "free" port).
        self._dead_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._dead_sock.bind(("127.0.0.1", 0))
        self.dead_port = self._dead_sock.getsockname()[1]

        self.log_path = tmp / "sshd.log"
        self._log_file = open(self.log_path, "ab")
        last_error = ""
        for _attempt in range(5):  # the free port may be taken between probe and bind: retry
            self.port = _free_port()
            sshd_config = tmp / "sshd_config"
            sshd_config.write_text(self._sshd_config(host_key, authorized))
            self._proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(sshd_config)],
                stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=self._log_file,
            )
            state = self._wait_listening()
            if state == "up":
                break
            last_error = self.log_text().strip()[-2000:]
            self._proc.kill() if self._proc.poll() is None else None
            self._proc.wait()
            self._proc = None
            if "Address already in use" not in last_error:
                raise SshdUnavailable(f"sshd did not start ({state}): {last_error}")
        else:
            raise SshdUnavailable(f"sshd did not start: {last_error}")

        host_pub = (tmp / "ssh_host_ed25519_key.pub").read_text().split()
        self.known_hosts = tmp / "known_hosts"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.config_path = tmp / "ssh_config"
        self.config_path.write_text(self._ssh_config(client_key))

        self.bin_dir = tmp / "bin"
        self.bin_dir.mkdir()
        wrapper = self.bin_dir / "ssh"
        wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(self._ssh)} -F "
                           f"{shlex.quote(str(self.config_path))} \"$@\"\n")
        wrapper.chmod(0o755)
        pdsh_vars = {"PDSH_RCMD_TYPE": "ssh", "PDSH_SSH_ARGS_APPEND": f"-F {self.config_path}"}
        self.pdsh_env = {**os.environ, **pdsh_vars}
        self.env = {**os.environ, **pdsh_vars,
                    "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}

        # A real login, end to end (host key check, pubkey auth, remote shell).
        try:
            res = self._run(self.ssh_argv(self.hosts[0], "echo", "sshd-ok"), timeout=15)
        except subprocess.TimeoutExpired:
            raise SshdUnavailable(f"ssh login timed out; sshd log: {self.log_text()[-2000:]}")
        if res.returncode != 0 or "sshd-ok" not in res.stdout:
            raise SshdUnavailable(
                f"ssh login to the test sshd failed (rc={res.returncode}): {res.stderr.strip()}; "
                f"sshd log: {self.log_text()[-2000:]}")

    def _wait_listening(self) -> str:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return f"exited with {self._proc.returncode}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return "up"
            except OSError:
                time.sleep(0.05)
        return "timeout"

    def _sshd_config(self, host_key: Path, authorized: Path) -> str:
        return "\n".join([
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {host_key}",
            f"PidFile {self.tmpdir / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "HostbasedAuthentication no",
            "GSSAPIAuthentication no",
            "KerberosAuthentication no",
            "PermitRootLogin prohibit-password",
            f"AllowUsers {self.user}",
            "UsePAM no",
            "StrictModes no",  # the temp dir / keys are not in a root-owned ~/.ssh
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AllowAgentForwarding no",
            "PermitUserEnvironment no",
            "MaxStartups 100",  # pdsh fans out up to 32 connections at once
            "LoginGraceTime 30",
            "LogLevel INFO",
            # the remote `python -m hangdbg agent` imports the checkout under test (a git
            # worktree's), not whatever hangdbg the venv has installed: the agent and the
            # coordinator are the same version, as on a real cluster with a shared venv
            f"SetEnv PYTHONPATH={Path(__file__).resolve().parents[2]}",
            # No AcceptEnv (nothing is forwarded) and no Subsystem (no sftp).
            "",
        ])

    def _ssh_config(self, client_key: Path) -> str:
        common = [
            f"    User {self.user}",
            f"    IdentityFile {client_key}",
            "    IdentitiesOnly yes",
            f"    UserKnownHostsFile {self.known_hosts}",
            "    GlobalKnownHostsFile /dev/null",
            "    StrictHostKeyChecking yes",
            "    CheckHostIP no",
            "    UpdateHostKeys no",
            "    HashKnownHosts no",
            "    BatchMode yes",
            f"    ConnectTimeout {self.connect_timeout}",
            "    PasswordAuthentication no",
            "    KbdInteractiveAuthentication no",
            "    GSSAPIAuthentication no",
            "    ControlMaster no",
            "    ControlPath none",
            "    ForwardAgent no",
            "    ForwardX11 no",
            "    LogLevel ERROR",
        ]
        return "\n".join([
            f"Host {' '.join(self.hosts)}",
            "    HostName 127.0.0.1",
            f"    Port {self.port}",
            *common,
            "",
            f"Host {self.dead_host}",
            "    HostName 127.0.0.1",
            f"    Port {self.dead_port}",
            *common,
            "",
        ])
