"""Parse the per-rank stack dumps of PyTorch's debug server (``torch.distributed.debug``), no I/O.

Format (PyTorch ``torch/distributed/debug/_debug_handlers.py``, ``StacksHandler.dump`` and
``PySpyHandler.dump``; the periodic dumper of ``_frontend.py`` saves them as
``stacks_YYYYmmdd_HHMMSS.txt`` / ``pyspy_dump_YYYYmmdd_HHMMSS.txt``): for each key ``rank{i}``,
``i`` in ``range(world_size)``, of the job's TCPStore, in rank order,

* the line ``=== Rank {i}: {addr} ===``, where ``addr`` is the URL the server asked
  (``http://host:port/handler/dump_traceback?``);
* the worker's answer when its HTTP status was 200, else the one line ``Error: {status}``
  (``_frontend.fetch_all``: 408 timeout, 503 connection error, 502 other failure; 500 when the
  handler failed, e.g. py-spy exited non-zero).

The answers (``torch/csrc/distributed/c10d/control_plane``): ``dump_traceback``
(``PythonHandlers.cpp``) is ``faulthandler.dump_traceback(all_threads=True)`` text, read by
:mod:`.thread_dump_text`; ``pyspy_dump`` (``Handlers.cpp``) is ``py-spy dump --pid <self>`` output
(``2>&1``), read by :mod:`.pyspy_text`. A bare ``traceback.format_stack`` answer is read as one
thread. The rank of a block is its header's (the strongest evidence: the server numbers the blocks
by the store's rank keys); a rank that did not answer is unreadable, not missing.
"""

from __future__ import annotations

import re
from dataclasses import replace
from urllib.parse import urlsplit

from .pyspy_text import ParsedProcess, parse_pyspy_dump
from .thread_dump_text import parse_thread_dump

__all__ = ["BLOCK", "is_debug_server_dump", "parse_debug_server_dump"]

BLOCK = re.compile(r"^=== Rank (\d{1,8}): (\S.{0,4000}?) ===\s*$")
"""A block header (also used to sniff a file)."""

_SNIFF = re.compile(rb"^=== Rank \d{1,8}: (\S[^\n]{0,4000}?) ===[ \t\r]*(?:\n([^\n]{0,200})|\Z)", re.M)
_HANDLER = re.compile(r"/handler/([A-Za-z0-9_]{1,100})")
_STACK_HANDLERS = ("dump_traceback", "pyspy_dump")
"""The worker handlers whose answers are stacks; the same block format also holds other handlers'
answers (``wait_counter_values``: JSON), which are no stack dump."""
_ERROR = re.compile(r"^Error: (\d{3})\s*$")
_MAX_RANK = 1 << 24
_STATUS = {
    408: "the request timed out (the rank may hold the GIL or be stopped)",
    500: "the rank's handler failed",
    502: "the request failed",
    503: "the rank's server did not accept the connection (process gone or server not started)",
}


def is_debug_server_dump(head: bytes) -> bool:
    """True when the first bytes of a file hold a block header (``=== Rank N: addr ===``): such a
    file is read as a whole by the stacks reader, whatever its blocks hold (faulthandler text
    included, which the stack-text reader must then leave alone)."""
    return any(_stacks_block(m.group(1).decode("utf-8", "replace"), (m.group(2) or b"").decode("utf-8", "replace"))
               for m in _SNIFF.finditer(head))


def _stacks_block(addr: str, first_line: str) -> bool:
    """The block may hold a stack: its URL names a stack handler, or names none and its answer
    does not start as JSON."""
    m = _HANDLER.search(addr)
    if m:
        return m.group(1) in _STACK_HANDLERS
    return not first_line.lstrip().startswith(("{", "["))


def _host(addr: str) -> str:
    """The host of a worker URL (``http://node-3:29600/handler/x?`` -> ``node-3``), ``""`` if none."""
    try:
        parts = urlsplit(addr if "//" in addr else f"//{addr}")
        return parts.hostname or ""
    except ValueError:
        return ""


def parse_debug_server_dump(text: str) -> tuple[list[ParsedProcess], int] | None:
    """Parse a debug-server dump (see the module docstring) into one process per rank block.

    Args:
        text (str): the whole file.

    Returns:
        ``None`` when the text holds no ``=== Rank N: addr ===`` header of a stack handler (the
        debug server's ``wait_counters`` dump has the same blocks with JSON); else ``(processes,
        garbled)``: one :class:`ParsedProcess` per block in file order, whose ``header`` holds
        ``rank``, ``rank_source="debug server"``, ``host`` and, when the blocks number ranks
        ``0..n-1``, ``world_size=n``; a block with ``Error: N`` or without any stack has
        ``error`` set. Of a py-spy answer with several processes (``--subprocesses``) the first,
        the rank's own, is kept. ``garbled`` counts the lines that are no part of any block or
        stack (non-blank lines before the first header, headers with a rank above 2**24).

    Raises:
        Nothing.
    """
    if "=== Rank " not in text:  # a C substring search: most files are plain py-spy text
        return None
    blocks: list[tuple[int, str, list[str]]] = []
    garbled = 0
    body: list[str] | None = None
    for raw in text.splitlines():
        m = BLOCK.match(raw.strip())
        if m and int(m.group(1)) <= _MAX_RANK:
            body = []
            blocks.append((int(m.group(1)), m.group(2), body))
        elif body is not None:
            body.append(raw)
        elif raw.strip():
            garbled += 1
    firsts = [next((ln for ln in body if ln.strip()), "") for _, _, body in blocks]
    if not blocks or not any(_stacks_block(addr, first) for (_, addr, _), first in zip(blocks, firsts)):
        return None
    ranks = [r for r, _, _ in blocks]
    whole = sorted(set(ranks)) == list(range(len(blocks)))
    procs: list[ParsedProcess] = []
    for rank, addr, lines in blocks:
        header = {"rank": str(rank), "rank_source": "debug server", "host": _host(addr)}
        if whole:
            header["world_size"] = str(len(blocks))
        proc, bad = _block(rank, lines)
        garbled += bad
        procs.append(replace(proc, header=header))
    return procs, garbled


def _block(rank: int, lines: list[str]) -> tuple[ParsedProcess, int]:
    """The process of one rank's answer, and its garbled lines."""
    content = [ln.strip() for ln in lines if ln.strip()]
    if len(content) == 1 and (m := _ERROR.match(content[0])):
        code = int(m.group(1))
        why = _STATUS.get(code, "the request failed")
        return ParsedProcess(error=f"the torch debug server got no stack from rank {rank}: HTTP {code}, {why}"), 0
    text = "\n".join(lines)
    procs, bad = parse_pyspy_dump(text)
    if procs:
        return procs[0], bad
    own, bad = parse_thread_dump(text, headerless=True)
    if own:
        return own[0], bad
    return ParsedProcess(error=f"the torch debug server's answer for rank {rank} holds no stack"), bad
