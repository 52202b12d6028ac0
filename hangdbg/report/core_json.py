"""The JSON document of ``hangdbg core`` (also what ``hangdbg collect`` brings back per core file).

It holds the analysis of the cores' stacks (the ``analyze`` document), one entry per core
(signal, crashing thread, rank, host, environment, threads with native and Python frames) and
the core reader's SourceReport, so ``hangdbg report`` can read it back without the core file
(:mod:`hangdbg.parse.core_json`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..collect.core import CoreReading
from ..model import Analysis, SourceReport
from .jsonout import analysis_to_dict, frame_to_dict

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
        "file": c.path, "rank": d.rank, "rank_source": d.rank_source, "host": d.host, "pid": d.pid,
        "local_rank": d.local_rank, "world_size": d.world_size, "signal": c.signal, "how": c.how,
        "crashing_tid": c.crashing_tid, "executable": c.executable, "executable_source": c.exe_source,
        "python": d.python, "cmdline": d.cmdline, "environ": c.environ, "diagnoses": list(c.diagnoses),
        "truncated": bool(c.info and c.info.truncated), "error": d.error,
        "threads": [{"thread_id": t.thread_id, "name": t.name, "status": t.status, "crashed": t.thread_id == c.crashing_tid,
                     "frames": [frame_to_dict(f) for f in t.frames]} for t in d.threads],
    }
