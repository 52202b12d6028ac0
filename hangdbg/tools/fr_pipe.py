"""Ask a rank for its flight-recorder dump through torch's dump pipe, and wait for the file.

Torch's side (``torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp``, ``struct DumpPipe``; the same
struct in ``ProcessGroupXCCL.hpp``): when the rank's environment has the pipe variable and a trace
buffer (``TORCH_FR_BUFFER_SIZE`` / ``TORCH_NCCL_TRACE_BUFFER_SIZE`` > 0), the constructor unlinks
``<stem><rank>.pipe``, ``mkfifo``s it (0666) and opens it ``O_RDONLY | O_NONBLOCK``; the watchdog's
heartbeat monitor calls ``shouldDump()`` (a ``read`` of up to 128 bytes: any byte triggers) and then
``dumpDebuggingInfo``, whose ``DebugInfoWriter`` (``FlightRecorder.cpp`` /
``FlightRecorderDetail.hpp``, ``DebugInfoWriter::getWriter``/``write``) writes the dump to
``<prefix><rank>``. The variables, newest first: the stem ``TORCH_FR_DEBUG_INFO_PIPE_FILE``
(``ProcessGroupXCCL.hpp``, newer torch), ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE`` (``ProcessGroupNCCL.hpp``);
the prefix ``TORCH_FR_DUMP_TEMP_FILE``, ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, else torch's defaults
``/tmp/nccl_trace_rank_`` (torch <= 2.8) and ``$XDG_CACHE_HOME/torch/comm_lib_trace_rank_`` (newer:
libtorch_cpu 2.13 reads ``XDG_CACHE_HOME`` next to ``TORCH_FR_DUMP_TEMP_FILE``).

Only NCCL (and XCCL) process groups own a ``DumpPipe``: a gloo job has no pipe. The write is
non-blocking (``O_WRONLY | O_NONBLOCK`` on a FIFO without reader fails with ``ENXIO``: reported,
never waited for); the wait for the file is bounded and takes only a file modified after the write.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass
from typing import Mapping

__all__ = ["PIPE_VARS", "PREFIX_VARS", "PipeResult", "pipe_path", "dump_prefixes", "trigger"]

PIPE_VARS = ("TORCH_FR_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
POLL = 0.1
"""Seconds between two looks for the dump file."""


@dataclass(frozen=True, slots=True)
class PipeResult:
    """``status``: ``written`` (the dump appeared: ``path``), ``no-reader`` (the FIFO exists, nobody
    reads it), ``no-pipe`` (the variable is set, the FIFO is not there), ``no-dump`` (triggered, no
    file within the timeout) or ``error``; ``detail``: one line."""

    rank: int
    status: str
    pipe: str
    path: str | None = None
    detail: str = ""


def pipe_path(env: Mapping[str, str], rank: int) -> str | None:
    """``<stem><rank>.pipe`` of a rank's start environment, or None when no pipe variable is set."""
    stem = next((env[v] for v in PIPE_VARS if env.get(v)), None)
    return f"{stem}{rank}.pipe" if stem else None


def dump_prefixes(env: Mapping[str, str]) -> list[str]:
    """Where torch may write the dump (prefixes of ``<prefix><rank>``): the set variable, else both defaults."""
    set_ = [env[v] for v in PREFIX_VARS if env.get(v)]
    if set_:
        return list(dict.fromkeys(set_))
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return ["/tmp/nccl_trace_rank_", os.path.join(cache, "torch", "comm_lib_trace_rank_")]


def _mtime(path: str) -> float | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) and st.st_size > 0 else None


def trigger(env: Mapping[str, str], rank: int, timeout: float) -> PipeResult | None:
    """Write one byte to rank ``rank``'s dump pipe and wait up to ``timeout`` seconds for the dump
    file written after it; None when the environment names no pipe. Never raises."""
    pipe = pipe_path(env, rank)
    if pipe is None:
        return None
    try:
        if not stat.S_ISFIFO(os.stat(pipe).st_mode):
            return PipeResult(rank, "no-pipe", pipe, detail=f"{pipe} is not a FIFO")
    except OSError:
        return PipeResult(rank, "no-pipe", pipe, detail=f"no FIFO at {pipe} (torch creates it only for NCCL/XCCL process groups with a trace buffer)")
    paths = [f"{p}{rank}" for p in dump_prefixes(env)]
    before = {p: _mtime(p) for p in paths}
    start = time.time()
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return PipeResult(rank, "no-reader", pipe, detail=f"nobody reads {pipe} (the rank's watchdog is not running)")
        return PipeResult(rank, "error", pipe, detail=f"cannot open {pipe}: {exc.strerror or exc}")
    try:
        os.write(fd, b"1")
    except OSError as exc:
        return PipeResult(rank, "error", pipe, detail=f"cannot write to {pipe}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    deadline = time.monotonic() + timeout
    while True:
        for p in paths:
            m = _mtime(p)
            if m is not None and m != before[p] and m >= start - 1.0:
                if _settled(p, deadline):
                    return PipeResult(rank, "written", pipe, p, f"torch wrote {p}")
        if time.monotonic() >= deadline:
            return PipeResult(rank, "no-dump", pipe, detail=f"triggered, but no dump at {' or '.join(paths)} within {timeout:g} s")
        time.sleep(POLL)


def _settled(path: str, deadline: float) -> bool:
    """True once the file's size stops changing for one poll (torch writes it with one ``ofstream``)."""
    size = -1
    while time.monotonic() < deadline + 1.0:
        try:
            now = os.stat(path).st_size
        except OSError:
            return False
        if now == size:
            return True
        size = now
        time.sleep(POLL)
    return True
