"""The ranks of a Ray job: which of a cluster's actors are training processes, their rank, their node.

An actor is a rank when something says its rank, in this order (the first that answers):

1. Ray Train's worker metadata (``world_rank``, ``local_rank``: :mod:`hangdbg.transport.ray_state`),
   the only place a Train worker's rank is visible from outside (Train sets ``RANK`` in-process);
2. the ``env_vars`` of the actor's runtime env (``RANK``, ``WORLD_SIZE``, ... as the launchers'
   table :mod:`hangdbg.launch_env` names them; verl's ``RayWorkerGroup`` passes them there);
3. on this node, the worker's start environment, ``/proc/PID/environ`` (psutil), the same table.

Anything else (the driver, which is no actor; idle or pooled Ray workers; Ray Train's controller and
state actors; the user's other actors) has no rank and is not dumped: only actors that run
``torch.distributed`` with a rank are ranks. A rank on another node is reached by its ``node_ip``
(the agent runs there with ``--ray``, :func:`node_ranks`).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import psutil

from ..errors import NoRanksFound
from ..launch_env import LOCAL_RANK_VARS, LOCAL_WORLD_SIZE_VARS, WORLD_SIZE_VARS, first_int, rank_from_environ
from ..model import RankProcess
from ..redact import mask_argv
from ..transport.ray_state import RayActor, RayCluster, RayTrainWorker, read_cluster

__all__ = ["RayRanks", "ray_ranks", "node_ranks", "local_addresses", "rank_of_actor"]

NO_RAY_RANKS_HELP = (
    "hangdbg takes an actor for a rank when Ray Train's metadata names its world rank, or when its runtime env "
    "(runtime_env={'env_vars': {'RANK': ...}}) or start environment holds RANK/WORLD_SIZE; the cluster's "
    "alive actors had none. Is the job running, and does it use torch.distributed?"
)


@dataclass(frozen=True, slots=True)
class RayRanks:
    """The ranks of a Ray cluster: ``here`` (this node's, ready to dump) and ``elsewhere`` (node IP ->
    that node's ranks, dumped by the agent there), with the number of alive actors looked at."""

    here: list[RankProcess]
    elsewhere: dict[str, list[RankProcess]]
    actors: int
    here_ip: str = ""

    @property
    def nodes(self) -> list[str]:
        """The IPs of every node with a rank, this node's first."""
        return ([self.here_ip] if self.here else []) + sorted(self.elsewhere)


def local_addresses() -> set[str]:
    """The IP addresses of this node's interfaces (psutil ``net_if_addrs``), loopback included."""
    out = {"127.0.0.1", "::1"}
    for addrs in psutil.net_if_addrs().values():
        out.update(a.address.split("%")[0] for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6))
    return out


def _proc_environ(pid: int) -> dict[str, str]:
    try:
        return dict(psutil.Process(pid).environ())
    except (psutil.Error, OSError):
        return {}


def _cmdline(pid: int) -> str:
    try:
        return " ".join(mask_argv(psutil.Process(pid).cmdline()))  # secrets never leave memory
    except (psutil.Error, OSError):
        return ""


def rank_of_actor(actor: RayActor, train: dict[str, RayTrainWorker], here: bool, host: str) -> RankProcess | None:
    """The rank process ``actor`` is (see the module's order of sources), or None when it is no rank.

    Args:
        train: Ray Train's workers by actor id.
        here: the actor runs on this node (its ``/proc/PID/environ`` can be read).
        host: the node name the rank is labelled with.
    """
    job = ("ray", actor.node_ip)
    w = train.get(actor.actor_id)
    if w is not None:
        return RankProcess(actor.pid, w.world_rank, host, w.local_rank, w.world_size, None, "ray-train",
                           _cmdline(actor.pid) if here else actor.class_name, job)
    for env, where in ((actor.env_vars, "runtime_env"), (_proc_environ(actor.pid) if here else {}, "environ")):
        rank, var = rank_from_environ(env)
        if rank is not None:
            return RankProcess(actor.pid, rank, host, first_int(env, LOCAL_RANK_VARS)[0],
                               first_int(env, WORLD_SIZE_VARS)[0], first_int(env, LOCAL_WORLD_SIZE_VARS)[0],
                               f"ray-{where}:{var}", _cmdline(actor.pid) if here else actor.class_name, job)
    return None


def ray_ranks(cluster: RayCluster, mine: set[str] | None = None) -> RayRanks:
    """Split ``cluster``'s ranks into this node's and the other nodes' (``mine``: this node's
    addresses, :func:`local_addresses` by default). Ranks sort by rank.

    Raises:
        NoRanksFound: no alive actor is a rank.
    """
    mine = local_addresses() if mine is None else mine
    train = {w.actor_id: w for w in cluster.train}
    here: list[RankProcess] = []
    elsewhere: dict[str, list[RankProcess]] = {}
    host, here_ip = socket.gethostname(), ""
    for actor in cluster.actors:
        local = actor.node_ip in mine
        here_ip = actor.node_ip if local and actor.node_ip else here_ip
        r = rank_of_actor(actor, train, local, host if local else actor.node_ip)
        if r is None:
            continue
        (here if local else elsewhere.setdefault(actor.node_ip, [])).append(r)
    if not here and not elsewhere:
        raise NoRanksFound(f"no training process found among the {len(cluster.actors)} alive actors of the Ray cluster",
                           help=NO_RAY_RANKS_HELP)
    here.sort(key=lambda r: (r.rank, r.pid))
    for ranks in elsewhere.values():
        ranks.sort(key=lambda r: (r.rank, r.pid))
    return RayRanks(here, elsewhere, len(cluster.actors), here_ip)


def node_ranks(address: str, timeout: float = 20.0) -> list[RankProcess]:
    """This node's ranks of the Ray cluster at ``address`` (the agent's ``--ray``: each node dumps
    its own).

    Raises:
        HangdbgError: ray missing, the cluster not reachable.
        NoRanksFound: no rank on this node.
    """
    found = ray_ranks(read_cluster(address, timeout))
    if not found.here:
        raise NoRanksFound(f"no rank of the Ray cluster at {address} runs on this node", help=NO_RAY_RANKS_HELP)
    return found.here
