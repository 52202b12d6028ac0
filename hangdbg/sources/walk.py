"""What each file of a post-mortem directory is, and which readers read it.

``hangdbg report DIR`` walks directories and asks every reader's ``sniff(head)`` about the first
64 KiB of each file (content, not names: a NCCL log named ``slurm-1234.out`` is still a NCCL log;
one job log often holds NCCL lines, watchdog timeouts and py-spy dumps at once, so a file can have
several kinds). Files no reader takes are listed with the reason.
"""

from __future__ import annotations

from typing import Sequence

from ..model import ClassifiedFile, SourceKind
from ..parse.textlines import iter_files, read_head
from .base import Reader
from .own_output import is_own_output
from .registry import READERS

__all__ = ["classify", "walk"]

def classify(path: str, readers: Sequence[Reader] = READERS) -> ClassifiedFile:
    """Sniff one regular file with every reader; never raises."""
    try:
        head = read_head(path)
    except OSError as exc:
        return ClassifiedFile(path, (), f"cannot read: {exc.strerror or exc}")
    if not head:
        return ClassifiedFile(path, (), "empty file")
    if is_own_output(path):  # before sniffing: hangdbg's documents quote the evidence they rest on
        core_doc = next((r for r in readers if r.kind is SourceKind.CORE_JSON), None)
        if core_doc is not None and core_doc.sniff(head):
            return ClassifiedFile(path, (core_doc.kind,))
        return ClassifiedFile(path, (), "hangdbg's own output (its inputs are read instead)")
    kinds = []
    for r in readers:
        try:
            if r.sniff(head):
                kinds.append(r.kind)
        except Exception as exc:  # a reader's sniff must never stop the walk
            return ClassifiedFile(path, tuple(kinds), f"sniffing as {r.kind} failed: {exc!r}")
    if kinds:
        return ClassifiedFile(path, tuple(kinds))
    binary = b"\x00" in head[:8192]
    return ClassifiedFile(path, (), "binary file of unknown kind" if binary else "no reader recognised its content")


def walk(paths: Sequence[str], readers: Sequence[Reader] = READERS) -> list[ClassifiedFile]:
    """Classify every regular file under ``paths`` (recursively; hidden files and directories
    skipped; symlinks to files followed, to directories not).

    Raises:
        FileNotFoundError: a named path does not exist.
    """
    return [classify(f, readers) for p in paths for f in iter_files(p)]
