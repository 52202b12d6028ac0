"""A stand-in for NCCL's RAS service on 127.0.0.1, and RAS reports written from NCCL's format strings.

The server speaks exactly what NCCL's server side does (``src/ras/client_support.cc``
``rasClientEventLoop``, NCCL 2.24.3-2.30): newline-terminated commands, case-insensitive, a
trailing ``\\r`` dropped; ``CLIENT PROTOCOL n`` -> ``SERVER PROTOCOL 2``; ``TIMEOUT n`` -> ``OK``
(``ERROR: Invalid timeout value n`` when not a number >= 0); ``SET FORMAT text|json`` -> ``OK``
(NCCL >= 2.28.7; ``ERROR: Invalid format F`` otherwise; before 2.28.7 the command is unknown:
``ERROR: Unknown command SET FORMAT json``); ``STATUS`` / ``VERBOSE STATUS`` -> the report, then
the connection is closed; anything else -> ``ERROR: Unknown command CMD``. Text reports are sent
in two pieces like ``rasClientRunInit`` (the version lines first). Loopback only.

:func:`json_report` writes a JSON report with the very format strings of ``jsonWriteHeader``,
``jsonStartCommunicator``, ``jsonWriteRankData``, ``jsonStartMissingRanks``,
``jsonWriteMissingRank``, ``jsonEndCommunicator`` and ``jsonWriteFooter``.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
"""The ``collective_counts`` keys of ras.rst's sample (``ncclFuncToString`` of ``NCCL_NUM_FUNCTIONS``)."""


@dataclass
class Rank:
    rank: int
    host: str = "10.0.0.1"
    pid: int = 4000
    cuda_dev: int = 0
    nvml_dev: int | None = None
    init_state: int = 0
    async_error: int = 0
    finalize_called: bool = False
    destroy_flag: bool = False
    abort_flag: bool = False
    counts: dict = field(default_factory=dict)


@dataclass
class Missing:
    rank: int
    host: str = "10.0.0.2"
    pid: int = 5000
    cuda_dev: int = 0
    unresponsive: bool = True
    considered_dead: bool = False


def json_report(comms: list[tuple[int, int, int, int, list[Rank], list[Missing]]], version: str = "2.29.1",
                timeouts: int = 0, seconds: float = 0.0) -> str:
    """``comms``: ``(hash, host_hash, pid_hash, size, ranks, missing)`` per communicator."""
    out = ["{\n", f'  "nccl_version": "{version}",\n', '  "cuda_runtime_version": 13000,\n',
           '  "cuda_driver_version": 13000,\n', '  "timestamp": "2025-12-19 13:06:53",\n',
           f'  "communicators_count": {len(comms)},\n', '  "communicators": [\n']
    for ci, (h, hh, ph, size, ranks, missing) in enumerate(comms):
        if ci:
            out.append(",\n")
        out += ["    {\n", f'      "hash": "0x{h:x}",\n', f'      "secondary_hash": "0x{hh:x}:0x{ph:x}",\n',
                f'      "size": {size},\n', f'      "ranks_count": {len(ranks)},\n',
                f'      "missing_ranks_count": {len(missing)},\n', '      "ranks": [\n']
        for ri, r in enumerate(ranks):
            if ri:
                out.append(",\n")
            out += ["        {\n", f'          "rank": {r.rank},\n', f'          "host": "{r.host}",\n',
                    f'          "pid": {r.pid},\n', f'          "cuda_dev": {r.cuda_dev},\n',
                    f'          "nvml_dev": {r.cuda_dev if r.nvml_dev is None else r.nvml_dev},\n',
                    '          "status": {\n', f'            "init_state": {r.init_state},\n',
                    f'            "async_error": {r.async_error},\n',
                    f'            "finalize_called": {str(r.finalize_called).lower()},\n',
                    f'            "destroy_flag": {str(r.destroy_flag).lower()},\n',
                    f'            "abort_flag": {str(r.abort_flag).lower()}\n', "          },\n",
                    '          "collective_counts": {\n']
            for i, fn in enumerate(FUNCS):
                out.append(f'            "{fn}": {r.counts.get(fn, 0)}' + ("," if i < len(FUNCS) - 1 else "") + "\n")
            out += ["          }\n", "        }"]
        out += ["\n", "      ],\n", '      "missing_ranks": [\n']
        for mi, m in enumerate(missing):
            if mi:
                out.append(",\n")
            out += ["        {\n", f'          "rank": {m.rank},\n', f'          "host": "{m.host}",\n',
                    f'          "pid": {m.pid},\n', f'          "cuda_dev": {m.cuda_dev},\n',
                    f'          "nvml_dev": {m.cuda_dev},\n', '          "status": {\n',
                    f'            "unresponsive": {str(m.unresponsive).lower()},\n',
                    f'            "considered_dead": {str(m.considered_dead).lower()}\n', "          }\n", "        }"]
        out += ["\n      ]\n", "    }"]
    out += ["\n  ],\n", '  "ras": {\n', f'    "collection_time_sec": {seconds:.3f},\n',
            f'    "timeouts_count": {timeouts}\n', "  }\n", "}\n"]
    return "".join(out)


class RasStandIn:
    """A RAS client socket on 127.0.0.1 (``port``); ``mode``: ``json`` (NCCL >= 2.28.7), ``old``
    (NCCL < 2.28.7: no SET FORMAT), ``silent`` (accepts and never answers), ``garbage`` (answers
    the handshake with junk), ``status-garbage`` (a correct handshake, then junk as the report).
    ``commands`` records what clients sent. ``json_text`` may be a list: the n-th STATUS gets the
    n-th report (the last one repeated), like a job whose counts move between queries."""

    def __init__(self, text: str = "", json_text: str | list[str] = "", mode: str = "json") -> None:
        self.text, self.mode = text, mode
        self.json_texts = [json_text] if isinstance(json_text, str) else list(json_text)
        self.statuses = 0
        self.commands: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "RasStandIn":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(5)

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _answer(self, cmd: str, state: dict) -> str | None:
        low = cmd.lower()
        if self.mode == "garbage":
            return "\x00\x01 hello, this is not RAS\n"
        if low.startswith("client protocol "):
            return "SERVER PROTOCOL 2\n"
        if low.startswith("timeout "):
            v = cmd[len("timeout "):]
            return "OK\n" if v.isdigit() else f"ERROR: Invalid timeout value {v}\n"
        if low.startswith("set format ") and self.mode != "old":
            f = cmd[len("set format "):]
            if f.lower() in ("text", "json"):
                state["format"] = f.lower()
                return "OK\n"
            return f"ERROR: Invalid format {f}\n"
        if low in ("status", "verbose status"):
            return None
        return f"ERROR: Unknown command {cmd}\n"

    def _client(self, conn: socket.socket) -> None:
        state = {"format": "text"}
        buf = b""
        with conn:
            conn.settimeout(10)
            while not self._stop.is_set():
                try:
                    chunk = conn.recv(4096)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, _, buf = buf.partition(b"\n")
                    cmd = line.decode().rstrip("\r")
                    self.commands.append(cmd)
                    if self.mode == "silent":
                        continue
                    reply = self._answer(cmd, state)
                    if reply is not None:
                        conn.sendall(reply.encode())
                        continue
                    self._report(conn, state["format"])
                    return

    def _report(self, conn: socket.socket, fmt: str) -> None:
        if self.mode == "status-garbage":
            conn.sendall(b"\xff\xfe{{{ not a report\n\x00garbled line\n")
            return
        self.statuses += 1
        if fmt == "json":
            conn.sendall(self.json_texts[min(self.statuses, len(self.json_texts)) - 1].encode())
            return
        head, sep, rest = self.text.partition("\n\n")
        conn.sendall((head + sep).encode())
        time.sleep(0.05)
        conn.sendall(rest.encode())
