"""Read keys of a c10d TCPStore over its own wire protocol, with the standard library only: a client
that starts in milliseconds (no ``import torch``), read-only (``CHECK`` then ``GET``, never a ``SET``
or a ``WAIT``).

The protocol (torch 2.x, ``torch/csrc/distributed/c10d/TCPStoreBackend.hpp`` and ``TCPStore.cpp``;
both the classic and the libuv server backends speak it): integers in the host's byte order
(``tcputil::sendValue``; little-endian here), a key as ``uint64`` length then bytes
(``sendString``), every key the client names prefixed with ``/`` (``TCPStore::keyPrefix_``).

* on connect the client sends ``QueryType::VALIDATE`` (0) and ``uint32`` ``validationMagicNumber``
  ``0x3C85F7CE`` (no answer);
* ``CHECK`` (5): ``uint64`` count, the keys; answer one byte ``CheckResponseType`` (0 ``READY``,
  1 ``NOT_READY``);
* ``GET`` (3): the key; answer ``uint64`` length then the value (asked only of a key ``CHECK`` found).
"""

from __future__ import annotations

import socket
import struct
import sys

__all__ = ["StoreProtocolError", "read_keys"]

_VALIDATE, _GET, _CHECK = 0, 3, 5
_MAGIC = 0x3C85F7CE
_READY = 0
_MAX_VALUE = 1 << 20
_ORDER = "<" if sys.byteorder == "little" else ">"


class StoreProtocolError(Exception):
    """The peer did not answer as a TCPStore does."""


def _recv(s: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            raise StoreProtocolError("the store closed the connection")
        got += chunk
    return got


def _key(k: str) -> bytes:
    b = ("/" + k).encode("utf-8")
    return struct.pack(_ORDER + "Q", len(b)) + b


def read_keys(host: str, port: int, keys: list[str], timeout: float) -> dict[str, str]:
    """The values of those of ``keys`` the store at ``host:port`` holds (others left out).

    Args:
        timeout: seconds for the connection and for each answer.

    Raises:
        OSError: no connection (refused, unreachable, timed out).
        StoreProtocolError: an answer that is not the protocol's.
    """
    out: dict[str, str] = {}
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(_ORDER + "BI", _VALIDATE, _MAGIC))
        for k in keys:
            s.sendall(struct.pack(_ORDER + "BQ", _CHECK, 1) + _key(k))
            answer = _recv(s, 1)[0]
            if answer not in (0, 1):
                raise StoreProtocolError(f"CHECK answered {answer}, not READY (0) or NOT_READY (1)")
            if answer != _READY:
                continue
            s.sendall(struct.pack(_ORDER + "B", _GET) + _key(k))
            size = struct.unpack(_ORDER + "Q", _recv(s, 8))[0]
            if size > _MAX_VALUE:
                raise StoreProtocolError(f"GET answered a value of {size} bytes")
            out[k] = _recv(s, size).decode("utf-8", "replace")
    return out
