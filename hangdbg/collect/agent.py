"""The node agent: collect this node's ranks and stream the results as framed messages.

Run on every node by the coordinator (``hangdbg agent``, through one srun, pdsh or ssh). It
writes only :mod:`frames` lines to its output: a ``hello``, one ``rank`` message per py-spy run
(the raw text exactly as ``dump -o`` keeps it, header line included) as soon as it arrives, and a
final ``done`` with the node's status (``ok``, ``no-ranks`` or ``error``) and its process list.
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
from .adaptive import adapt
from .local import CollectOptions, collect, process_start, raw_name, raw_text
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


def proc_message(dumps: list[RankDump]) -> dict[str, dict[str, Any]]:
    """The ``proc`` field of the ``done`` message: rank -> ``asdict`` of its /proc facts
    (:class:`hangdbg.waits.ProcFacts`, read for blocked ranks only); read back by
    :func:`hangdbg.collect.proc_facts.facts_from_json`."""
    return {str(d.rank): asdict(d.proc) for d in dumps if d.proc is not None}


def run_agent(
    opts: CollectOptions,
    send: Callable[[dict[str, Any]], None],
    jobid: str | None = None,
    pids: list[int] | None = None,
    node_name: str | None = None,
    match_env: list[str] | None = None,
    adaptive: bool = True,
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
            present; ``ops``: rank -> op; ``proc``: rank -> the /proc facts of a blocked rank).
    """
    host = agent_host(node_name)
    start = time.monotonic()
    send({"type": "hello", "host": host, "pid": os.getpid(), "version": __version__, "schema_version": SCHEMA_VERSION})
    filters: list[EnvFilter] = []
    if jobid is not None:
        filters.append(slurm_job_filter(jobid, agent_host(), os.environ.get("SLURM_STEP_ID"),
                                        os.environ.get("SLURM_CLUSTER_NAME")))
    if match_env:
        filters.append(env_filter(match_env))
    keep = (lambda env: all(f(env) for f in filters)) if filters else None
    ranks: list[RankProcess] = []
    try:
        ranks = [replace(r, host=host) for r in find_ranks(pids, keep)]
    except HangdbgError as exc:
        found_none = isinstance(exc, NoRanksFound) and not isinstance(exc, RanksUnreadable)
        status = NodeStatus.NO_RANKS if found_none else NodeStatus.ERROR
        send({"type": "done", "host": host, "status": status.value, "error": str(exc), "processes": [],
              "seconds": time.monotonic() - start})
        return status

    started = {p.pid: process_start(p.pid) for p in ranks}  # the headers' started=, with unix= (the window)

    def on_result(p: RankProcess, sample: int, res) -> None:
        send({"type": "rank", "host": host, "rank": p.rank, "sample": sample,
              "name": raw_name(p.rank, sample, opts.samples),
              "text": raw_text(p, sample, res, "", time.time(), started[p.pid]), "error": res.error})

    dumps = collect(ranks, opts, on_result)
    store: dict[str, bool] = {}
    ops: dict[str, dict] = {}
    if adaptive:
        def on_raw(p: RankProcess, name: str, text: str) -> None:
            send({"type": "rank", "host": host, "rank": p.rank, "name": name, "text": text, "error": None})

        result = adapt(ranks, dumps, opts, lambda m: send({"type": "log", "text": m}), on_raw)
        store, ops = result.store_keys, {str(r): asdict(op) for r, op in result.ops.items()}
        dumps = result.dumps
    send({"type": "done", "host": host, "status": NodeStatus.OK.value, "error": None, "store": store, "ops": ops,
          "proc": proc_message(dumps), "processes": [asdict(r) for r in ranks], "seconds": time.monotonic() - start})
    return NodeStatus.OK
