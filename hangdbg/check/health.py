"""The GPU health figures of a check, compared across the GPUs and nodes of the run.

Each rank on a GPU measured its device alone (:class:`hangdbg.check.rank.HealthSteps`: bf16
matmul TFLOP/s, device-memory copy GB/s, host<->device copy GB/s), the node's all_reduce within
the node (busbw, nccl-tests' formula), and the node read each GPU's memory health counters
(:mod:`hangdbg.check.nvml`). A GPU is slow when a figure is below ``factor`` x the median of the
same figure over the run's GPUs (two GPUs or more); a node when its in-node busbw is below
``factor`` x the nodes' median; a link when the ring receive between two nodes is below
``factor`` x the median of the links between nodes. The slow unit is named as a bad GPU is in
the manual recipe (one GPU at a time against its peers: ``host:slot``), and DCGM's diagnostic
(``dcgmi diag -r 2``: targeted stress, memory bandwidth, PCIe) is the anchor for what is measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable

from .blame import CheckNode, RankResult, below_median

__all__ = ["FIGURES", "GpuFigure", "Slow", "slow_gpus", "slow_node_busbw", "slow_links", "gpu_faults", "medians"]

FIGURES: tuple[tuple[str, str, str], ...] = (
    ("matmul_tflops", "bf16 matmul", "TFLOP/s"),
    ("copy_gbps", "memory copy", "GB/s"),
    ("h2d_gbps", "host->GPU copy", "GB/s"),
    ("d2h_gbps", "GPU->host copy", "GB/s"),
)
"""``(RankResult field, words, unit)`` of each per-GPU figure."""


@dataclass(frozen=True, slots=True)
class GpuFigure:
    """One figure's median over the run's GPUs: ``field`` of :data:`FIGURES`, ``gpus`` how many."""

    field: str
    words: str
    unit: str
    median: float
    gpus: int


@dataclass(frozen=True, slots=True)
class Slow:
    """A unit below the median: ``what`` (``vm:3``, ``node2``, ``node1 -> node2``), ``figure``
    words and unit, its ``value`` and the ``median`` it is compared with."""

    what: str
    words: str
    unit: str
    value: float
    median: float
    rank: int | None = None


def _gpu_ranks(ranks: Iterable[RankResult]) -> list[RankResult]:
    return [r for r in ranks if r.on_gpu]


def medians(ranks: Iterable[RankResult]) -> list[GpuFigure]:
    """The median of each figure over the GPUs that measured it (CPU ranks left out: they share
    the cores, their figures say nothing of a device)."""
    gpu = _gpu_ranks(ranks)
    out = []
    for field, words, unit in FIGURES:
        values = [v for r in gpu if (v := getattr(r, field)) is not None]
        if values:
            out.append(GpuFigure(field, words, unit, statistics.median(values), len(values)))
    return out


def slow_gpus(ranks: Iterable[RankResult], factor: float) -> list[Slow]:
    """GPUs with a figure below ``factor`` x its median over the run's GPUs (two or more)."""
    gpu = _gpu_ranks(ranks)
    out = []
    for field, words, unit in FIGURES:
        slow, mid = below_median([(r, v) for r in gpu if (v := getattr(r, field)) is not None], factor, 2)
        out += [Slow(f"{r.host}:{r.slot}", words, unit, v, mid, r.rank) for r, v in slow]
    return out


def slow_node_busbw(ranks: Iterable[RankResult], factor: float) -> list[Slow]:
    """Nodes whose all_reduce within the node (busbw) is below ``factor`` x the nodes' median
    (two nodes or more; a node's figure is its slowest rank's: the collective ends with it)."""
    per: dict[str, float] = {}
    for r in ranks:
        if r.node_busbw_gbps is not None:
            per[r.host] = min(per.get(r.host, r.node_busbw_gbps), r.node_busbw_gbps)
    slow, mid = below_median(list(per.items()), factor, 2)
    return [Slow(h, "all_reduce busbw within the node", "GB/s", v, mid) for h, v in slow]


def slow_links(ranks: Iterable[RankResult], factor: float) -> list[Slow]:
    """Links between two nodes of the ring (rank ``recv_from`` on one node to a rank on the next)
    whose receive bandwidth is below ``factor`` x the median of those links (three or more)."""
    rows = list(ranks)
    host_of = {r.rank: r.host for r in rows}
    links: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        src = host_of.get(r.recv_from) if r.recv_from is not None else None
        if r.recv_gbps and src is not None and src != r.host:
            links.setdefault((src, r.host), []).append(r.recv_gbps)
    slow, mid = below_median([(k, statistics.median(v)) for k, v in links.items()], factor, 3)
    return [Slow(f"{a} -> {b}", "ring receive between the nodes", "GB/s", v, mid) for (a, b), v in slow]


def gpu_faults(nodes: Iterable[CheckNode]) -> list[tuple[str, str | None, tuple[str, ...], str]]:
    """The GPUs whose NVML counters show a fault: ``(host, "host:slot" or None, faults, label)``;
    the slot is the GPU's index among those visible to the ranks (None: a GPU the check did not
    use), the label names it (``GPU 3 (NVIDIA H100, 0000:4E:00.0)``)."""
    out = []
    for n in nodes:
        for c in n.nvml:
            if not c.faults:
                continue
            slot = n.slot_of(c)
            label = f"GPU {c.index}" + (f" ({', '.join(x for x in (c.name, c.bus) if x)})" if c.name or c.bus else "")
            used = f"{n.host}:{slot}" if slot is not None and slot in n.slots else None
            out.append((n.host, used, c.faults, label))
    return out
