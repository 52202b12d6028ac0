"""The JSON twin of ``hangdbg report``: the verdict, every finding, every source, per-rank states."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..model import Finding, SourceReport, Verdict
from .evidence import source_report_dict
from .jsonout import analysis_to_dict, document_header

__all__ = ["verdict_to_dict", "finding_to_dict", "source_to_dict"]


def finding_to_dict(f: Finding) -> dict[str, Any]:
    return dataclasses.asdict(f)


def source_to_dict(s: SourceReport) -> dict[str, Any]:
    d = source_report_dict(s)
    d["errors"] = [{"file": f, "reason": r} for f, r in s.errors]
    return d


def verdict_to_dict(v: Verdict, command: str = "report", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The documented JSON document of a verdict (schema_version 1)."""
    doc: dict[str, Any] = {
        **document_header(command),
        "verdict": v.text,
        "found_failure": v.found_failure,
        "suspects": [finding_to_dict(f) for f in v.suspects],
        "warnings": [finding_to_dict(f) for f in v.warnings],
        "ranks": {str(r): [dataclasses.asdict(s) for s in states] for r, states in v.rank_states.items()},
        "sources": [source_to_dict(s) for s in v.sources],
        "unparsed": [{"file": f, "reason": r} for f, r in v.unparsed],
        "files": [{"file": f, "kinds": list(k)} for f, k in v.files],
        "stacks": analysis_to_dict(v.analysis, command) if v.analysis is not None else None,
    }
    if extra:
        doc.update(extra)
    return doc
