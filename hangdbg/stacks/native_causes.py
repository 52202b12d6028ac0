"""What a native (C++) stack of PyTorch's c10d / NCCL / CUDA says about its process.

Heuristics over function names, not a format. The names are PyTorch's
(``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``: the watchdog thread ``ncclCommWatchdog`` ->
``watchdogHandler`` (``workCleanupLoop`` before 2.2) -> ``WorkNCCL::checkTimeout`` /
``WorkNCCL::isCompleted`` -> ``finishedGPUExecutionInternal`` -> ``C10_CUDA_CHECK``
(``c10/cuda/CUDAException.cpp`` ``c10_cuda_check_implementation``); ``ProcessGroupNCCL::abort`` /
``shutdown`` -> ``abortCommsFromMap`` -> ``ncclCommAbort`` under ``waitForFutureOrTimeout``;
``getNCCLComm`` -> ``broadcastUniqueNCCLID`` when a communicator is created) and NCCL's
(``src/init.cc``: ``ncclCommAbort``/``ncclCommDestroy`` -> ``commFree`` joins the proxy thread;
``src/proxy.cc``: ``persistentThread``, ``ncclProxyService``, ``ncclProxyProgress``), and the CUDA
runtime's (``cudaLaunchKernel``, ``cudaStreamSynchronize`` ... over ``libcuda.so``).

Each cause is one :class:`NativeCause`; the reader that owns the text turns it into a
:class:`~hangdbg.model.Finding` with its evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import Kind, Severity, Thread
from ..frames import Frame

__all__ = ["SERVICE_FRAMES", "NativeCause", "is_library_thread", "is_service_thread", "native_cause"]

SERVICE_FRAMES = re.compile(
    r"ncclCommWatchdog|watchdogHandler|workCleanupLoop|checkForNCCLErrors|WorkNCCL::(?:checkTimeout|isCompleted|query"
    r"|finishedGPUExecution|checkAndSetException)|ProcessGroupNCCL::(?:abort|shutdown|abortCommsFromMap)\b"
    r"|waitForFutureOrTimeout|HeartbeatMonitor|heartbeatMonitor|ncclCommAbort|ncclCommDestroy|\bcommFree\b"
    r"|persistentThread|ncclProxyService|ncclProxyProgress|proxyProgressAsync|ncclAsyncJobMain"
)
"""Frames of threads that PyTorch or NCCL run for themselves (the c10d watchdog, heartbeat
monitor and abort, NCCL's proxy threads): such a thread waits, but not in a collective."""

_ABORT_WAIT = re.compile(r"waitForFutureOrTimeout|pthread_cond_(?:timed)?wait|\bfutex|__lll_lock_wait|sched_yield|nanosleep"
                         r"|usleep|\bpoll\b|__poll|epoll_wait|sem_(?:timed)?wait|std::future|condition_variable::wait")
"""An abort/destroy thread that waits (blocking primitives of glibc, std::future)."""
_ABORT = re.compile(r"ncclCommAbort|ncclCommDestroy|\bcommFree\b|commReclaim|ProcessGroupNCCL::(?:abort|shutdown"
                    r"|abortCommsFromMap)\b|NCCLComm::(?:abort|destroy)")
_JOIN = re.compile(r"pthread_(?:clock|timed)?join")
_CUDA_CHECK = re.compile(r"c10_cuda_check_implementation|c10::cuda::.*CUDAError|cudaGetErrorString")
_WORK_QUERY = re.compile(r"WorkNCCL::(?:finishedGPUExecution|isCompleted|query|synchronize|checkAndSetException)")
_CHECK_TIMEOUT = re.compile(r"WorkNCCL::checkTimeout")
_COMM_INIT = re.compile(r"broadcastUniqueNCCLID|ProcessGroupNCCL::getNCCLComm|NCCLComm::create|ncclCommInitRank")
_COLL = re.compile(r"ProcessGroupNCCL::(\w+?)(?:_impl)?\(")
_CUDA_API = re.compile(r"^(?:cuda(?:LaunchKernel\w*|StreamSynchronize|DeviceSynchronize|EventSynchronize|Memcpy\w*"
                       r"|Malloc\w*|Free\w*|StreamWaitEvent)|cu(?:LaunchKernel|StreamSynchronize|CtxSynchronize"
                       r"|MemcpyDtoH\w*|MemAlloc\w*))\b")
_LIBCUDA = re.compile(r"libcuda\.so")
_CUDART = re.compile(r"libcudart|libcuda\.so")


@dataclass(frozen=True, slots=True)
class NativeCause:
    """One thing a native stack shows.

    Attributes:
        kind, severity: of the finding it becomes.
        summary: what happened, without the rank (``"hangs in NCCL's communicator abort: ..."``).
        action: what the user does next.
        frame: the frame that shows it.
    """

    kind: Kind
    severity: Severity
    summary: str
    action: str
    frame: Frame


def is_service_thread(thread: Thread) -> bool:
    """True when a thread without Python frames is one of PyTorch's, NCCL's or the CUDA driver's
    own (watchdog, heartbeat monitor, abort, proxy: :data:`SERVICE_FRAMES`; ``cuda-EvtHandlr`` or
    a thread that runs only in ``libcuda.so``)."""
    if thread.python_frames:
        return False
    return any(f.native and SERVICE_FRAMES.search(f.function) for f in thread.frames) or _cuda_internal(thread)


_THREAD_BASE = re.compile(r"start_thread|clone|^__?GI_|poll|epoll|futex|sched_yield|nanosleep|pthread_cond|ioctl|select")


def _cuda_internal(thread: Thread) -> bool:
    """The CUDA driver's own threads: named ``cuda-EvtHandlr`` (``cuda-...``), or whose frames past
    the wait are all in ``libcuda.so`` (cut frames aside)."""
    if (thread.name or "").startswith("cuda-"):
        return True
    known = [f for f in thread.frames if f.file or not (f.function == "??" or f.function.startswith("0x"))]
    rest = [f for f in known if not _THREAD_BASE.search(f.function)]
    return bool(rest) and all(_LIBCUDA.search(f.file) for f in rest)


def is_library_thread(thread: Thread) -> bool:
    """A service thread (:func:`is_service_thread`) that shows no cause of its own: it tells
    nothing about where the process's own threads are."""
    return is_service_thread(thread) and native_cause(thread) is None and native_cause(thread, thrown=True) is None


def _first(frames: tuple[Frame, ...], pattern: re.Pattern[str]) -> Frame | None:
    return next((f for f in frames if f.native and pattern.search(f.function)), None)


def _short(f: Frame) -> str:
    """``c10d::ProcessGroupNCCL::abort() at X.cpp:1`` -> ``ProcessGroupNCCL::abort``."""
    name = f.function.split("(", 1)[0].split(" at ", 1)[0].strip()
    return name.removeprefix("c10d::").removeprefix("c10::")


def _chain(frames: tuple[Frame, ...], first: Frame, n: int = 5) -> str:
    """The calls from ``first`` inward, outermost first: ``abort -> ncclCommAbort -> commFree``."""
    i = frames.index(first)
    inner = [f for f in frames[max(0, i - n + 1): i + 1] if f.native and f.function not in ("??", "<unknown function>")]
    return " -> ".join(_short(f) for f in reversed(inner))


def native_cause(thread: Thread, thrown: bool = False) -> NativeCause | None:
    """What ``thread``'s native frames show, or None.

    Args:
        thread: frames innermost first.
        thrown: the frames are a C++ exception's trace (``frame #N:``), not a live stack.

    Recognised, first match wins: a failed CUDA check in the watchdog (``cuda-error``), a
    failed communicator creation (``comm-init-failed``, thrown), a hang in a communicator abort or
    destroy (``abort-hang``, live), a collective the watchdog timed out (``watchdog-timeout``,
    thrown), a thread spinning in libcuda under a CUDA runtime call (``cuda-stuck``, live).
    """
    fr = thread.frames
    check = _first(fr, _CUDA_CHECK)
    if check is not None:
        where = _first(fr, _WORK_QUERY)
        under = f" under {_short(where)} (the c10d watchdog polls its work)" if where else ""
        return NativeCause(
            Kind.CUDA_ERROR, Severity.SUSPECT,
            f"CUDA error in a CUDA check ({_short(check)}){under}: the CUDA context is broken (a kernel fault, an "
            "illegal memory access or a lost GPU); the watchdog throws and the process dies",
            "read the CUDA error text printed above the C++ frames; check this host's kernel log for Xid errors "
            "(`hangdbg gpu`); rerun with CUDA_LAUNCH_BLOCKING=1 to find the faulting kernel", check)
    init = _first(fr, _COMM_INIT)
    if thrown and init is not None:
        coll = next((m.group(1) for f in fr if f.native and (m := _COLL.search(f.function))
                     and m.group(1) not in ("getNCCLComm", "broadcastUniqueNCCLID")), None)
        op = f" for {coll}" if coll else ""
        calls = [f for f in fr if f.native and (_COLL.search(f.function) or _COMM_INIT.search(f.function))]
        return NativeCause(
            Kind.COMM_INIT_FAILED, Severity.SUSPECT,
            f"NCCL communicator creation failed{op} ({' -> '.join(_short(f) for f in reversed(calls[:6]))}): the NCCL unique id "
            "could not be exchanged through the store, or NCCL's bootstrap failed",
            "check that every rank reaches MASTER_ADDR:MASTER_PORT and the same store, that all ranks create the "
            "group, and NCCL_SOCKET_IFNAME; the NCCL WARN lines of this rank (NCCL_DEBUG=INFO) name the socket error",
            init)
    abort = _first(fr, _ABORT)
    if not thrown and abort is not None:
        outer = [f for f in fr if f.native and _ABORT.search(f.function)][-1]
        join = " (it joins an NCCL thread, the proxy, that does not exit)" if _first(fr, _JOIN) else ""
        # one snapshot inside a destroy at exit is normal: a hang when the thread waits there
        waits = _first(fr, _JOIN) is not None or _first(fr, _ABORT_WAIT) is not None
        return NativeCause(
            Kind.ABORT_HANG, Severity.SUSPECT if waits else Severity.WARNING,
            (f"hangs in the NCCL communicator abort/destroy: {_chain(fr, outer, 8)}{join}" if waits else
             f"in the NCCL communicator abort/destroy, not waiting in this snapshot: {_chain(fr, outer, 8)} "
             "(a hang only if it stays there)"),
            "the process cannot exit after an error: upgrade NCCL (abort/destroy hangs are fixed in later releases, "
            "see the NCCL release notes for your version), take `thread apply all bt` to see the NCCL thread it "
            "waits for, and look for the error that started the abort in this rank's log", abort)
    timeout = _first(fr, _CHECK_TIMEOUT)
    if thrown and timeout is not None:
        return NativeCause(
            Kind.WATCHDOG_TIMEOUT, Severity.WARNING,
            "the c10d watchdog timed out a collective (WorkNCCL::checkTimeout): a symptom, some rank did not join it",
            "find the rank that did not reach this collective: compare the ranks' watchdog lines (SeqNum), or take "
            "`hangdbg dump` / py-spy stacks of all ranks before the timeout", timeout)
    return _cuda_stuck(thread) if not thrown else None


def _cuda_stuck(thread: Thread) -> NativeCause | None:
    """A live stack whose innermost frames lie in libcuda, called from a CUDA runtime API."""
    fr = thread.frames
    i = 0
    while i < len(fr) and fr[i].native and not _CUDART.search(fr[i].file) and not _CUDA_API.match(fr[i].function):
        i += 1  # sched_yield, poll, ioctl ... under the driver
        if i > 3:
            return None
    driver = 0
    while i < len(fr) and fr[i].native and _CUDART.search(fr[i].file) and not _CUDA_API.match(fr[i].function):
        driver += _LIBCUDA.search(fr[i].file) is not None
        i += 1
    if not driver or i >= len(fr) or not _CUDA_API.match(fr[i].function):
        return None
    api = fr[i].function.split("(", 1)[0].strip()
    return NativeCause(
        Kind.CUDA_STUCK, Severity.WARNING,
        f"spins inside the CUDA driver (libcuda) under {api}: the GPU does not finish earlier work (a kernel queued "
        "before it, such as an NCCL collective waiting for a peer, or a GPU or driver in a bad state)",
        "check this host's kernel log for Xid errors and nvidia-smi (`hangdbg gpu`); if other ranks wait in a "
        "collective, find the rank that did not join it; `py-spy dump --native` shows the Python caller", fr[i])
