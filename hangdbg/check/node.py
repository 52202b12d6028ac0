"""``hangdbg check``'s launcher on one node: start its ranks, relay their results, end in time.

The coordinator runs ``hangdbg check-node`` on every node of a trial (srun, ssh, pdsh, or a local
process) with the same ``--layout HOST=SLOTS`` list everywhere: the node finds its own entry by
name, so its global ranks are the slots of the nodes before it plus its local rank (the torchrun
numbering: node by node, then local rank). Each rank runs :mod:`hangdbg.check.rank` as a script with the
torchrun environment, ``HANGDBG_CHECK_SLOT`` and ``HANGDBG_CHECK_NODE``. The node resolves the
backend once for all its ranks (:func:`~hangdbg.check.gpus.resolve_backend`) and keeps its own
``CUDA_VISIBLE_DEVICES``: with nccl, a rank uses the GPU of its slot among the visible GPUs (in
the run of every GPU, slot = ``LOCAL_RANK``: torchrun's convention). When the ranks do not fit
the visible GPUs (:func:`~hangdbg.check.gpus.gpu_fit`) no rank starts: the node's facts say why
(``setup_error``) and it ends with status ``setup``.

Messages sent (one ``send(dict)`` each, framed by the caller):

* ``node``: the node's facts (host name, GPUs from ``nvidia-smi -L`` and those visible to CUDA,
  the backend, network interfaces, the interface that routes to the rendezvous address, a
  ``setup_error``) before any rank starts;
* ``step``: a rank's step result as :mod:`hangdbg.check.rank` printed it, plus ``host``, ``slot``;
* ``rank-end``: how a rank ended: ``exited`` (with its exit status), ``stopped`` (state T: it
  got SIGSTOP and will never answer), or ``silent`` (alive but sent nothing within its step's
  hard limit: wedged); with the last lines of its stderr;
* ``done``: when every rank has ended.

The node never outlives its budget: a rank silent for longer than any step may take (its own
watchdog ends it otherwise) is killed, a stopped rank is killed once the others have ended.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import psutil

from ..enums import NodeStatus
from ..tools.children import pdeathsig_preexec
from ..tools.subproc import LOG
from .gpus import node_gpus
from .nvml import read_gpus

__all__ = ["BACKENDS", "CheckJob", "NodeCheckOptions", "gpu_list", "parse_layout", "route_interface", "run_node", "RANK_SCRIPT", "PREFIX"]

RANK_SCRIPT = Path(__file__).with_name("rank.py")
PREFIX = "HANGDBG-CHECK "
Send = Callable[[dict], None]


BACKENDS = ("auto", "gloo", "nccl")
"""The backends of the diagnostics job (``auto``: nccl on nodes with GPUs, else gloo)."""


@dataclass(frozen=True)
class CheckJob:
    """The diagnostics job's parameters, the same for every rank of every trial.

    Attributes:
        backend: ``gloo``, ``nccl`` or ``auto`` (nccl when the node has GPUs; then each rank
            uses the GPU of its slot among the visible ones).
        init_timeout: seconds for the rendezvous and ``init_process_group`` (each).
        timeout: seconds for every later step.
        size: bytes of the bandwidth all_reduce.
        iters: timed iterations of the bandwidth test.
        alloc_bytes: bytes each rank allocates on CPU.
        health: run the steps of each device alone (matmul, memory copy, host copy).
    """

    backend: str = "auto"
    init_timeout: float = 120.0
    timeout: float = 30.0
    size: int = 64 << 20
    iters: int = 5
    alloc_bytes: int = 64 << 20
    health: bool = True

    def to_json(self) -> str:
        """These parameters as the one argument of :mod:`hangdbg.check.rank` (a JSON object)."""
        return json.dumps(asdict(self), sort_keys=True)

    def argv(self) -> list[str]:
        """These parameters as the options of ``check-node`` (and of ``hangdbg check``)."""
        return ["--backend", self.backend, "--init-timeout", str(self.init_timeout), "--timeout", str(self.timeout),
                "--size", str(self.size), "--iters", str(self.iters), "--alloc-bytes", str(self.alloc_bytes)] \
            + ([] if self.health else ["--no-health"])


@dataclass(frozen=True)
class NodeCheckOptions:
    """What a node needs to run its part of a trial.

    Attributes:
        node: this node's name as the coordinator knows it (its entry in ``layout``).
        layout: every node of the trial in rank order, with the slots (GPU indexes) it runs.
        master_addr, master_port: the rendezvous (rank 0's TCP store, on the first node).
        job: the diagnostics job's parameters.
        ifname: set ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME`` to this interface
            (``"auto"``: the one that routes to ``master_addr``); None keeps the node's setting.
        python: the interpreter of the ranks.
    """

    node: str
    layout: tuple[tuple[str, tuple[int, ...]], ...]
    master_addr: str
    master_port: int
    job: CheckJob = field(default_factory=CheckJob)
    ifname: str | None = None
    python: str = field(default_factory=lambda: sys.executable)

    @property
    def world_size(self) -> int:
        return sum(len(slots) for _, slots in self.layout)

    def my_ranks(self) -> list[tuple[int, int, int]]:
        """``(global rank, local rank, slot)`` of this node's ranks.

        Raises:
            ValueError: this node is not in the layout.
        """
        base = 0
        for host, slots in self.layout:
            if host == self.node:
                return [(base + i, i, s) for i, s in enumerate(slots)]
            base += len(slots)
        raise ValueError(f"node {self.node!r} is not one of {', '.join(h for h, _ in self.layout)}")

    @property
    def step_limit(self) -> float:
        """Seconds a rank may stay silent: the longest step's hard limit, plus slack."""
        return max(self.job.init_timeout, self.job.timeout) + 15.0


def parse_layout(items: list[str]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``["node1=0,1", "node2=0-3"]`` -> ``(("node1", (0, 1)), ("node2", (0, 1, 2, 3)))``.

    Raises:
        ValueError: an item is not ``HOST=SLOTS`` with slots as integers or ranges.
    """
    out = []
    for item in items:
        host, sep, slots = item.partition("=")
        if not sep or not host:
            raise ValueError(f"--layout takes HOST=SLOTS, not {item!r}")
        nums: list[int] = []
        for part in slots.split(","):
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
            if not m:
                raise ValueError(f"bad slots in {item!r}")
            a, b = int(m.group(1)), int(m.group(2) or m.group(1))
            nums.extend(range(a, b + 1))
        out.append((host, tuple(nums)))
    return tuple(out)


def route_interface(addr: str) -> str | None:
    """The network interface this node uses to reach ``addr`` (a UDP socket connected to it
    sends nothing; its local address is matched against :func:`psutil.net_if_addrs`), or None."""
    try:
        infos = socket.getaddrinfo(addr, 9, type=socket.SOCK_DGRAM)
        family, _, _, _, sockaddr = infos[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(sockaddr)
            local = s.getsockname()[0]
    except OSError:
        return None
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == local for a in addrs):
            return name
    return "lo" if local.startswith("127.") else None


def gpu_list() -> list[str]:
    """This node's GPUs, one ``GPU 0: NAME (UUID: ...)`` line each (``nvidia-smi -L``). Without
    nvidia-smi (or when it fails), the GPUs the NVIDIA kernel driver registered, one
    ``GPU i: (PCI BUS_ID)`` line per ``/proc/driver/nvidia/gpus/BUS_ID`` folder; empty when
    neither lists one."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            res = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            if res.returncode == 0:
                return [ln.strip() for ln in res.stdout.splitlines() if ln.startswith("GPU ")]
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        buses = sorted(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return []
    return [f"GPU {i}: (PCI {bus})" for i, bus in enumerate(buses)]


def node_facts(opts: NodeCheckOptions) -> dict:
    """Host name, GPUs (:func:`gpu_list`; ``visible_gpus``: those ``CUDA_VISIBLE_DEVICES`` lets the
    ranks see), the backend of its ranks, IPv4 interfaces, the route to the rendezvous, and
    ``setup_error`` (None, or why its ranks do not fit its GPUs: :func:`~.gpus.gpu_fit`)."""
    gpus = gpu_list()
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    mine = node_gpus(opts.job.backend, [slot for _, _, slot in opts.my_ranks()], gpus, cvd, "SLURM_JOB_ID" in os.environ)
    fit = mine.fit
    ifaces = {name: [a.address for a in addrs if a.family == socket.AF_INET]
              for name, addrs in psutil.net_if_addrs().items()}
    ssh = os.environ.get("SSH_CONNECTION", "").split()
    return {
        "hostname": socket.gethostname(), "gpus": gpus, "interfaces": {k: v for k, v in ifaces.items() if v},
        "route_interface": route_interface(opts.master_addr), "ssh_address": ssh[2] if len(ssh) == 4 else None,
        "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME"), "NCCL_SOCKET_IFNAME": os.environ.get("NCCL_SOCKET_IFNAME"),
        "cpus": os.cpu_count(), "CUDA_VISIBLE_DEVICES": cvd, "visible_gpus": len(mine.visible), "backend": mine.backend,
        "setup_error": fit.message(opts.node) if fit else None, "setup_remedy": fit.remedy() if fit else None,
        "nvml": read_gpus() if gpus else None,
    }


class _Rank:
    def __init__(self, rank: int, local: int, slot: int, proc: subprocess.Popen) -> None:
        self.rank, self.local, self.slot, self.proc = rank, local, slot, proc
        self.last = time.monotonic()
        self.stderr: deque[str] = deque(maxlen=12)
        self.steps: list[str] = []
        self.failed = False
        self.threads: list[threading.Thread] = []


def _rank_argv(opts: NodeCheckOptions, backend: str) -> list[str]:
    return [opts.python, str(RANK_SCRIPT), replace(opts.job, backend=backend).to_json()]


def _rank_env(opts: NodeCheckOptions, rank: int, local: int, slot: int, ifname: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(opts.world_size),
               LOCAL_WORLD_SIZE=str(len(opts.my_ranks())), GROUP_RANK=str([h for h, _ in opts.layout].index(opts.node)),
               MASTER_ADDR=opts.master_addr, MASTER_PORT=str(opts.master_port), HANGDBG_CHECK_SLOT=str(slot),
               HANGDBG_CHECK_NODE=opts.node, PYTHONUNBUFFERED="1",
               HANGDBG_CHECK_NODE_SIZES=",".join(str(len(slots)) for _, slots in opts.layout))
    env.setdefault("OMP_NUM_THREADS", "1")
    if ifname:
        env["GLOO_SOCKET_IFNAME"] = env["NCCL_SOCKET_IFNAME"] = ifname
    return env


def run_node(opts: NodeCheckOptions, send: Send, poll: float = 0.2) -> NodeStatus:
    """Run this node's ranks of the trial; returns ``ok`` (every rank passed every step),
    ``failed``, or ``setup`` (its ranks do not fit its GPUs: none started, the facts say why).
    Raises ValueError when the node is not in the layout (before starting anything)."""
    mine = opts.my_ranks()
    facts = node_facts(opts)
    ifname = facts["route_interface"] if opts.ifname == "auto" else opts.ifname
    facts["ifname_set"] = ifname
    send({"type": "node", "facts": facts})
    if facts["setup_error"]:
        return NodeStatus.SETUP
    ranks: list[_Rank] = []
    dies_with_node = pdeathsig_preexec()
    for rank, local, slot in mine:
        argv = _rank_argv(opts, facts["backend"])
        LOG.info("rank %d (slot %d): %s", rank, slot, " ".join(argv))
        proc = subprocess.Popen(argv, env=_rank_env(opts, rank, local, slot, ifname), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1,
                                preexec_fn=dies_with_node)  # a rank never outlives its launcher (SIGKILL included)
        r = _Rank(rank, local, slot, proc)
        r.threads = [threading.Thread(target=_pump_out, args=(r, opts, send), daemon=True),
                     threading.Thread(target=_pump_err, args=(r,), daemon=True)]
        for t in r.threads:
            t.start()
        ranks.append(r)
    ended: dict[int, str] = {}
    try:
        while len(ended) < len(ranks):
            time.sleep(poll)
            now = time.monotonic()
            for r in ranks:
                if r.rank in ended:
                    continue
                if r.proc.poll() is not None:
                    ended[r.rank] = "exited"
                    continue
                state = _state(r.proc.pid)
                if state == psutil.STATUS_STOPPED or state == psutil.STATUS_TRACING_STOP:
                    if all(o.rank in ended or o is r or _state(o.proc.pid) in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
                           for o in ranks):
                        ended[r.rank] = "stopped"
                elif now - r.last > opts.step_limit:
                    ended[r.rank] = "silent"
    finally:
        for r in ranks:
            if r.proc.poll() is None:
                _kill(r.proc)
    for r in ranks:
        for t in r.threads:
            t.join(timeout=5)
        how = ended.get(r.rank, "exited")
        code = r.proc.returncode
        send({"type": "rank-end", "rank": r.rank, "host": opts.node, "slot": r.slot, "local_rank": r.local,
              "state": how, "exit": code if how == "exited" else None, "steps": r.steps,
              "stderr": [ln for ln in r.stderr]})
    passed = all(ended.get(r.rank) == "exited" and r.proc.returncode == 0 and not r.failed for r in ranks)
    return NodeStatus.OK if passed else NodeStatus.RANK_FAILED


def _state(pid: int) -> str | None:
    try:
        return psutil.Process(pid).status()
    except psutil.Error:
        return None


def _kill(proc: subprocess.Popen) -> None:
    try:
        proc.send_signal(signal.SIGKILL)  # a stopped process dies of SIGKILL too
    except OSError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _pump_out(r: _Rank, opts: NodeCheckOptions, send: Send) -> None:
    assert r.proc.stdout is not None
    for line in r.proc.stdout:
        r.last = time.monotonic()
        if not line.startswith(PREFIX):
            r.stderr.append(line.rstrip("\n")[:500])
            continue
        try:
            msg = json.loads(line[len(PREFIX):])
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        r.steps.append(str(msg.get("step")))
        r.failed |= msg.get("ok") is not True
        send({**msg, "type": "step", "rank": r.rank, "host": opts.node, "slot": r.slot, "local_rank": r.local})


def _pump_err(r: _Rank) -> None:
    assert r.proc.stderr is not None
    for line in r.proc.stderr:
        text = line.rstrip("\n")
        if text and not text.startswith(("frame #", "Exception raised from", "<omitting")):
            r.stderr.append(text[:500])
