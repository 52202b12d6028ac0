"""Read what ``/proc`` says about a blocked rank (:class:`hangdbg.waits.ProcFacts`), at dump time.

Only for ranks the first analysis finds blocked outside torch.distributed (a handful), and read-only: a pipe is
opened through ``/proc/PID/fd/N`` with ``O_RDONLY | O_NONBLOCK`` to ask ``FIONREAD`` and ``F_GETPIPE_SZ``
(pipe(7)) and closed without reading. Sources (proc(5)):

* ``/proc/PID/task/TID/stat`` (field 3: the state, ``D`` uninterruptible sleep), ``wchan``, and ``syscall``
  (the blocked call's number and arguments; the numbers are the kernel's tables, Linux
  ``arch/x86/entry/syscalls/syscall_64.tbl`` and ``include/uapi/asm-generic/unistd.h`` for arm64; reading it needs
  the same ptrace access py-spy has);
* ``/proc/PID/fd/N`` (what a descriptor is: a path, ``pipe:[INODE]``, ``socket:[INODE]``) and ``fdinfo/N``
  (``flags``, octal: the access mode);
* ``/proc/locks`` (``ID: [->] KIND MODE TYPE PID MAJ:MIN:INODE START END``; ``->``: a blocked waiter);
* psutil: children with their command lines, ``Process.net_connections()`` for a socket's addresses.

Cost: a few small files per thread and per named descriptor; the node's ``/proc/*/fd`` are scanned only for a full
pipe (who holds its read end) and a waited-for lock (who has the file open).
"""

from __future__ import annotations

import array
import fcntl
import os
import platform
import re
import termios
from pathlib import Path
from typing import Callable, Iterable

import psutil

from ..waits import LockFact, OpenFile, ProcessRef, ProcFacts, TaskState

__all__ = ["proc_facts", "SYSCALLS", "parse_locks"]

_X86_64 = {0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev", 23: "select",
           35: "nanosleep", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
           61: "wait4", 72: "fcntl", 73: "flock", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
           247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4", 296: "pwritev"}
_GENERIC = {22: "epoll_pwait", 25: "fcntl", 32: "flock", 63: "read", 64: "write", 65: "readv", 66: "writev",
            67: "pread64", 68: "pwrite64", 70: "pwritev", 72: "pselect6", 73: "ppoll", 95: "waitid", 98: "futex",
            101: "nanosleep", 115: "clock_nanosleep", 202: "accept", 203: "connect", 206: "sendto", 207: "recvfrom",
            211: "sendmsg", 212: "recvmsg", 242: "accept4", 260: "wait4"}
SYSCALLS = {"x86_64": _X86_64, "aarch64": _GENERIC, "arm64": _GENERIC, "riscv64": _GENERIC}
"""Machine (``platform.machine()``) -> system call number -> name, for the calls a blocker names."""

_FD_CALLS = frozenset({"read", "write", "readv", "writev", "pread64", "pwrite64", "pwritev", "flock", "fcntl",
                       "recvfrom", "recvmsg", "sendto", "sendmsg", "accept", "accept4", "connect"})
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
PAGE = 4096
"""Bytes of a pipe buffer page (pipe(7): a pipe's capacity is a number of pages; a write waits for room)."""
_LOCK_LINE = re.compile(r"^\d+:\s+(->\s+)?(\w+)\s+\S+\s+\S+\s+(-?\d+)\s+([0-9a-fA-F]+:[0-9a-fA-F]+:\d+)\s")


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _task(pid: int, tid: int, table: dict[int, str]) -> TaskState | None:
    base = f"/proc/{pid}/task/{tid}"
    stat = _read(f"{base}/stat")
    if ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    state = fields[0] if fields else "?"
    wchan = _read(f"{base}/wchan").strip()
    parts = _read(f"{base}/syscall").split()
    name, fd, arg = "", None, None
    if parts and parts[0].lstrip("-").isdigit() and int(parts[0]) >= 0:
        name = table.get(int(parts[0]), f"syscall {parts[0]}")
        first = int(parts[1], 16) if len(parts) > 1 else None
        if first is not None and first >= 1 << 63:
            first -= 1 << 64  # a negative argument (wait4(-1, ...))
        fd, arg = (first, None) if name in _FD_CALLS else (None, first if name == "wait4" else None)
    return TaskState(tid, state, "" if wchan == "0" else wchan, name, fd, arg)


def _ref(pid: int) -> ProcessRef:
    try:
        p = psutil.Process(pid)
        alive = p.status() != psutil.STATUS_ZOMBIE
        return ProcessRef(pid, " ".join(p.cmdline()), alive)
    except (psutil.Error, OSError):
        return ProcessRef(pid, "", False)


def _fds_of(pid: int) -> Iterable[tuple[int, str]]:
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        try:
            yield int(name), os.readlink(f"{base}/{name}")
        except (OSError, ValueError):
            continue


def _flags(pid: int, fd: int) -> int | None:
    m = re.search(r"^flags:\s*([0-7]+)", _read(f"/proc/{pid}/fdinfo/{fd}"), re.M)
    return int(m.group(1), 8) if m else None


def _holders(want: Callable[[int, int, str], bool], skip: set[int]) -> tuple[ProcessRef, ...]:
    """Processes of this node with a descriptor ``want(pid, fd, target)`` accepts (``/proc/*/fd``)."""
    out = []
    for pid in psutil.pids():
        if pid in skip:
            continue
        if any(want(pid, fd, target) for fd, target in _fds_of(pid)):
            out.append(_ref(pid))
    return tuple(out)


def _pipe(pid: int, fd: int) -> tuple[int | None, int | None]:
    """``(bytes unread, capacity)`` of a pipe, opened read-only and non-blocking through /proc, never read."""
    try:
        own = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None, None
    try:
        buf = array.array("i", [0])
        fcntl.ioctl(own, termios.FIONREAD, buf, True)
        return buf[0], fcntl.fcntl(own, _F_GETPIPE_SZ)
    except OSError:
        return None, None
    finally:
        os.close(own)


def _open_file(pid: int, fd: int, target: str, sockets: dict[int, tuple[str, str, str]]) -> OpenFile:
    flags = _flags(pid, fd)
    write = flags is not None and flags & 3 != 0
    if target.startswith("pipe:"):
        unread, capacity = _pipe(pid, fd)
        readers: tuple[ProcessRef, ...] = ()
        if write and unread is not None and capacity and unread + PAGE > capacity:  # full: who should read it?
            readers = _holders(lambda p, n, t: t == target and (_flags(p, n) or 0) & 3 != 1, {os.getpid()})
        return OpenFile(fd, target, write, unread, capacity, readers)
    if target.startswith("socket:") and fd in sockets:
        local, remote, status = sockets[fd]
        return OpenFile(fd, target, write, local=local, remote=remote, status=status)
    return OpenFile(fd, target, write)


def _addr(a: object) -> str:
    if not a:
        return ""
    if isinstance(a, tuple) and len(a) >= 2:
        return f"[{a[0]}]:{a[1]}" if ":" in str(a[0]) else f"{a[0]}:{a[1]}"
    return str(a)


def _sockets(pid: int) -> dict[int, tuple[str, str, str]]:
    try:
        conns = psutil.Process(pid).net_connections(kind="all")
    except (psutil.Error, OSError):
        return {}
    return {c.fd: (_addr(c.laddr), _addr(c.raddr), c.status if c.status != psutil.CONN_NONE else "")
            for c in conns if c.fd >= 0}


def parse_locks(text: str) -> list[tuple[bool, str, int, str]]:
    """``(waiting, kind, pid, MAJ:MIN:INODE)`` of each line of ``/proc/locks`` (proc(5)); other lines are skipped."""
    out = []
    for line in text.splitlines():
        m = _LOCK_LINE.match(line.strip())
        if m:
            out.append((bool(m.group(1)), m.group(2), int(m.group(3)), m.group(4).lower()))
    return out


def _inode(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def _is_path(path: str) -> Callable[[int, int, str], bool]:
    """A :func:`_holders` test: the descriptor is ``path``."""
    return lambda _pid, _fd, target: target == path


def _locks(pid: int, fds: dict[int, str], paths: Iterable[str], lock_fds: Iterable[int]) -> tuple[LockFact, ...]:
    table = parse_locks(_read("/proc/locks"))
    waited = {ident for waiting, _k, p, ident in table if waiting and p == pid}
    wanted: dict[str, str] = {}  # inode -> path
    for fd in lock_fds:
        if fd in fds:
            wanted.setdefault(_inode(f"/proc/{pid}/fd/{fd}"), fds[fd])
    for path in paths:
        wanted.setdefault(_inode(path) or f"missing:{path}", path)
    for ident in waited - set(wanted):
        path = next((t for fd, t in fds.items() if t.startswith("/") and _inode(f"/proc/{pid}/fd/{fd}") == ident), "")
        wanted[ident] = path or f"inode {ident}"
    out = []
    for ident, path in wanted.items():
        exists = not ident.startswith("missing:")
        rows = [(k, p) for waiting, k, p, i in table if i == ident and not waiting] if exists else []
        openers: tuple[ProcessRef, ...] = ()
        if exists and path.startswith("/"):
            openers = _holders(_is_path(path), {pid, os.getpid()})
        out.append(LockFact(path, ident if exists else "", rows[0][0] if rows else "", ident in waited,
                            tuple(_ref(p) for _k, p in rows), openers, exists))
    return tuple(out)


def proc_facts(pid: int, lock_paths: tuple[str, ...] = (), machine: str | None = None) -> ProcFacts:
    """What ``/proc`` says about the blocked rank ``pid`` (see the module docstring).

    Args:
        pid: the rank's process id on this node.
        lock_paths: lock files its stack names (filelock's locals), looked up in ``/proc/locks``.
        machine: ``platform.machine()`` (the system call table); this machine's by default.

    Returns:
        The facts; what could not be read is left out and said in ``error`` (never raises for a process that
        is gone or not readable).
    """
    table = SYSCALLS.get(machine or platform.machine(), {})
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError as exc:
        return ProcFacts(error=f"/proc/{pid}/task: {exc.strerror or exc}")
    tasks = tuple(t for t in (_task(pid, tid, table) for tid in tids) if t is not None)
    fds = dict(_fds_of(pid))
    named = {0, 1, 2} | {t.fd for t in tasks if t.fd is not None}
    sockets = _sockets(pid) if any(fds.get(fd, "").startswith("socket:") for fd in named) else {}
    files = tuple(_open_file(pid, fd, fds[fd], sockets) for fd in sorted(named) if fd in fds)
    lock_fds = [t.fd for t in tasks if t.syscall in ("flock", "fcntl") and t.fd is not None]
    locks = _locks(pid, fds, lock_paths, lock_fds)
    try:
        children = tuple(_ref(c.pid) for c in psutil.Process(pid).children())
    except (psutil.Error, OSError):
        children = ()
    error = "" if tasks and (fds or not Path(f"/proc/{pid}").exists()) else f"/proc/{pid}: not readable"
    return ProcFacts(tasks, files, locks, children, error)
