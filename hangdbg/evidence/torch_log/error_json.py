"""torchelastic ``error.json`` files (``torch/distributed/elastic/multiprocessing/errors/error_handler.py``):
``{"message": {"message": "T: msg", "extraInfo": {"py_callstack": "...", "timestamp": "1700000000"},
"errorCode": N}}`` or the older ``{"message": "msg", "timestamp": T}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ErrorFile", "JSON_HEAD", "is_error_json", "parse_error_json"]

JSON_HEAD = re.compile(rb'^\s*\{\s*"message"\s*:')
"""The start of an ``error.json`` document."""


@dataclass(frozen=True, slots=True)
class ErrorFile:
    """A torchelastic ``error.json``: ``local_rank`` from an ``.../attempt_N/<local_rank>/error.json`` path."""

    path: str
    message: str
    timestamp: int | None
    traceback: str
    error_code: int | None
    local_rank: int | None


_ATTEMPT_PATH = re.compile(r"attempt_\d+[/\\](\d+)[/\\][^/\\]+$")


def parse_error_json(data: object, path: str) -> ErrorFile:
    """An ``error.json`` document (already decoded) as an :class:`ErrorFile`.

    Raises:
        ValueError: the document has not the torchelastic layout (no ``message``).
    """
    if not isinstance(data, dict) or "message" not in data:
        raise ValueError("not a torchelastic error file (no 'message' key)")
    msg = data["message"]
    code = None
    if isinstance(msg, dict):
        extra = msg.get("extraInfo") or {}
        text = str(msg.get("message", ""))
        tb = str(extra.get("py_callstack", "")) if isinstance(extra, dict) else ""
        ts = extra.get("timestamp") if isinstance(extra, dict) else None
        code = msg.get("errorCode")
    else:
        text, tb, ts = str(msg), "", data.get("timestamp")
    try:
        timestamp = int(ts) if ts is not None else None
    except (TypeError, ValueError):
        timestamp = None
    m = _ATTEMPT_PATH.search(path)
    return ErrorFile(path, text, timestamp, tb, code if isinstance(code, int) else None, int(m.group(1)) if m else None)


def is_error_json(head: bytes) -> bool:
    """True when ``head`` starts a torchelastic ``error.json`` document (``{"message": ...``)."""
    return bool(JSON_HEAD.match(head))
