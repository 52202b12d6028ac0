"""The coordinator: run the agent on every node, keep what arrives, merge it into one job.

Each node's raw dumps are written to ``OUT/raw/<host>/`` the moment their frame arrives and its
final status to ``OUT/nodes/<host>.json``, so Ctrl-C or a dead node loses nothing that arrived;
the dumps are then read back with the same loader as ``hangdbg analyze``.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..model import RankDump
from ..waits import ProcFacts
from ..enums import NodeStatus
from ..stacks.op_record import CurrentOp
from ..stacks.saved import load_dump_texts
from ..rankset import rank_number
from ..tools.subproc import LOG
from ..outdir import OutDir
from ..transport.wire import FrameDecoder
from .local import RAW
from .proc_facts import facts_from_json
from ..transport.runners import Runner

__all__ = ["NodeResult", "FanoutResult", "FileSink", "fan_out", "agent_argv", "node_file"]

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class NodeResult:
    """What became of one node.

    ``status``: :class:`~hangdbg.enums.NodeStatus`: ``ok`` (ranks dumped, or files sent),
    ``no-ranks`` (agent ran, found none), ``nothing`` (``collect``: none of the files asked for is
    on the node), ``error`` (the agent or the transport failed), ``unreachable``, ``no-hangdbg``,
    ``timeout``, or ``no-answer`` (nothing came back and the transport said nothing either);
    ``status.failed``: the node could not be read. ``seconds``: until the node's result came.
    """

    host: str
    status: NodeStatus
    reason: str | None = None
    ranks: tuple[int, ...] = ()
    seconds: float | None = None
    files: tuple[str, ...] = ()
    """Files the node sent (``hangdbg collect``), relative to ``OUT/<host>/``."""


def node_file(out: Path, host: str) -> Path | None:
    """``OUT/nodes/<host>.json``, the file of one node's final status (written by the caller as
    the node finishes), or None when the host's name would lead outside ``out``."""
    path = out / "nodes" / f"{_safe(host)}.json"
    return path if inside(out, path) else None


class FileSink:
    """Writes ``file`` messages (chunks of a node's file) to ``OUT/<host>/<name>``.

    Chunks go to ``<name>.part`` at their offset as they arrive; the file gets its name when the
    last chunk is in. Names are sanitised per path component (no ``..``, no absolute paths), and a
    path that resolves outside ``out`` (a symlink in the way) is refused and counted in ``bad``.
    """

    def __init__(self, out: OutDir) -> None:
        self.out = out
        self.bad = 0

    def path(self, host: str, name: str) -> Path | None:
        """``OUT/<host>/<name>`` sanitised, or None when nothing is left or it leaves ``out``."""
        parts = [_safe(p) for p in name.split("/") if p not in ("", ".", "..")]
        top = self.out.path
        path = top.joinpath(_safe(host), *parts) if parts else None
        if path is None or not inside(top, path) or not inside(top, path.with_name(path.name + ".part")):
            return None
        return path

    def write(self, host: str, msg: dict) -> None:
        path = self.path(host, str(msg.get("name", "")))
        try:
            data = base64.b64decode(msg.get("data", ""), validate=True)
            offset = int(msg.get("offset", 0))
        except (ValueError, TypeError, binascii.Error):
            path = None
        if path is None or offset < 0:
            self.bad += 1
            return
        self.out.save_chunk(path, offset, data, bool(msg.get("last")))  # a failed file is recorded as not saved


@dataclass(frozen=True, slots=True)
class FanoutResult:
    dumps: list[RankDump]
    nodes: list[NodeResult]
    garbled_lines: int
    store_keys: dict[str, bool] = field(default_factory=dict)
    """What the nodes' agents learned from the job's store (key -> present)."""
    ops: dict[int, CurrentOp] = field(default_factory=dict)
    """rank -> the op its in-job recorder says it is in, as the nodes' agents read it."""


def agent_argv(python: str, args: list[str]) -> list[str]:
    """``PYTHON -m hangdbg agent ARGS``: the command each node runs."""
    return [python, "-m", "hangdbg", "agent", *args]


def _safe(host: str) -> str:
    """One path component for ``host`` (or a file name): never empty, ``.``, ``..`` or holding ``/``."""
    name = _SAFE.sub("_", host)
    return name if name.strip(".") else "_" * max(1, len(name))


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, symlinks resolved (also for the parts that do not exist yet), is under ``root``."""
    top = os.path.realpath(root)
    return os.path.realpath(path).startswith(top.rstrip(os.sep) + os.sep)


def fan_out(
    runner: Runner,
    hosts: list[str],
    argv: list[str],
    out: OutDir,
    timeout: float,
    on_node: Callable[[NodeResult], None] | None = None,
) -> FanoutResult:
    """Run ``argv`` (the agent) on ``hosts`` through ``runner`` and gather the job's dumps.

    Args:
        runner: the transport (srun, pdsh, ssh, fake).
        hosts: the node names expected to answer.
        argv: the agent command (see :func:`agent_argv`).
        out: output directory (``raw/<host>/``, ``nodes/<host>.json``).
        timeout: seconds for the whole fan-out (every node runs at once).
        on_node: called once per node as its final status becomes known (progress bars, the
            node's document in :func:`node_file`).
    """
    decoder = FrameDecoder(hosts=frozenset(hosts))
    files = FileSink(out)
    problems: dict[str, list[str]] = {}
    lock = threading.Lock()
    done: dict[str, NodeResult] = {}
    seen: dict[str, float] = {}
    store: dict[str, bool] = {}
    ops: dict[int, CurrentOp] = {}
    proc: dict[int, ProcFacts] = {}
    texts: dict[str, dict[str, str]] = {}
    start = time.monotonic()

    def finish(result: NodeResult) -> None:
        if result.host in done:
            return
        done[result.host] = result
        if on_node is not None:
            on_node(result)

    def on_line(stream: str | None, line: str) -> None:
        with lock:
            for host, msg in decoder.feed(line, stream):
                kind = msg.get("type")
                seen.setdefault(host, time.monotonic())
                if kind == "rank" and isinstance(msg.get("text"), str) and isinstance(msg.get("name"), str):
                    raw = RAW / _safe(host) / _safe(msg["name"])
                    if inside(out.path, out / raw):
                        out.save_text(raw, msg["text"])
                        texts.setdefault(host, {})[_safe(msg["name"])] = msg["text"]  # analysed from memory
                elif kind == "file":
                    files.write(host, msg)
                elif kind == "log" and isinstance(msg.get("text"), str):  # the agent's -v lines
                    LOG.info("[%s] %s", host, msg["text"])
                elif kind == "problem":
                    problems.setdefault(host, []).append(f"{msg.get('what')}: {msg.get('reason')}")
                elif kind == "done":
                    if isinstance(msg.get("store"), dict):
                        store.update({str(k): bool(v) for k, v in msg["store"].items()})
                    if isinstance(msg.get("ops"), dict):
                        ops.update(_ops(msg["ops"]))
                    proc.update(proc_facts_of(msg.get("proc")))
                    procs = msg.get("processes")
                    ranks = tuple(sorted(r for r in (rank_number(p.get("rank")) for p in (procs if isinstance(procs, list) else ())
                                                     if isinstance(p, dict)) if r is not None))
                    status = NodeStatus.read(msg.get("status"), NodeStatus.ERROR)
                    if status not in _AGENT_STATUSES:  # a garbled or unknown status: the agent failed
                        status = NodeStatus.ERROR
                    reason = msg.get("error") or "; ".join(problems.get(host, [])) or None
                    took = msg.get("seconds")
                    took = float(took) if isinstance(took, (int, float)) else time.monotonic() - start
                    finish(NodeResult(host, status, reason, ranks, took, tuple(msg.get("files") or ())))

    try:
        failures = runner.run(argv, on_line, timeout)
    except BaseException:
        runner.stop()
        raise
    elapsed = time.monotonic() - start
    with lock:
        for host in [*hosts, *failures]:
            if host in done:
                continue
            said, reason = failures.get(host, (NodeStatus.NO_ANSWER, "the agent sent no result"))
            status = NodeStatus.read(said, NodeStatus.ERROR)  # what the transport said (a fake runner's text too)
            if host in seen and status is NodeStatus.NO_ANSWER:
                status, reason = NodeStatus.ERROR, "the agent stopped before it finished (its node or job step died?)"
            finish(NodeResult(host, status, reason, (), elapsed))
    # this run's dumps as they arrived, not what is on disk: a file not saved (disk full) is still
    # analysed, and a file an earlier run left in OUT/raw is never read as current
    dumps = load_dump_texts([(name, texts[h][name]) for h in done if h in texts for name in sorted(texts[h])])[0]
    dumps = [replace(d, proc=proc[d.rank]) if d.rank in proc and d.proc is None else d for d in dumps]
    order = {h: i for i, h in enumerate(hosts)}
    nodes = sorted(done.values(), key=lambda n: (order.get(n.host, len(order)), n.host))
    if decoder.foreign:
        LOG.warning("%d frame line(s) of hosts not asked for were ignored", decoder.foreign)
    return FanoutResult(dumps, nodes, decoder.garbled + decoder.foreign, store, ops)


_AGENT_STATUSES = frozenset({NodeStatus.OK, NodeStatus.NO_RANKS, NodeStatus.ERROR, NodeStatus.NOTHING})
"""The statuses a node's agent (``done`` message) reports; the others are the transport's."""


def proc_facts_of(raw: object) -> dict[int, ProcFacts]:
    """The ``proc`` of an agent's ``done`` message (rank -> /proc facts of a blocked rank,
    :func:`hangdbg.collect.agent.proc_message`); a malformed entry is skipped."""
    out: dict[int, ProcFacts] = {}
    for rank, doc in (raw.items() if isinstance(raw, dict) else ()):
        facts = facts_from_json(doc)
        r = rank_number(rank)
        if facts is not None and r is not None:
            out[r] = facts
    return out


def _ops(raw: dict) -> dict[int, CurrentOp]:
    """The ``ops`` of an agent's ``done`` message (rank -> op fields); a malformed entry is skipped."""
    out = {}
    for rank, fields in raw.items():
        try:
            out[int(rank)] = CurrentOp(**{**fields, "group_ranks": tuple(fields.get("group_ranks") or ())})
        except (TypeError, ValueError, AttributeError):
            continue
    return out
