"""The files hangdbg itself writes, which a directory walk must not read as evidence."""

from __future__ import annotations

import os
import re

__all__ = ["OWN_OUTPUT", "SCHEMA_FILE", "GDB_TEXT_SUFFIX", "is_own_output"]

OWN_OUTPUT = ("hangdbg.json", "report.json", "report.html", "traces.json", "processes.json", "collect.json", "nccl.json",
              "logs.json", "fr.json", "gpu.json", "split.json", "check.json", "watch.json",
              ".hangdbg-run.json")  # hangdbg.outdir.RUN_MARKER
"""The files hangdbg writes under ``-o DIR``: not evidence (their inputs are read instead), except
the documents of ``hangdbg core`` (``hangdbg.json`` of ``core -o``), which stand for their cores."""

SCHEMA_FILE = re.compile(r"hangdbg-schema-v\d+\.json")
"""The file ``hangdbg schema -o DIR`` writes, ``hangdbg-schema-v4.json`` (one per schema_version:
the files of earlier versions are skipped too)."""

GDB_TEXT_SUFFIX = ".hangdbg.gdb.txt"
"""The name ending of gdb's backtrace text that ``core -o`` and ``collect`` keep beside a core
document: the document is read, not this text (it would read as a second, rankless process)."""


def is_own_output(path: str) -> bool:
    """True for a file hangdbg itself wrote under ``-o DIR`` (see :data:`OWN_OUTPUT`), a schema of
    ``hangdbg schema -o`` (:data:`SCHEMA_FILE`, any version), a node status of the fan-out
    (``nodes/HOST.json``), a straggler report of ``watch --straggler-every`` (``straggler/step-N.json``)
    or a kept gdb text (:data:`GDB_TEXT_SUFFIX`); also the heartbeat files of
    :func:`hangdbg.hooks.heartbeat.heartbeat` (``heartbeat.rankN``/``heartbeat.pidN``: progress, read
    by ``watch``) and the debug server's raw flight-recorder reply (``debug_server/rank-N.fr_trace_json.txt``,
    kept beside its JSON ``fr/debug_server_fr_rank_N.json``, which is read) that ``run``'s folder holds."""
    name = os.path.basename(path)
    parent = os.path.basename(os.path.dirname(path))
    return (name in OWN_OUTPUT or name.endswith(GDB_TEXT_SUFFIX) or SCHEMA_FILE.fullmatch(name) is not None
            or (name.endswith(".json") and parent in ("nodes", "straggler"))
            or _HEARTBEAT.fullmatch(name) is not None
            or (parent == "debug_server" and name.endswith(".fr_trace_json.txt")))


_HEARTBEAT = re.compile(r"heartbeat\.(?:rank|pid)\d+")
