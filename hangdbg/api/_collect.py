"""The ``collect`` use case: post-mortem evidence from every node's local disks into one directory.

:func:`collect` runs the agent on every node through the same fan-out as ``dump`` (one srun,
pdsh, or an ssh pool); each node reads its local disks (NCCL logs split per rank, core files
turned into backtraces by :func:`read_core`, the kernel log, tracer files, other logs) and sends
back the small results, written to ``OUT/<host>/`` as they arrive. ``hangdbg report OUT`` (or
:func:`hangdbg.api.report`) then reads them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ..collect.fanout import agent_argv
from ..collect.gather import CoreRead, GatherOptions
from ..collect.node_status import node_findings
from ..collect.result import CollectResult
from ..errors import UsageError
from ..events import Events
from ..headline import collect_headline
from ..report.build import collect_document
from ..report.schema import to_json
from ..transport.runners import HOST
from ..transport.targets import TargetSpec, resolve
from ._dump import claim_out, fan_out_nodes

__all__ = ["collect", "read_core"]


def collect(target: TargetSpec, gather: GatherOptions, events: Events | None = None, *, out: Path | None = None,
            force: bool = False, node_timeout: float = 600.0, verbose: bool = False,
            argv: Sequence[str] = ()) -> CollectResult:
    """Gather ``gather``'s evidence from every node of ``target`` into ``out`` (``collect.json``
    last, ``nodes/HOST.json`` as each node finishes).

    Raises:
        UsageError: a target of this node only, nothing asked for, ``match_env`` (it selects ranks).
    """
    events = events or Events()
    if not target.remote:
        raise UsageError("collect needs --jobid, --hosts or --hostfile (on this node alone, point `hangdbg report` at the files)")
    if not gather:
        raise UsageError("nothing to collect: give --nccl-logs, --cores, --traces, --logs and/or --dmesg")
    if target.match_env:
        raise UsageError("--match-env is for dump (it selects ranks); collect reads files")
    targets = resolve(target, "collect")
    run = claim_out(out, "collect", argv, force=force, prefix="hangdbg-collect")
    options = gather.to_argv() + (["-v"] if verbose else []) + (["--node-name", HOST] if not target.jobid else [])
    fan = fan_out_nodes("collect", targets, agent_argv(target.remote_python, options), run, node_timeout, events)
    failed = node_findings([(n.host, n.status, n.reason) for n in fan.nodes])
    headline = collect_headline(failed, sum(len(n.files) for n in fan.nodes), len(fan.nodes), str(run.path))
    result = CollectResult(str(run.path), tuple(fan.nodes), headline, tuple(failed), fan.garbled_lines)
    run.save_text("collect.json", to_json(collect_document(result)) + "\n")
    for f in failed:
        events.warn(f.summary)
    return replace(result, not_saved=run.not_saved)


def read_core(core: str, exe: str | None) -> CoreRead | str:
    """A core file read on its node as ``hangdbg core`` reads it (for ``collect``): its JSON
    document and gdb's backtrace texts, or why it could not be read."""
    from ..evidence.core.reader import CoreOptions, load
    from ..report.build import core_document
    from ..stacks.analysis import analyze

    report, dumps, readings = load([core], CoreOptions(exe=exe))
    if not dumps:
        return "; ".join(d for c in readings for d in c.diagnoses) or "not a readable core file"
    doc = core_document(readings, report, analyze(dumps, live=False), [core])
    return CoreRead(to_json(doc) + "\n", [c.gdb_text for c in readings if c.gdb_text])
