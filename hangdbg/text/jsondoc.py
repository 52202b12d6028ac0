"""One loader for every JSON document hangdbg reads (flight-recorder dumps, ``error.json``, core
documents, op records, the agents' frame messages): text that is not UTF-8 is decoded with
replacement characters, and a document nested deeper than the decoder can follow is a
``ValueError`` saying so ("too deeply nested"), never a ``RecursionError`` escaping to the user."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TOO_DEEP", "load_json"]

TOO_DEEP = "too deeply nested"
"""The reason given for a document nested deeper than Python's JSON decoder can follow."""


def load_json(data: bytes | str) -> Any:
    """Parse one JSON document.

    Args:
        data: the document; bytes are decoded as UTF-8 with errors replaced.

    Returns:
        the decoded value (dict, list, str, number, bool or None).

    Raises:
        ValueError: not valid JSON (``json.JSONDecodeError``), or nested deeper than the decoder
            can follow (the message starts with :data:`TOO_DEEP`).
    """
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else data
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{TOO_DEEP} (more levels of arrays/objects than JSON can be read with)") from None
