"""Ask a job's c10d TCPStore which keys it holds: read-only, with a short timeout, in a child.

The store's address is the rank's ``MASTER_ADDR``/``MASTER_PORT`` (its environment, read with psutil; torchrun,
``torch.distributed.launch`` and the SLURM recipes set both). The child is the rank's own Python
interpreter (the first word of its command line when it is a file, else its executable), since
hangdbg itself may run without torch; it connects as a client (``is_master=False``,
``wait_for_workers=False``) and calls ``TCPStore.check([key])`` per key, which neither sets nor
waits. Keys travel as argv, never through a shell.

**Prefixes.** A job rarely waits on the TCPStore's root: the store ``init_process_group`` makes (the
default store, ``torch.distributed.distributed_c10d._get_default_store()``) wraps it twice, so a key
``K`` set on it is held as ``default_pg/0//K`` (torch 2.x ``distributed_c10d.py``: ``init_process_group``
wraps the rendezvous store in ``PrefixStore("default_pg", store)``; ``_new_process_group_helper`` wraps
that in ``PrefixStore(f"{group_name}/", store)``, the default group's name being ``"0"``, the first
``_world.group_count``; c10d's ``PrefixStore::joinKey`` joins ``prefix + "/" + key``). Each key is
therefore looked up as given and under :data:`TORCH_PREFIXES`; where the store can list its keys
(``Store.list_keys``, newer torch), every prefix under which one of the keys is held (another
group's ``default_pg/N//``, a user's ``PrefixStore``) is tried after those. The answer kept is the
first whose presence of the waiter's own keys (:func:`hangdbg.waits.own_keys`: the key of the
waiting rank's number in a family of per-rank keys) is complete, and among those the one holding
the most keys; with no such answer, the keys as given (the analysis then finds the contradiction
and does not blame: :mod:`hangdbg.stacks.store_answer`).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import Collection

import psutil

from ..launch_env import rank_from_environ
from ..waits import own_keys
from .subproc import Popen, communicate_or_kill

__all__ = ["StoreAnswer", "lookup_keys", "store_address", "job_store", "run_store_child", "choose_answer",
           "TORCH_PREFIXES"]

TORCH_PREFIXES = ("default_pg/0//", "0//", "default_pg/")
"""Where torch's stores put a key ``K`` of the job's default store (module docstring): ``default_pg/0//K``
(``init_process_group`` with a rendezvous), ``0//K`` (``init_process_group(store=...)``: no
``default_pg`` wrapper), ``default_pg/K`` (the rendezvous store wrapped once)."""

MAX_PREFIXES = 8
"""Prefixes found by listing the store's keys that are tried at most (the cost is one ``check`` per key
and prefix)."""

_CHILD = r"""
import datetime, json, sys
import torch.distributed as dist
host, port, keys, timeout = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4])
prefixes, most = json.loads(sys.argv[5]), int(sys.argv[6])
store = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False)
found = []
try:
    listed = store.list_keys()
except Exception:
    listed = []
wanted = set(keys)
for held in sorted(listed):
    cut = held.find("/")
    while cut >= 0 and len(found) < most:
        p = held[:cut + 1]
        if held[cut + 1:] in wanted and p not in prefixes and p not in found:
            found.append(p)
        cut = held.find("/", cut + 1)
answers = [[p, {k: bool(store.check([p + k])) for k in keys}] for p in ["", *prefixes]]
answers += [[p, {k: bool(store.check([p + k])) for k in keys}] for p in found]
print(json.dumps({"answers": answers, "known": 1 + len(prefixes)}))
"""


@dataclass(frozen=True, slots=True)
class StoreAnswer:
    """``keys``: ``(key, present)`` for every key asked; ``error`` why there is no answer; ``prefix``:
    under which prefix the keys were read (``""``: as given)."""

    keys: tuple[tuple[str, bool], ...] = ()
    error: str | None = None
    prefix: str = ""


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


def _own(pid: int, keys: Collection[str]) -> tuple[str, ...]:
    """The keys of ``keys`` that are process ``pid``'s own (its rank from its environment:
    :func:`hangdbg.launch_env.rank_from_environ`), or ``()``."""
    try:
        rank, _source = rank_from_environ(psutil.Process(pid).environ())
    except (psutil.Error, OSError):
        return ()
    return own_keys(keys, rank) if rank is not None else ()


def choose_answer(answers: list[tuple[str, dict[str, bool]]], own: Collection[str], known: int | None = None) -> tuple[str, dict[str, bool]]:
    """The answer to keep among ``(prefix, {key: present})`` (the keys as given first): see the module
    docstring.

    Args:
        answers: one per prefix tried, in the order tried; must not be empty.
        own: the waiter's own keys (may be empty: then only the count decides).
        known: how many of ``answers`` come from :data:`TORCH_PREFIXES` and the keys as given (the rest
            were found by listing the store): those are preferred when they hold the own keys.
    """
    known = len(answers) if known is None else known

    def best(group: list[tuple[str, dict[str, bool]]]) -> tuple[str, dict[str, bool]] | None:
        ok = [a for a in group if all(a[1].get(k) for k in own)]
        top = max(ok, key=lambda a: sum(a[1].values()), default=None)  # max keeps the first of equals
        return top if top is not None and (own or sum(top[1].values())) else None

    return best(answers[:known]) or best(answers[known:]) or answers[0]


def lookup_keys(pid: int, keys: tuple[str, ...] | list[str], timeout: float = 15.0,
                own: Collection[str] | None = None) -> StoreAnswer:
    """Which of ``keys`` the store of the job of rank ``pid`` holds, read as the job's store sees them
    (the prefixes of the module docstring); never raises.

    Args:
        pid: a rank of the job (its environment gives the store's address, its interpreter torch);
            the rank that waits for the keys.
        keys: the keys to check.
        timeout: seconds for the whole child (import of torch included); the store connection
            gets a third of it.
        own: the waiting rank's own keys (present in a trustworthy answer); by default
            :func:`hangdbg.waits.own_keys` of ``keys`` for the rank in ``pid``'s environment (``RANK``,
            or another launcher's variable).
    """
    job = job_store(pid)
    if isinstance(job, str):
        return StoreAnswer(error=job)
    addr, exe = job
    ran = run_store_child(exe, addr, _CHILD, [json.dumps(list(keys)), str(max(1.0, timeout / 3)),
                                              json.dumps(list(TORCH_PREFIXES)), str(MAX_PREFIXES)], timeout)
    if isinstance(ran, str):
        return StoreAnswer(error=ran)
    out, last = ran
    try:
        doc = json.loads(out.decode("utf-8", "replace"))
        answers = [(str(p), {str(k): bool(v) for k, v in found.items()}) for p, found in doc["answers"]]
        prefix, found = choose_answer(answers, _own(pid, keys) if own is None else own, int(doc["known"]))
        return StoreAnswer(tuple((k, found[k]) for k in keys if k in found), prefix=prefix)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return StoreAnswer(error=f"could not ask the store at {addr[0]}:{addr[1]}: {last[:300]}")


def job_store(pid: int) -> tuple[tuple[str, int], str] | str:
    """The store of the job of rank ``pid`` (``(MASTER_ADDR, MASTER_PORT)``, :func:`store_address`)
    and the job's interpreter (which has torch), or why there is none; never raises."""
    try:
        addr = store_address(pid)
        exe = _interpreter(pid)
    except (psutil.Error, OSError) as exc:
        return f"cannot read the environment of pid {pid}: {exc}"
    if addr is None:
        return f"pid {pid} has no MASTER_ADDR/MASTER_PORT: no store to ask"
    return addr, exe


def run_store_child(exe: str, addr: tuple[str, int], script: str, args: list[str],
                    timeout: float) -> tuple[bytes, str] | str:
    """Run ``script`` (``python -c``: torch's own TCPStore client) under the job's interpreter ``exe``
    with ``argv[1:]`` = the store's host, port, then ``args``, in a session of its own, killed after
    ``timeout`` seconds; never raises.

    Returns:
        ``(stdout, the last line of stderr or the exit status)`` (for the caller's parse error), or
        why it could not run or did not answer in time.
    """
    argv = [exe, "-c", script, addr[0], str(addr[1]), *args]
    try:
        proc = Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     start_new_session=True)
    except OSError as exc:
        return f"cannot run {exe}: {exc}"
    got = communicate_or_kill(proc, timeout)
    if got is None:
        return f"the store at {addr[0]}:{addr[1]} did not answer within {timeout:g} s"
    out, err = got
    return out, (err.decode("utf-8", "replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
