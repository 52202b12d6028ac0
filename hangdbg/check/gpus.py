"""Which GPUs a node's ranks can use, which backend the check runs, and whether its ranks fit.

``hangdbg check`` must never blame a node for a launch mistake. Before any rank starts, the
node launcher (and, for this node, the coordinator) resolves the backend once for every rank
(:func:`resolve_backend`: ``auto`` is nccl where GPUs are visible) and checks that the ranks fit
the GPUs that CUDA will show them (:func:`gpu_fit`): with nccl, one rank per visible GPU, rank
``LOCAL_RANK`` on GPU ``LOCAL_RANK`` (torchrun's convention). More ranks than visible GPUs, or a
``CUDA_VISIBLE_DEVICES`` that hides the GPUs ``nvidia-smi -L`` lists, is a set-up error with
its numbers, never a bad node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

__all__ = ["GpuFit", "NodeGpus", "gpu_fit", "node_gpus", "resolve_backend", "visible_gpus", "uuid_of"]

_UUID = re.compile(r"\(UUID: ((?:GPU|MIG)-[0-9A-Za-z/-]+)\)")


def uuid_of(line: str) -> str | None:
    """The UUID of one ``nvidia-smi -L`` line (``GPU 0: NVIDIA H200 (UUID: GPU-f61b...)``), or None."""
    m = _UUID.search(line)
    return m.group(1) if m else None


def visible_gpus(listed: Sequence[str], cuda_visible_devices: str | None, in_job: bool = False) -> list[str]:
    """The GPUs a CUDA program on this node sees, in its device order (``cuda:0`` first).

    Args:
        listed: the node's GPUs, one ``nvidia-smi -L`` line each (``nvidia-smi`` ignores
            ``CUDA_VISIBLE_DEVICES``).
        cuda_visible_devices: the variable's value, None when unset (every GPU is visible).
        in_job: the process runs in a SLURM job step. There ``nvidia-smi`` may list only the job's
            GPUs (cgroup ``ConstrainDevices``) while the variable keeps other numbers; when the
            entries are distinct indexes, no more than the GPUs listed, and one is out of range,
            they are taken as that many visible GPUs rather than as an invalid list.

    Returns:
        The lines of ``listed`` that CUDA shows, in the order the variable gives them.

    The rules are CUDA's (CUDA C++ Programming Guide, "CUDA Environment Variables",
    ``CUDA_VISIBLE_DEVICES``): a comma-separated list of device indexes or UUIDs (a UUID may be
    abbreviated to a unique prefix); the list ends at the first entry that is invalid (an index
    out of range, an unknown or ambiguous UUID, a repeat), so ``""`` and ``-1`` hide every GPU
    and ``0,7,1`` on a node of two GPUs shows only GPU 0.
    """
    if cuda_visible_devices is None:
        return list(listed)
    uuids = [uuid_of(line) or "" for line in listed]
    entries = [e.strip() for e in cuda_visible_devices.split(",")]
    if in_job and all(e.isdigit() for e in entries) and len(set(entries)) == len(entries) <= len(listed) \
            and any(int(e) >= len(listed) for e in entries):
        return list(listed[:len(entries)])
    out: list[str] = []
    taken: set[int] = set()
    for item in cuda_visible_devices.split(","):
        item = item.strip()
        index: int | None = None
        if item.isdigit():
            index = int(item)
        elif item.upper().startswith(("GPU-", "MIG-")):
            hits = [i for i, u in enumerate(uuids) if u and u.lower().startswith(item.lower())]
            index = hits[0] if len(hits) == 1 else None
        if index is None or index >= len(listed) or index in taken:
            break
        taken.add(index)
        out.append(listed[index])
    return out


def resolve_backend(backend: str, visible: int) -> str:
    """The backend every rank of a node uses: ``nccl`` or ``gloo`` as asked; ``auto`` is nccl when
    ``visible`` (GPUs the ranks see) is at least 1, else gloo. Resolved once per node, so that
    no rank picks its own (two backends in one job never meet at init)."""
    if backend == "auto":
        return "nccl" if visible > 0 else "gloo"
    return backend


@dataclass(frozen=True, slots=True)
class GpuFit:
    """Why a node's ranks do not fit its GPUs: ``ranks`` asked for on the node, ``visible`` GPUs
    CUDA shows them, ``listed`` GPUs ``nvidia-smi -L`` lists, ``cuda_visible_devices`` the
    variable (None when unset), ``highest_slot`` the largest GPU index a rank was given."""

    ranks: int
    visible: int
    listed: int
    cuda_visible_devices: str | None
    highest_slot: int

    @property
    def hidden(self) -> bool:
        """``CUDA_VISIBLE_DEVICES`` hides GPUs that the ranks would need."""
        return self.cuda_visible_devices is not None and self.visible < self.listed

    def message(self, host: str) -> str:
        """One line naming the numbers, e.g. ``2 ranks with nccl need 2 GPUs, and vm has 1 (GPU 0
        to 0 visible)``."""
        need = max(self.ranks, self.highest_slot + 1)
        have = f"{host} shows its ranks {self.visible} GPU{'s' if self.visible != 1 else ''}"
        if self.hidden:
            have += f" (CUDA_VISIBLE_DEVICES={self.cuda_visible_devices!r} hides {self.listed - self.visible} of " \
                    f"the {self.listed} that nvidia-smi lists)"
        return f"{self.ranks} rank{'s' if self.ranks != 1 else ''} with nccl need{'s' if self.ranks == 1 else ''} " \
               f"{need} GPU{'s' if need != 1 else ''} (one each), and {have}"

    def remedy(self) -> str:
        """What to change: fewer ranks, the variable, or the gloo backend."""
        fix = f"run at most {self.visible} rank(s) per node (--nproc-per-node {self.visible})" if self.visible else \
            "run on a node with GPUs"
        if self.hidden:
            fix += ", or unset CUDA_VISIBLE_DEVICES (or list every GPU in it)"
        return fix + "; --backend gloo checks the network without GPUs"


def gpu_fit(backend: str, slots: Sequence[int], listed: int, visible: int,
            cuda_visible_devices: str | None) -> GpuFit | None:
    """None when the ranks of a node fit its GPUs, else why not (:class:`GpuFit`).

    Args:
        backend: the resolved backend (:func:`resolve_backend`); only nccl needs GPUs.
        slots: the GPU index (among the visible GPUs) of each rank of the node.
        listed, visible: GPUs ``nvidia-smi -L`` lists, and those CUDA shows the ranks.
        cuda_visible_devices: the node's ``CUDA_VISIBLE_DEVICES`` (None: unset).

    With nccl each rank needs a GPU of its own (NCCL 2.28 ``init.cc`` refuses two ranks of one
    communicator on one GPU: ``Duplicate GPU detected``), and a rank's GPU index must exist.
    """
    if backend != "nccl" or not slots:
        return None
    highest = max(slots)
    if len(slots) <= visible and highest < visible:
        return None
    return GpuFit(len(slots), visible, listed, cuda_visible_devices, highest)


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """What a node's ranks would get: the ``visible`` GPUs (``nvidia-smi -L`` lines, CUDA's
    order), the ``backend`` resolved for all of them, and ``fit``: why they do not fit (None: they do)."""

    visible: list[str]
    backend: str
    fit: GpuFit | None


def node_gpus(backend: str, slots: Sequence[int], listed: Sequence[str], cuda_visible_devices: str | None,
              in_job: bool) -> NodeGpus:
    """:func:`visible_gpus`, :func:`resolve_backend` and :func:`gpu_fit` of one node, in that order:
    what the node launcher reports and what ``hangdbg check`` checks for this node before it starts."""
    visible = visible_gpus(listed, cuda_visible_devices, in_job)
    used = resolve_backend(backend, len(visible))
    return NodeGpus(visible, used, gpu_fit(used, slots, len(listed), len(visible), cuda_visible_devices))
