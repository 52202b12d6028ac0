"""The coordinator: run the agent on every node, keep what arrives, merge it into one job.

Each node's agent sends its ranks merged into equivalence classes (``class`` messages: each
distinct stack once with its ranks, :mod:`hangdbg.transport.classes`); the coordinator merges the
classes of every node into the job's :class:`~hangdbg.model.RankDump` list, decoding each distinct
stack once. The raw py-spy outputs stay on the nodes (``--keep-raw``, under ``OUT/raw/<host>/`` of
the node's own disk) unless they are sent as well (``dump --fetch-raw``, and agents of wire format
1, which send only them): then each is written to ``OUT/raw/<host>/`` the moment its frame
arrives, and a node that sent no class is read from these texts with the same loader as
``hangdbg analyze``. Each node's final status goes to ``OUT/nodes/<host>.json`` as it arrives, so
Ctrl-C or a dead node loses nothing that arrived.
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
from typing import Callable, Iterable

from .._version import __version__
from ..model import RankDump
from ..enums import NodeStatus
from ..stacks.op_record import CurrentOp
from ..stacks.saved import load_dump_texts
from ..rankset import rank_number
from ..tools.subproc import LOG
from ..outdir import OutDir
from ..transport.classes import CLASS, ClassMerger, WireError
from ..transport.wire import WIRE_READ, WIRE_VERSION, FrameDecoder
from .local import RAW
from ..transport.runners import STDERR_HEAD, STDERR_TAIL, Runner
from ..text.lines import MAX_LINE

__all__ = ["NodeResult", "FanoutResult", "FileSink", "fan_out", "agent_argv", "node_file", "safe_name"]

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
    raw_dir: str | None = None
    """Where the node kept its raw py-spy outputs, on its own disk (None: none kept there)."""


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
    The ``mode`` of a message (the source's permission bits) narrows the copy: ``mode & 0o600``.
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
        mode = msg.get("mode")  # the source's permission bits: the copy keeps them or narrower
        self.out.save_chunk(path, offset, data, bool(msg.get("last")),  # a failed file is recorded as not saved
                            mode if isinstance(mode, int) and not isinstance(mode, bool) else None)


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


def safe_name(host: str) -> str:
    """One path component for ``host`` (or a file name): never empty, ``.``, ``..`` or holding ``/``."""
    name = _SAFE.sub("_", host)
    return name if name.strip(".") else "_" * max(1, len(name))


_safe = safe_name


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
        out: output directory (``raw/<host>/`` for raw outputs sent, ``nodes/<host>.json``).
        timeout: seconds for the whole fan-out (every node runs at once).
        on_node: called once per node as its final status becomes known (progress bars, the
            node's document in :func:`node_file`).
    """
    c = _Coordinator(hosts, out, on_node)
    try:
        failures = runner.run(argv, c.on_line, timeout)
    except BaseException:
        runner.stop()
        raise
    elapsed = time.monotonic() - c.start
    with c.lock:
        for host in [*hosts, *failures]:
            if host in c.done:
                continue
            said, reason = failures.get(host, (NodeStatus.NO_ANSWER, "the agent sent no result"))
            status = NodeStatus.read(said, NodeStatus.ERROR)  # what the transport said (a fake runner's text too)
            if host in c.rejected:
                status, reason = NodeStatus.ERROR, c.rejected[host]
            elif host in c.seen and status is NodeStatus.NO_ANSWER:
                status, reason = NodeStatus.ERROR, "the agent stopped before it finished (its node or job step died?)"
            c.finish(NodeResult(host, status, _version_hint(reason), (), elapsed))
    _note_dropped(c, runner.dropped)
    order = {h: i for i, h in enumerate(hosts)}
    nodes = sorted(c.done.values(), key=lambda n: (order.get(n.host, len(order)), n.host))
    if c.decoder.foreign:
        LOG.warning("%d frame line(s) of hosts not asked for were ignored", c.decoder.foreign)
    return FanoutResult(c.dumps(n.host for n in nodes), nodes, c.decoder.garbled + c.decoder.foreign, c.store, c.ops)


class _Coordinator:
    """What :func:`fan_out` keeps while the nodes' messages arrive (one lock: lines come from the
    transport's reader threads)."""

    def __init__(self, hosts: list[str], out: OutDir, on_node: Callable[[NodeResult], None] | None) -> None:
        self.decoder = FrameDecoder(hosts=frozenset(hosts))
        self.files = FileSink(out)
        self.out, self.on_node = out, on_node
        self.problems: dict[str, list[str]] = {}
        self.lock = threading.Lock()
        self.done: dict[str, NodeResult] = {}
        self.seen: dict[str, float] = {}
        self.store: dict[str, bool] = {}
        self.ops: dict[int, CurrentOp] = {}
        self.texts: dict[str, dict[str, str]] = {}
        self.classes: dict[str, dict[int, RankDump]] = {}
        self.rejected: dict[str, str] = {}
        self.merger = ClassMerger()
        self.start = time.monotonic()

    def finish(self, result: NodeResult) -> None:
        if result.host in self.done:
            return
        self.done[result.host] = result
        if self.on_node is not None:
            self.on_node(result)

    def on_line(self, stream: str | None, line: str) -> None:
        with self.lock:
            for host, msg in self.decoder.feed(line, stream):
                self.seen.setdefault(host, time.monotonic())
                kind = msg.get("type")
                if kind == "hello":
                    self.hello(host, msg)
                elif host in self.rejected:
                    if kind == "done":
                        self.finish(NodeResult(host, NodeStatus.ERROR, self.rejected[host], (), self._took(msg)))
                elif kind == CLASS:
                    self.add_class(host, msg)
                elif kind == "rank" and isinstance(msg.get("text"), str) and isinstance(msg.get("name"), str):
                    raw = RAW / _safe(host) / _safe(msg["name"])
                    if inside(self.out.path, self.out / raw):
                        self.out.save_text(raw, msg["text"])
                        self.texts.setdefault(host, {})[_safe(msg["name"])] = msg["text"]  # analysed from memory
                elif kind == "file":
                    self.files.write(host, msg)
                elif kind == "log" and isinstance(msg.get("text"), str):  # the agent's -v lines
                    LOG.info("[%s] %s", host, msg["text"])
                elif kind == "problem":
                    self.problems.setdefault(host, []).append(f"{msg.get('what')}: {msg.get('reason')}")
                elif kind == "done":
                    self.node_done(host, msg)

    def hello(self, host: str, msg: dict) -> None:
        """Refuse an agent whose wire format this coordinator cannot read (another hangdbg version)."""
        wire = msg.get("wire", 1)
        if wire not in WIRE_READ:
            self.rejected[host] = (
                f"the agent on {host} is hangdbg {msg.get('version')!s} and speaks wire format {wire!s}; this "
                f"hangdbg ({__version__}) reads wire format {', '.join(map(str, sorted(WIRE_READ)))}: install the "
                f"same hangdbg version on the nodes (or point --remote-python at one)")

    def add_class(self, host: str, msg: dict) -> None:
        try:
            got = self.merger.add(msg)
        except WireError as exc:
            self.decoder.garbled += 1
            self.problems.setdefault(host, []).append(f"a class message that could not be read: {exc}")
            return
        known = self.classes.setdefault(host, {})
        for d in got:  # a rank sent again (the adaptive steps changed it) replaces its first dump
            known[d.rank] = d

    def node_done(self, host: str, msg: dict) -> None:
        if isinstance(msg.get("store"), dict):
            self.store.update({str(k): bool(v) for k, v in msg["store"].items()})
        if isinstance(msg.get("ops"), dict):
            self.ops.update(_ops(msg["ops"]))
        listed = msg.get("ranks")  # wire 2; wire 1 sent each rank's process facts
        if not isinstance(listed, list):
            procs = msg.get("processes")
            listed = [p.get("rank") for p in (procs if isinstance(procs, list) else ()) if isinstance(p, dict)]
        ranks = tuple(sorted(r for r in map(rank_number, listed) if r is not None))
        status = NodeStatus.read(msg.get("status"), NodeStatus.ERROR)
        if status not in _AGENT_STATUSES:  # a garbled or unknown status: the agent failed
            status = NodeStatus.ERROR
        reason = msg.get("error") or "; ".join(self.problems.get(host, [])) or None
        self.finish(NodeResult(host, status, reason, ranks, self._took(msg), tuple(msg.get("files") or ()),
                               _raw_dir(host, msg.get("raw"))))

    def _took(self, msg: dict) -> float:
        took = msg.get("seconds")
        return float(took) if isinstance(took, (int, float)) else time.monotonic() - self.start

    def dumps(self, hosts: Iterable[str]) -> list[RankDump]:
        """The job's dumps, node by node in ``hosts`` order: a node's classes, else (an agent of
        wire format 1) its raw texts as they arrived (not what is on disk: a file not saved is
        still analysed, and a file an earlier run left in OUT/raw is never read as current). A
        rank two nodes report is taken from the first."""
        hosts = list(hosts)
        texts = [(name, self.texts[h][name]) for h in hosts if h in self.texts and h not in self.classes
                 for name in sorted(self.texts[h])]
        by_rank: dict[int, RankDump] = {}
        for d in [*(d for h in hosts for d in self.classes.get(h, {}).values()), *load_dump_texts(texts)[0]]:
            first = by_rank.setdefault(d.rank, d)
            if first is not d:
                LOG.warning("rank %d was reported by %s and by %s; the first is kept", d.rank, first.host, d.host)
        return sorted(by_rank.values(), key=lambda d: d.rank)


def _note_dropped(c: "_Coordinator", dropped: dict[str | None, int]) -> None:
    """Say what a transport left out of the nodes' output (lines over 1 MiB, stderr over its cap,
    :meth:`hangdbg.transport.runners.Runner._pump`): a warning, and the node's reason in its document."""
    for host, lost in dropped.items():
        what = (f"{lost} bytes of output dropped (lines over {MAX_LINE >> 20} MiB, stderr beyond its first "
                f"{STDERR_HEAD >> 20} MiB and last {STDERR_TAIL >> 10} KiB)")
        LOG.warning("%s: %s", host or "the transport", what)
        node = c.done.get(host) if host is not None else None
        if host is not None and node is not None:
            c.done[host] = replace(node, reason=f"{node.reason}; {what}" if node.reason else what)


def _raw_dir(host: str, raw: object) -> str | None:
    """Where a node kept its raw outputs (the ``raw`` of its ``done``), warning about the files it
    could not write there."""
    if not isinstance(raw, dict) or not isinstance(raw.get("dir"), str):
        return None
    lost = raw.get("not_saved")
    if isinstance(lost, list) and lost:
        why = lost[0][1] if isinstance(lost[0], list) and len(lost[0]) == 2 else "?"
        LOG.warning("%s could not keep %d raw output(s) in %s (%s); `dump --fetch-raw` brings them here",
                    host, len(lost), raw["dir"], why)
    return raw["dir"] if raw.get("saved") else None


def _version_hint(reason: str | None) -> str | None:
    """``reason`` with a hint when it is argparse refusing an option of this hangdbg: the agent on
    the node is another (older) version."""
    if reason and ("unrecognized arguments" in reason or "invalid choice: 'agent'" in reason):
        return (f"{reason} (the node's hangdbg does not know this option: it is another version than this "
                f"one, {__version__}, wire format {WIRE_VERSION}; install the same version on the nodes)")
    return reason


_AGENT_STATUSES = frozenset({NodeStatus.OK, NodeStatus.NO_RANKS, NodeStatus.ERROR, NodeStatus.NOTHING})
"""The statuses a node's agent (``done`` message) reports; the others are the transport's."""


def _ops(raw: dict) -> dict[int, CurrentOp]:
    """The ``ops`` of an agent's ``done`` message (rank -> op fields); a malformed entry is skipped."""
    out = {}
    for rank, fields in raw.items():
        try:
            out[int(rank)] = CurrentOp(**{**fields, "group_ranks": tuple(fields.get("group_ranks") or ())})
        except (TypeError, ValueError, AttributeError):
            continue
    return out
