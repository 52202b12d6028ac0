"""Ask a job's c10d TCPStore which keys it holds: read-only, with a short timeout, in a child.

The store's address is the rank's ``MASTER_ADDR``/``MASTER_PORT`` (its environment, read with psutil; torchrun,
``torch.distributed.launch`` and the SLURM recipes set both). The child is the rank's own Python
interpreter (the first word of its command line when it is a file, else its executable), since
hangdbg itself may run without torch; it connects as a client (``is_master=False``,
``wait_for_workers=False``) and calls ``TCPStore.check([key])`` per key, which neither sets nor
waits. Keys travel as argv, never through a shell.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

import psutil

from .subproc import Popen, communicate_or_kill

__all__ = ["StoreAnswer", "lookup_keys", "store_address"]

_CHILD = r"""
import datetime, json, sys
import torch.distributed as dist
host, port, keys, timeout = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4])
store = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False)
print(json.dumps({k: bool(store.check([k])) for k in keys}))
"""


@dataclass(frozen=True, slots=True)
class StoreAnswer:
    """``keys``: ``(key, present)`` for every key asked; ``error`` why there is no answer."""

    keys: tuple[tuple[str, bool], ...] = ()
    error: str | None = None


def store_address(pid: int) -> tuple[str, int] | None:
    """``(MASTER_ADDR, MASTER_PORT)`` of process ``pid``, or ``None`` when it has no such variables.

    Raises:
        psutil.Error: the environment cannot be read (gone, or another user's process).
    """
    env = psutil.Process(pid).environ()
    try:
        return env["MASTER_ADDR"], int(env["MASTER_PORT"])
    except (KeyError, ValueError):
        return None


def _interpreter(pid: int) -> str:
    proc = psutil.Process(pid)
    first = next(iter(proc.cmdline()), "")
    if os.path.isabs(first) and os.access(first, os.X_OK):
        return first
    return proc.exe()


def lookup_keys(pid: int, keys: tuple[str, ...] | list[str], timeout: float = 15.0) -> StoreAnswer:
    """Which of ``keys`` the store of the job of rank ``pid`` holds; never raises.

    Args:
        pid: a rank of the job (its environment gives the store's address, its interpreter torch).
        keys: the keys to check.
        timeout: seconds for the whole child (import of torch included); the store connection
            gets a third of it.
    """
    try:
        addr = store_address(pid)
        exe = _interpreter(pid)
    except (psutil.Error, OSError) as exc:
        return StoreAnswer(error=f"cannot read the environment of pid {pid}: {exc}")
    if addr is None:
        return StoreAnswer(error=f"pid {pid} has no MASTER_ADDR/MASTER_PORT: no store to ask")
    argv = [exe, "-c", _CHILD, addr[0], str(addr[1]), json.dumps(list(keys)), str(max(1.0, timeout / 3))]
    try:
        proc = Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     start_new_session=True)
    except OSError as exc:
        return StoreAnswer(error=f"cannot run {exe}: {exc}")
    got = communicate_or_kill(proc, timeout)
    if got is None:
        return StoreAnswer(error=f"the store at {addr[0]}:{addr[1]} did not answer within {timeout:g} s")
    out, err = got
    try:
        found = json.loads(out.decode("utf-8", "replace"))
        return StoreAnswer(tuple((k, bool(found[k])) for k in keys if k in found))
    except (ValueError, TypeError, KeyError):
        last = (err.decode("utf-8", "replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return StoreAnswer(error=f"could not ask the store at {addr[0]}:{addr[1]}: {last[:300]}")
