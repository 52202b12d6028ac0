"""Where is a thread? Recognise collectives, rendezvous and lock waits from stack frames.

Heuristics (not a format): a frame is part of torch.distributed when its file lies under
``torch/distributed/``, ``torch/nn/parallel/`` or ``deepspeed/comm/``; a collective is such a frame
whose function is one of the c10d collective API names (``all_reduce``, ``broadcast``, ...,
torch 1.x-2.x names, ``_functional_collectives`` included); ``init_process_group``, rendezvous
handlers and store barriers count as *init*. With ``--native``, c10d / gloo / NCCL C++ frames
under a non-distributed Python frame (``work.wait()`` on an async op) also count as a collective,
except the frames of PyTorch's and NCCL's own threads (watchdog, heartbeat, abort, proxy:
:data:`hangdbg.stacks.native_causes.SERVICE_FRAMES`), which are "outside" at that frame; a
watchdog's ``WorkNCCL::checkTimeout`` trace is in a collective, :data:`TIMED_OUT`, and a library
thread that shows no cause (NCCL's proxy, CUDA's event handler) is ``unknown``: it does not tell
where the process's own threads are.
The call site is the first frame outside torch.distributed, seen from the collective outward.
An object collective (:data:`OBJECT_COLLECTIVES`) is split into phases (:func:`object_phase`,
``Place.phase``): a rank still pickling its object is *outside* (its own code, a ``__reduce__``
say, is where the others wait), one in the ops it calls or unpickling what it received is in it.

Library wrappers that issue a collective and then wait on it inside their own frame (the torch
frame is gone, or the wait is a ``.wait()`` / ``.cpu()`` C call on the wrapper's line) count as
that collective when no torch.distributed collective is on the stack and every Python frame inside
the wrapper is torch.distributed, another wrapper or a thin decorator (see ``WRAPPER_COLLECTIVES``:
function names of DeepSpeed 0.9-0.16 ZeRO ``partition_parameters.py``, ZeRO-3's parameter fetch of 0.3-0.5
(``stage3.py``; a CUDA stream sync in it is its wait), the checkpoint tag check (``engine.py``) and
``runtime/comm/coalesced_collectives.py``, Megatron-LM core ``tensor_parallel/mappings.py`` and
``pipeline_parallel/p2p_communication.py``, accelerate ``utils/operations.py``, transformers
``trainer.py`` / ``trainer_pt_utils.py``).
"""

from __future__ import annotations

import linecache
import os
import re
from dataclasses import replace

from ..model import Place, Thread
from ..frames import Frame, bare_name
from ..enums import ObjectPhase, PlaceKind
from .native_causes import SERVICE_FRAMES, is_library_thread

__all__ = ["place_of", "primary_thread", "lock_wait", "DIST_PATHS", "COLLECTIVES", "INIT_FUNCTIONS", "NATIVE_STORE",
           "WRAPPER_COLLECTIVES", "OBJECT_COLLECTIVES", "object_phase"]

DIST_PATHS = ("torch/distributed/", "torch/nn/parallel/", "deepspeed/comm/", "torch/_C/_distributed")

COLLECTIVES = frozenset(
    """
    all_reduce all_reduce_coalesced all_reduce_multigpu reduce reduce_multigpu broadcast
    broadcast_multigpu broadcast_coalesced all_gather all_gather_into_tensor _all_gather_base
    all_gather_coalesced all_gather_multigpu all_gather_object gather gather_object scatter
    scatter_object_list reduce_scatter reduce_scatter_tensor _reduce_scatter_base
    reduce_scatter_multigpu all_to_all all_to_all_single barrier monitored_barrier send recv
    isend irecv batch_isend_irecv broadcast_object_list send_object_list recv_object_list
    wait_tensor all_gather_tensor _sync_module_states _sync_params_and_buffers
    _verify_param_shape_across_processes inference_all_reduce
    """.split()
)

INIT_FUNCTIONS = frozenset(
    """
    init_process_group new_group new_subgroups new_subgroups_by_enumeration rendezvous
    _create_c10d_store _store_based_barrier _env_rendezvous_handler _tcp_rendezvous_handler
    _file_rendezvous_handler next_rendezvous _rendezvous init_device_mesh _create_tcp_store
    init_distributed _new_process_group_helper
    """.split()
)

_NATIVE_COMM_INIT = re.compile(r"broadcastUniqueNCCLID|ProcessGroupNCCL::getNCCLComm|ncclCommInitRank|ncclCommSplit")
_NCCL_API = re.compile(r"\b(?:nccl|ProcessGroupNCCL::|ProcessGroupGloo::)(AllReduce|allreduce|Broadcast|broadcast|Reduce\b|reduce\b"
                       r"|AllGather|allgather|ReduceScatter|reduce_scatter|AllToAll|alltoall|Send|send\b|Recv|recv\b|barrier)")
_NCCL_OPS = {"allreduce": "all_reduce", "broadcast": "broadcast", "reduce": "reduce", "allgather": "all_gather",
             "reducescatter": "reduce_scatter", "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all",
             "send": "send", "recv": "recv", "barrier": "barrier"}
"""NCCL's API (``ncclAllReduce``, nccl.h) and ProcessGroupNCCL's/Gloo's methods -> the c10d op name."""
TIMED_OUT = "timed-out collective"
"""The op of a rank whose only stack is its watchdog's ``WorkNCCL::checkTimeout`` exception: it
waited in a collective the trace does not name."""

WRAPPER_COLLECTIVES: dict[str, dict[str, str]] = {
    # file (path suffix) -> function -> the op it waits in (its own name, or the p2p op)
    "deepspeed/runtime/zero/partition_parameters.py": {
        f: f for f in ("all_gather_coalesced", "_all_gather", "_allgather_params", "_allgather_params_coalesced",
                       "_allgather_param", "_all_gather_dtype", "_dist_allgather_fn")} | {"wait": "all_gather"},
    # ZeRO-3's parameter fetch in DeepSpeed 0.3-0.5 stage3.py waits for its all-gather of partitioned weights
    # (_synchronize_communication syncs the comm stream); 0.6+ fetches through partition_parameters.py above
    "deepspeed/runtime/zero/stage3.py": {"_synchronize_communication": "all_gather", "fetch_sub_module": "all_gather"},
    # save_checkpoint's tag check all-reduces a hash of the tag on every rank (DeepSpeed 0.3+ runtime/engine.py)
    "deepspeed/runtime/engine.py": {"_checkpoint_tag_validation": "all_reduce"},
    "deepspeed/runtime/comm/coalesced_collectives.py": {
        f: f for f in ("reduce_scatter_coalesced", "all_to_all_quant_reduce", "all_to_all_loco_quant_reduce")},
    "megatron/core/tensor_parallel/mappings.py": {
        f: f for f in ("_reduce", "_gather_along_first_dim", "_gather_along_last_dim", "_reduce_scatter_along_first_dim",
                       "_reduce_scatter_along_last_dim", "all_to_all")},
    "megatron/core/pipeline_parallel/p2p_communication.py": {
        f: "batch_isend_irecv" for f in ("_communicate", "_batched_p2p_ops", "_p2p_ops")},
    "accelerate/utils/operations.py": {
        f: f for f in ("gather", "_gpu_gather", "_gpu_gather_one", "gather_object", "_gpu_gather_object", "broadcast",
                       "_gpu_broadcast", "broadcast_object_list", "reduce", "_reduce_across_processes",
                       "pad_across_processes", "_pad_across_processes")},
    "transformers/trainer.py": {f: f for f in ("_nested_gather", "_pad_across_processes")},
    "transformers/trainer_pt_utils.py": {
        f: f for f in ("distributed_concat", "distributed_broadcast_scalars", "nested_gather")},
}
"""Python-level collective wrappers of DeepSpeed, Megatron-LM, accelerate and transformers (see the
module docstring for when they count)."""

_THIN = ("deepspeed/utils/nvtx.py", "torch/utils/_contextlib.py", "torch/_dynamo/eval_frame.py",
         "torch/distributed/c10d_logger.py", "contextlib.py", "functools.py",
         "torch/cuda/streams.py", "torch/cuda/__init__.py")  # a wrapper's stream sync: its wait for the collective

_NATIVE_COLLECTIVE = re.compile(r"c10d::|gloo::|nccl|ProcessGroup", re.IGNORECASE)
NATIVE_STORE = re.compile(r"TCPStore|TCPClient|FileStore|HashStore|PrefixStore|c10d::Store\b")
_NATIVE_LOCK = re.compile(
    r"PyThread_acquire_lock|lock_PyThread_acquire_lock|acquire_timed|rlock_acquire|pthread_mutex_lock|"
    r"__lll_lock_wait|std::mutex::lock"
)
_LOCK_SOURCE = re.compile(r"^\s*with\s+[^:]*(lock|mutex)[^:]*:|\.acquire\(", re.IGNORECASE)
_PY_LOCK_FUNCS = frozenset({"Lock.acquire", "RLock.acquire", "_RLock.acquire", "acquire"})


def in_distributed(frame: Frame) -> bool:
    """True when the frame's file is part of torch.distributed (or DDP / deepspeed.comm)."""
    return any(p in frame.file for p in DIST_PATHS)


def _wrapper_op(frame: Frame) -> str | None:
    """The op of a collective wrapper frame (``WRAPPER_COLLECTIVES``), else None."""
    file = frame.file.replace("\\", "/")
    for suffix, funcs in WRAPPER_COLLECTIVES.items():
        if file.endswith(suffix):
            return funcs.get(bare_name(frame.function))
    return None


def _thin(frame: Frame) -> bool:
    return in_distributed(frame) or any(frame.file.endswith(t) for t in _THIN)


def _wrapper_collective(py: tuple[Frame, ...]) -> tuple[str, Frame | None] | None:
    """``(op, call site)`` of the outermost wrapper frame with only wrappers, torch.distributed
    and thin decorators inside it (``py`` innermost first), else None."""
    found: tuple[str, int] | None = None
    for i, f in enumerate(py):
        op = _wrapper_op(f)
        if op is not None:
            found = (op, i)
        elif not _thin(f):
            break
    if found is None:
        return None
    op, i = found
    site = next((f for f in py[i + 1:] if not _thin(f) and _wrapper_op(f) is None), py[i])
    return op, site


def _call_site(py: tuple[Frame, ...], index: int) -> Frame | None:
    for f in py[index + 1:]:
        if not in_distributed(f):
            return f
    return py[index] if py else None


OBJECT_COLLECTIVES = frozenset(
    "all_gather_object broadcast_object_list gather_object scatter_object_list send_object_list recv_object_list".split())
"""The object collectives of torch.distributed (``distributed_c10d.py``, torch 1.8-2.x): each pickles
its object(s) (``_object_to_tensor``), exchanges the sizes then the bytes with the collective or p2p
ops it calls (``all_gather``, ``broadcast``, ``gather``, ``scatter``, ``send``/``recv``), then
unpickles what it received (``_tensor_to_object``)."""

_PICKLE_PHASES = {"_object_to_tensor": ObjectPhase.PICKLE, "_tensor_to_object": ObjectPhase.UNPICKLE}
"""torch.distributed's helpers of the object collectives (``distributed_c10d.py``, torch 1.8-2.x) ->
the phase a frame of theirs puts the rank in (``pickle.Pickler.dump`` / ``Unpickler.load`` and the
user's ``__reduce__``, ``__reduce_ex__``, ``__getstate__``, ``__setstate__`` run under them)."""


def object_phase(py: tuple[Frame, ...], index: int) -> ObjectPhase:
    """The phase of the object collective whose frame is ``py[index]`` (``py`` innermost first): the
    first of torch's pickling helpers or of the collectives it calls, walking inward from it
    (:attr:`~hangdbg.enums.ObjectPhase.PICKLE`, :attr:`~hangdbg.enums.ObjectPhase.UNPICKLE`); else
    :attr:`~hangdbg.enums.ObjectPhase.EXCHANGE` (in the ops it calls, or between them)."""
    for j in range(index - 1, -1, -1):
        f = py[j]
        if not in_distributed(f):
            continue
        name = bare_name(f.function)
        if name in _PICKLE_PHASES:
            return _PICKLE_PHASES[name]
        if name in COLLECTIVES:
            return ObjectPhase.EXCHANGE
    return ObjectPhase.EXCHANGE


def place_of(thread: Thread) -> Place:
    """Classify one thread: in a collective, in init/rendezvous, or outside (with its top frame)."""
    py = thread.python_frames
    found: tuple[str, int] | None = None
    # outermost first: the user-facing API (all_gather_object) wins over what it calls (all_gather)
    for i in range(len(py) - 1, -1, -1):
        f = py[i]
        if not in_distributed(f):
            continue
        name = f.bare
        if name in INIT_FUNCTIONS:
            return Place(PlaceKind.INIT, name, _call_site(py, i), thread.name)
        if found is None and name in COLLECTIVES:
            found = (name, i)
    if found is not None:
        name, i = found
        phase = object_phase(py, i) if name in OBJECT_COLLECTIVES else None
        if phase == ObjectPhase.PICKLE:  # not in the collective yet: where its own code is
            return Place(PlaceKind.OUTSIDE, name, py[0], thread.name, phase)
        return Place(PlaceKind.COLLECTIVE, name, _call_site(py, i), thread.name, phase)
    wrapped = _wrapper_collective(py)
    if wrapped is not None:
        return Place(PlaceKind.COLLECTIVE, wrapped[0], wrapped[1], thread.name)
    if not py and is_library_thread(thread):  # NCCL's proxy, CUDA's event thread, a watchdog polling
        return Place(PlaceKind.UNKNOWN, thread=thread.name)
    service = next((f for f in thread.frames if f.native and SERVICE_FRAMES.search(f.function)), None)
    if service is not None:  # the c10d watchdog / abort / NCCL proxy thread waits, but in no collective
        if any(f.native and "WorkNCCL::checkTimeout" in f.function for f in thread.frames):
            return Place(PlaceKind.COLLECTIVE, TIMED_OUT, None, thread.name)  # the watchdog timed out this rank's collective
        return Place(PlaceKind.OUTSIDE, None, service, thread.name)
    if any(f.native and _NATIVE_COMM_INIT.search(f.function) for f in thread.frames):
        return Place(PlaceKind.INIT, "NCCL communicator creation", None, thread.name)
    natives = [f.function for f in thread.frames if f.native]
    if any(_NATIVE_COLLECTIVE.search(n) for n in natives) and not any(NATIVE_STORE.search(n) for n in natives):
        site = next((f for f in py if "torch/" not in f.file), py[0] if py else None)
        return Place(PlaceKind.COLLECTIVE, _native_op(natives), site, thread.name)
    if not thread.frames:
        return Place(PlaceKind.UNKNOWN, thread=thread.name)
    return Place(PlaceKind.OUTSIDE, None, py[0] if py else own_native_frame(thread.frames), thread.name)


_SYSTEM_FUNCTION = re.compile(r"^(?:std::|__gthread|__GI_|__libc|__pthread|pthread_|_*lll_|syscall|sched_yield|"
                              r"(?:clock_)?nanosleep|_*futex|do_futex|epoll_wait|_*poll\b|_*select\b|start_thread|"
                              r"clone\d*\b|\?\?$)")
_SYSTEM_FILE = re.compile(r"sysdeps/|/libc[.-]|libc\.so|libpthread|/ld-linux|libstdc\+\+|/include/c\+\+/|bits/gthr")


def own_native_frame(frames: tuple[Frame, ...]) -> Frame:
    """The innermost native frame of the program's own code: the first one that is not the C library's, the C++
    standard library's or a system call's wait (``sched_yield`` <- ``std::this_thread::yield`` <-
    ``horovod::common::GPUContext::WaitForEvents``: the last one says what the thread waits for); the innermost frame
    when every frame is such. ``frames`` must not be empty (innermost first)."""
    own = next((f for f in frames if not _SYSTEM_FUNCTION.match(f.function) and not _SYSTEM_FILE.search(f.file)),
               frames[0])
    cut = own.function.find("(")  # gdb prints a C++ function with its parameter types: the name says enough
    return replace(own, function=own.function[:cut]) if own.native and cut > 0 else own


_NATIVE_RECV = re.compile(r"waitRecv|RecvWork")
_NATIVE_SEND = re.compile(r"waitSend|SendWork")
_UNBOUND_RECV = re.compile(r"recvFromAny|::recv\b|irecv", re.IGNORECASE)
_UNBOUND_SEND = re.compile(r"::send\b|isend", re.IGNORECASE)
_NATIVE_DDP = re.compile(r"c10d::Reducer|autograd|Engine::")


def _native_op(natives: list[str]) -> str:
    """The op a c10d wait under non-distributed Python frames is for (``--native``; the one
    classifier of native waits): gloo's ``UnboundBuffer::waitRecv``/``waitSend`` (``recv``/
    ``send``; another ``UnboundBuffer`` call by its name, else ``p2p wait``), DDP's
    ``c10d::Reducer`` or the autograd engine (``DDP all_reduce``), an NCCL API call or a
    ProcessGroupNCCL/Gloo method by its op (``ncclBroadcast`` -> ``broadcast``), else ``wait``."""
    joined = " ".join(natives)
    if _NATIVE_RECV.search(joined):
        return "recv"
    if _NATIVE_SEND.search(joined):
        return "send"
    if "UnboundBuffer" in joined:
        return "recv" if _UNBOUND_RECV.search(joined) else "send" if _UNBOUND_SEND.search(joined) else "p2p wait"
    if _NATIVE_DDP.search(joined):
        return "DDP all_reduce"
    m = _NCCL_API.search(joined)
    return _NCCL_OPS.get(m.group(1).lower(), "wait") if m else "wait"


def read_source(frame: Frame) -> str:
    """The source line of a Python frame if its file is readable here (absolute paths only)."""
    if frame.native or frame.line is None or not os.path.isabs(frame.file):
        return ""
    return linecache.getline(frame.file, frame.line).strip()


def lock_wait(thread: Thread) -> bool:
    """True when the thread is blocked acquiring a mutex (not waiting on an Event or a Queue).

    Evidence, strongest first: native lock frames (``--native``), a Python ``Lock.acquire`` frame,
    or the top frame's source line (``with self.lock:`` / ``.acquire(``) when the file is readable.
    A thread in ``threading.Condition.wait`` (``Event.wait``, ``Semaphore.acquire``, ``Barrier.wait``,
    ``Queue.get`` all wait there: CPython 3.8-3.13 ``Lib/threading.py``) also acquires a lock, its
    waiter lock, but that is a wait for a notify, not for a mutex's owner: not a lock wait.
    """
    if not thread.idle or not thread.frames or condition_wait(thread.python_frames):
        return False
    if any(f.native and _NATIVE_LOCK.search(f.function) for f in thread.frames[:12]):
        return True
    py = thread.python_frames
    if not py:
        return False
    if py[0].function in _PY_LOCK_FUNCS or py[0].bare == "acquire" and py[0].file.endswith("threading.py"):
        return True
    return bool(_LOCK_SOURCE.search(read_source(py[0])))


CONDITION_WAITS = frozenset({"wait", "wait_for"})
"""Bare names of ``threading.Condition``'s waits (CPython 3.8-3.13 ``Lib/threading.py``: ``Condition.wait``
acquires its waiter lock; ``Event.wait``, ``Barrier.wait``, ``Semaphore.acquire`` call it)."""


def condition_wait(py: tuple[Frame, ...]) -> bool:
    """True when the innermost Python frame is ``threading.Condition.wait``/``wait_for`` (by bare name in
    ``threading.py``, so py-spy's qualified 3.11+ names and bare older ones both count)."""
    return bool(py) and py[0].file.replace("\\", "/").rsplit("/", 1)[-1] == "threading.py" and py[0].bare in CONDITION_WAITS


def primary_thread(threads: tuple[Thread, ...], places: list[Place] | None = None) -> int:
    """Index of the thread that speaks for a rank: the one in a collective (or init), else
    ``MainThread``, else the first thread py-spy printed. A thread without Python frames (a
    gloo/NCCL worker thread seen in a core file or with ``--native``) never speaks for a rank
    through its collective: it is the library's, not the caller's."""
    if not threads:
        return -1
    places = places if places is not None else [place_of(t) for t in threads]
    for kind in (PlaceKind.COLLECTIVE, PlaceKind.INIT):
        hits = [i for i, p in enumerate(places) if p.kind == kind and any(not f.native for f in threads[i].frames)]
        if hits:
            return next((i for i in hits if threads[i].name == "MainThread"), hits[0])
    for i, t in enumerate(threads):
        if t.name == "MainThread":
            return i
    return 0
