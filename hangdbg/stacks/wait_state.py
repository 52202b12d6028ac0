"""What one rank waits on (:class:`~hangdbg.waits.RankWait`), read from its chosen thread.

Evidence, strongest first (heuristics, ours; frame names of torch 2.x c10d, gloo and CPython):

* the place of the thread (:func:`hangdbg.stacks.places.place_of`): a collective, a
  point-to-point op (``send``/``recv``/``isend``/``irecv``/``batch_isend_irecv``), init;
* ``--locals`` of the torch.distributed frame (``dst``/``src``/``group_dst``/``group_src`` of
  ``send``/``recv``) or, for ``req.wait()`` in user code, peer-like locals of the user frame
  (``src``, ``dst``, ``peer``, ``prev_rank``, ...); ``keys``/``key`` of a store wait;
* native frames (``--native``): gloo's ``UnboundBuffer::waitRecv``/``waitSend`` (a
  point-to-point wait; these and DDP's are told apart once, by ``places.place_of``), ``c10d::TCPStore``/``c10d::FileStore`` calls (a store wait), ``c10d::Reducer``
  or c10d work waits under ``autograd`` (DDP's gradient all_reduce inside ``backward()``),
  ``read``/``open``/``nanosleep``/``poll`` system calls (I/O, sleep);
* the source line of the top frame when the file is readable here (``store.wait(``,
  ``open(``, ``time.sleep(``);
* a CUDA synchronization (:mod:`hangdbg.stacks.gpu_sync`: ``torch.cuda.synchronize``,
  ``Stream``/``Event.synchronize``, ``.item()``/``.cpu()`` on the top frame's line,
  ``cudaDeviceSynchronize``/``cuCtxSynchronize`` native frames): the rank waits on its GPU
  (:attr:`~hangdbg.waits.WaitKind.GPU`), whether py-spy shows it idle or active (the CUDA
  driver spins);
* Python frames of the standard library and torch's DataLoader (CPython 3.8-3.13 ``queue.py``,
  ``multiprocessing/queues.py``, ``multiprocessing/connection.py``, ``threading.py``,
  ``concurrent/futures/_base.py``, ``socket.py``/``ssl.py``; torch ``utils/data/dataloader.py``):
  an idle thread in ``Queue.get`` under a data loader's ``__next__`` waits for its next batch, in
  ``Thread.join`` for another thread, in ``Future.result`` for a future, in a pipe or socket read
  for another process (:func:`identified_block` says the rank waits on nothing inside the job);
* the blocked states of :mod:`hangdbg.stacks.blockers` (a debugger prompt, a child process, a file lock,
  a write of its output, an Event or Condition wait): the wait's ``blocker`` names them;
* py-spy's thread state: ``active`` outside torch.distributed is computation, ``idle`` a blocked
  system call.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..model import Place, Thread
from ..frames import Frame
from ..enums import PlaceKind
from .op_record import CurrentOp
from ..waits import RankWait, WaitKind
from .gpu_sync import GPU_WAIT, gpu_sync
from .blockers import SOCKET, stack_blocker
from .places import NATIVE_STORE, in_distributed, read_source

__all__ = ["wait_of", "with_record", "may_be_computing", "P2P_OPS", "opaque", "peer_from_locals", "identified_block", "UNEXPLAINED_BLOCK"]

P2P_OPS = {"send": "send", "isend": "send", "send_object_list": "send", "recv": "recv", "irecv": "recv",
           "recv_object_list": "recv", "batch_isend_irecv": None, "p2p wait": None}
"""Point-to-point ops and their direction (``None``: both)."""

_PEER_LOCALS = {
    "send": ("dst", "group_dst", "dest", "dst_rank", "next_rank", "send_to", "to_rank", "peer", "next_stage"),
    "recv": ("src", "group_src", "source", "src_rank", "prev_rank", "recv_from", "from_rank", "peer", "prev_stage"),
}
_KEY_LOCALS = ("keys", "key", "wait_keys")

_NATIVE_IO = re.compile(r"(^|_)(read|pread64|readv|open|open64|openat|__open|recv|recvfrom|accept|connect|"
                        r"poll|ppoll|select|epoll_wait)(64)?$|__libc_(read|open|recv)")
_NATIVE_SLEEP = re.compile(r"nanosleep|clock_nanosleep|usleep|pysleep|time_sleep")

_SRC_STORE = re.compile(r"\bstore\w*\s*\.\s*(wait|get|compare_set|add)\s*\(", re.IGNORECASE)
_SRC_SLEEP = re.compile(r"\bsleep\s*\(")
_SRC_FILE = re.compile(r"\bopen\s*\(|\.read\w*\s*\(|\.readline|\.load\s*\(|np\.load|torch\.load", re.IGNORECASE)
_SRC_SOCKET = re.compile(r"\.recv\w*\s*\(|\.accept\s*\(|\.connect\s*\(|urlopen|requests\.", re.IGNORECASE)
_SRC_OPAQUE = re.compile(r"\.(wait|synchronize|backward)\s*\(")


UNEXPLAINED_BLOCK = "blocked outside torch.distributed"
"""The detail of an idle thread whose frames do not say what it waits on."""

# (file suffix, bare function names: frames.bare_name) of blocking standard-library / DataLoader frames -> what the thread waits on
_PY_BLOCKS: tuple[tuple[str, frozenset[str], str], ...] = (
    ("torch/utils/data/dataloader.py", frozenset({"_try_get_data", "_get_data", "_next_data"}), "data loader"),
    ("queue.py", frozenset({"get", "_get", "get_nowait", "put"}), "queue"),
    ("multiprocessing/queues.py", frozenset({"get", "_recv_bytes", "put"}), "queue"),
    ("multiprocessing/connection.py", frozenset({"recv", "recv_bytes", "_recv_bytes", "_recv", "poll", "_poll", "wait"}),
     "pipe"),
    ("concurrent/futures/_base.py", frozenset({"result", "wait", "as_completed"}), "future"),
    ("threading.py", frozenset({"join", "_wait_for_tstate_lock"}), "thread"),
    ("socket.py", frozenset({"readinto", "recv", "recv_into", "accept", "create_connection"}), "socket"),
    ("ssl.py", frozenset({"read", "recv", "recv_into"}), "socket"),
)
_DATA_FRAME = re.compile(r"(^|/)data(sets?)?/|data_?loader|iterators?\.py$|/datasets?\.py$", re.IGNORECASE)
_PASSIVE = ("threading.py", "queue.py", "multiprocessing/", "torch/utils/data/", "concurrent/futures/", "selectors.py", "socket.py", "ssl.py",
            "subprocess.py", "contextlib.py")


def _python_block(py: tuple[Frame, ...]) -> tuple[str, Frame] | None:
    """``(detail, site)`` of an idle thread whose Python frames show what it waits on (see the
    module docstring), the site being the first frame outside the standard library's waits."""
    what = None
    for i, f in enumerate(py[:8]):
        file = f.file.replace("\\", "/")
        hit = next((w for suffix, funcs, w in _PY_BLOCKS if file.endswith(suffix) and f.bare in funcs), None)
        if hit is not None:
            what = hit
            if hit != "queue" and hit != "pipe":
                break
        elif not any(p in file for p in _PASSIVE):
            break
    if what is None:
        return None
    site = next((f for f in py if not any(p in f.file for p in _PASSIVE)), py[0])
    data = what == "data loader" or (what in ("queue", "pipe") and any(_DATA_FRAME.search(f.file) for f in py[:12]))
    if data:
        return "waiting for its next batch from a data loader (a queue its worker threads or processes fill)", site
    return {
        "queue": "waiting on a queue another thread or process fills",
        "pipe": "waiting on a pipe from another process",
        "future": "waiting for a future (work of another thread or process)",
        "thread": "waiting for another thread to finish (Thread.join)",
        "socket": "blocked on a socket",
    }[what], site


def may_be_computing(w: RankWait) -> bool:
    """True when ``w`` may be a rank computing: on CPU (:attr:`~hangdbg.waits.WaitKind.COMPUTE`), or
    idle where its frames name no wait (:data:`UNEXPLAINED_BLOCK`: py-spy calls a thread ``idle`` when
    it is not running at that instant, and a computing thread descheduled on a loaded node, or
    waiting for the GIL, is not running: a healthy rank mid-step, blamed on a CI machine under load).
    On a live dump such a rank is a suspect only once the observation window covers it
    (:mod:`hangdbg.stacks.window`); saved stacks without sample times keep today's rules."""
    return w.kind is WaitKind.COMPUTE or (w.kind is WaitKind.BLOCKED and w.detail == UNEXPLAINED_BLOCK
                                          and not w.blocker)


def identified_block(w: RankWait) -> bool:
    """True when ``w`` waits on something named that is not another rank of the job: a lock, a
    data loader or queue, a pipe, a socket, a file, a sleep (not an idle thread whose frames say
    nothing, nor an opaque C++ call)."""
    if w.kind is WaitKind.LOCK:
        return True
    return w.kind is WaitKind.BLOCKED and w.detail != UNEXPLAINED_BLOCK and not w.detail.startswith("inside")


def _int(value: str) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def peer_from_locals(frames: tuple[Frame, ...], direction: str | None) -> int | None:
    """The peer rank of a point-to-point op from ``--locals`` (innermost frame first), or ``None``."""
    names = _PEER_LOCALS.get(direction or "", ()) or _PEER_LOCALS["recv"] + _PEER_LOCALS["send"]
    for f in frames:
        values = dict(f.locals)
        for name in names:
            peer = _int(values.get(name, ""))
            if peer is not None and peer >= 0:
                return peer
    return None


def _keys_from_locals(frames: tuple[Frame, ...]) -> tuple[str, ...]:
    for f in frames:
        values = dict(f.locals)
        for name in _KEY_LOCALS:
            if name in values:
                return tuple(re.findall(r"""['"]([^'"]*)['"]""", values[name]))
    return ()


def opaque(thread: Thread) -> bool:
    """The Python stack ends in a C/C++ call whose purpose Python frames cannot show: a torch
    (not torch.distributed) frame such as ``backward()``, or a ``.wait()`` / ``.synchronize()`` /
    ``.backward()`` call on the top frame's source line (readable here). Native frames
    (``--native``) tell what it waits on."""
    py = thread.python_frames
    if not py:
        return bool(thread.frames)
    top = py[0]
    if "torch/" in top.file and not in_distributed(top):
        return True
    return bool(_SRC_OPAQUE.search(read_source(top)))


def wait_of(thread: Thread, place: Place, lock: bool = False) -> RankWait:
    """Classify what ``thread`` (the thread that speaks for ``rank``) waits on.

    Args:
        thread: the chosen thread of a rank (see :func:`hangdbg.stacks.places.primary_thread`).
        place: ``place_of(thread)``.
        lock: the thread waits to acquire a mutex (:func:`hangdbg.stacks.places.lock_wait`).
    """
    natives = [f.function for f in thread.frames if f.native]
    evidence: tuple[str, ...] = ("python", "native") if natives else ("python",)
    has_locals = any(f.locals for f in thread.frames)
    if has_locals:
        evidence += ("locals",)
    site = place.call_site
    if place.kind == PlaceKind.INIT:
        return RankWait(WaitKind.INIT, place.collective or "rendezvous", site, evidence=evidence)
    if place.kind == PlaceKind.COLLECTIVE:
        op = place.collective or "wait"
        if op in P2P_OPS:
            direction = P2P_OPS[op]
            return RankWait(WaitKind.P2P, op, site, peer_from_locals(thread.python_frames, direction),
                            direction, evidence=evidence)
        return RankWait(WaitKind.COLLECTIVE, op, site, evidence=evidence)
    if place.kind == PlaceKind.UNKNOWN:
        return RankWait(WaitKind.UNKNOWN, "", None, detail="no stack", evidence=())
    top = thread.python_frames[0] if thread.python_frames else (site or (thread.frames[0] if thread.frames else None))
    store = _store_op(thread, natives)
    if store:
        return RankWait(WaitKind.STORE, store, top, keys=_keys_from_locals(thread.python_frames), evidence=evidence)
    gpu = gpu_sync(thread)
    if gpu is not None:
        return RankWait(WaitKind.GPU, gpu.op, gpu.site or top, detail=GPU_WAIT, evidence=evidence)
    blocked = stack_blocker(thread) if thread.idle else None
    if blocked is None and lock:
        return RankWait(WaitKind.LOCK, top.function if top else "", top, detail="waiting for a lock", evidence=evidence)
    kind = WaitKind.BLOCKED if thread.idle else WaitKind.COMPUTE
    block = _python_block(thread.python_frames) if thread.idle and blocked is None else None
    if block is not None:
        return RankWait(kind, block[1].function, block[1], detail=block[0], evidence=evidence,
                        blocker=SOCKET.name if block[0] == SOCKET.detail else "")
    blocked = blocked or (stack_blocker(thread, after_python_blocks=True) if thread.idle else None)
    if blocked is not None:
        return RankWait(kind, blocked.site.function, blocked.site, detail=blocked.detail, evidence=evidence,
                        blocker=blocked.blocker.name, waiting_on=blocked.waiting_on)
    if not natives and opaque(thread):
        detail = f"inside a C++ call ({'idle' if thread.idle else 'on CPU'})"
    else:
        detail = _blocked_detail(thread, natives) if thread.idle else "computing"
    return RankWait(kind, top.function if top else "", top, detail=detail, evidence=evidence,
                    blocker=SOCKET.name if detail == SOCKET.detail else "")


def _store_op(thread: Thread, natives: list[str]) -> str:
    for name in natives:
        if NATIVE_STORE.search(name):
            m = re.search(r"::(wait|get|compareSet|add|check|set)\b", name)
            return f"store.{m.group(1)}" if m else "store.wait"
    py = thread.python_frames
    if py:
        m = _SRC_STORE.search(read_source(py[0]))
        if m:
            return f"store.{m.group(1)}"
    return ""


def _blocked_detail(thread: Thread, natives: list[str]) -> str:
    top_native = next((n for n in natives if not n.startswith(("_Py", "Py", "_PyEval"))), "")
    src = read_source(thread.python_frames[0]) if thread.python_frames else ""
    if _NATIVE_SLEEP.search(top_native) or _SRC_SLEEP.search(src):
        return "sleeping"
    if _SRC_FILE.search(src):
        return "blocked reading a file"
    if _SRC_SOCKET.search(src):
        return "blocked on a socket"
    if _NATIVE_IO.search(top_native):
        return "blocked in I/O (a file or a socket)"
    return UNEXPLAINED_BLOCK


def with_record(w: RankWait, op: CurrentOp) -> RankWait:
    """``w`` completed by the rank's op record (``hangdbg.hooks.record_collectives``): the process
    group's ranks, the sequence number and the peer of the op it is in. A record of an op that
    is ``running`` or ``issued`` also tells what a rank in an opaque C/C++ call waits on; a
    ``done`` or ``failed`` op is history and changes nothing."""
    if op.state not in ("running", "issued"):
        return w
    direction = P2P_OPS.get(op.op, "") if op.op in P2P_OPS else None
    evidence = (*w.evidence, "record")
    if w.kind in (WaitKind.COLLECTIVE, WaitKind.P2P):
        return replace(w, group=op.group_ranks or None, seq=op.seq, evidence=evidence,
                       peer=w.peer if w.peer is not None else op.peer if w.kind is WaitKind.P2P else None)
    if op.state == "running" and w.kind in (WaitKind.BLOCKED, WaitKind.COMPUTE) and w.detail.startswith("inside"):
        if direction is not None or op.op in P2P_OPS:
            return replace(w, kind=WaitKind.P2P, op=op.op, peer=op.peer, direction=direction, group=op.group_ranks or None,
                           seq=op.seq, detail="", evidence=evidence)
        return replace(w, kind=WaitKind.COLLECTIVE, op=op.op, group=op.group_ranks or None, seq=op.seq, detail="",
                       evidence=evidence)
    return w
