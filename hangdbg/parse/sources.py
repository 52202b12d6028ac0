"""What each file of a post-mortem directory is, and which reader reads it.

``hangdbg report DIR`` walks directories and asks every reader's ``sniff(head)`` about the
first 64 KiB of each file (content, not names: a NCCL log named ``slurm-1234.out`` is still a
NCCL log; one job log often holds NCCL lines, watchdog timeouts and py-spy dumps at once, so a
file can have several kinds). Files no reader takes are listed with the reason.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

from .textlines import iter_files, read_head

__all__ = ["READERS", "Classified", "classify", "walk", "reader"]

READERS: dict[str, str] = {
    # kind -> module with sniff(head: bytes) -> bool and read(paths: list[str]) -> SourceReport.
    # Order matters only for display.
    "stacks": "hangdbg.parse.stacks_source",
    "core": "hangdbg.collect.core",
    "core-json": "hangdbg.parse.core_json",
    "stacks-text": "hangdbg.parse.native_stacks",
    "nccl": "hangdbg.analyze.nccl",
    "torch-log": "hangdbg.parse.torch_log",
    "flight-recorder": "hangdbg.parse.flight_recorder",
    "gpu": "hangdbg.parse.xid",
}

_OWN_OUTPUT = ("hangdbg.json", "report.json", "traces.json", "processes.json", "collect.json")


def reader(kind: str) -> ModuleType:
    """The reader module of ``kind`` (imported on first use)."""
    return importlib.import_module(READERS[kind])


def _available() -> dict[str, ModuleType]:
    return {kind: reader(kind) for kind in READERS}


@dataclass(frozen=True, slots=True)
class Classified:
    """One file and what it is.

    Attributes:
        path: the file.
        kinds: the readers that take it (empty when none does).
        reason: why no reader takes it (or why it was skipped), ``""`` otherwise.
    """

    path: str
    kinds: tuple[str, ...]
    reason: str = ""


def classify(path: str, mods: dict[str, ModuleType] | None = None) -> Classified:
    """Sniff one file.

    Args:
        path: a regular file.
        mods: the reader modules (default: all available).
    """
    name = os.path.basename(path)
    try:
        head = read_head(path)
    except OSError as exc:
        return Classified(path, (), f"cannot read: {exc.strerror or exc}")
    if not head:
        return Classified(path, (), "empty file")
    mods = _available() if mods is None else mods
    kinds = []
    for kind, mod in mods.items():
        try:
            if mod.sniff(head):
                kinds.append(kind)
        except Exception as exc:  # a reader's sniff must never stop the walk
            return Classified(path, tuple(kinds), f"sniffing as {kind} failed: {exc!r}")
    if kinds:
        return Classified(path, tuple(kinds))
    if name in _OWN_OUTPUT or (name.endswith(".json") and os.path.basename(os.path.dirname(path)) == "nodes"):
        return Classified(path, (), "hangdbg's own summary (its inputs are read instead)")
    binary = b"\x00" in head[:8192]
    return Classified(path, (), "binary file of unknown kind" if binary else "no reader recognised its content")


def walk(paths: list[str]) -> list[Classified]:
    """Classify every regular file under ``paths`` (recursively; hidden files and directories
    skipped; symlinks to files followed, to directories not).

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    mods = _available()
    return [classify(f, mods) for p in paths for f in iter_files(p)]
