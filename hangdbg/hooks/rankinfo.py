"""Which rank is this process? Without importing torch.

Order: ``torch.distributed`` if torch is *already imported* and the default process group is
initialised; else the launcher's environment (the table of :mod:`hangdbg.launch_env`: torchrun,
Open MPI, MPICH/PMI, PMIx, SLURM).
Missing values are ``None``. The host is ``SLURMD_NODENAME`` or ``socket.gethostname()``.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

from ..launch_env import LOCAL_RANK_VARS, RANK_VARS, WORLD_SIZE_VARS, first_int, host_from_environ

__all__ = ["RankInfo", "rank_info", "initialized_dist"]


class RankInfo(NamedTuple):
    rank: int | None
    local_rank: int | None
    world_size: int | None
    host: str


def _from_env() -> tuple[int | None, int | None, int | None]:
    env = os.environ
    return (first_int(env, RANK_VARS)[0], first_int(env, LOCAL_RANK_VARS)[0], first_int(env, WORLD_SIZE_VARS)[0])


def initialized_dist():
    """``torch.distributed`` if torch is already imported and the default process group is
    initialised, else ``None`` (never imports torch)."""
    if "torch" not in sys.modules:
        return None
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
    except Exception:  # half-torn-down process group, etc.
        return None
    return dist


def _from_torch() -> tuple[int, int] | None:
    dist = initialized_dist()
    if dist is None:
        return None
    try:
        return dist.get_rank(), dist.get_world_size()
    except Exception:  # half-torn-down process group, etc.
        return None


def rank_info() -> RankInfo:
    """The current rank info (cheap; call it again after ``init_process_group``)."""
    rank, local_rank, world_size = _from_env()
    t = _from_torch()
    if t is not None:
        rank, world_size = t
    return RankInfo(rank, local_rank, world_size, host_from_environ(os.environ))
