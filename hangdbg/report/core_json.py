"""The JSON document of ``hangdbg core`` (also what ``hangdbg collect`` brings back per core file).

It holds the analysis of the cores' stacks (the ``analyze`` document), one entry per core
(signal, crashing thread, rank, host, environment, threads with native and Python frames) and
the core reader's SourceReport, so ``hangdbg report`` can read it back without the core file
(:mod:`hangdbg.parse.core_json`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..collect.core import CoreReading, core_facts
from ..model import Analysis, SourceReport
from .jsonout import analysis_to_dict, thread_to_dict

__all__ = ["core_document"]


def core_document(readings: list[CoreReading], report: SourceReport, analysis: Analysis) -> dict[str, Any]:
    """``analysis_to_dict(analysis, "core")`` plus ``cores`` (one dict per core) and ``report``."""
    return analysis_to_dict(analysis, "core", {
        "cores": [_core_dict(c) for c in readings],
        "report": asdict(report),
    })


def _core_dict(c: CoreReading) -> dict:
    d = c.dump
    return {
        **core_facts(c), "local_rank": d.local_rank, "world_size": d.world_size, "python": d.python,
        "cmdline": d.cmdline, "error": d.error,
        "threads": [{**thread_to_dict(t), "crashed": t.thread_id == c.crashing_tid} for t in d.threads],
    }
