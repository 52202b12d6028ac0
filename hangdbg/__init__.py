"""hangdbg: find out why a distributed PyTorch job hangs or dies.

Public API (stable names; everything else is internal)::

    from hangdbg import find_ranks, collect_stacks, analyze_dumps, load_dumps
    dumps = collect_stacks(find_ranks())   # py-spy every rank of this node's job
    result = analyze_dumps(dumps)          # classes, tree, suspects
    print(result.verdict)

    verdict = read_evidence(["/scratch/job-4242"])   # post-mortem: cores, NCCL/torch logs, FR, Xid
    print(verdict.text, [(f.kind, f.ranks, f.hosts) for f in verdict.suspects])

(The functions are not named ``collect``/``analyze`` so that they do not shadow the subpackages
``hangdbg.collect`` and ``hangdbg.analyze``.) torch is never imported by ``import hangdbg``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .analyze import analyze as analyze_dumps
from .analyze.evidence import read_evidence
from .analyze.rankset import compress, expand
from .collect.local import CollectOptions
from .collect.local import collect as collect_stacks
from .collect.procs import RankProcess, find_ranks
from .collect.pyspy import PySpyOptions
from .errors import HangdbgError, NoRanksFound, UsageError
from .model import (Analysis, Evidence, Finding, Frame, Group, Place, RankDump, RankState, SourceReport, Suspect,
                    Thread, TreeNode, Verdict)
from .hooks import rank_logging
from .hooks.breakpoint import breakpoint
from .hooks.capture import capture
from .hooks.printflock import printflock
from .hooks.rankinfo import RankInfo, rank_info
from .parse import load_dumps, parse_pyspy_dump

_LAZY = {  # these import torch: loaded on first use, so `import hangdbg` never imports torch
    "DebugUnderflowOverflow": "hangdbg.hooks.overflow",
    "detect_overflow": "hangdbg.hooks.overflow",
    "OverflowDetected": "hangdbg.hooks.overflow",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hangdbg' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)

__all__ = [
    "__version__",
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
    "Group",
    "Place",
    "RankDump",
    "Suspect",
    "Thread",
    "TreeNode",
    "Evidence",
    "Finding",
    "RankState",
    "SourceReport",
    "Verdict",
    "printflock",
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
