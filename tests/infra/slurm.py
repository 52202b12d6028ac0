"""A real, private SLURM cluster on this machine for tests (standard library only).

``LocalSlurm`` starts, in a fresh temp directory, its own ``munged`` (own key and socket), a
``slurmctld`` and one ``slurmd -N nodeK`` per emulated node (default ``node1``, ``node2``; all on
127.0.0.1, each on its own port), from a ``slurm.conf`` it writes itself::

    from infra.slurm import LocalSlurm, SlurmUnavailable, srun_job_script, wait_ready

    try:
        cluster = LocalSlurm().start()
    except SlurmUnavailable as exc:
        pytest.skip(str(exc))
    try:
        cluster.run(["sinfo"])                       # any client, with SLURM_CONF set
        job = cluster.sbatch(srun_job_script(ready))  # a real hung gloo job, 2 nodes x 2 ranks
        wait_ready(ready, 4, timeout=60)
        ...
    finally:
        cluster.stop()

Clients find the cluster through ``SLURM_CONF`` only: ``cluster.env`` is ``os.environ`` plus
``SLURM_CONF`` (and a marker variable), ``cluster.run(argv)`` runs a client with it. Jobs inherit
that environment (sbatch exports the submitter's environment by default).

Facts about slurm-wlm 22.05 on a single VM, which the code below relies on:

* the node names do not resolve: jobs must take MASTER_ADDR from ``scontrol show node``
  (``NodeAddr=127.0.0.1``) and set ``GLOO_SOCKET_IFNAME=lo``;
* ``srun`` into a job whose CPUs are all in use pends forever without ``--overlap``;
  ``srun`` without ``-N`` runs on one node only;
* ``squeue --json`` ignores ``-j`` and ``scontrol --json`` does not exist: parse ``scontrol -o``;
* ``munged`` runs as root without ``--force``; its socket directory must not be writable by
  others (we use 0755);
* cgroup plugins do not work in this VM: ``ProctrackType=proctrack/linuxproc``,
  ``TaskPlugin=task/none``; ``SlurmdParameters=config_overrides`` lets a node declare more CPUs
  than the machine has;
* stopping slurmd does not stop jobs: ``slurmstepd`` (one per job step and node) daemonizes,
  runs with an EMPTY environment and with its cwd in the slurmd log directory (our temp dir), so
  ``stop()`` cancels every job first and then kills whatever is left that belongs to this
  cluster (see ``_leftover_pids``).

Several instances may run at once (pytest-xdist): each has its own temp dir, ports, munge
socket and cluster name; ``stop()`` stops only its own daemons, by PID. Port choice and daemon
start are serialized between processes with a lock file, so two instances never race for ports.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from .procs import alive, ppid_map

__all__ = [
    "DEMO_JOB",
    "LocalSlurm",
    "SlurmError",
    "SlurmUnavailable",
    "free_port",
    "srun_job_script",
    "torchrun_job_script",
    "wait_ready",
]

ROOT = Path(__file__).resolve().parents[2]
DEMO_JOB = ROOT / "hangdbg" / "demo" / "job.py"

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "squeue", "sbatch", "scontrol", "srun", "scancel")
MARKER_VAR = "HANGDBG_LOCALSLURM"  # in env of daemons and jobs: identifies this cluster's processes
TERMINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
}
_PORT_LOCK = Path(tempfile.gettempdir()) / "hangdbg-localslurm-ports.lock"
_PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range (32768-60999): no client grabs them


class SlurmUnavailable(RuntimeError):
    """SLURM cannot run here (binaries missing, not root, a daemon dies at start...).

    ``str(exc)`` is the reason, for ``pytest.skip``.
    """


class SlurmError(RuntimeError):
    """The cluster runs but did not do what was asked (timeouts, sbatch failing, ...)."""


# --------------------------------------------------------------------------------- utilities
def free_port() -> int:
    """A TCP port that is free right now on 127.0.0.1 (for MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))  # slurmctld/slurmd bind INADDR_ANY
        except OSError:
            return False
    return True


def _free_port_block(n: int) -> int:
    """First port of ``n`` consecutive free ports in ``_PORT_RANGE``."""
    lo, hi = _PORT_RANGE
    for _ in range(500):
        base = random.randrange(lo, hi - n)
        if all(_port_is_free(p) for p in range(base, base + n)):
            return base
    raise SlurmUnavailable(f"no block of {n} free TCP ports in {lo}-{hi}")


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _parse_kv(text: str) -> dict[str, str]:
    """``scontrol -o show ...`` output (``Key=Value Key=Value ...``) as a dict.

    Values containing spaces are cut at the first space (good enough for the fields we read).
    """
    out: dict[str, str] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


# --------------------------------------------------------------------------------- cluster
class LocalSlurm:
    """A private SLURM cluster: munged + slurmctld + one slurmd per emulated node.

    Args:
        nodes: number of emulated nodes (``node1`` .. ``nodeN``), all on 127.0.0.1.
        cpus: CPUs declared per node (may exceed the machine's; several jobs share nodes).
        start_timeout: seconds ``start()`` waits for the nodes to be ``idle``.
        keep_dir: do not remove the temp dir in ``stop()`` (for debugging).

    Attributes (valid after ``start()``):
      ``tmpdir``        the temp directory holding everything (removed by ``stop()``)
      ``conf_path``     the slurm.conf (``SLURM_CONF``)
      ``munge_socket``  the private munged socket
      ``node_names``    ``["node1", "node2", ...]``
      ``ctld_port``     slurmctld's port; ``node_ports`` {node: slurmd port}
      ``cluster_name``  unique per instance
      ``env``           ``os.environ`` + ``SLURM_CONF`` + the marker variable, for every client
      ``start_seconds`` how long ``start()`` took
    """

    def __init__(self, nodes: int = 2, cpus: int = 8, start_timeout: float = 30.0,
                 keep_dir: bool = False) -> None:
        self.nodes = nodes
        self.cpus = cpus
        self.start_timeout = start_timeout
        self.keep_dir = keep_dir
        self.node_names = [f"node{i}" for i in range(1, nodes + 1)]
        self.tmpdir: Path | None = None
        self.conf_path: Path | None = None
        self.munge_socket: Path | None = None
        self.cluster_name = ""
        self.ctld_port: int | None = None
        self.node_ports: dict[str, int] = {}
        self.env: dict[str, str] = {}
        self.start_seconds: float | None = None
        self._procs: dict[str, subprocess.Popen] = {}  # name -> daemon (foreground child)
        self._out_files: list = []

    # ------------------------------------------------------------------- lifecycle
    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> LocalSlurm:
        t0 = time.monotonic()
        self._check_prerequisites()
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Cancel all jobs, stop the daemons (by PID), kill leftovers, remove the temp dir.

        Idempotent; never raises for cleanup problems.
        """
        atexit.unregister(self.stop)
        if self.tmpdir is None:
            return
        ctld = self._procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            try:
                self._cancel_all_jobs(timeout=15)
            except Exception:  # noqa: BLE001 - best effort, the kill below still happens
                pass
        # all slurmds first (at once), then slurmctld, munged last; by PID, never by name.
        groups = [[n for n in self._procs if n.startswith("slurmd-")], ["slurmctld"], ["munged"]]
        for group in groups:
            procs = [self._procs[n] for n in group if n in self._procs]
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self._procs.clear()
        self._kill_leftovers()
        for f in self._out_files:
            f.close()
        self._out_files.clear()
        if not self.keep_dir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        self.tmpdir = None

    # ------------------------------------------------------------------- clients
    def run(self, argv: list[str], *, check: bool = False, timeout: float = 60,
            **kw) -> subprocess.CompletedProcess:
        """Run a SLURM client (``sinfo``, ``squeue``, ``srun``...) against this cluster.

        Captures text output unless ``stdout``/``stderr``/``capture_output`` are given; ``env``
        defaults to ``self.env``. ``check=True`` raises ``SlurmError`` with stderr on failure.
        """
        assert self.conf_path is not None, "start() first"
        kw.setdefault("env", self.env)
        kw.setdefault("text", True)
        if "input" not in kw:
            kw.setdefault("stdin", subprocess.DEVNULL)
        if not any(k in kw for k in ("stdout", "stderr", "capture_output")):
            kw["capture_output"] = True
        res = subprocess.run([str(a) for a in argv], timeout=timeout, check=False, **kw)
        if check and res.returncode != 0:
            raise SlurmError(f"{shlex.join(map(str, argv))} failed (rc={res.returncode}): "
                             f"{(res.stderr or '').strip()}")
        return res

    def sbatch(self, script_text: str, *args: str) -> int:
        """Submit ``script_text`` (``sbatch --parsable *args``, script on stdin); the job id."""
        assert self.tmpdir is not None, "start() first"
        res = self.run(["sbatch", "--parsable", *args], input=script_text, check=True)
        try:
            return int(res.stdout.strip().split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch printed no job id: {res.stdout!r} {res.stderr!r}") from None

    def job_info(self, jobid: int) -> dict[str, str] | None:
        """``scontrol -o show job ID`` as a dict (None once slurmctld forgot the job)."""
        res = self.run(["scontrol", "-o", "show", "job", str(jobid)])
        if res.returncode != 0 or "JobId=" not in res.stdout:
            return None
        return _parse_kv(res.stdout)

    def job_state(self, jobid: int) -> str | None:
        """``PENDING``, ``RUNNING``, ``COMPLETED``, ``CANCELLED``... or None if unknown."""
        info = self.job_info(jobid)
        return info.get("JobState") if info else None

    def wait_state(self, jobid: int, state: str | Iterable[str], timeout: float = 30,
                   poll: float = 0.1) -> str:
        """Wait until job ``jobid`` is in ``state`` (or one of several); the state reached.

        Raises ``SlurmError`` on timeout or when the job ends in another terminal state.
        """
        wanted = {state} if isinstance(state, str) else set(state)
        deadline = time.monotonic() + timeout
        current = None
        while True:
            current = self.job_state(jobid)
            if current in wanted:
                return current
            if current in TERMINAL_STATES:
                raise SlurmError(f"job {jobid} ended {current}, wanted {sorted(wanted)}; "
                                 f"{self._job_output_tail(jobid)}")
            if time.monotonic() > deadline:
                raise SlurmError(f"job {jobid} is {current} after {timeout}s, wanted "
                                 f"{sorted(wanted)}; {self._job_output_tail(jobid)}")
            time.sleep(poll)

    def scancel(self, jobid: int, wait: float | None = 15) -> None:
        """Cancel a job; with ``wait``, also wait until slurmctld has it in a terminal state."""
        self.run(["scancel", str(jobid)], check=True)
        if wait:
            self.wait_state(jobid, TERMINAL_STATES, timeout=wait)

    def job_ids(self) -> list[int]:
        """Jobs slurmctld still has in the queue (any state but long-finished)."""
        res = self.run(["squeue", "-h", "-o", "%i"], check=True)
        return [int(x) for x in res.stdout.split() if x.isdigit()]

    def node_states(self) -> dict[str, str]:
        """{node: state} from ``sinfo -N`` (``idle``, ``mixed``, ``alloc``, ``down*``...)."""
        res = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=True)
        return dict(line.split(None, 1) for line in res.stdout.splitlines() if line.strip())

    def node_addr(self, node: str) -> str:
        """The ``NodeAddr`` of a node (what jobs must use instead of its name)."""
        res = self.run(["scontrol", "-o", "show", "node", node], check=True)
        return _parse_kv(res.stdout)["NodeAddr"]

    def reset(self, timeout: float = 60) -> None:
        """Cancel every job and wait until every node is ``idle`` again: the state a fresh cluster
        starts in, for the next user of a cluster that stays up (one per pytest worker, shared by
        the test modules). Raises ``SlurmError`` when the nodes are not idle within ``timeout``."""
        deadline = time.monotonic() + timeout
        self._cancel_all_jobs(timeout=timeout)
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = self.node_states()
            if set(states.values()) == {"idle"}:
                return
            time.sleep(0.1)
        raise SlurmError(f"nodes not idle {timeout}s after cancelling every job: {states}; "
                         f"{self.log_tails()}")

    def daemon_pids(self) -> dict[str, int]:
        """{"munged": pid, "slurmctld": pid, "slurmd-node1": pid, ...} of the running daemons."""
        return {name: proc.pid for name, proc in self._procs.items() if proc.poll() is None}

    # ------------------------------------------------------------------- diagnostics
    def log_paths(self) -> list[Path]:
        if self.tmpdir is None:
            return []
        log = self.tmpdir / "log"
        return sorted(log.glob("*.log")) + sorted(log.glob("*.out"))

    def log_tails(self, lines: int = 20) -> str:
        """The last lines of every daemon log (for error messages)."""
        parts = []
        for path in self.log_paths():
            text = _tail(path, lines)
            if text.strip():
                parts.append(f"--- {path.name}\n{text}")
        return "\n".join(parts) or "(no daemon output)"

    # ------------------------------------------------------------------- internals
    def _check_prerequisites(self) -> None:
        if not sys.platform.startswith("linux"):
            raise SlurmUnavailable("LocalSlurm needs Linux")
        if os.geteuid() != 0:
            raise SlurmUnavailable("LocalSlurm needs root (slurmd runs jobs as their user)")
        missing = [t for t in (*DAEMONS, *CLIENTS) if shutil.which(t, path=self._path()) is None]
        if missing:
            raise SlurmUnavailable(f"SLURM/munge binaries not found: {', '.join(missing)}")

    @staticmethod
    def _path() -> str:
        return os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        out = open(self.tmpdir / "log" / f"{name}.out", "ab")
        self._out_files.append(out)
        exe = shutil.which(argv[0], path=self._path())
        proc = subprocess.Popen(
            [exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=self.env, cwd=self.tmpdir, start_new_session=True,  # no terminal signals
        )
        self._procs[name] = proc
        return proc

    def _start(self) -> None:
        self.tmpdir = tmp = Path(tempfile.mkdtemp(prefix="hangdbg-slurm-"))
        tmp.chmod(0o755)
        for sub in ("munge", "state", "log", "run", *(f"spool/{n}" for n in self.node_names)):
            (tmp / sub).mkdir(parents=True, mode=0o755, exist_ok=True)
        self.cluster_name = f"t{os.getpid()}x{random.randrange(16**6):06x}"
        self.conf_path = tmp / "slurm.conf"
        self.munge_socket = tmp / "munge" / "munge.sock"
        self.env = {
            **os.environ,
            "SLURM_CONF": str(self.conf_path),
            MARKER_VAR: str(tmp),
        }
        for var in [v for v in self.env if v.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))]:
            if var != "SLURM_CONF":  # e.g. when the tests themselves run inside a SLURM job
                del self.env[var]

        self._start_munged()
        lock = open(_PORT_LOCK, "a")  # serializes port choice + bind between parallel instances
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            last = ""
            for _attempt in range(3):
                base = _free_port_block(1 + self.nodes)
                self.ctld_port = base
                self.node_ports = {n: base + 1 + i for i, n in enumerate(self.node_names)}
                self.conf_path.write_text(self._slurm_conf())
                self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-f", str(self.conf_path)])
                for node in self.node_names:
                    self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f",
                                                   str(self.conf_path)])
                problem = self._wait_nodes_idle()
                if problem is None:
                    return
                last = f"{problem}\n{self.log_tails()}"
                dead = [n for n, p in self._procs.items() if n != "munged" and p.poll() is not None]
                self._stop_slurm_daemons()
                if not dead:
                    raise SlurmError(f"SLURM nodes not idle within {self.start_timeout}s: {last}")
                if "Address already in use" not in last:
                    raise SlurmUnavailable(f"SLURM daemon(s) {', '.join(dead)} exited at start: "
                                           f"{last}")
            raise SlurmUnavailable(f"SLURM daemons could not bind their ports: {last}")
        finally:
            lock.close()

    def _stop_slurm_daemons(self) -> None:
        for name in [n for n in self._procs if n != "munged"]:
            proc = self._procs.pop(name)
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)

    def _start_munged(self) -> None:
        key = self.tmpdir / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))  # == dd if=/dev/urandom bs=1 count=1024
        key.chmod(0o600)
        mdir = self.tmpdir / "munge"
        proc = self._spawn("munged", [
            "munged", "--foreground",
            f"--key-file={key}", f"--socket={self.munge_socket}",
            f"--pid-file={mdir / 'munged.pid'}", f"--log-file={self.tmpdir / 'log' / 'munged.log'}",
            f"--seed-file={mdir / 'munged.seed'}", "--num-threads=2",
        ])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SlurmUnavailable(f"munged exited with {proc.returncode}: {self.log_tails()}")
            if self.munge_socket.exists():
                return
            time.sleep(0.01)
        raise SlurmUnavailable(f"munged did not create its socket in 10s: {self.log_tails()}")

    def _wait_nodes_idle(self) -> str | None:
        """None once every node is idle, else what went wrong."""
        deadline = time.monotonic() + self.start_timeout
        states: dict[str, str] | str = {}
        while time.monotonic() < deadline:
            dead = [n for n, p in self._procs.items() if p.poll() is not None]
            if dead:
                return "daemon(s) exited: " + ", ".join(
                    f"{n} (rc={self._procs[n].returncode})" for n in dead)
            res = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=15)
            if res.returncode == 0:
                states = dict(l.split(None, 1) for l in res.stdout.splitlines() if l.strip())
                if sorted(states) == self.node_names and set(states.values()) == {"idle"}:
                    return None
            else:
                states = res.stderr.strip()
            time.sleep(0.05)
        return f"timeout after {self.start_timeout}s; last sinfo: {states}"

    def _slurm_conf(self) -> str:
        tmp = self.tmpdir
        first, last = self.node_ports[self.node_names[0]], self.node_ports[self.node_names[-1]]
        ports = str(first) if self.nodes == 1 else f"{first}-{last}"
        nodes = "node1" if self.nodes == 1 else f"node[1-{self.nodes}]"
        return "\n".join([
            f"ClusterName={self.cluster_name}",
            # distinct job ids per instance: two clusters on one machine must not share ids
            f"FirstJobId={random.randrange(1000, 60000) * 100}",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={first}",  # the per-node Port= below wins; this is just the default
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "MailProg=/bin/true",
            "MpiDefault=none",  # (slurmd still logs that it cannot load mpi/pmix: harmless)
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "KillWait=5",          # SIGTERM -> SIGKILL delay on scancel (default 30 s)
            "MinJobAge=600",       # keep finished jobs visible to scontrol for a while
            "InactiveLimit=0",
            "SchedulerParameters=batch_sched_delay=0",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "MessageTimeout=10",
            f"StateSaveLocation={tmp / 'state'}",
            f"SlurmdSpoolDir={tmp / 'spool'}/%n",
            f"SlurmctldPidFile={tmp / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={tmp / 'run'}/slurmd-%n.pid",
            f"SlurmctldLogFile={tmp / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={tmp / 'log'}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            (f"NodeName={nodes} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports} "
             f"CPUs={self.cpus} State=UNKNOWN"),
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
            "",
        ])

    def _cancel_all_jobs(self, timeout: float) -> None:
        ids = self.job_ids()
        if not ids:
            return
        self.run(["scancel", *map(str, ids)], timeout=30)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = {self.job_state(j) for j in ids}
            if states <= TERMINAL_STATES | {None}:
                return
            time.sleep(0.1)

    def _leftover_pids(self) -> list[int]:
        """Processes of this cluster still alive: anything that has our temp dir as cwd
        (slurmstepd: its environment is empty, its cwd is slurmd's log dir) or our marker in its
        environment (job processes, daemons), plus all their descendants."""
        assert self.tmpdir is not None
        root = str(self.tmpdir)
        marker = f"{MARKER_VAR}={root}".encode()
        me = os.getpid()
        seeds: set[int] = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
                if cwd == root or cwd.startswith(root + "/"):
                    seeds.add(int(entry))
                    continue
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        seeds.add(int(entry))
            except OSError:
                continue
        ppids = ppid_map()
        children: dict[int, list[int]] = {}
        for pid, ppid in ppids.items():
            children.setdefault(ppid, []).append(pid)
        out, todo = set(), list(seeds)
        while todo:
            pid = todo.pop()
            if pid in out or pid == me:
                continue
            out.add(pid)
            todo.extend(children.get(pid, []))
        return sorted(p for p in out if alive(p))

    def _kill_leftovers(self) -> None:
        for _round in range(3):
            pids = self._leftover_pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and any(alive(p) for p in pids):
                time.sleep(0.02)

    def _job_output_tail(self, jobid: int) -> str:
        info = self.job_info(jobid) or {}
        out = info.get("StdOut")
        text = _tail(Path(out), 15) if out else ""
        return f"job output ({out}):\n{text}" if text else f"job info: {info}"


# --------------------------------------------------------------------------------- demo jobs
_MASTER_ADDR_SH = """\
# Node names do not resolve here: take the first node's NodeAddr (127.0.0.1) from slurmctld.
first_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
addr=$(scontrol -o show node "$first_node" | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')
export MASTER_ADDR="${addr:-127.0.0.1}"
"""


def _header(ready_dir: Path, job_name: str, nodes: int, ntasks_per_node: int,
            cpus_per_task: int = 1) -> str:
    if any(c.isspace() for c in str(ready_dir)):
        raise ValueError(f"ready_dir must not contain whitespace: {str(ready_dir)!r}")
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={ntasks_per_node}",
        f"#SBATCH --cpus-per-task={cpus_per_task}",
        f"#SBATCH --output={ready_dir}/slurm-%j.out",
        f"#SBATCH --chdir={ready_dir}",
        "set -eu",
        "",
        _MASTER_ADDR_SH,
    ])


def srun_job_script(ready_dir: str | os.PathLike, scenario: str = "mismatch", nodes: int = 2,
                    ntasks_per_node: int = 2, *, master_port: int | None = None,
                    python: str | None = None, job_script: str | os.PathLike = DEMO_JOB,
                    job_args: Iterable[str] = ()) -> str:
    """An sbatch script: ``srun`` starts ``nodes * ntasks_per_node`` ranks of the demo job.

    Every rank is ``bash -c 'export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS
    LOCAL_RANK=$SLURM_LOCALID ...; exec python job.py ...'``: the torch variables are in the
    rank's own /proc/PID/environ. MASTER_PORT is chosen now (a free port); stdout/stderr go to
    ``ready_dir/slurm-<jobid>.out``.
    """
    ready_dir = Path(ready_dir).resolve()
    ready_dir.mkdir(parents=True, exist_ok=True)
    port = master_port or free_port()
    py = python or sys.executable
    cmd = shlex.join([py, str(job_script), "--scenario", scenario, "--ready", str(ready_dir),
                      *job_args])
    wrapper = ("export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
               "LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE "
               f"MASTER_ADDR=$MASTER_ADDR MASTER_PORT={port} GLOO_SOCKET_IFNAME=lo "
               f"OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1; exec {cmd}")
    return _header(ready_dir, f"hangdbg-srun-{scenario}", nodes, ntasks_per_node) + "\n".join([
        f"export MASTER_PORT={port} GLOO_SOCKET_IFNAME=lo",
        f"srun --kill-on-bad-exit=1 bash -c {shlex.quote(wrapper)}",
        "",
    ])


def torchrun_job_script(ready_dir: str | os.PathLike, scenario: str = "mismatch", nodes: int = 2,
                        nproc_per_node: int = 2, *, master_port: int | None = None,
                        python: str | None = None, job_script: str | os.PathLike = DEMO_JOB,
                        job_args: Iterable[str] = ()) -> str:
    """An sbatch script: one ``torchrun`` agent per node (``srun --ntasks-per-node=1``), each
    starting ``nproc_per_node`` ranks; static rendezvous on ``MASTER_ADDR:master_port`` with
    ``--node_rank $SLURM_NODEID`` (both agents really run on this machine)."""
    ready_dir = Path(ready_dir).resolve()
    ready_dir.mkdir(parents=True, exist_ok=True)
    port = master_port or free_port()
    py = python or sys.executable
    torchrun = shlex.join([py, "-m", "torch.distributed.run", "--nnodes", str(nodes),
                           "--nproc_per_node", str(nproc_per_node), "--rdzv_backend", "static",
                           "--monitor_interval", "1"])
    job = shlex.join([str(job_script), "--scenario", scenario, "--ready", str(ready_dir),
                      *job_args])
    wrapper = (f"export GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1; exec {torchrun} "
               f"--node_rank $SLURM_NODEID --master_addr $MASTER_ADDR --master_port {port} {job}")
    return _header(ready_dir, f"hangdbg-torchrun-{scenario}", nodes, 1,
                   cpus_per_task=nproc_per_node) + "\n".join([
        f"export MASTER_PORT={port} GLOO_SOCKET_IFNAME=lo",
        f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(wrapper)}",
        "",
    ])


def wait_ready(ready_dir: str | os.PathLike, n: int, timeout: float = 60.0, *,
               cluster: LocalSlurm | None = None, jobid: int | None = None,
               poll: float = 0.1) -> None:
    """Wait until ``ready_dir/rank-0`` .. ``rank-{n-1}`` exist (every rank reached its hang).

    With ``cluster`` and ``jobid``, fail fast if the job ends. Raises ``TimeoutError`` with
    what is there and the tail of the job's output.
    """
    ready_dir = Path(ready_dir)
    want = [ready_dir / f"rank-{r}" for r in range(n)]
    deadline = time.monotonic() + timeout
    ended = None
    while True:
        if all(p.exists() for p in want):
            return
        if cluster is not None and jobid is not None:
            state = cluster.job_state(jobid)
            if state in TERMINAL_STATES:
                ended = state
        if ended or time.monotonic() > deadline:
            have = sorted(p.name for p in ready_dir.glob("rank-*"))
            outs = "\n".join(f"--- {p.name}\n{_tail(p, 20)}" for p in sorted(ready_dir.glob("slurm-*.out")))
            why = f"job {jobid} ended {ended}" if ended else f"timeout after {timeout}s"
            raise TimeoutError(f"{why}: {len(have)}/{n} ready markers in {ready_dir} ({have})\n{outs}")
        time.sleep(poll)
