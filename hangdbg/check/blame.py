"""``hangdbg check``: what one trial of the diagnostics job says, and whom it blames.

A trial is one run of the diagnostics ranks (:mod:`hangdbg.check.rank`) on some nodes
and some of their GPUs (slots). Its messages (``node``, ``step``, ``rank-end``, ``done`` of
:mod:`hangdbg.check.node`, and the transport's failures) become a :class:`Trial`;
:func:`blame` reads it as the stack analysis reads a hang: at the first step some rank did not
pass, the ranks that failed on their own (an error, a wrong result, stopped, silent, dead) are
the cause, and the ranks that timed out only waited for them: never a suspect.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, TypeVar

from ..enums import DocumentedEnum, NodeStatus
from ..rankset import ranks_text
from .fields import as_float, as_int, as_str
from .gpus import uuid_of, visible_gpus
from .nvml import GpuCounters

__all__ = ["STEPS", "BOOTSTRAP", "SetupError", "StepResult", "RankResult", "CheckNode", "Trial", "Blame", "Bandwidth",
           "rank_result", "rank_setup", "check_node", "blame", "bandwidth", "slow_ranks", "slow_nodes", "slots_text"]

STEPS = ("facts", "alloc", "interface", "rendezvous", "init", "barrier", "all_reduce", "all_gather", "broadcast", "send_recv",
         "bandwidth", "node_bandwidth", "matmul", "copy", "host_copy")
"""The steps of a rank, in the order it runs them (:mod:`hangdbg.check.rank`)."""
BOOTSTRAP = frozenset({"interface", "rendezvous", "init"})
"""Steps that set up the connections: a failure there is retried on another network interface."""


class SetupError(DocumentedEnum):
    """Why the check could not run at all: the set-up is at fault, not a node or a GPU
    (:func:`hangdbg.check.run.setup_error` of the nodes, :func:`hangdbg.check.run.ranks_setup_error`
    of the ranks, whose ``facts`` step reports it as ``setup``: :mod:`hangdbg.check.rank`)."""

    NO_HANGDBG = ("no-hangdbg", "hangdbg is not installed where --remote-python runs on the nodes")
    TRANSPORT = ("transport", "no node could start its launcher, every one for the same reason (the transport failed)")
    NO_TORCH = ("no-torch", "torch is not installed where the ranks run")
    CPU_ONLY = ("cpu-only", "--backend nccl asks for CUDA, and the ranks' torch is a CPU-only build")


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step of one rank: passed, or why not (``timeout``: it waited longer than its limit)."""

    step: str
    ok: bool
    seconds: float
    error: str | None = None
    timeout: bool = False
    wrong_result: bool = False


@dataclass(frozen=True, slots=True)
class RankResult:
    """A rank of a trial: where it runs, what it passed, how it ended.

    Attributes:
        state: ``exited``, ``stopped`` (SIGSTOP: state T, killed by the node after the others
            ended), ``silent`` (alive, no result within its step's limit: killed), or
            ``not-started`` (its node never ran it).
        exit_status: the exit status when ``exited`` (negative: killed by that signal).
        hostname: what the rank's host calls itself; ``device``: ``cpu`` or ``cuda:0``;
        gpu: name and PCI bus id of its GPU; numa: NUMA nodes of its CPUs (and GPU);
        backend: the backend it used (``gloo``, ``nccl``);
        alloc_bytes: bytes it allocated and freed; memory_bytes: its GPU's total memory.
        ifname: ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` as the rank saw it.
        algbw_gbps, busbw_gbps: the bandwidth all_reduce as this rank timed it (GB/s, 1e9 B/s).
        recv_gbps: the ring exchange: bandwidth of the link from rank ``recv_from`` (GB/s).
        stderr: the last lines it printed on stderr.
        node_busbw_gbps: busbw of the all_reduce within its node (GB/s; None: one node, one rank).
        matmul_tflops: its device's matrix product (``matmul_dtype``: bfloat16 on a GPU), TFLOP/s.
        copy_gbps: device-memory copy, bytes read and written per second / 1e9.
        h2d_gbps, d2h_gbps: host-to-device and device-to-host copies over the bus (GB/s).
    """

    rank: int
    host: str
    slot: int
    local_rank: int
    state: str
    exit_status: int | None
    steps: tuple[StepResult, ...]
    hostname: str | None = None
    device: str | None = None
    gpu: str | None = None
    numa: tuple[int, ...] = ()
    alloc_bytes: int | None = None
    memory_bytes: int | None = None
    ifname: str | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    recv_gbps: float | None = None
    recv_from: int | None = None
    bw_bytes: int | None = None
    bw_iters: int | None = None
    bw_time_s: float | None = None
    backend: str | None = None
    stderr: tuple[str, ...] = ()
    node_busbw_gbps: float | None = None
    matmul_tflops: float | None = None
    matmul_dtype: str | None = None
    copy_gbps: float | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None

    @property
    def on_gpu(self) -> bool:
        """It ran on a GPU (its figures are the GPU's)."""
        return (self.device or "").startswith("cuda")

    @property
    def passed(self) -> bool:
        return self.failed_step is None

    @property
    def failed_step(self) -> str | None:
        """The first step this rank did not pass (failed, or never reported), None if it passed all.
        A rank that passed every step up to ``bandwidth`` and reported no later one ran a job
        without them (``--no-health``, or a node of hangdbg 0.2.0)."""
        by = {s.step: s for s in self.steps}
        optional = STEPS.index("node_bandwidth")
        for i, name in enumerate(STEPS):
            s = by.get(name)
            if s is None and i >= optional and not any(x in by for x in STEPS[i:]):
                return None
            if s is None or not s.ok:
                return name
        return None

    def result(self, step: str) -> StepResult | None:
        return next((s for s in self.steps if s.step == step), None)

    @property
    def where(self) -> str:
        return f"{self.host} slot {self.slot}"


@dataclass(frozen=True, slots=True)
class CheckNode:
    """A node of a trial: its status and facts.

    ``status`` (:class:`~hangdbg.enums.NodeStatus`): ``ok``, ``failed`` (a rank failed), or what
    the transport said (``status.failed``): ``unreachable``, ``no-hangdbg``, ``timeout``, ``error``,
    ``no-answer``; or ``setup`` (its ranks do not fit its GPUs: ``setup_error`` says why,
    ``setup_remedy`` what to change; no rank started). ``ifname_configured``: the node's own
    ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME``; ``ifname_set``: what hangdbg set for the trial.
    ``gpus``: ``nvidia-smi -L`` lines; ``visible_gpus``: how many of them CUDA shows the ranks
    (``cuda_visible_devices``: the node's ``CUDA_VISIBLE_DEVICES``, None when unset);
    ``backend``: the one its ranks use (None: a node that did not say: hangdbg 0.2.0 and before).
    ``nvml``: each GPU's memory health counters (:mod:`~hangdbg.check.nvml`); ``nvml_error``: why
    they were not read (no nvidia-ml-py, no driver library), None on a node without GPUs.
    """

    host: str
    slots: tuple[int, ...]
    status: NodeStatus
    reason: str | None = None
    hostname: str | None = None
    gpus: tuple[str, ...] = ()
    interfaces: tuple[str, ...] = ()
    route_interface: str | None = None
    ifname_configured: str | None = None
    ifname_set: str | None = None
    backend: str | None = None
    visible_gpus: int | None = None
    cuda_visible_devices: str | None = None
    setup_error: str | None = None
    setup_remedy: str | None = None
    nvml: tuple[GpuCounters, ...] = ()
    nvml_error: str | None = None

    def visible(self) -> list[str]:
        """The ``nvidia-smi -L`` lines of the GPUs its ranks saw, in their device order (slot i is
        the i-th): as the node counted them (``visible_gpus``) when that differs from CUDA's rules
        applied here (a SLURM job's renumbered GPUs: :func:`~.gpus.visible_gpus`)."""
        strict = visible_gpus(self.gpus, self.cuda_visible_devices)
        if self.visible_gpus is not None and len(strict) != self.visible_gpus:
            return list(self.gpus[:self.visible_gpus])
        return strict

    def slot_of(self, counters: GpuCounters) -> int | None:
        """The slot (index among the visible GPUs) of the GPU whose NVML ``counters`` these are,
        matched by UUID; by NVML's index when the node listed no UUIDs and hides none (the
        ``/proc`` fallback lists GPUs in NVML's order); None for a GPU its ranks did not see."""
        visible = [uuid_of(line) for line in self.visible()]
        if counters.uuid and counters.uuid in visible:
            return visible.index(counters.uuid)
        if self.cuda_visible_devices is None and not any(visible) and counters.index < len(self.gpus):
            return counters.index
        return None


@dataclass(frozen=True, slots=True)
class Trial:
    """One run of the diagnostics job. ``purpose``: why it ran (``all``, ``interface lo``,
    ``bisect``); ``master``: the rendezvous ``addr:port``; ``seconds``: wall time."""

    number: int
    purpose: str
    layout: tuple[tuple[str, tuple[int, ...]], ...]
    ifname: str | None
    master: str
    nodes: tuple[CheckNode, ...]
    ranks: tuple[RankResult, ...]
    seconds: float
    setup: Mapping[int, SetupError] = field(default_factory=dict)
    """rank -> the set-up error its ``facts`` step reported (:func:`rank_setup`), for the ranks that did."""

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(h for h, _ in self.layout)

    @property
    def passed(self) -> bool:
        expected = sum(len(s) for _, s in self.layout)
        return len(self.ranks) == expected and all(r.passed for r in self.ranks) and all(n.status == NodeStatus.OK for n in self.nodes)

    @property
    def failed_step(self) -> str | None:
        steps = [r.failed_step for r in self.ranks if r.failed_step]
        return min(steps, key=STEPS.index) if steps else None

    @property
    def label(self) -> str:
        return " ".join(f"{h}:{slots_text(s)}" for h, s in self.layout)


@dataclass(frozen=True, slots=True)
class Blame:
    """Whom a failed trial blames.

    Attributes:
        step: the first step some rank did not pass.
        ranks, hosts, slots: the cause (``slots`` as ``(host, slot)``); empty when the trial
            cannot tell (every rank timed out, or a result was wrong on every rank).
        why: one line per cause.
        waiting: ranks that only timed out waiting for the cause.
        bootstrap: the failure is in the rendezvous or ``init_process_group``.
    """

    step: str | None
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]
    slots: tuple[tuple[str, int], ...]
    why: tuple[str, ...]
    waiting: tuple[int, ...]
    bootstrap: bool


@dataclass(frozen=True, slots=True)
class Bandwidth:
    """The all_reduce bandwidth test of a trial that passed (nccl-tests convention: algbw =
    bytes / time; busbw = algbw x 2(n-1)/n, comparable across rank counts and with the link's
    speed). ``time_s``: the slowest rank's mean time of one all_reduce; GB/s are 1e9 bytes/s."""

    trial: int
    bytes: int
    iters: int
    world_size: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    recv_gbps_median: float | None


def rank_result(rank: int, host: str, slot: int, local_rank: int, steps: Iterable[dict], end: dict | None) -> RankResult:
    """A rank from its ``step`` messages and its ``rank-end`` message (None: the node never
    said how it ended). Fields of the wrong type are ignored (a message is data from a node)."""
    results: list[StepResult] = []
    facts: dict[str, Any] = {}
    for m in steps:
        name = m.get("step")
        if name not in STEPS or any(s.step == name for s in results):
            continue
        err = m.get("error")
        results.append(StepResult(str(name), m.get("ok") is True, as_float(m.get("seconds")) or 0.0,
                                  err[:2000] if isinstance(err, str) else None, m.get("timeout") is True,
                                  m.get("wrong_result") is True))
        if m.get("ok") is True:
            facts[str(name)] = m
    f = facts.get("facts", {})
    gpu = " ".join(x for x in (as_str(f.get("gpu_name")), as_str(f.get("gpu_pci"))) if x) or None
    numa = tuple(n for n in (f.get("numa") or []) if isinstance(n, int)) if isinstance(f.get("numa"), list) else ()
    if isinstance(f.get("gpu_numa"), int):
        numa = tuple(sorted(set(numa) | {f["gpu_numa"]}))
    bw = facts.get("bandwidth", {})
    mm, cp, hc = facts.get("matmul", {}), facts.get("copy", {}), facts.get("host_copy", {})
    state: str = "not-started"
    exit_status = None
    stderr: tuple[str, ...] = ()
    if end is not None:
        state = str(end["state"]) if end.get("state") in ("exited", "stopped", "silent") else "exited"
        exit_status = as_int(end.get("exit"))
        stderr = tuple(str(x)[:500] for x in (end.get("stderr") or [])[-12:]) if isinstance(end.get("stderr"), list) else ()
    elif results:
        state = "silent"
    return RankResult(
        rank, host, slot, local_rank, state, exit_status, tuple(results), as_str(f.get("hostname")), as_str(f.get("device")),
        gpu, numa, as_int(facts.get("alloc", {}).get("bytes")), as_int(f.get("gpu_memory")),
        as_str(f.get("NCCL_SOCKET_IFNAME")) or as_str(f.get("GLOO_SOCKET_IFNAME")),
        as_float(bw.get("algbw_gbps")), as_float(bw.get("busbw_gbps")), as_float(bw.get("recv_gbps")), as_int(bw.get("recv_from")),
        as_int(bw.get("bytes")), as_int(bw.get("iters")), as_float(bw.get("time_s")), as_str(f.get("backend")), stderr,
        as_float(facts.get("node_bandwidth", {}).get("busbw_gbps")), as_float(mm.get("tflops")), as_str(mm.get("dtype")),
        as_float(cp.get("gbps")), as_float(hc.get("h2d_gbps")), as_float(hc.get("d2h_gbps")))


def rank_setup(steps: Iterable[dict]) -> SetupError | None:
    """The set-up error a rank's failed ``facts`` step reported (its ``setup`` field, a
    :class:`SetupError` value), or None: none, or one this hangdbg does not know."""
    for m in steps:
        if m.get("step") == "facts" and m.get("ok") is not True:
            return SetupError.read(m.get("setup"), None)
    return None


def check_node(host: str, slots: tuple[int, ...], facts: dict | None, status: NodeStatus, reason: str | None,
               backend: str) -> CheckNode:
    """A node from its ``node`` message's facts (None: it sent none) and its final status."""
    f = facts or {}
    ifaces: dict = f["interfaces"] if isinstance(f.get("interfaces"), dict) else {}
    listed = tuple(f"{k}={','.join(str(a) for a in v)}" for k, v in sorted(ifaces.items()) if isinstance(v, list))
    gpus = tuple(str(g) for g in f.get("gpus") or [] if isinstance(g, str)) if isinstance(f.get("gpus"), list) else ()
    used = as_str(f.get("backend"))
    env = "NCCL_SOCKET_IFNAME" if (used or backend) == "nccl" or (backend == "auto" and gpus and not used) \
        else "GLOO_SOCKET_IFNAME"
    cvd = f.get("CUDA_VISIBLE_DEVICES")
    nvml = f.get("nvml")
    counters = tuple(c for d in nvml if (c := GpuCounters.read(d)) is not None) if isinstance(nvml, list) else ()
    return CheckNode(host, slots, status, reason, as_str(f.get("hostname")), gpus, listed, as_str(f.get("route_interface")),
                     as_str(f.get(env)), as_str(f.get("ifname_set")), used, as_int(f.get("visible_gpus")),
                     cvd if isinstance(cvd, str) else None, as_str(f.get("setup_error")), as_str(f.get("setup_remedy")),
                     counters, nvml[:300] if isinstance(nvml, str) else None)


def _first_line(text: str | None) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return (lines[-1] if lines and lines[0].startswith("Traceback") else lines[0] if lines else "").strip()[:300]


def blame(trial: Trial) -> Blame:
    """Whom a failed trial blames (an empty blame for a trial that passed).

    Heuristic (the stack analysis' rule applied to the check's own steps): take the first step
    ``X`` that some rank did not pass. Nodes the transport could not run are the cause. Of the
    ranks at ``X``, those that failed by themselves are the cause: an error that is not a
    timeout (``Unable to find address for: eth9``, the rendezvous unreachable), a wrong
    result, no result at all because they were stopped (SIGSTOP), went silent or died. Ranks
    that timed out at ``X`` or later only waited. When every rank timed out, or the result was
    wrong everywhere, the trial cannot decide: the blame is empty and bisection decides.
    """
    if trial.passed:
        return Blame(None, (), (), (), (), (), False)
    why: list[str] = []
    hosts: list[str] = []
    unfit = {n.host for n in trial.nodes if n.status is NodeStatus.SETUP}  # no rank started there: the set-up, not a rank
    for n in trial.nodes:
        if n.status.failed:
            hosts.append(n.host)
            why.append(f"{n.host}: {n.status}: {n.reason or 'the node did not run its ranks'}")
    step = trial.failed_step
    cause: list[RankResult] = []
    waiting: list[int] = []
    if step is not None:
        at = STEPS.index(step)
        for r in trial.ranks:
            fs = r.failed_step
            if fs is None:
                continue
            res = r.result(fs)
            if res is not None and not res.ok and res.timeout:
                waiting.append(r.rank)
                continue
            if STEPS.index(fs) != at or r.host in hosts or r.host in unfit:
                continue
            if res is not None and res.wrong_result:
                continue  # every rank gets the wrong sum: the data says something is wrong, not where
            cause.append(r)
            why.append(f"rank {r.rank} ({r.where}) {_how(r, fs, res)}")
        wrong = [x for r in trial.ranks if (x := r.result(step)) is not None and x.wrong_result]
        if wrong and not cause and not hosts:
            on = ranks_text([r.rank for r in trial.ranks if (x := r.result(step)) is not None and x.wrong_result])
            why.append(f"{step} returned a wrong result on {on}: {_first_line(wrong[0].error)}")
    if any(r.state in ("stopped", "silent", "not-started") or r.exit_status not in (None, 0, 1) for r in cause):
        # a rank that died or stopped makes its peers fail with "connection closed by peer": they only lost it
        lost = [r for r in cause if (x := r.result(step or "")) is not None and _peer_lost(x.error)]
        waiting += [r.rank for r in lost]
        cause = [r for r in cause if r not in lost]
        why[:] = [w for w in why if not any(w.startswith(f"rank {r.rank} (") for r in lost)]
    cause, why = _rendezvous_host(trial, cause, why)
    ranks = tuple(sorted(r.rank for r in cause))
    hosts = sorted(set(hosts) | {r.host for r in cause})
    slots = tuple(sorted({(r.host, r.slot) for r in cause}))
    waiting_set = tuple(sorted(set(waiting) - set(ranks)))
    if not why and step is not None:
        why.append(f"every rank timed out at {step}: no rank stands out")
    return Blame(step, ranks, tuple(hosts), slots, tuple(why), waiting_set, step in BOOTSTRAP or step is None and bool(hosts))


_PEER_LOST = re.compile(r"closed by peer|connection reset|broken pipe|connection closed|likely closed|\beof\b|end of file", re.I)


def _unreachable(r: RankResult) -> bool:
    res = r.result("rendezvous")
    return res is not None and not res.ok and (res.error or "").startswith("ConnectionError: cannot reach the rendezvous")


def _rendezvous_host(trial: Trial, cause: list[RankResult], why: list[str]) -> tuple[list[RankResult], list[str]]:
    """When every rank off the first node (the rendezvous host) cannot reach it, the ranks do
    not tell who is at fault: with two or more other nodes it is the host's address (blamed
    instead); with one other node either side may be (no one is blamed: bisection decides)."""
    host = trial.layout[0][0]
    others = [r for r in trial.ranks if r.host != host]
    if not others or not all(_unreachable(r) for r in others) or any(r.host == host for r in cause):
        return cause, why
    kept = [w for w in why if not any(w.startswith(f"rank {r.rank} (") for r in others)]
    if len({r.host for r in others}) < 2:
        return [], kept + [f"{others[0].host} cannot reach the rendezvous on {host} ({trial.master}): either side may be at fault"]
    first = [r for r in trial.ranks if r.host == host][:1]
    return first, kept + [f"rank {first[0].rank} ({first[0].where}) hosts the rendezvous ({trial.master}), which no rank of "
                          f"the {len({r.host for r in others})} other nodes can reach: its address is unreachable from them"]


def _peer_lost(error: str | None) -> bool:
    """An error a rank gets when a peer went away (gloo: ``Connection closed by peer``)."""
    return bool(_PEER_LOST.search(error or ""))


def _how(r: RankResult, step: str, res: StepResult | None) -> str:
    if res is not None and not res.ok:
        return f"failed {step}: {_first_line(res.error)}"
    if r.state == "stopped":
        return f"was stopped (state T, SIGSTOP) before it finished {step}: it never answered"
    if r.state == "silent":
        return f"went silent in {step} (alive, no result within its limit): killed"
    if r.state == "not-started":
        return "never started"
    tail = _first_line("\n".join(r.stderr[-3:])) if r.stderr else ""
    status = r.exit_status
    died = f"was killed by signal {-status}" if status is not None and status < 0 else f"exited with status {status}"
    return f"{died} before it finished {step}" + (f": {tail}" if tail else "")


def bandwidth(trial: Trial) -> Bandwidth | None:
    """The bandwidth figures of a trial of two ranks or more that passed (None otherwise: one rank
    moves no byte, whatever an older rank reported). ``time_s`` is the slowest rank's mean: an
    all_reduce is over when the last rank has the result."""
    if not trial.passed or len(trial.ranks) < 2:
        return None
    times = [(r.bw_time_s, r) for r in trial.ranks if r.bw_time_s and r.bw_bytes]
    if not times:
        return None
    rows = [r for _, r in times]
    world = len(trial.ranks)
    slowest = max(t for t, _ in times)
    nbytes = rows[0].bw_bytes or 0
    algbw = nbytes / slowest / 1e9
    recv = [r.recv_gbps for r in trial.ranks if r.recv_gbps]
    return Bandwidth(trial.number, nbytes, rows[0].bw_iters or 0, world, slowest, algbw, algbw * 2 * (world - 1) / world,
                     statistics.median(recv) if recv else None)


U = TypeVar("U")


def below_median(rows: Sequence[tuple[U, float]], factor: float, least: int) -> tuple[list[tuple[U, float]], float]:
    """The ``(unit, value)`` rows whose value is below ``factor`` x the median of all values, and
    that median; none when fewer than ``least`` rows (too few to tell a median from an outlier)."""
    if len(rows) < least or not rows:
        return [], 0.0
    mid = statistics.median(v for _, v in rows)
    return [(u, v) for u, v in rows if v < factor * mid], mid


def slow_ranks(ranks: Iterable[RankResult], factor: float) -> list[RankResult]:
    """Ranks whose ring receive bandwidth is below ``factor`` x the median of all ranks."""
    slow, _ = below_median([(r, r.recv_gbps) for r in ranks if r.recv_gbps], factor, 3)
    return [r for r, _ in slow]


def slow_nodes(ranks: Iterable[RankResult], factor: float) -> list[tuple[str, float, float]]:
    """Nodes whose median receive bandwidth is below ``factor`` x the median of the nodes:
    ``(host, its median GB/s, all nodes' median GB/s)``."""
    per: dict[str, list[float]] = {}
    for r in ranks:
        if r.recv_gbps:
            per.setdefault(r.host, []).append(r.recv_gbps)
    slow, mid = below_median([(h, statistics.median(v)) for h, v in per.items()], factor, 3)
    return [(h, v, mid) for h, v in slow]


def slots_text(slots: Iterable[int]) -> str:
    """``(0, 1, 2, 5)`` -> ``0-2,5`` (the form ``--layout`` and ``CUDA_VISIBLE_DEVICES`` lists take apart)."""
    nums = sorted(set(slots))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(parts)
