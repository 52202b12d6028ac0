"""Where a quiet file's output stops: the progress line that starts a step which can wait forever (a catalog entry's
``stall``), read at the file's end. The processes of one job print the same lines, interleaved, so the step a job
hangs in need not be the very last line: the lines after it may be other processes' copies of lines printed before
it (the same text but for its numbers: times, pids, ranks), which say that nothing new happened after it.

Pure: no I/O.
"""

from __future__ import annotations

import re

from ...catalog.catalog import Catalog
from ...catalog.entry import CatalogEntry
from ...catalog.message import Message, parse_line
from ...model import Evidence
from .log import LOOKED_AT

__all__ = ["stall_at", "stall_in_tail"]

TAIL_LINES = 8
"""Most lines with text after a stall line that may all be copies of earlier lines (one per other process)."""
_TAIL_BYTES = 64 << 10
"""The end of a file looked at for its tail (bytes)."""
_NUMBERS = re.compile(r"\d+")


def stall_at(last: Evidence | None, catalog: Catalog | None) -> tuple[Message, CatalogEntry] | None:
    """The message of line ``last`` and its catalog entry, when that entry has a ``stall`` (a progress line)."""
    if last is None or catalog is None:
        return None
    msg = parse_line(last.text[:LOOKED_AT])
    m = catalog.match(msg.text)
    return (msg, m.innermost) if m is not None and m.innermost.stall else None


def _shape(line: str) -> str:
    return _NUMBERS.sub("#", line.strip())


def stall_in_tail(path: str, data: bytes, catalog: Catalog) -> tuple[Evidence, Message, CatalogEntry] | None:
    """The last stall line of ``data`` (the text of file ``path``) that only copies of earlier lines follow (one to
    :data:`TAIL_LINES` of them, each the same as a line before the stall line but for its numbers), as evidence with
    its 1-based line number, its message and its entry; None when a new line follows every stall line of the tail.
    The last line itself is :func:`stall_at`'s, which the caller asks first."""
    start = max(0, len(data) - _TAIL_BYTES)
    lines = data[start:].decode("utf-8", "replace").split("\n")
    first_no = data.count(b"\n", 0, start) + 1
    text = [(first_no + i, ln.rstrip("\r")) for i, ln in enumerate(lines) if ln.strip()]
    if start:
        text = text[1:]  # the first line of the tail may be cut
    shapes = [_shape(ln) for _, ln in text]
    for k in range(len(text) - 2, max(-1, len(text) - 2 - TAIL_LINES), -1):
        if not set(shapes[k + 1:]) <= set(shapes[:k]):
            return None  # a line that is new comes after this one: the output went on past it
        no, line = text[k]
        found = stall_at(Evidence(path, no, line), catalog)
        if found is not None:
            return (Evidence(path, no, line), *found)
    return None
