"""A private one-node Ray cluster for the ``--ray`` tests: ``ray start --head`` on 127.0.0.1 with
free ports, 4 CPUs, an 80 MB object store and a temp dir of its own; stopped by killing exactly the
processes whose command line names that temp dir (and their descendants), never by name
(``ray stop`` would end every Ray process of the user).

Ray binds some of its gRPC servers on every interface whatever ``--node-ip-address`` says, and a
driver's ``ray.init`` resolves ``127.0.0.1`` to the node's own IP (``resolve_ip_for_localhost``):
nothing leaves the host, but Ray's own listeners are its choice, not the test's.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from .procs import alive

__all__ = ["LocalRay", "RayUnavailable", "free_port"]


class RayUnavailable(Exception):
    """Ray is not installed or its head did not start."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_program() -> str | None:
    path = Path(sys.executable).with_name("ray")
    return str(path) if path.exists() else shutil.which("ray")


class LocalRay:
    """``start()`` a head node, ``address`` (``127.0.0.1:PORT``), ``driver(...)`` a job, ``stop()``."""

    def __init__(self) -> None:
        self.tmpdir: str | None = None
        self.port = 0
        self.drivers: list[subprocess.Popen] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> "LocalRay":
        ray = _ray_program()
        if ray is None:
            raise RayUnavailable("the ray program is not installed (pip install 'ray[default]')")
        self.tmpdir = tempfile.mkdtemp(prefix="hdray")  # short: Ray's unix socket paths are long
        self.port = free_port()
        ports = {f"--{n}": str(free_port()) for n in (
            "dashboard-port", "ray-client-server-port", "node-manager-port", "object-manager-port",
            "metrics-export-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
            "runtime-env-agent-port")}
        argv = [ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(self.port),
                "--num-cpus", "4", "--object-store-memory", str(80 << 20), "--include-dashboard", "true",
                "--dashboard-host", "127.0.0.1", "--temp-dir", self.tmpdir, "--disable-usage-stats",
                *[x for kv in ports.items() for x in kv]]
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_TMPDIR=self.tmpdir)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RayUnavailable("ray start --head took too long") from None
        if res.returncode != 0:
            self.stop()
            raise RayUnavailable(f"ray start --head failed: {(res.stderr or res.stdout)[-2000:]}")
        return self

    def driver(self, script: str, *args: str, log: Path) -> subprocess.Popen:
        """Start ``python script --address ADDRESS ARGS`` in a session of its own (killed by :meth:`stop`)."""
        env = dict(os.environ, RAY_TMPDIR=self.tmpdir or "", RAY_USAGE_STATS_ENABLED="0")
        with open(log, "wb") as out:
            p = subprocess.Popen([sys.executable, script, "--address", self.address, *args], stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.drivers.append(p)
        return p

    def _own_pids(self) -> list[int]:
        """The processes of this cluster: those whose command line names its temp dir, their
        descendants, and the drivers with theirs."""
        roots = [p.pid for p in self.drivers]
        if self.tmpdir:
            for proc in psutil.process_iter(["cmdline"]):
                if any(self.tmpdir in a for a in proc.info["cmdline"] or ()):
                    roots.append(proc.pid)
        pids: list[int] = []
        for pid in roots:
            pids.append(pid)
            try:
                pids.extend(c.pid for c in psutil.Process(pid).children(recursive=True))
            except psutil.Error:
                pass
        return list(dict.fromkeys(pids))

    def stop(self) -> None:
        """Kill the drivers and every process of this cluster (TERM, then KILL after 5 s), remove the temp dir."""
        victims = self._own_pids()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in victims:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(alive(p) for p in victims):
                time.sleep(0.1)
        for p in self.drivers:
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        self.drivers = []
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
