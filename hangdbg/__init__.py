"""hangdbg: find out why a distributed PyTorch job hangs or dies.

Public API (stable names; everything else is internal). The use cases, one per command, take a
typed plan and return the result the command renders (:mod:`hangdbg.api`)::

    from hangdbg import DumpPlan, TargetSpec, api
    result = api.dump(DumpPlan(target=TargetSpec(jobid="4242")))   # every node of a SLURM job
    print(result.headline, [(f.kind, f.ranks, f.hosts) for f in result.suspects])

and the parts they are made of::

    from hangdbg import find_ranks, collect_stacks, analyze_dumps
    dumps = collect_stacks(find_ranks())   # py-spy every rank of this node's job
    result = analyze_dumps(dumps)          # classes, tree, findings
    print(result.headline, [(f.kind, f.ranks) for f in result.suspects])

    verdict = read_evidence(["/scratch/job-4242"])   # post-mortem: cores, NCCL/torch logs, FR, Xid, traces
    print(verdict.headline, [(f.kind, f.ranks, f.hosts) for f in verdict.suspects])

Every conclusion is a :class:`Finding` (``kind``: :class:`Kind`, ``severity``: :class:`Severity`).
(The functions are not named ``collect``, ``check``, ``watch`` or ``report`` at this level, so that
they do not shadow the subpackages of those names: they are ``hangdbg.api.check`` and so on.)
torch is never imported by ``import hangdbg``.
"""

from __future__ import annotations

from ._version import __version__
from .errors import HangdbgError, NoRanksFound, UsageError
from .model import (Analysis, EquivalenceClass, Evidence, Finding, Kind, Place, RankDump, RankProcess, RankState,
    Severity, SourceKind, SourceReport, Thread, TreeNode, Verdict)
from .frames import Frame
from .rankset import compress, expand

_LAZY = {  # loaded on first use: `import hangdbg` stays cheap (the CLI starts faster) and never imports torch
    "api": ("hangdbg.api", None),
    "DumpPlan": ("hangdbg.collect.plan", "DumpPlan"),
    "WatchPlan": ("hangdbg.watch.plan", "WatchPlan"),
    "CheckPlan": ("hangdbg.check.plan", "CheckPlan"),
    "CheckJob": ("hangdbg.check.node", "CheckJob"),
    "TargetSpec": ("hangdbg.transport.targets", "TargetSpec"),
    "analyze_dumps": ("hangdbg.stacks.analysis", "analyze"),
    "read_evidence": ("hangdbg.evidence.read", "read_evidence"),
    "collect_stacks": ("hangdbg.collect.local", "collect"),
    "CollectOptions": ("hangdbg.collect.local", "CollectOptions"),
    "find_ranks": ("hangdbg.collect.procs", "find_ranks"),
    "PySpyOptions": ("hangdbg.tools.pyspy", "PySpyOptions"),
    "load_dumps": ("hangdbg.stacks.saved", "load_dumps"),
    "parse_pyspy_dump": ("hangdbg.stacks.pyspy_text", "parse_pyspy_dump"),
    "rank_logging": ("hangdbg.hooks.rank_logging", None),
    "breakpoint": ("hangdbg.hooks.breakpoint", "breakpoint"),
    "capture": ("hangdbg.hooks.capture", "capture"),
    "printflock": ("hangdbg.hooks.printflock", "printflock"),
    "heartbeat": ("hangdbg.hooks.heartbeat", "heartbeat"),
    "rank_info": ("hangdbg.hooks.rankinfo", "rank_info"),
    "RankInfo": ("hangdbg.hooks.rankinfo", "RankInfo"),
    "DebugUnderflowOverflow": ("hangdbg.hooks.overflow", "DebugUnderflowOverflow"),  # these import torch
    "detect_overflow": ("hangdbg.hooks.overflow", "detect_overflow"),
    "OverflowDetected": ("hangdbg.hooks.overflow", "OverflowDetected"),
}


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'hangdbg' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "api",
    "DumpPlan",
    "WatchPlan",
    "CheckPlan",
    "CheckJob",
    "TargetSpec",
    "analyze_dumps",
    "read_evidence",
    "collect_stacks",
    "find_ranks",
    "load_dumps",
    "parse_pyspy_dump",
    "compress",
    "expand",
    "CollectOptions",
    "PySpyOptions",
    "RankProcess",
    "Analysis",
    "Frame",
    "EquivalenceClass",
    "Place",
    "RankDump",
    "Thread",
    "TreeNode",
    "Evidence",
    "Finding",
    "Kind",
    "Severity",
    "SourceKind",
    "RankState",
    "SourceReport",
    "Verdict",
    "printflock",
    "heartbeat",
    "rank_logging",
    "capture",
    "breakpoint",
    "rank_info",
    "RankInfo",
    "DebugUnderflowOverflow",
    "detect_overflow",
    "OverflowDetected",
    "HangdbgError",
    "NoRanksFound",
    "UsageError",
]
