"""Ask a Ray cluster which actors run where: Ray's state API, and Ray Train's worker metadata.

**Why the state API** (``ray.util.state.list_actors``/``list_nodes``) and not the dashboard's REST
routes by hand: it is Ray's public, versioned Python API for exactly this question (the
``ray list actors`` command is built on it), it accepts both forms of a cluster's address (the GCS
bootstrap ``HOST:PORT``, resolved to the dashboard through the GCS, or the dashboard's
``http://HOST:PORT``), and it filters on the server (``state=ALIVE``). An actor record carries
its worker ``pid``, its ``node_id`` and its ``serialized_runtime_env`` (the ``env_vars`` it was
started with: verl's ``RayWorkerGroup`` passes ``RANK``/``WORLD_SIZE`` there); a node record its
``node_ip`` (``ray/util/state/common.py``: ``ActorState``, ``NodeState``). Ray is imported only
here, only when ``--ray`` is used: hangdbg runs without it.

**Ray Train.** Ray Train sets ``RANK`` with ``os.environ`` inside its workers, after they started,
so neither ``/proc/PID/environ`` nor the runtime env shows it; its own metadata does: the
dashboard's ``/api/train/v2/runs/v1`` (Train V2) and ``/api/train/v2/runs`` (Train V1) list each
run's workers with ``world_rank``, ``local_rank``, ``actor_id``, ``pid`` and ``node_ip``
(``ray/train/v2/_internal/state/schema.py``: ``TrainWorker``; ``ray/dashboard/modules/train/train_head.py``).
Both are read; a cluster without Train answers an error, which only means "no Train metadata".
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import HangdbgError

__all__ = ["RayActor", "RayTrainWorker", "RayCluster", "read_cluster", "train_workers", "TRAIN_ROUTES"]

TRAIN_ROUTES = ("/api/train/v2/runs/v1", "/api/train/v2/runs")
"""Ray Train's dashboard routes: Train V2's runs, then Train V1's (``train_head.py``)."""


@dataclass(frozen=True, slots=True)
class RayActor:
    """One alive actor: its worker process ``pid`` on the node ``node_ip`` (``node_id``), its class,
    and the ``env_vars`` of its runtime env (the variables it was started with)."""

    actor_id: str
    class_name: str
    pid: int
    node_id: str
    node_ip: str
    env_vars: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RayTrainWorker:
    """A Ray Train worker as Train's metadata describes it (``TrainWorker``)."""

    actor_id: str
    pid: int
    node_ip: str
    world_rank: int
    local_rank: int | None
    world_size: int


@dataclass(frozen=True, slots=True)
class RayCluster:
    """What the cluster said: its alive actors, and the Train workers (empty without Train)."""

    actors: tuple[RayActor, ...]
    train: tuple[RayTrainWorker, ...] = ()


def _state_api() -> Any:
    try:
        from ray.util import state  # optional: only --ray needs it
    except ImportError:
        raise HangdbgError("--ray needs the ray package", help="pip install 'hangdbg[ray]' (or pip install 'ray[default]')") from None
    return state


def read_cluster(address: str, timeout: float = 20.0) -> RayCluster:
    """The alive actors (at most 10,000, the API server's default cap) of the Ray cluster at ``address`` and its Train workers.

    Args:
        address: the GCS address ``HOST:PORT`` (what ``ray start --head`` prints) or the
            dashboard's ``http://HOST:PORT``.
        timeout: seconds each request may take.

    Raises:
        HangdbgError: ray is not installed; the cluster cannot be reached.
    """
    state = _state_api()
    try:
        nodes = state.list_nodes(address=address, timeout=int(max(1, timeout)), raise_on_missing_output=False)
        actors = state.list_actors(address=address, filters=[("state", "=", "ALIVE")], detail=True,
                                   timeout=int(max(1, timeout)), raise_on_missing_output=False, limit=10_000)
    except Exception as exc:  # ray raises ConnectionError, RayStateApiException, ValueError, ...
        raise HangdbgError(f"cannot read the Ray cluster at {address}: {exc}".splitlines()[0],
                           help="give the head's GCS address HOST:PORT (ray start --head --port) or its dashboard "
                                "http://HOST:8265; the dashboard must run (ray[default])") from None
    ips = {n.node_id: n.node_ip for n in nodes}
    out = [RayActor(a.actor_id, a.class_name or "", int(a.pid), a.node_id or "", ips.get(a.node_id, ""),
                    runtime_env_vars(a.serialized_runtime_env))
           for a in actors if a.pid]
    return RayCluster(tuple(out), tuple(train_workers(_dashboard_url(address), timeout)))


def runtime_env_vars(serialized: str | None) -> dict[str, str]:
    """The ``env_vars`` of an actor's ``serialized_runtime_env`` (JSON, ``{"env_vars": {...}}``);
    ``{}`` when absent or not readable."""
    try:
        env = json.loads(serialized or "{}").get("env_vars") or {}
    except (ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def _dashboard_url(address: str) -> str | None:
    if address.startswith(("http://", "https://")):
        return address.rstrip("/")
    try:
        from ray.dashboard.utils import get_address_for_submission_client

        return str(get_address_for_submission_client(address)).rstrip("/")
    except Exception:  # no dashboard: no Train metadata either
        return None


def train_workers(url: str | None, timeout: float = 20.0) -> list[RayTrainWorker]:
    """The workers of every Ray Train run the dashboard at ``url`` knows (:data:`TRAIN_ROUTES`);
    ``[]`` when it has none or does not answer. A worker seen in several attempts keeps its last."""
    if not url:
        return []
    found: dict[str, RayTrainWorker] = {}
    for route in TRAIN_ROUTES:
        try:
            with urllib.request.urlopen(url + route, timeout=timeout) as resp:  # noqa: S310 (http(s) only)
                doc = json.loads(resp.read(64 << 20))
        except (OSError, ValueError, urllib.error.URLError):
            continue
        for w in parse_train_runs(doc):
            found[w.actor_id] = w
    return list(found.values())


def parse_train_runs(doc: Any) -> list[RayTrainWorker]:
    """The workers in a Train runs document: every object with ``world_rank``, ``pid`` and
    ``actor_id`` (``TrainWorker`` of V2, ``TrainWorkerInfo`` of V1), the world size being the number
    of workers in the same list."""
    out: list[RayTrainWorker] = []
    for group in _worker_lists(doc):
        for w in group:
            try:
                out.append(RayTrainWorker(str(w["actor_id"]), int(w["pid"]), str(w.get("node_ip") or ""),
                                          int(w["world_rank"]), _int(w.get("local_rank")), len(group)))
            except (KeyError, TypeError, ValueError):
                continue
    return out


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _is_worker(x: Any) -> bool:
    return isinstance(x, dict) and {"world_rank", "pid", "actor_id"} <= x.keys()


def _worker_lists(doc: Any) -> Iterator[list[dict[str, Any]]]:
    if isinstance(doc, dict):
        for v in doc.values():
            yield from _worker_lists(v)
    elif isinstance(doc, list):
        workers = [x for x in doc if _is_worker(x)]
        if workers:
            yield workers
        for x in doc:
            if not _is_worker(x):
                yield from _worker_lists(x)
