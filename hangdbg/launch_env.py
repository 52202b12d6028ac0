"""The launchers' environment variables: which say the rank, local rank, world size and node.

One table for the process scanner (reading ``/proc/PID/environ`` of other processes) and the
in-model helpers (reading ``os.environ`` of this one). Sources: torchrun / torch.distributed.run
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``), Open MPI (``OMPI_COMM_WORLD_*``),
MPICH / Intel MPI (``PMI_*``, ``MPI_LOCAL*``), PMIx (``PMIX_RANK``), SLURM srun (``SLURM_PROCID``,
``SLURM_LOCALID``, ``SLURM_NTASKS``, ``SLURM_TASKS_PER_NODE``, ``SLURMD_NODENAME``). ``RANK`` wins
over ``SLURM_PROCID``: for a torchrun worker under srun, ``SLURM_PROCID`` is the node index.
"""

from __future__ import annotations

import socket
from typing import Mapping

from .rankset import rank_number

__all__ = [
    "RANK_VARS",
    "LOCAL_RANK_VARS",
    "WORLD_SIZE_VARS",
    "LOCAL_WORLD_SIZE_VARS",
    "env_int",
    "first_int",
    "rank_from_environ",
    "host_from_environ",
]

RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
WORLD_SIZE_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
LOCAL_WORLD_SIZE_VARS = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_TASKS_PER_NODE")


def env_int(value: str | None) -> int | None:
    """``"3"`` -> 3; SLURM's ``"8(x2)"`` -> 8; anything else (a number no job has included:
    :func:`hangdbg.rankset.rank_number`) -> None."""
    if value is None:
        return None
    return rank_number(value.split("(")[0])


def first_int(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[int | None, str | None]:
    """The first of ``names`` with an integer value in ``env``, and its name."""
    for name in names:
        value = env_int(env.get(name))
        if value is not None:
            return value, name
    return None, None


def rank_from_environ(env: Mapping[str, str]) -> tuple[int | None, str | None]:
    """The global rank in an environment and the variable it came from, or ``(None, None)``."""
    return first_int(env, RANK_VARS)


def host_from_environ(env: Mapping[str, str]) -> str:
    """The node name: ``SLURMD_NODENAME`` (SLURM's name for the node), else the host name."""
    return env.get("SLURMD_NODENAME") or socket.gethostname()
