"""The node agent's wire format: self-describing text lines that survive interleaving.

An agent writes every message as one or more lines::

    HANGDBG1 <host> <msgid> <part>/<parts> <data>

``data`` is a slice of the base64 of the zlib-compressed JSON message. Lines of many nodes may be
interleaved line by line (one ``srun`` for all nodes), prefixed (``pdsh``'s ``node1: ``) or mixed
with other output (a login banner, a warning): the decoder looks for the ``HANGDBG1`` marker
anywhere in a line, keys messages by (host, msgid) and ignores everything else, counting it.
Lines are at most ~4 KB, well under the line buffers of srun and pdsh.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["MARKER", "encode_message", "FrameDecoder"]

MARKER = "HANGDBG1"
_CHUNK = 4000


def encode_message(host: str, msgid: int, message: dict[str, Any]) -> Iterator[str]:
    """Lines (without newline) carrying ``message`` from ``host``; ``host`` must have no spaces."""
    payload = base64.b64encode(zlib.compress(json.dumps(message).encode(), 6)).decode("ascii")
    parts = max(1, -(-len(payload) // _CHUNK))
    for i in range(parts):
        yield f"{MARKER} {host} {msgid} {i + 1}/{parts} {payload[i * _CHUNK:(i + 1) * _CHUNK]}"


@dataclass
class FrameDecoder:
    """Reassemble agent messages from lines in any order; never raises on bad input.

    ``feed(line)`` returns the ``(host, message)`` pairs that became complete with that line.
    ``garbled`` counts marker lines that could not be used, ``other`` the lines without a marker.
    """

    garbled: int = 0
    other: int = 0
    _parts: dict[tuple[str, str], dict[int, str]] = field(default_factory=dict)

    def feed(self, line: str) -> list[tuple[str, dict[str, Any]]]:
        at = line.find(MARKER + " ")
        if at < 0:
            if line.strip():
                self.other += 1
            return []
        fields = line[at:].strip().split(" ")
        if len(fields) != 5:
            self.garbled += 1
            return []
        _, host, msgid, frac, data = fields
        try:
            part, parts = (int(x) for x in frac.split("/"))
        except ValueError:
            self.garbled += 1
            return []
        if not 1 <= part <= parts:
            self.garbled += 1
            return []
        got = self._parts.setdefault((host, msgid), {})
        got[part] = data
        if len(got) < parts:
            return []
        del self._parts[(host, msgid)]
        try:
            blob = "".join(got[i] for i in range(1, parts + 1))
            message = json.loads(zlib.decompress(base64.b64decode(blob, validate=True)))
        except (KeyError, ValueError, binascii.Error, zlib.error):
            self.garbled += 1
            return []
        if not isinstance(message, dict):
            self.garbled += 1
            return []
        return [(host, message)]
