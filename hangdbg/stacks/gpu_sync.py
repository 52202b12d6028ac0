"""Is a thread waiting on its GPU? A CUDA synchronization seen in its stack.

A host thread that synchronizes with its GPU (``torch.cuda.synchronize()``, ``loss.item()``) blocks
until the GPU has finished the work queued before the call: while a kernel runs for ever, or waits
behind one, the thread stays in the CUDA call. py-spy then shows the thread ``active`` (the CUDA
driver spins by default, ``cudaDeviceScheduleAuto``) or ``idle`` (``cudaDeviceScheduleBlockingSync``),
neither of which is computation of its own.

Evidence, strongest first (the names are the APIs'; that a thread seen there waits on its GPU is
our heuristic):

* native frames (``--native``), the calls under the top Python frame: the CUDA runtime API's
  synchronizing calls (CUDA Runtime API reference, ``cuda_runtime_api.h``: ``cudaDeviceSynchronize``,
  ``cudaStreamSynchronize``, ``cudaEventSynchronize``, the synchronous ``cudaMemcpy``,
  ``cudaMemcpy2D``/``3D``/``Peer``/``ToSymbol``/``FromSymbol``...; not the ``*Async`` ones) and
  the driver API's (``cuda.h``: ``cuCtxSynchronize``/``_v2``, ``cuStreamSynchronize``/``_ptsz``,
  ``cuEventSynchronize``, the synchronous ``cuMemcpy*``: ``cuMemcpyDtoH_v2``...), else torch's
  own (c10 ``c10/cuda/CUDAFunctions.h``: ``c10::cuda::device_synchronize``,
  ``stream_synchronize``, ``memcpy_and_sync``; ``CUDAStream::synchronize``,
  ``at::cuda::CUDAEvent::synchronize``; ``at::native::_local_scalar_dense_cuda``, what
  ``Tensor.item()`` runs) when the CUDA runtime is linked in without symbols;
* the top Python frame in torch's synchronizing API (torch 2.x): ``torch/cuda/__init__.py``
  ``synchronize`` (``torch.cuda.synchronize``), ``torch/cuda/streams.py`` ``Stream.synchronize``,
  ``Event.synchronize`` and ``Stream.query``/``Event.query`` (a polling loop), the same in
  ``torch/xpu/`` and ``torch/mps/``, and ``torch/accelerator/__init__.py`` ``synchronize``
  (torch 2.6+). ``Event.wait``, ``Stream.wait_event`` and ``Stream.wait_stream`` are not waits
  of the host (``cudaStreamWaitEvent``: the host returns at once);
* the source line of the top Python frame when its file is readable here (py-spy shows no
  Python frame under a C method): ``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``,
  ``.to("cpu")`` (a copy of a CUDA tensor to the host: torch's ``_local_scalar_dense_cuda`` and
  device-to-host ``copy_`` end in ``at::cuda::memcpy_and_sync``, a ``cudaStreamSynchronize``),
  ``torch.cuda.synchronize(`` / ``.synchronize(`` (``torch.cuda.current_stream().synchronize()``)
  and ``.query()`` (an event or stream polled in a loop). On a CPU tensor these calls return
  at once, so a rank seen in one is waiting on its GPU, most likely.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..frames import Frame
from ..model import Thread
from .places import read_source

__all__ = ["GpuSync", "gpu_sync", "GPU_WAIT"]

GPU_WAIT = "waiting on its GPU"
"""The detail of a :class:`~hangdbg.waits.WaitKind` ``gpu`` wait."""

_RUNTIME_SYNC = re.compile(r"^cuda(?:DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy(?!\w*Async)\w*)"
                           r"(?:_v\d+|_ptds|_ptsz)*$")
_DRIVER_SYNC = re.compile(r"^cu(?:CtxSynchronize|StreamSynchronize|EventSynchronize|Memcpy(?!\w*Async)\w*)"
                          r"(?:_v\d+|_ptds|_ptsz)*$")
_TORCH_SYNC = re.compile(r"c10::cuda::(?:device_synchronize|stream_synchronize|memcpy_and_sync|CUDAStream::synchronize)"
                         r"|at::cuda::(?:memcpy_and_sync|CUDAEvent::synchronize)|_local_scalar_dense_cuda")

_PY_API = re.compile(r"(?:^|/)torch/(cuda|xpu|mps|accelerator)/(?:__init__|streams)\.py$")
_PY_FUNCS = frozenset({"synchronize", "query"})
_TORCH_FILE = re.compile(r"(?:^|/)torch/")

_SRC_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(cuda|xpu|mps|accelerator)\s*\.\s*synchronize\s*\("), "torch.{0}.synchronize"),
    (re.compile(r"\.\s*synchronize\s*\("), ".synchronize()"),
    (re.compile(r"\.\s*(item|tolist|cpu|numpy)\s*\("), ".{0}()"),
    (re.compile(r"""\.\s*to\s*\(\s*(?:device\s*=\s*)?['"]cpu['"]"""), '.to("cpu")'),
    (re.compile(r"\.\s*query\s*\(\s*\)"), ".query()"),
)


@dataclass(frozen=True, slots=True)
class GpuSync:
    """A thread's wait on its GPU.

    Attributes:
        op: the call it waits in: the CUDA runtime and driver calls of its native frames
            (``cudaDeviceSynchronize -> cuCtxSynchronize_v2``), under torch's Python API when a
            frame or the source line shows it (``torch.cuda.synchronize``, ``.item()``).
        site: the frame of the program that called it: the first Python frame outside torch
            under a torch API frame, else the top Python frame; None without Python frames.
        native: the native frames show the CUDA call.
    """

    op: str
    site: Frame | None
    native: bool


def _bare(function: str) -> str:
    """``cuCtxSynchronize_v2 (libcuda.so)`` / ``c10::cuda::device_synchronize()`` -> the name alone."""
    return function.split("(", 1)[0].split(" at ", 1)[0].strip()


def _native_chain(frames: tuple[Frame, ...]) -> str:
    """``cudaDeviceSynchronize -> cuCtxSynchronize_v2`` from the native frames above the top Python
    frame (innermost first): the outermost runtime call, then the innermost driver call; else
    torch's synchronizing call; '' when none."""
    natives = []
    for f in frames:
        if not f.native:
            break
        natives.append(_bare(f.function))
    runtime = next((n for n in reversed(natives) if _RUNTIME_SYNC.match(n)), "")
    driver = next((n for n in natives if _DRIVER_SYNC.match(n)), "")
    chain = " -> ".join(n for n in (runtime, driver) if n)
    if chain:
        return chain
    return next((n.removeprefix("c10::").removeprefix("at::") for n in reversed(natives) if _TORCH_SYNC.search(n)), "")


def _python_api(frame: Frame) -> str:
    """``torch.cuda.synchronize`` / ``torch.cuda.Stream.synchronize`` for a frame of torch's
    synchronizing API, else ''."""
    m = _PY_API.search(frame.file.replace("\\", "/"))
    name = frame.bare
    if m is None or name not in _PY_FUNCS or frame.native:
        return ""
    qual = frame.function if "." in frame.function and "<" not in frame.function else name
    return f"torch.{m.group(1)}.{qual}"


def _source_api(frame: Frame) -> str:
    """``.item()``, ``torch.cuda.synchronize``... when the frame's source line (readable here)
    calls one, else ''."""
    text = read_source(frame)
    if not text:
        return ""
    for pattern, fmt in _SRC_RULES:
        m = pattern.search(text)
        if m:
            return fmt.format(*m.groups())
    return ""


def _user_frame(py: tuple[Frame, ...]) -> Frame:
    """The first of ``py`` (innermost first, not empty) outside torch's own files."""
    return next((f for f in py if not _TORCH_FILE.search(f.file.replace("\\", "/"))), py[0])


def gpu_sync(thread: Thread) -> GpuSync | None:
    """The thread's wait on its GPU (see the module docstring), or None when its stack shows none.

    Args:
        thread: frames innermost first; its place is outside torch.distributed (the caller
            decides collectives first: a c10d wait that syncs a stream is the collective's).
    """
    py = thread.python_frames
    chain = _native_chain(thread.frames)
    api = ""
    if py:
        api = _python_api(py[0]) or _source_api(py[0])
    if not chain and not api:
        return None
    op = f"{chain} under {api}" if chain and api else chain or api
    site = _user_frame(py) if py else None
    return GpuSync(op, site, bool(chain))
