"""Which rank is this process? Without importing torch.

Order: ``torch.distributed`` if torch is *already imported* and the default process group is
initialised; else the launcher's environment (torchrun ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``,
Slurm ``SLURM_PROCID``/``SLURM_LOCALID``/``SLURM_NTASKS``, Open MPI ``OMPI_COMM_WORLD_*``).
Missing values are ``None``. The host is ``SLURMD_NODENAME`` or ``socket.gethostname()``.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import NamedTuple

__all__ = ["RankInfo", "rank_info"]


class RankInfo(NamedTuple):
    rank: int | None
    local_rank: int | None
    world_size: int | None
    host: str


_ENV = (
    ("RANK", "LOCAL_RANK", "WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _host() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _from_env() -> tuple[int | None, int | None, int | None]:
    env = os.environ
    for r, l, w in _ENV:
        if r in env:
            return _int(env.get(r)), _int(env.get(l)), _int(env.get(w))
    return None, None, None


def _from_torch() -> tuple[int, int] | None:
    if "torch" not in sys.modules:  # never import torch ourselves
        return None
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        return dist.get_rank(), dist.get_world_size()
    except Exception:  # half-torn-down process group, etc.
        return None


def rank_info() -> RankInfo:
    """The current rank info (cheap; call it again after ``init_process_group``)."""
    rank, local_rank, world_size = _from_env()
    t = _from_torch()
    if t is not None:
        rank, world_size = t
    return RankInfo(rank, local_rank, world_size, _host())
