"""Opt-in, in-job record of the ``torch.distributed`` operation each rank is in *now*.

    import torch.distributed as dist
    from hangdbg.hooks import record_collectives

    dist.init_process_group("nccl")
    record_collectives()            # once per rank; calling it before init_process_group works too

:func:`record_collectives` replaces the functions :data:`WRAPPED` of ``torch.distributed``
(collectives, point-to-point ops, ``*_object`` forms, ``new_group``) by thin wrappers that keep, in
a small file per process, which op the rank is in, on which group, with which peer, the how-many-th
it is and whether it returned; :func:`hangdbg.collect.op_records.read_op_records` reads them.

File ``{directory}/{pid}.json``; directory: the argument, else :func:`record_dir`
(``$HANGDBG_RECORD_DIR``, else ``/dev/shm/hangdbg-rec-<uid>``, else ``<tempdir>/hangdbg-rec-<uid>``),
created with mode 0o700 (the default one must be a directory of this user only: when another user
made it or planted a link there, a new ``hangdbg-rec-<uid>-XXXXXXXX`` next to it is used). The file (mode
0o600, 4096 bytes unless huge groups need more, a multiple of 4096) is mapped with ``mmap`` and
rewritten in place, never replaced. It is one JSON object padded with spaces (fields:
:mod:`hangdbg.stacks.op_record`)::

    {"gen":                   42,"version":1,"pid":4242,"rank":1,"world_size":4,
     "groups":{"WORLD":[0,1,2,3],"1":[1,2,3]},"op":{"op":"recv","group":"WORLD",
     "group_ranks":[0,1,2,3],"peer":0,"seq":2,"async":false,"state":"running",
     "since":1764000000.123}          <spaces>          ,"end":                   42}\\n

``rank``/``world_size`` come from the launcher's environment until the first op after
``init_process_group`` (``null`` if unknown). ``groups``: the groups of this rank used so far or
made by ``new_group`` (``"WORLD"``: the default group, else ``group_name``). ``peer``: the other
side of a point-to-point op or the root of a rooted collective (global ranks), else null. ``seq``
(from 1): collectives this rank issued on the group (``new_group`` counts on WORLD unless
``use_local_synchronization``); for point-to-point ops, ops with that peer on the group (the n-th
send of 0 to 1 matches the n-th recv of 1 from 0; a ``batch_isend_irecv`` counts each of its ops
and shows its single peer's count, or with several peers ``peer`` null and its count of batches).
``state``: ``running`` (called), ``done`` (returned), ``failed`` (raised), ``issued`` (an async
op whose ``Work`` was not waited for; ``work.wait()`` makes it the current op again, ``running``
then ``done``). ``since``: Unix time, seconds (to the millisecond), of the last change of state.

Torn writes: a write sets ``end``, then the op, then ``gen``; a reader copying the file front to
back that finds ``gen == end`` has a whole record, else it reads again. Cost per op: a dict
look-up, a lock, two short byte strings, a few ``mmap`` slice copies, no syscall
(``bench/recorder_overhead.py``); ``Work.wait`` is replaced on the class. The process holds an
exclusive ``flock`` on its file while it lives: a file nobody holds is stale (a killed rank's).
The file is removed at normal exit (``atexit``) and by :func:`stop_recording`; a ``fork`` child
(DataLoader worker) does not write its parent's file.

Limits: only calls through the ``torch.distributed`` namespace after the call are seen (not a
function imported earlier by name, C++ callers such as DDP's reducer, functional collectives, ops
inside another recorded op). One op at a time: while a thread is in a recorded op, other threads'
ops are not recorded. Completion seen through ``get_future()``/``is_completed()`` is not (the op
stays ``issued``). ``torch.distributed.P2POp`` becomes a subclass storing the original
``isend``/``irecv``. Write order relies on x86's store order (elsewhere readers retry more).
Containers sharing ``/dev/shm`` but not the pid namespace need their own ``HANGDBG_RECORD_DIR``.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import functools
import inspect
import json
import mmap
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

from ..launch_env import RANK_VARS, WORLD_SIZE_VARS, first_int
from ._private import create_excl, warn
from .record_dir import ENV_DIR, _make_dir, _private_dir, fallback_dirs, record_dir

__all__ = ["ENV_DIR", "WRAPPED", "record_dir", "fallback_dirs", "record_collectives", "stop_recording"]

VERSION = 1
PAGE = 4096
_OP_ROOM = 400  # bytes for an op besides its group's name and rank list
_TAIL = b',"end":%20d}\n'
_TAIL_LEN = len(_TAIL % 0)
_GEN_AT = len(b'{"gen":')
_NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)

_COLLECTIVE = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_single", "reduce_scatter",
               "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all", "all_to_all_single", "barrier",
               "monitored_barrier", "all_gather_object")
_ROOTED = {"broadcast": ("src", "group_src"), "reduce": ("dst", "group_dst"), "gather": ("dst", "group_dst"),
           "scatter": ("src", "group_src"), "broadcast_object_list": ("src", "group_src"),
           "gather_object": ("dst", "group_dst"), "scatter_object_list": ("src", "group_src")}
_P2P = {"send": ("dst", "group_dst"), "recv": ("src", "group_src"), "isend": ("dst", "group_dst"),
        "irecv": ("src", "group_src"), "send_object_list": ("dst", "group_dst"),
        "recv_object_list": ("src", "group_src")}
WRAPPED = (*_COLLECTIVE, *_ROOTED, *_P2P, "batch_isend_irecv", "new_group")
"""The ``torch.distributed`` functions recorded (those missing from the installed torch are skipped)."""


class _RecordFile:
    """The mapped, locked file (no torch here): a header rewritten when it changes, then the op
    (``head`` + fixed-length ``suffix``: state and time) rewritten per call."""

    def __init__(self, path: Path):
        self.path, self.gen, self.size, self.op_at, self.tail_gen_at, self.last_len = path, 0, 0, 0, 0, 0
        self.head, self.suffix = b"", b"null"  # the current op (JSON null before the first)
        self.suffix_at: int | None = None
        self.mm: mmap.mmap | None = None
        try:  # made anew, never through a link (the directory is this user's: a file there is a stale one of ours)
            self.fd = create_excl(str(path), 0o600, os.O_RDWR)
        except FileExistsError:
            self.fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            for _ in range(50):  # a reader probing for staleness holds a shared lock for microseconds
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(0.002)
                except OSError as exc:  # no flock on this filesystem: record; readers cannot tell stale files
                    if exc.errno not in _NO_FLOCK:
                        raise
                    break
            else:
                raise BlockingIOError(errno.EWOULDBLOCK, f"{path} is held by another live process (the same pid "
                                                         f"in another pid namespace?); set {ENV_DIR}")
            os.ftruncate(self.fd, 0)
        except BaseException:
            os.close(self.fd)
            raise

    def write_header(self, header: bytes, op_room: int) -> None:
        """Rewrite the whole file: ``header`` (everything before the op), the op, the tail; grow
        it to hold an op of ``op_room`` bytes."""
        op = self.head + self.suffix
        size = max(self.size, -(-(len(header) + max(op_room, len(op)) + _TAIL_LEN) // PAGE) * PAGE)
        if size != self.size or self.mm is None:
            if self.mm is not None:
                self.mm.close()
            os.ftruncate(self.fd, size)
            os.posix_fallocate(self.fd, 0, size)  # ENOSPC now rather than SIGBUS at a write to the map
            self.mm, self.size = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE), size
        if self.suffix_at is not None:
            self.suffix_at += len(header) - self.op_at
        self.op_at, self.tail_gen_at, self.last_len = len(header), size - _TAIL_LEN + 7, len(op)
        self.gen += 1
        body = header + op
        body += b" " * (size - _TAIL_LEN - len(body)) + _TAIL % self.gen
        gen = b"%20d" % self.gen  # every write: the new generation at the tail, the data, then at the head
        self.mm[self.tail_gen_at:self.tail_gen_at + 20] = gen
        self.mm[_GEN_AT + 20:] = body[_GEN_AT + 20:]
        self.mm[:_GEN_AT + 20] = body[:_GEN_AT] + gen

    def write_op(self, head: bytes, suffix: bytes) -> None:
        op, mm, at, end = head + suffix, self.mm, self.op_at, self.tail_gen_at
        n = len(op)
        if mm is None or at + n > end - 7:  # never over the tail
            return
        self.gen = gen = self.gen + 1
        gen_b = b"%20d" % gen
        mm[end:end + 20] = gen_b
        mm[at:at + max(n, self.last_len)] = op if n >= self.last_len else op + b" " * (self.last_len - n)
        mm[_GEN_AT:_GEN_AT + 20] = gen_b
        self.head, self.suffix, self.last_len, self.suffix_at = head, suffix, n, at + len(head)

    def write_state(self, suffix: bytes) -> None:
        mm, at, end = self.mm, self.suffix_at, self.tail_gen_at
        if mm is None or at is None:
            return
        self.gen = gen = self.gen + 1
        gen_b = b"%20d" % gen
        mm[end:end + 20] = gen_b
        mm[at:at + len(suffix)] = suffix
        mm[_GEN_AT:_GEN_AT + 20] = gen_b
        self.suffix = suffix

    def close(self, remove: bool) -> None:
        if self.mm is not None:
            self.mm.close()
            self.mm = None
        with contextlib.suppress(OSError):
            os.unlink(self.path) if remove else None
        os.close(self.fd)


_SUFFIX = {state: b'"state":%s,"since":' % token for state, token in (
    (b"issued", b'"issued" '), (b"running", b'"running"'), (b"done", b'"done"   '), (b"failed", b'"failed" '))}
"""The state and the time of an op, of one length whatever the state: rewritten in place."""
_clock: tuple[int, bytes] = (0, b"")  # the last millisecond formatted (ops come microseconds apart)


def _head(name: bytes, frag: bytes, peer: int | None, seq: int, is_async: bool) -> bytes:
    """The fixed part of an op's JSON (everything but the state and the time)."""
    return b'{"op":"%s",%s,"peer":%s,"seq":%d,"async":%s,' % (
        name, frag, b"null" if peer is None else b"%d" % peer, seq, b"true" if is_async else b"false")


def _suffix(state: bytes) -> bytes:
    global _clock
    ms = time.time_ns() // 1000000
    if ms != _clock[0]:
        _clock = (ms, b"%10d.%03d}" % divmod(ms, 1000))
    return _SUFFIX[state] + _clock[1]


class _Group:
    __slots__ = ("name", "ranks", "frag", "member", "seq", "p2p")

    def __init__(self, name: str, ranks: tuple[int, ...], member: bool):
        self.name, self.ranks, self.member, self.seq = name, ranks, member, 0
        self.frag = b'"group":%s,"group_ranks":[%s]' % (json.dumps(name).encode(), ",".join(map(str, ranks)).encode())
        self.p2p: dict[Any, int] = {}


_NOT_MEMBER = _Group("", (), False)


class _Recorder:
    """This process's record: groups by object, the file, the op in progress."""

    def __init__(self, path: Path):
        self.pid, self.busy, self.room = os.getpid(), False, _OP_ROOM
        self.file, self.lock = _RecordFile(path), threading.Lock()
        self.groups: dict[Any, _Group] = {}  # by group object (None: the default group)
        self.named: dict[str, tuple[int, ...]] = {}
        self.pending: dict[int, tuple[Any, bytes]] = {}  # id(Work) -> (weakref, op head)
        self.rank, self.world_size = first_int(os.environ, RANK_VARS)[0], first_int(os.environ, WORLD_SIZE_VARS)[0]
        self._rewrite()  # (nobody else has it yet)

    def _rewrite(self) -> None:
        groups = ",".join(f"{json.dumps(n)}:[{','.join(map(str, r))}]" for n, r in self.named.items())
        self.file.write_header(b'{"gen":%20d,"version":%d,"pid":%d,"rank":%s,"world_size":%s,"groups":{%s},"op":' % (
            0, VERSION, self.pid, b"null" if self.rank is None else b"%d" % self.rank,
            b"null" if self.world_size is None else b"%d" % self.world_size, groups.encode()), self.room)

    def group(self, group: Any) -> _Group | None:
        """The group of a call (``None``: the default one); None before ``init_process_group``."""
        try:
            g = self.groups.get(group)
            return g if g is not None else self._resolve(group)
        except Exception:  # unhashable (not a process group), a torn-down torch, a full /dev/shm
            return _NOT_MEMBER

    def _resolve(self, group: Any) -> _Group | None:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        if not dist.is_initialized():
            return None
        default = c10d._get_default_group()
        if group is not None and group is default:  # (P2POp holds the default group object): one group, one seq
            self.groups[group] = known = self.group(None) or _NOT_MEMBER
            return known
        try:
            world = group is None or group is default
            ranks = tuple(dist.get_process_group_ranks(default if world else group))
            name = "WORLD" if world else str(getattr(group, "group_name", "") or f"pg-{id(group):x}")
            me = dist.get_rank()
        except Exception:  # NON_GROUP_MEMBER, a destroyed group, not a group
            self.groups[group] = _NOT_MEMBER
            return _NOT_MEMBER
        g = self.groups[group] = _Group(name, ranks, me in ranks)
        if g.member:
            self.named[name] = ranks
            self.rank, self.world_size = me, dist.get_world_size()
            self.room = max(self.room, len(g.frag) + _OP_ROOM)
            with self.lock:
                self._rewrite()
        return g

    def forget_groups(self, group: Any) -> None:
        """After ``destroy_process_group(group)``: drop it (all of them for ``None``/the default)."""
        with self.lock:
            g = None
            with contextlib.suppress(TypeError):
                g = self.groups.get(group) if group is not None else None
            if g is None or g.name == "WORLD":
                self.groups.clear()
                self.named.clear()
            else:
                self.groups = {k: v for k, v in self.groups.items() if v is not g}
                self.named.pop(g.name, None)
            self._rewrite()

    def begin(self, head: bytes, state: bytes) -> bool:
        """Enter the op ``head`` (:func:`_head`) in ``state``; False when another op is in progress."""
        with self.lock:
            if self.busy:
                return False
            self.busy = True
            try:
                self.file.write_op(head, _suffix(state))
            except Exception:  # recording never breaks the job
                pass
            return True

    def end(self, state: bytes | None) -> None:
        """Leave the op; ``state`` None keeps the record as it is (an async op left issued)."""
        with self.lock:
            self.busy = False
            try:
                if state is not None:
                    self.file.write_state(_suffix(state))
            except Exception:
                pass

    def issued(self, work: Any, head: bytes) -> None:
        """Remember an async op's Work so that waiting for it is recorded (bounded: oldest dropped)."""
        try:
            ref = weakref.ref(work)
        except TypeError:
            return
        if len(self.pending) >= 1024:
            del self.pending[next(iter(self.pending))]
        self.pending[id(work)] = (ref, head)

    def close(self, remove: bool) -> None:
        with self.lock:
            self.file.close(remove)


_rec: _Recorder | None = None
_originals: dict[str, Any] = {}
_install_lock = threading.Lock()


def _loc(fn: Callable, name: str | None) -> tuple[str, int] | None:
    """Where argument ``name`` of ``fn`` is: ``(name, positional index or a huge number)``."""
    params = list(inspect.signature(fn).parameters.values())
    for i, p in enumerate(params):
        if p.name == name:
            return name, i if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else 1 << 30
    return None


def _arg(args: tuple, kwargs: dict, loc: tuple[str, int] | None) -> Any:
    """The value of an argument found by :func:`_loc` (None when not given: every default is None/False)."""
    if loc is None:
        return None
    return kwargs[loc[0]] if loc[0] in kwargs else args[loc[1]] if loc[1] < len(args) else None


def _global_peer(g: _Group, peer: Any, group_peer: Any) -> int | None:
    try:
        if peer is None and group_peer is not None:
            return g.ranks[int(group_peer)]
        return None if peer is None else int(peer)
    except (IndexError, TypeError, ValueError):
        return None


def _wrap(name: str, fn: Callable) -> Callable:
    """The recording wrapper of ``torch.distributed.<name>`` (``fn`` is the original)."""
    bname = name.encode()
    gi, ai = (_loc(fn, "group") or ("", 1 << 30))[1], (_loc(fn, "async_op") or ("", 1 << 30))[1]
    peer_names = _P2P.get(name) or _ROOTED.get(name) or (None, None)
    where_peer, where_gpeer = _loc(fn, peer_names[0]), _loc(fn, peer_names[1])
    p2p, always_async = name in _P2P, name in ("isend", "irecv")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        rec = _rec
        if rec is None:
            return fn(*args, **kwargs)
        g = rec.group(kwargs["group"] if "group" in kwargs else args[gi] if len(args) > gi else None)
        if g is None or not g.member:
            return fn(*args, **kwargs)
        is_async = always_async or bool(kwargs["async_op"] if "async_op" in kwargs else
                                        args[ai] if len(args) > ai else False)
        peer = None if where_peer is None else _global_peer(g, _arg(args, kwargs, where_peer),
                                                            _arg(args, kwargs, where_gpeer))
        if p2p:
            seq = g.p2p[peer] = g.p2p.get(peer, 0) + 1
        else:
            seq = g.seq = g.seq + 1
        head = _head(bname, g.frag, peer, seq, is_async)
        if not rec.begin(head, b"issued" if is_async else b"running"):
            return fn(*args, **kwargs)
        try:
            ret = fn(*args, **kwargs)
        except BaseException:
            rec.end(b"failed")
            raise
        if is_async and ret is not None:
            rec.issued(ret, head)
        rec.end(None if is_async and ret is not None else b"done")
        return ret

    return _mark(wrapper, fn)


def _mark(wrapper: Callable, fn: Any) -> Callable:
    wrapper.__hangdbg_recorded__ = fn  # type: ignore[attr-defined]  # the original, for P2POp and tests
    return wrapper


def _wrap_batch(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def batch_isend_irecv(p2p_op_list):
        rec = _rec
        try:
            g = rec.group(p2p_op_list[0].group) if rec is not None and p2p_op_list else None
            peers = [p.peer for p in p2p_op_list]
        except Exception:
            g = None
        if rec is None or g is None or not g.member:
            return fn(p2p_op_list)
        if len(set(peers)) > 1:  # several peers: show the count of such batches
            peers.append("batch")
        for peer in peers:
            g.p2p[peer] = g.p2p.get(peer, 0) + 1
        head = _head(b"batch_isend_irecv", g.frag, None if peers[-1] == "batch" else peers[0], g.p2p[peers[-1]], True)
        if not rec.begin(head, b"issued"):
            return fn(p2p_op_list)
        try:
            works = fn(p2p_op_list)
        except BaseException:
            rec.end(b"failed")
            raise
        for w in works or ():
            rec.issued(w, head)
        rec.end(None if works else b"done")
        return works

    return _mark(batch_isend_irecv, fn)


def _guarded(rec: _Recorder, head: bytes, fn: Callable, *args, **kwargs) -> Any:
    """Call ``fn`` recorded as the op ``head``: running, then done or failed."""
    if not rec.begin(head, b"running"):
        return fn(*args, **kwargs)
    try:
        ret = fn(*args, **kwargs)
    except BaseException:
        rec.end(b"failed")
        raise
    rec.end(b"done")
    return ret


def _wrap_new_group(fn: Callable) -> Callable:
    local = _loc(fn, "use_local_synchronization")

    @functools.wraps(fn)
    def new_group(*args, **kwargs):
        rec = _rec
        g = rec.group(None) if rec is not None else None
        if rec is None or g is None or not g.member:
            return fn(*args, **kwargs)
        g.seq += 0 if _arg(args, kwargs, local) else 1
        pg = _guarded(rec, _head(b"new_group", g.frag, None, g.seq, False), fn, *args, **kwargs)
        rec.group(pg)  # into the header now, not at its first use
        return pg

    return _mark(new_group, fn)


def _wrap_destroy(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def destroy_process_group(group=None):
        try:
            return fn(group)
        finally:
            if _rec is not None:
                _rec.forget_groups(group)

    return _mark(destroy_process_group, fn)


def _wrap_wait(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wait(self, *args, **kwargs):
        rec = _rec
        entry = rec.pending.pop(id(self), None) if rec is not None else None
        if rec is None or entry is None or entry[0]() is not self:
            return fn(self, *args, **kwargs)
        return _guarded(rec, entry[1], fn, self, *args, **kwargs)

    return _mark(wait, fn)


def _p2p_op_class(base: type) -> type:
    """A ``P2POp`` that accepts the recording ``isend``/``irecv`` and stores the originals
    (``batch_isend_irecv`` tells them apart by identity)."""

    def unwrap(op):
        return getattr(op, "__hangdbg_recorded__", op)

    class P2POp(base):
        __doc__ = base.__doc__

        def __new__(cls, op, *args, **kwargs):
            return super().__new__(cls, unwrap(op), *args, **kwargs)

        def __init__(self, op, *args, **kwargs):
            super().__init__(unwrap(op), *args, **kwargs)

    P2POp.__module__, P2POp.__qualname__ = base.__module__, base.__qualname__
    return _mark(P2POp, base)  # type: ignore[return-value]


def _install() -> None:
    import torch.distributed as dist

    if _originals:
        return
    special: dict[str, Callable[[Any], Any]] = {"batch_isend_irecv": _wrap_batch, "new_group": _wrap_new_group,
                                                "destroy_process_group": _wrap_destroy, "P2POp": _p2p_op_class}
    for name in (*WRAPPED, "destroy_process_group", "P2POp"):
        fn = getattr(dist, name, None)
        if fn is not None:
            _originals[name] = fn
            setattr(dist, name, special[name](fn) if name in special else _wrap(name, fn))
    if hasattr(getattr(dist, "Work", None), "wait"):
        _originals["Work.wait"] = dist.Work.wait
        setattr(dist.Work, "wait", _wrap_wait(dist.Work.wait))


def _uninstall() -> None:
    import torch.distributed as dist

    for name, fn in _originals.items():
        setattr(dist.Work if name == "Work.wait" else dist, "wait" if name == "Work.wait" else name, fn)
    _originals.clear()


def _after_fork_in_child() -> None:  # the child must not write (nor keep locked) its parent's file
    global _rec, _install_lock
    _install_lock, (rec, _rec) = threading.Lock(), (_rec, None)
    with contextlib.suppress(Exception):
        rec.file.close(remove=False) if rec is not None else None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def record_collectives(directory: str | None = None) -> Path | None:
    """Start recording this process's ``torch.distributed`` operations; returns the record file.

    Args:
        directory (str | None): where to put ``<pid>.json``; default :func:`record_dir` (the
            ``HANGDBG_RECORD_DIR`` environment variable, else ``/dev/shm/hangdbg-rec-<uid>``).

    Call it once per rank, after ``init_process_group`` or before it (rank, world size and groups
    are filled in at the first op after init); a second call returns the same path. Imports torch.
    Format: this module's docstring. :func:`stop_recording` undoes it.

    The default directory must be a private directory of this user (``lstat``: not a link, this
    user's, writable by no one else); when it is not (another user made it, or planted a link
    there), a new private one next to it is used (``hangdbg-rec-<uid>-XXXXXXXX``, which the readers
    look in too) and stderr says so. The file is made with ``O_EXCL | O_NOFOLLOW``.

    Returns:
        the record file (Path), or None when recording could not start (the directory or the file
        cannot be made, the file is locked by another live process): stderr says why, once, and the
        training goes on unrecorded. Never raises ``OSError``.
    """
    global _rec
    with _install_lock:
        if _rec is not None and _rec.pid == os.getpid():
            return _rec.file.path
        try:
            if directory or os.environ.get(ENV_DIR):
                d = Path(directory) if directory else record_dir()
                _make_dir(d, default=False)
            else:
                d = _private_dir(record_dir())
            rec = _Recorder(d / f"{os.getpid()}.json")
        except OSError as exc:
            warn("recorder", f"record_collectives: not recording ({exc}); training goes on")
            return None
        _install()
        _rec = rec
        rec.group(None)  # WORLD and the rank into the header now if initialised
        atexit.unregister(stop_recording)  # once, however often recording is restarted
        atexit.register(stop_recording)
        return rec.file.path


def stop_recording() -> None:
    """Stop recording: restore the original ``torch.distributed`` functions, close and remove the
    file. Does nothing when not recording."""
    global _rec
    with _install_lock:
        rec, _rec = _rec, None
        if _originals:
            _uninstall()
        if rec is not None and rec.pid == os.getpid():
            rec.close(remove=True)
