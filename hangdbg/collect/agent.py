"""The node agent: collect this node's ranks and stream the results as framed messages.

Run on every node by the coordinator (``hangdbg agent``, through one srun, pdsh or ssh). It
writes only :mod:`frames` lines to its output (the messages: :mod:`hangdbg.transport.wire`): a
``hello``; once the node's ranks are read, one ``class`` message per distinct stack with its ranks
(:mod:`hangdbg.transport.classes`: the merge happens here, on the node, as STAT's daemons do);
the ranks the adaptive steps changed, again (each replaces its first dump); and a final ``done``
with the node's status (``ok``, ``no-ranks`` or ``error``) and its ranks (their process facts are
in the classes). Each raw py-spy output (the text exactly as ``dump -o`` keeps it, header line
included) is written on the node as it arrives (``--keep-raw DIR``: ``DIR/<node>/``), and sent as
a ``rank`` message only when asked (``--fetch-raw``).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, replace
from typing import Any, Callable

from .._version import __version__
from ..errors import HangdbgError, NoRanksFound, RanksUnreadable, UsageError
from ..launch_env import host_from_environ
from ..model import SCHEMA_VERSION, RankDump
from ..enums import NodeStatus
from ..outdir import OutDir
from ..transport.classes import encode_classes
from ..transport.wire import WIRE_VERSION
from .adaptive import adapt
from .local import CollectOptions, collect, process_start, raw_name, raw_text
from .ray_ranks import node_ranks
from .procs import EnvFilter, RankProcess, find_ranks, slurm_job_filter

__all__ = ["run_agent", "agent_host"]


def agent_host(name: str | None = None) -> str:
    """This node's name: ``name``, else ``SLURMD_NODENAME`` inside a SLURM step, else the host name."""
    return name or host_from_environ(os.environ)


def env_filter(pairs: list[str]) -> EnvFilter:
    """Keep processes whose environment has every ``KEY=VALUE`` of ``pairs``.

    Raises:
        UsageError: a pair without ``=``.
    """
    want = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--match-env takes KEY=VALUE, not {pair!r}")
        want.append((key, value))
    return lambda env: all(env.get(k) == v for k, v in want)


def run_agent(
    opts: CollectOptions,
    send: Callable[[dict[str, Any]], None],
    jobid: str | None = None,
    pids: list[int] | None = None,
    node_name: str | None = None,
    match_env: list[str] | None = None,
    adaptive: bool = True,
    keep_raw: OutDir | None = None,
    fetch_raw: bool = False,
    ray: str | None = None,
) -> NodeStatus:
    """Collect this node's ranks and ``send`` every message; returns the node status (``ok``,
    ``no-ranks``: no rank found, ``error``: another failure, such as ranks not readable).

    Args:
        opts: collection options (``opts.out`` may name a shared directory to write to as well).
        send: called with each message (a JSON-able dict); the CLI frames and prints it.
        jobid: keep only the ranks of this SLURM job on this node (see ``slurm_job_filter``).
        pids: ranks or launchers to dump instead of scanning the node.
        node_name: the name the coordinator knows this node by (labels the results).
        match_env: ``KEY=VALUE`` pairs a rank's environment must have (several jobs on a node).
        adaptive: run the adaptive steps of ``dump`` on this node's ranks
            (:func:`hangdbg.collect.adaptive.adapt`); their raw outputs go out as ``rank``
            messages, the store's answer and the op records in ``done`` (``store``: key ->
            present; ``ops``: rank -> op).
        keep_raw: write every raw py-spy output into this directory as it arrives (the node's
            own disk, or a shared one); ``done`` says where and what could not be written.
        fetch_raw: also send every raw output as a ``rank`` message (``dump --fetch-raw``).
        ray: the address of a Ray cluster: this node's ranks are its actors that have a rank
            (:func:`hangdbg.collect.ray_ranks.node_ranks`), not the processes found by scanning.
    """
    host = agent_host(node_name)
    start = time.monotonic()
    send({"type": "hello", "host": host, "pid": os.getpid(), "version": __version__, "schema_version": SCHEMA_VERSION,
          "wire": WIRE_VERSION})
    filters: list[EnvFilter] = []
    if jobid is not None:
        filters.append(slurm_job_filter(jobid, agent_host(), os.environ.get("SLURM_STEP_ID"),
                                        os.environ.get("SLURM_CLUSTER_NAME")))
    if match_env:
        filters.append(env_filter(match_env))
    keep = (lambda env: all(f(env) for f in filters)) if filters else None
    ranks: list[RankProcess] = []
    try:
        found = node_ranks(ray, opts.pyspy.timeout) if ray else find_ranks(pids, keep)
        ranks = [replace(r, host=host) for r in found]
    except HangdbgError as exc:
        found_none = isinstance(exc, NoRanksFound) and not isinstance(exc, RanksUnreadable)
        status = NodeStatus.NO_RANKS if found_none else NodeStatus.ERROR
        send({"type": "done", "host": host, "status": status.value, "error": str(exc), "ranks": [],
              "seconds": time.monotonic() - start})
        return status

    started = {p.pid: process_start(p.pid) for p in ranks}  # the headers' started=, with unix= (the window)

    saved = [0]

    def raw(p: RankProcess, name: str, text: str, error: str | None) -> None:
        if keep_raw is not None:
            before = len(keep_raw.not_saved)
            keep_raw.save_text(name, text)
            saved[0] += len(keep_raw.not_saved) == before
        if fetch_raw:
            send({"type": "rank", "host": host, "rank": p.rank, "name": name, "text": text, "error": error})

    def on_result(p: RankProcess, sample: int, res) -> None:
        raw(p, raw_name(p.rank, sample, opts.samples), raw_text(p, sample, res, "", time.time(), started[p.pid]), res.error)

    dumps = collect(ranks, opts, on_result)
    send_classes(host, dumps, send)  # the first round now: a node cut off by --node-timeout still counts
    store: dict[str, bool] = {}
    ops: dict[str, dict] = {}
    if adaptive:
        result = adapt(ranks, dumps, opts, lambda m: send({"type": "log", "text": m}),
                       lambda p, name, text: raw(p, name, text, None))
        store, ops = result.store_keys, {str(r): asdict(op) for r, op in result.ops.items()}
        first = {d.rank: d for d in dumps}
        send_classes(host, [d for d in result.dumps if first.get(d.rank) != d], send)  # what the steps changed
    kept = None if keep_raw is None else {
        "dir": str(keep_raw.path), "saved": saved[0],
        "not_saved": [[str(n.path), n.reason] for n in keep_raw.not_saved]}
    send({"type": "done", "host": host, "status": NodeStatus.OK.value, "error": None, "store": store, "ops": ops,
          "ranks": sorted(r.rank for r in ranks), "seconds": time.monotonic() - start, "raw": kept})
    return NodeStatus.OK


def send_classes(host: str, dumps: list[RankDump], send: Callable[[dict[str, Any]], None]) -> None:
    """Send ``dumps`` as ``class`` messages (one per distinct stack, :mod:`hangdbg.transport.classes`)."""
    for msg in encode_classes(dumps):
        send({**msg, "host": host})
