"""A client of PyTorch's debug server (``torch.distributed.debug.start_debug_server``): read the
workers' URLs from the job's TCPStore, then ask each worker's handlers over HTTP.

Formats (torch 2.13, ``torch/distributed/debug/``):

* ``__init__.py`` ``start_debug_server``: every rank starts a ``_WorkerServer("::", worker_port)``
  and sets ``rank{RANK}`` to ``http://{socket.gethostname()}:{port}`` in
  ``_store.tcpstore_client()``, a ``PrefixStore("debug_server", TCPStore(MASTER_ADDR, MASTER_PORT))``:
  the root store holds the key ``debug_server/rank{i}`` (c10d ``PrefixStore::joinKey``: ``prefix + "/" + key``).
* ``_frontend.py`` ``fetch_all``: the frontend reads ``rank{r}`` for ``r`` in ``range(WORLD_SIZE)`` and
  POSTs ``{addr}/handler/{endpoint}?{args}`` (``fetch_thread_pool``: ``requests.post``; GET answers
  404); a timeout is its 408, a refused connection its 503.
* The handlers (``torch/csrc/distributed/c10d/control_plane``): ``dump_traceback``
  (``PythonHandlers.cpp``: ``faulthandler.dump_traceback(all_threads=True)`` text) and
  ``fr_trace_json`` (``FlightRecorder.cpp``: the flight recorder as JSON, ``_dump_fr_trace_json``).

The store is read over its wire protocol (:mod:`.tcpstore_wire`: milliseconds, no torch); when the
peer does not answer as that protocol says (another torch's server), by a child in the rank's own
interpreter, as a client (``is_master=False``, ``wait_for_workers=False``). Both ``check`` before
``get``, so a missing key is told at once, never waited for. Every request is bounded by a timeout;
nothing here raises.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping
from urllib.parse import urlsplit

from .store import job_store, run_store_child
from .tcpstore_wire import StoreProtocolError, read_keys

__all__ = ["HANDLERS", "KEY", "Fetched", "WorkerUrls", "worker_urls", "fetch", "fetch_all", "MAX_ANSWER"]

HANDLERS = ("dump_traceback", "fr_trace_json")
"""The worker handlers ``dump`` asks: the stacks (no ptrace needed) and the flight recorder."""
KEY = "debug_server/rank{}"
"""The root-store key of a worker's URL (module docstring)."""
MAX_ANSWER = 256 << 20
"""Bytes of one answer read at most (the flight recorder's dumps are refused above this too)."""

_CHILD = r"""
import datetime, json, sys
import torch.distributed as dist
host, port, keys, timeout = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4])
store = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False)
out = {}
for k in keys:
    if store.check([k]):
        out[k] = store.get(k).decode("utf-8", "replace")
print(json.dumps(out))
"""


@dataclass(frozen=True, slots=True)
class WorkerUrls:
    """``urls``: rank -> worker URL (``http://host:port``) for the ranks whose key the store holds;
    ``error``: why the store could not be read (``None``: it answered)."""

    urls: Mapping[int, str]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Fetched:
    """One answer of one worker's handler.

    ``status``: ``answered`` (HTTP 200), ``http-error`` (another HTTP status, in ``code``),
    ``timeout``, ``unresolved`` (the URL's host name does not resolve here), ``refused`` (no
    server listening: the process is gone or never started it) or ``error``; ``text``: the answer
    (200) or the error body; ``detail``: one line for a human."""

    rank: int
    handler: str
    url: str
    status: str
    text: str = ""
    code: int | None = None
    detail: str = ""


def worker_urls(pid: int, world_size: int, timeout: float) -> WorkerUrls:
    """The debug server's worker URLs of the job of rank ``pid``, from its TCPStore (``MASTER_ADDR``/
    ``MASTER_PORT`` of the process's environment, read with psutil).

    Args:
        pid: a rank of the job (its environment gives the store, its interpreter torch).
        world_size: ranks asked (``0..world_size-1``).
        timeout: seconds for the whole child (its import of torch included).

    Returns:
        The URLs found (none when the job runs no debug server) or the error; never raises.
    """
    job = job_store(pid)
    if isinstance(job, str):
        return WorkerUrls({}, job)
    addr, exe = job
    keys = [KEY.format(r) for r in range(world_size)]
    try:
        doc = read_keys(addr[0], addr[1], keys, max(0.5, timeout / 3))
        return WorkerUrls({r: doc[k] for r, k in enumerate(keys) if k in doc})
    except OSError as exc:
        return WorkerUrls({}, f"the store at {addr[0]}:{addr[1]} cannot be reached: {exc.strerror or exc}")
    except StoreProtocolError:
        pass  # not the protocol this client knows: ask torch itself
    ran = run_store_child(exe, addr, _CHILD, [json.dumps(keys), str(max(1.0, timeout / 3))], timeout)
    if isinstance(ran, str):
        return WorkerUrls({}, ran)
    out, last = ran
    try:
        doc = json.loads(out.decode("utf-8", "replace"))
        return WorkerUrls({r: str(doc[k]) for r, k in enumerate(keys) if k in doc})
    except (ValueError, TypeError, AttributeError):
        return WorkerUrls({}, f"could not read the store at {addr[0]}:{addr[1]}: {last[:300]}")


def _resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


def fetch(rank: int, base: str, handler: str, timeout: float) -> Fetched:
    """POST ``{base}/handler/{handler}`` (as ``_frontend.fetch_all`` does), bounded by ``timeout``
    seconds; never raises."""
    url = f"{base.rstrip('/')}/handler/{handler}"
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    if not host:
        return Fetched(rank, handler, url, "error", detail=f"not a worker URL: {base!r}")
    if not _resolves(host):
        return Fetched(rank, handler, url, "unresolved", detail=f"the host name {host!r} of the worker URL does not resolve here")
    req = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (http URL from the job's store)
            text = resp.read(MAX_ANSWER).decode("utf-8", "replace")
            return Fetched(rank, handler, url, "answered", text, resp.status, f"HTTP {resp.status}")
    except urllib.error.HTTPError as exc:
        body = exc.read(4096).decode("utf-8", "replace") if exc.fp is not None else ""
        return Fetched(rank, handler, url, "http-error", body, exc.code, f"HTTP {exc.code}")
    except (TimeoutError, socket.timeout):
        return Fetched(rank, handler, url, "timeout", detail=f"no answer within {timeout:g} s")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return Fetched(rank, handler, url, "timeout", detail=f"no answer within {timeout:g} s")
        if isinstance(reason, ConnectionRefusedError):
            return Fetched(rank, handler, url, "refused", detail="connection refused: no debug server listens there")
        return Fetched(rank, handler, url, "error", detail=str(reason)[:300])
    except (OSError, ValueError) as exc:
        return Fetched(rank, handler, url, "error", detail=f"{type(exc).__name__}: {exc}"[:300])


def fetch_all(urls: Mapping[int, str], handlers: tuple[str, ...], timeout: float,
              on_answer: Callable[[Fetched], None] | None = None, jobs: int = 16) -> list[Fetched]:
    """Every handler of every worker in ``urls`` (rank -> URL), ``jobs`` requests at once, each
    bounded by ``timeout`` seconds; ``on_answer`` gets each answer as it arrives. Sorted by rank,
    then handler."""
    tasks = [(r, u, h) for r, u in sorted(urls.items()) for h in handlers]

    def one(task: tuple[int, str, str]) -> Fetched:
        got = fetch(task[0], task[1], task[2], timeout)
        if on_answer is not None:
            on_answer(got)
        return got

    if not tasks:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(tasks))), thread_name_prefix="debug-server") as pool:
        return list(pool.map(one, tasks))
