"""The node agent's wire format: self-describing text lines that survive interleaving.

An agent writes every message as one or more lines::

    HANGDBG1 <host> <msgid> <part>/<parts> <data>

``data`` is a slice of the base64 of the zlib-compressed JSON message. Lines of many nodes may be
interleaved line by line (one ``srun`` for all nodes), prefixed (``pdsh``'s ``node1: ``) or mixed
with other output (a login banner, a warning): the decoder looks for the ``HANGDBG1`` marker
anywhere in a line, keys messages by (host, msgid) and ignores everything else, counting it.
Lines are at most ~4 KB, well under the line buffers of srun and pdsh.

Anything on a node's output can look like a frame (a login banner, a user program under srun),
so the decoder given the run's ``hosts`` takes only frames of those hosts, and of the host whose
stream the line came from when the transport says (ssh, pdsh): a frame claiming host ``..`` or
another node is counted in ``foreign`` and dropped.

**Messages** (JSON objects with a ``type``), in the order an agent sends them:

* ``hello``: ``host``, ``pid``, ``version`` (hangdbg's), ``schema_version`` (of the documents,
  :data:`hangdbg.model.SCHEMA_VERSION`) and ``wire`` (:data:`WIRE_VERSION`; absent: 1).
* ``class`` (wire 2): the ranks of the node that share one stack, the stack once
  (:mod:`hangdbg.transport.classes`); the analysis is made from these. The agent sends the first
  round's classes as soon as it has them, then the ranks its adaptive steps changed: a rank
  sent again replaces its earlier dump.
* ``rank``: one raw py-spy output as ``dump -o`` keeps it (``name``, ``text``, ``error``): in wire 1
  the only stacks; in wire 2 sent only with ``dump --fetch-raw``, for ``OUT/raw/<host>/``.
* ``log`` (``text``: a ``-v`` line), ``problem`` (``what``, ``reason``), ``file`` (``hangdbg
  collect``: ``name``, ``offset``, ``data``, ``last``).
* ``done``: ``status``, ``error``, ``seconds``, ``store``, ``ops``, and the node's ranks: in wire 1
  ``processes`` (each rank's process facts), in wire 2 ``ranks`` (numbers: the facts are in the
  classes) and ``raw`` (``dir``: where the node kept its raw outputs, ``saved``, ``not_saved``).

The coordinator reads wire 1 and 2 (:data:`WIRE_READ`); a node whose agent says another ``wire``
fails with a reason that names both hangdbg versions.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..text.jsondoc import load_json

__all__ = ["WIRE_VERSION", "WIRE_READ", "MARKER", "MAX_MESSAGE", "MAX_PENDING", "TooLarge", "encode_message", "FrameDecoder", "inflate"]

WIRE_VERSION = 2
"""The version of the messages an agent of this hangdbg sends (in its ``hello``): 2 added the
``class`` messages, sent instead of the raw ``rank`` texts."""
WIRE_READ = frozenset({1, 2})
"""The wire versions this coordinator reads (1: ``rank`` texts only, hangdbg before 2)."""

MARKER = "HANGDBG1"
_CHUNK = 4000
MAX_MESSAGE = 64 << 20
"""Bytes a message may have once decompressed (the biggest, a file chunk of 1 MiB or a rank's
py-spy text, is far below): a compressed bomb from a node (1.3 MB inflating to 2 GB) is refused
after inflating this much, never held whole."""


MAX_PENDING = (MAX_MESSAGE // 3 + 1) * 4 + (1 << 20)
"""Characters of a host's incomplete messages held while their other parts are awaited: the base64 of
the largest message that can be read (:data:`MAX_MESSAGE`, which zlib never makes larger) and a
little more. A node sending parts beyond it (parts that never complete, or a message too large) has
its incomplete messages dropped, counted in ``garbled``, and a ``problem`` says so: a node's output
of any size costs the coordinator at most this per host."""


class TooLarge(ValueError):
    """A message larger than :data:`MAX_MESSAGE` after decompression."""


def inflate(data: bytes, limit: int = MAX_MESSAGE) -> bytes:
    """zlib-decompress ``data``, holding at most ``limit`` + 1 bytes of output.

    Raises:
        TooLarge: the output would be larger than ``limit`` bytes ("too large after decompression").
        zlib.error: not zlib data, or truncated.
    """
    d = zlib.decompressobj()
    out = d.decompress(data, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise TooLarge(f"too large after decompression (more than {limit >> 20} MiB)")
    if not d.eof:
        raise zlib.error("truncated compressed data")
    return out


def encode_message(host: str, msgid: int, message: dict[str, Any]) -> Iterator[str]:
    """Lines (without newline) carrying ``message`` from ``host``; ``host`` must have no spaces."""
    payload = base64.b64encode(zlib.compress(json.dumps(message).encode(), 6)).decode("ascii")
    parts = max(1, -(-len(payload) // _CHUNK))
    for i in range(parts):
        yield f"{MARKER} {host} {msgid} {i + 1}/{parts} {payload[i * _CHUNK:(i + 1) * _CHUNK]}"


@dataclass
class FrameDecoder:
    """Reassemble agent messages from lines in any order; never raises on bad input.

    ``feed(line, stream)`` returns the ``(host, message)`` pairs that became complete with that
    line. ``garbled`` counts marker lines that could not be used, ``other`` the lines without a
    marker, ``foreign`` the frames of a host not in ``hosts`` (when given) or not the ``stream``'s
    host (when the transport names it; a ``user@`` prefix on either side is ignored).
    A message too large after decompression (:data:`MAX_MESSAGE`) becomes a ``problem`` message of
    its host saying so.
    """

    garbled: int = 0
    other: int = 0
    hosts: frozenset[str] | None = None
    foreign: int = 0
    _parts: dict[tuple[str, str], dict[int, str]] = field(default_factory=dict)
    _held: dict[str, int] = field(default_factory=dict)  # host -> characters in its incomplete messages

    def accepts(self, host: str, stream: str | None = None) -> bool:
        """Whether a frame of ``host`` read on ``stream``'s output (None: not known) is taken."""
        if self.hosts is not None and host not in self.hosts:
            return False
        return stream is None or _bare(stream) == _bare(host)

    def feed(self, line: str, stream: str | None = None) -> list[tuple[str, dict[str, Any]]]:
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
        if not self.accepts(host, stream):
            self.foreign += 1
            return []
        try:
            part, parts = (int(x) for x in frac.split("/"))
        except ValueError:
            self.garbled += 1
            return []
        if not 1 <= part <= parts:
            self.garbled += 1
            return []
        got: dict[int, str] = {1: data}
        if parts > 1:  # most messages (a class of ranks, a node's status) are one line: no reassembly
            if self._held.get(host, 0) + len(data) > MAX_PENDING:
                return self._overflow(host)
            got = self._parts.setdefault((host, msgid), {})
            self._held[host] = self._held.get(host, 0) + len(data) - len(got.get(part, ""))
            got[part] = data
            if len(got) < parts:
                return []
            del self._parts[(host, msgid)]
            self._held[host] -= sum(map(len, got.values()))
        try:
            blob = data if parts == 1 else "".join(got[i] for i in range(1, parts + 1))
            message = load_json(inflate(base64.b64decode(blob, validate=True)))
        except TooLarge as exc:
            self.garbled += 1
            return [(host, {"type": "problem", "what": f"message {msgid}", "reason": str(exc)})]
        except (KeyError, ValueError, binascii.Error, zlib.error):
            self.garbled += 1
            return []
        if not isinstance(message, dict):
            self.garbled += 1
            return []
        return [(host, message)]


    def _overflow(self, host: str) -> list[tuple[str, dict[str, Any]]]:
        """Drop ``host``'s incomplete messages (more than :data:`MAX_PENDING` held): a ``problem``."""
        lost = [key for key in self._parts if key[0] == host]
        for key in lost:
            del self._parts[key]
        self.garbled += len(lost) + 1
        self._held[host] = 0
        return [(host, {"type": "problem", "what": f"{len(lost)} incomplete message(s)",
                         "reason": f"more than {MAX_PENDING >> 20} MiB of message parts never completed: dropped"})]


def _bare(host: str) -> str:
    return host.rpartition("@")[2]
