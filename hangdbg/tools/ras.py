"""A client of NCCL's RAS service: the ``ncclras`` binary when it is on PATH, else its socket protocol.

The protocol (NCCL ``src/ras/client.cc`` ``connectToNCCL``/``setOutputFormat``/``getNCCLStatus``,
the server side ``src/ras/client_support.cc`` ``rasClientEventLoop``; NCCL 2.24.3 to 2.30): a TCP
connection to ``NCCL_RAS_ADDR`` (default ``localhost:28028``, ``NCCL_RAS_CLIENT_PORT``), then
newline-terminated commands, each answered with one line:

* ``CLIENT PROTOCOL 2`` -> ``SERVER PROTOCOL 2`` (``NCCL_RAS_CLIENT_PROTOCOL``, 2 since 2.24.3);
* ``TIMEOUT <secs>`` -> ``OK`` (the RAS collective's leg timeout; 5 s by default,
  ``RAS_COLLECTIVE_LEG_TIMEOUT_SEC``);
* ``SET FORMAT json`` -> ``OK`` (NCCL >= 2.28.7; older servers answer
  ``ERROR: Unknown command SET FORMAT json``: then the text format is used);
* ``STATUS`` or ``VERBOSE STATUS`` -> the report, then the server closes the connection (EOF ends
  the answer). In text the report may come in pieces (the first, ``NCCL version ...``, at once).

A server that does not answer a handshake line within a second is treated like ``ncclras``
does (``TIMEOUT_INCREMENT``), except that ``ncclras`` retries forever and this client gives up at
its deadline. The ``ncclras`` binary is run with an argv list (``-h HOST -p PORT -t SECS -f json``;
logged on ``hangdbg.commands``, shown by ``hangdbg -v``), bounded by the same deadline; a client
older than 2.28.7 rejects ``-f`` (getopt) and a server older than 2.28.7 makes a newer client fail
with ``Unexpected response from NCCL: ERROR...``: both are retried once in text.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

from .subproc import run

__all__ = ["RasAddress", "RasAnswer", "parse_ras_addr", "query_ras", "DEFAULT_ADDR", "NOT_LISTENING", "ANSWER_CAP"]

DEFAULT_ADDR = "localhost:28028"
"""``NCCL_RAS_ADDR``'s default (NCCL ``rasClientInitSocket``)."""

PROTOCOL = 2
"""``NCCL_RAS_CLIENT_PROTOCOL`` (``src/ras/ras_internal.h``)."""

ANSWER_CAP = 64 << 20
"""Bytes of an answer kept (a 100,000-rank JSON report is tens of MB); the rest is dropped."""

NOT_LISTENING = "RAS is not listening: NCCL_RAS_ENABLE=0, NCCL < 2.24, or no NCCL job on this node"
"""The remedy line of a refused connection (NCCL starts the listener in ``ncclCommInitRank``'s
bootstrap when ``NCCL_RAS_ENABLE`` is 1: ``src/bootstrap.cc``)."""


@dataclass(frozen=True, slots=True)
class RasAddress:
    """Where RAS listens: ``host`` (a name or an IP, without IPv6 brackets) and ``port``."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class RasAnswer:
    """What a RAS query brought.

    Attributes:
        address: where it asked.
        text: the report as it arrived (``""`` when none).
        format: ``json`` or ``text`` (what was asked for and accepted), ``""`` when nothing came.
        via: ``ncclras`` (the binary, ``argv`` its command line) or ``socket``.
        error: why there is no (complete) report, ``""`` when there is one.
        refused: the connection was refused (nothing listens there).
        seconds: how long the query took.
        argv: the ``ncclras`` command line, when it ran.
    """

    address: RasAddress
    text: str = ""
    format: str = ""
    via: str = "socket"
    error: str = ""
    refused: bool = False
    seconds: float = 0.0
    argv: tuple[str, ...] = ()


def parse_ras_addr(value: str | None) -> RasAddress | None:
    """``NCCL_RAS_ADDR`` -> the address; unset or empty -> the default; None when it cannot be read.

    Format (NCCL ``env.rst`` ``NCCL_RAS_ADDR``, ``ncclSocketGetAddrFromString``): ``host:port``,
    an IPv6 address in square brackets (``[::1]:28028``).
    """
    value = (value or "").strip() or DEFAULT_ADDR
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if not sep:
            return None
    else:
        host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return RasAddress(host, int(port))


class _Conn:
    """One connection, read line by line under a deadline (monotonic seconds)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.buf = sock, deadline, b""

    def _left(self, cap: float | None = None) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer before the deadline")
        return min(left, cap) if cap is not None else left

    def line(self, cmd: str, cap: float | None = None) -> str:
        """Send ``cmd`` and read one answer line (raises TimeoutError, ConnectionError)."""
        self.sock.settimeout(self._left(cap))
        self.sock.sendall(cmd.encode() + b"\n")
        while b"\n" not in self.buf:
            self.sock.settimeout(self._left(cap))
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("RAS closed the connection")
            self.buf += chunk
            if len(self.buf) > 4096:
                raise ConnectionError(f"no answer line in {len(self.buf)} bytes: not a RAS server")
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", "replace").strip()

    def rest(self) -> tuple[bytes, bool]:
        """Everything until EOF (capped at :data:`ANSWER_CAP`); True when the deadline cut it."""
        chunks, size = [self.buf], len(self.buf)
        while True:
            try:
                self.sock.settimeout(self._left())
                chunk = self.sock.recv(1 << 16)
            except (TimeoutError, socket.timeout):
                return b"".join(chunks), True
            if not chunk:
                return b"".join(chunks), False
            if size < ANSWER_CAP:
                chunks.append(chunk[:ANSWER_CAP - size])
            size += len(chunk)


def _handshake(conn: _Conn, rasto: int, fmt: str) -> str:
    """Protocol, timeout, format; returns the format accepted (raises on a foreign server)."""
    hello = conn.line(f"CLIENT PROTOCOL {PROTOCOL}", cap=1.0)
    if not hello.upper().startswith("SERVER PROTOCOL "):
        raise ConnectionError(f"not a RAS server (it answered {hello[:80]!r})")
    ok = conn.line(f"TIMEOUT {rasto}", cap=1.0)
    if ok.upper() != "OK":
        raise ConnectionError(f"RAS refused TIMEOUT {rasto}: {ok[:80]!r}")
    if fmt == "json":
        ok = conn.line("SET FORMAT json", cap=1.0)
        if ok.upper() != "OK":  # NCCL < 2.28.7: "ERROR: Unknown command SET FORMAT json"
            return "text"
    return fmt


def _over_socket(addr: RasAddress, timeout: float, fmt: str, verbose: bool) -> RasAnswer:
    start = time.monotonic()
    deadline = start + timeout
    rasto = max(1, int(timeout / 2))  # RAS answers (with INCOMPLETE/TIMEOUT) before our deadline
    try:
        sock = socket.create_connection((addr.host, addr.port), timeout=min(timeout, 2.0))
    except ConnectionRefusedError:
        return RasAnswer(addr, error=f"connection to {addr} refused", refused=True, seconds=time.monotonic() - start)
    except OSError as exc:
        return RasAnswer(addr, error=f"cannot connect to {addr}: {exc.strerror or exc}", seconds=time.monotonic() - start)
    with sock:
        conn = _Conn(sock, deadline)
        try:
            fmt = _handshake(conn, rasto, fmt)
            sock.sendall(b"VERBOSE STATUS\n" if verbose else b"STATUS\n")
            data, cut = conn.rest()
        except (TimeoutError, socket.timeout):
            return RasAnswer(addr, error=f"{addr} did not answer within {timeout:g} s", seconds=time.monotonic() - start)
        except (ConnectionError, OSError) as exc:
            return RasAnswer(addr, error=f"{addr}: {exc}", seconds=time.monotonic() - start)
    text = data.decode("utf-8", "replace")
    error = f"the report was cut at the deadline ({timeout:g} s)" if cut else ("" if text.strip() else "empty answer")
    return RasAnswer(addr, text, fmt, "socket", error, seconds=time.monotonic() - start)


def _with_binary(exe: str, addr: RasAddress, timeout: float, fmt: str, verbose: bool) -> RasAnswer:
    start = time.monotonic()
    rasto = max(1, int(timeout / 2))
    base = [exe, "-h", addr.host, "-p", str(addr.port), "-t", str(rasto)] + (["-v"] if verbose else [])
    err = ""
    for f in ((fmt, "text") if fmt == "json" else (fmt,)):
        argv = base + (["-f", "json"] if f == "json" else [])
        left = timeout - (time.monotonic() - start)
        if left <= 0:
            break
        try:
            done = run(argv, timeout=left)
        except subprocess.TimeoutExpired:  # ncclras retries a silent server forever
            return RasAnswer(addr, error=f"ncclras did not finish within {timeout:g} s", via="ncclras",
                             seconds=time.monotonic() - start, argv=tuple(argv))
        except OSError as exc:
            return RasAnswer(addr, error=f"cannot run {exe}: {exc.strerror or exc}", via="ncclras", argv=tuple(argv))
        out = done.stdout[:ANSWER_CAP].decode("utf-8", "replace")
        err = done.stderr.decode("utf-8", "replace").strip()
        if done.returncode == 0 and out.strip():
            return RasAnswer(addr, out, f, "ncclras", seconds=time.monotonic() - start, argv=tuple(argv))
        if "Failed to connect" in err or "Connection refused" in err:
            return RasAnswer(addr, error=f"connection to {addr} refused", refused=True, via="ncclras",
                             seconds=time.monotonic() - start, argv=tuple(argv))
    last = err.splitlines()[-1] if err else "no output"
    return RasAnswer(addr, error=f"ncclras failed: {last[:200]}", via="ncclras", seconds=time.monotonic() - start,
                     argv=tuple(argv))


def query_ras(addr: RasAddress, timeout: float, fmt: str = "json", verbose: bool = False,
              ncclras: str | None = "ncclras") -> RasAnswer:
    """Ask RAS at ``addr`` for its status report; never raises for what the server does.

    Args:
        addr: where RAS listens (:func:`parse_ras_addr` of the job's ``NCCL_RAS_ADDR``).
        timeout: seconds for the whole query; RAS is told half of it (``TIMEOUT``, at least 1 s)
            so that it answers with what it gathered (``INCOMPLETE``) before this deadline.
        fmt: ``json`` (falls back to ``text`` on NCCL < 2.28.7) or ``text``.
        verbose: ``VERBOSE STATUS`` (``ncclras -v``): outliers listed up to half a communicator.
        ncclras: the binary to prefer when found on PATH (None: always the socket).

    Returns:
        The answer; ``error`` says why there is no report (``refused``: nothing listens).
    """
    exe = shutil.which(ncclras) if ncclras else None
    if exe is not None:
        return _with_binary(exe, addr, timeout, fmt, verbose)
    return _over_socket(addr, timeout, fmt, verbose)
