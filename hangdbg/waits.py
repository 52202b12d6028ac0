"""What each rank waits on: the nodes and edges of the wait-for graph (frozen dataclasses, no I/O).

A :class:`RankWait` says what one rank's main thread is doing in field terms (a collective on a
process group, a point-to-point op with a peer, a store wait on keys, a lock, a system call,
computation, its GPU, nothing readable) and on which evidence; :class:`WaitEdge` says that one rank waits
for another and why. ``hangdbg.stacks.waitfor`` builds both from the stacks (and, when present,
locals, native frames, op records of ``hangdbg.hooks.record_collectives`` and the job's store).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from .enums import DocumentedEnum
from .frames import Frame

__all__ = ["WaitKind", "RankWait", "WaitEdge", "WAITING_KINDS", "ROOT_KINDS", "rank_keys", "own_keys", "ProcessRef",
           "TaskState", "OpenFile", "LockFact", "ProcFacts"]


class WaitKind(DocumentedEnum):
    """What a rank's main thread is doing (the value is the JSON string, ``doc`` what it means)."""

    COLLECTIVE = ("collective", "in a collective (all_reduce, barrier, DDP's gradient all_reduce...)")
    P2P = ("p2p", "in send/recv/isend/irecv/batch_isend_irecv, or wait() on one")
    STORE = ("store", "in store.get / store.wait on a c10d store (TCPStore, FileStore)")
    INIT = ("init", "in init_process_group, a rendezvous or new_group")
    LOCK = ("lock", "acquiring a mutex")
    BLOCKED = ("blocked", "idle in a system call outside torch.distributed: file or socket I/O, a sleep")
    COMPUTE = ("compute", "on CPU outside torch.distributed (py-spy \"active\")")
    GPU = ("gpu", "waiting on its GPU: in a CUDA synchronize or a copy to the host (torch.cuda.synchronize, "
                  "Stream/Event.synchronize, .item(), .cpu(); cudaDeviceSynchronize, cuCtxSynchronize...) while the "
                  "GPU has not finished earlier work (a kernel still running, or queued behind one)")
    UNKNOWN = ("unknown", "no stack could be read")
    GONE = ("gone", "the process exited (or never started)")


WAITING_KINDS = frozenset({WaitKind.COLLECTIVE, WaitKind.P2P, WaitKind.STORE, WaitKind.INIT})
"""Kinds in which a rank waits for other ranks of the job."""

ROOT_KINDS = frozenset({WaitKind.LOCK, WaitKind.BLOCKED, WaitKind.COMPUTE, WaitKind.GPU, WaitKind.UNKNOWN,
                        WaitKind.GONE})
"""Kinds in which a rank waits on nothing inside the job: when others wait for it, it is a cause."""


@dataclass(frozen=True, slots=True)
class RankWait:
    """What one rank waits on.

    One object may stand for every rank of an equivalence class (the analysis keys them by rank).

    Attributes:
        kind: see :class:`WaitKind`.
        op: the collective or point-to-point op (``all_reduce``, ``recv``, ``wait``), the store
            call (``store.wait``), for ``gpu`` the call that waits on the GPU (the CUDA runtime and
            driver calls of native frames, ``cudaDeviceSynchronize -> cuCtxSynchronize_v2``, under
            torch's Python API when a frame or the source line shows it: ``torch.cuda.synchronize``,
            ``.item()``), or for other kinds the function the thread is in.
        site: the user frame that called into torch.distributed (for ``gpu``: that called the
            synchronizing API; else the top frame).
        peer: the peer's global rank of a point-to-point op, when known.
        direction: ``"send"`` or ``"recv"`` for point-to-point ops, when known.
        keys: the store keys waited on (``--locals``).
        missing_keys: those of ``keys`` the store does not hold (asked read-only).
        group: the global ranks of the process group, when known (op records, locals).
        seq: the op's sequence number in its group, when known (op records).
        detail: a short phrase for a person: ``"reading a file"``, ``"computing"``.
        evidence: what the classification rests on: ``python``, ``native``, ``locals``,
            ``record``, ``store``, ``samples``, ``proc`` (:class:`ProcFacts`).
        blocker: for a rank blocked outside torch.distributed, what blocks it, from the vocabulary of
            :mod:`hangdbg.stacks.blockers` (``debugger``, ``child process``, ``output``, ``event``,
            ``file lock``, ``socket``, ``D state``); '' when none applies.
        waiting_on: for a blocker, what the thread waits on, said after its site (``waiting on stdin``).
    """

    kind: WaitKind
    op: str = ""
    site: Frame | None = None
    peer: int | None = None
    direction: str | None = None
    keys: tuple[str, ...] = ()
    missing_keys: tuple[str, ...] = ()
    group: tuple[int, ...] | None = None
    seq: int | None = None
    detail: str = ""
    evidence: tuple[str, ...] = ("python",)
    blocker: str = ""
    waiting_on: str = ""

    @property
    def waiting(self) -> bool:
        """True when the rank waits for other ranks of the job."""
        return self.kind in WAITING_KINDS

    def describe(self) -> str:
        """``in all_reduce at train.py:40 in step()``, ``in recv from rank 1 at pp.py:12``, ``reading a file
        in load_shard (data.py:33)`` (the call site's function unless it is ``<module>``)."""
        site = f" at {self.site.short_file}:{self.site.line}" if self.site is not None and self.site.line else ""
        if site and self.site is not None and self.site.function and not self.site.function.startswith("<"):
            site += f" in {self.site.function}()"  # the caller's function says what the program was doing
        if self.kind is WaitKind.P2P:
            dir_ = {"send": " to", "recv": " from"}.get(self.direction or "", " with")
            peer = f"{dir_} rank {self.peer}" if self.peer is not None else ""
            return f"in {self.op}{peer}{site}"
        if self.kind is WaitKind.STORE:
            shown = self.missing_keys or self.keys
            more = f" (+{len(shown) - 3} more)" if len(shown) > 3 else ""
            lacking = " the store lacks" if self.missing_keys else ""
            keys = f" for key{'s' if len(shown) != 1 else ''} {', '.join(shown[:3])}{more}{lacking}" if shown else ""
            return f"in {self.op}{keys}{site}"
        if self.kind in (WaitKind.COLLECTIVE, WaitKind.INIT):
            return f"in {self.op}{site}"
        if self.kind is WaitKind.UNKNOWN:
            return self.detail or "stack unknown"
        if self.kind is WaitKind.GONE:
            return self.detail or "gone"
        if self.kind is WaitKind.GPU:
            return f"{self.detail or 'waiting on its GPU'} in {self.op or 'a CUDA synchronize'}{site}"
        if self.blocker:  # ``sits in pdb at train.py:40 in step(), waiting on stdin``
            return f"{self.detail}{site}{', ' + self.waiting_on if self.waiting_on else ''}"
        where = f" in {self.site}" if self.site is not None else ""
        return f"{self.detail or str(self.kind)}{where}"


@dataclass(frozen=True, slots=True)
class WaitEdge:
    """Each of ``waiters`` waits for each of ``targets`` (one edge per place: ranks waiting in one
    collective wait for the same ranks, so the graph stays linear in the number of ranks).

    Attributes:
        waiters: the waiting ranks, sorted.
        targets: the ranks they wait for, sorted.
        why: ``collective`` (members of the group not in the collective yet), ``p2p`` (the peer),
            ``store`` (the ranks whose keys are missing), ``init`` (ranks not in the rendezvous).
    """

    waiters: tuple[int, ...]
    targets: tuple[int, ...]
    why: str


_DIGITS = re.compile(r"(\d+)")


def rank_keys(keys: Iterable[str]) -> dict[str, int]:
    """The keys of ``keys`` that name a rank each, with that rank: ``{"step2/done/0": 0, ...}``.

    Heuristic (ours; the shape of hand-made store barriers and of torch's own per-rank keys,
    ``f"{key_prefix}{rank}"`` in ``torch.distributed.elastic.utils.store.synchronize``/``barrier``, torch 2.x):
    keys that are equal but for one integer, the same position in each (``step2/done/0`` ...
    ``step2/done/3``: ``step2`` is the same in all), form a family indexed by rank, and that integer
    is the rank. A family needs two keys or more; a key alone, or keys that differ in two integers,
    name no rank here (:func:`hangdbg.stacks.waitfor.key_rank`, the last integer, is the fallback).

    Args:
        keys: store keys (a rank's wait, ``RankWait.keys``).
    """
    by_shape: dict[tuple[str, ...], list[tuple[str, list[str]]]] = {}
    for key in dict.fromkeys(keys):
        parts = _DIGITS.split(key)
        by_shape.setdefault(tuple(parts[0::2]), []).append((key, parts[1::2]))
    out: dict[str, int] = {}
    for family in by_shape.values():
        if len(family) < 2:
            continue
        varying = [i for i in range(len(family[0][1])) if len({nums[i] for _, nums in family}) > 1]
        if len(varying) == 1:
            out.update((key, int(nums[varying[0]])) for key, nums in family)
    return out


def own_keys(keys: Iterable[str], rank: int) -> tuple[str, ...]:
    """The keys of ``keys`` that are ``rank``'s own: in a family indexed by rank (:func:`rank_keys`), the
    key with ``rank``'s number. A rank that waits for a whole family including its own key (a barrier)
    set its own key before it waits: a store that lacks it is not read as the job sees it (another
    prefix, another store), so its answer cannot be trusted."""
    return tuple(k for k, r in rank_keys(keys).items() if r == rank)


@dataclass(frozen=True, slots=True)
class ProcessRef:
    """A process named by a fact: its pid, command line and whether it still exists.

    Attributes:
        pid: the process id (on the rank's node).
        cmdline: ``/proc/PID/cmdline``, arguments joined by spaces ('' when unreadable or gone).
        alive: the process existed when the fact was read.
    """

    pid: int
    cmdline: str = ""
    alive: bool = True


@dataclass(frozen=True, slots=True)
class TaskState:
    """One OS thread of a rank (``/proc/PID/task/TID``, proc(5)).

    Attributes:
        tid: the thread id (py-spy >= 0.3.10 prints it as the thread's id).
        state: field 3 of ``stat``: ``R`` running, ``S`` sleeping, ``D`` uninterruptible (disk) sleep, ``T``, ``Z``...
        wchan: ``wchan``: the kernel function the thread sleeps in ('' or ``0`` when not known).
        syscall: the system call it is blocked in, by name (``syscall``'s first field through the
            architecture's table: ``write``, ``wait4``, ``flock``...), '' when running or unknown.
        fd: the file descriptor argument of that call (``read``/``write``/``flock``/``recvfrom``...),
            ``None`` when the call takes none.
        arg: the first argument of that call when it is not a descriptor (``wait4``: the pid waited for).
    """

    tid: int
    state: str
    wchan: str = ""
    syscall: str = ""
    fd: int | None = None
    arg: int | None = None


@dataclass(frozen=True, slots=True)
class OpenFile:
    """One open file descriptor of a rank that a blocker may name (``/proc/PID/fd``, ``fdinfo``; proc(5)).

    Attributes:
        fd: the descriptor number.
        target: what ``/proc/PID/fd/N`` links to: a path, ``pipe:[INODE]``, ``socket:[INODE]``, ``/dev/pts/3``.
        write: the descriptor is open for writing (``fdinfo`` flags ``O_WRONLY``/``O_RDWR``).
        unread: for a pipe, bytes written and not yet read (``FIONREAD``, pipe(7)); ``None`` unknown.
        capacity: for a pipe, its capacity in bytes (``F_GETPIPE_SZ``, pipe(7)).
        readers: for a pipe, the processes holding its read end.
        local: for a socket, its local address (``host:port``).
        remote: for a socket, its peer's address (``host:port``), '' when unconnected.
        status: for a TCP socket, its state (``ESTABLISHED``, ``CLOSE_WAIT``...).
    """

    fd: int
    target: str
    write: bool = False
    unread: int | None = None
    capacity: int | None = None
    readers: tuple[ProcessRef, ...] = ()
    local: str = ""
    remote: str = ""
    status: str = ""


@dataclass(frozen=True, slots=True)
class LockFact:
    """A file lock a rank waits for (``/proc/locks``, proc(5): ``ID: [->] KIND MODE TYPE PID MAJ:MIN:INODE START END``).

    Attributes:
        path: the locked file.
        inode: ``MAJ:MIN:INODE`` as ``/proc/locks`` writes it (device numbers in hex), '' when the file
            was not found.
        kind: ``FLOCK``, ``POSIX`` or ``OFDLCK`` ('' when nobody holds it).
        waiting: the rank is a blocked waiter of it (a ``->`` line with its pid).
        holders: the processes ``/proc/locks`` names as holding it; a ``FLOCK`` lock names the process that
            took it, which may have exited while a child that inherited the descriptor keeps it held.
        openers: the other processes that have the file open (``/proc/*/fd``).
        exists: the file exists (for a lock file that is itself the lock, ``filelock.SoftFileLock``).
    """

    path: str
    inode: str = ""
    kind: str = ""
    waiting: bool = False
    holders: tuple[ProcessRef, ...] = ()
    openers: tuple[ProcessRef, ...] = ()
    exists: bool = True


@dataclass(frozen=True, slots=True)
class ProcFacts:
    """What ``/proc`` said about a blocked rank when it was dumped (collected by
    :mod:`hangdbg.collect.proc_facts`; a saved dump read back has none).

    Attributes:
        tasks: the rank's OS threads.
        files: the descriptors a blocker may name (pipes, terminals, sockets, locked files, stdin).
        locks: the file locks the rank waits for.
        children: the rank's child processes.
        error: why some facts could not be read ('' when all were).
    """

    tasks: tuple[TaskState, ...] = ()
    files: tuple[OpenFile, ...] = ()
    locks: tuple[LockFact, ...] = ()
    children: tuple[ProcessRef, ...] = ()
    error: str = ""
