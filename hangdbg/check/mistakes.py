"""The user's mistakes in a check's set-up, told apart from a node's fault (issue 31, item 7).

A node is at fault only when it fails with a set-up that passes elsewhere. Two set-ups pass
nowhere, whatever the node:

* **sizes no rank can allocate**: ``--size`` (the bandwidth steps hold about two buffers of it
  per rank: the all_reduce tensor, then the ring's send and receive buffers) or, on CPU,
  ``--alloc-bytes``. Refused before the run when this node's memory and swap cannot hold it
  (:func:`memory_needed`); after a run, every rank failing to allocate at the step that takes
  that size is the same mistake (:func:`oversized`).
* **a rendezvous port that is in use**: rank 0 cannot listen on ``--master-port`` (``EADDRINUSE``).
  Refused before the run on this node, naming the process that holds it (:func:`port_holder`);
  seen on a remote first node, the trial says so (:func:`port_in_use`).
"""

from __future__ import annotations

import errno
import re
import socket
from dataclasses import dataclass

from ..redact import mask_argv
from .blame import Trial
from .node import CheckJob

__all__ = ["ALLOC_FAILED", "ADDR_IN_USE", "BUFFERS_PER_RANK", "Oversize", "SIZED_STEPS", "memory_needed", "oversized", "port_holder",
           "port_in_use"]

ALLOC_FAILED = re.compile(
    r"can't allocate memory"            # PyTorch c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory: you tried to allocate %d bytes"
    r"|CUDA out of memory"              # PyTorch c10/cuda/CUDACachingAllocator.cpp: "CUDA out of memory. Tried to allocate ..."
    r"|OutOfMemoryError"                # torch.OutOfMemoryError (torch.cuda.OutOfMemoryError), the class the message is raised as
    r"|\bMemoryError\b"                 # Python's own
    r"|std::bad_alloc"                  # a C++ allocation that threw (gloo's buffers)
    r"|Cannot allocate memory",         # strerror(ENOMEM), glibc sysdeps/gnu/errlist.h
    re.IGNORECASE)
"""An allocation failure in a rank's step error (sources in the pattern's comments)."""

ADDR_IN_USE = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)
"""The rendezvous port in use: torch's TCPStore server ("The server socket has failed to listen on
any local network address. port: %d, ... name: EADDRINUSE, message: address already in use",
PyTorch torch/csrc/distributed/c10d/socket.cpp) and strerror(EADDRINUSE)."""

SIZED_STEPS = {"bandwidth": "--size", "node_bandwidth": "--size"}
"""The steps whose buffers the user sizes, and the option that sizes them (``alloc`` on CPU:
``--alloc-bytes``; on a GPU it takes 90 % of the free memory, no option)."""

BUFFERS_PER_RANK = 2
"""Buffers of ``--size`` bytes a rank holds at once in the bandwidth steps (the ring exchange's
send and receive tensors, :meth:`hangdbg.check.rank.RankCheck.ring`)."""


@dataclass(frozen=True, slots=True)
class Oversize:
    """Every rank of a trial failed to allocate at the step a user's option sizes.

    ``option``: ``--size`` or ``--alloc-bytes``; ``nbytes``: its value (bytes); ``step``: the step;
    ``error``: one rank's error text."""

    option: str
    nbytes: int
    step: str
    error: str


def memory_needed(job: CheckJob, ranks: int) -> int:
    """Bytes ``ranks`` CPU ranks of ``job`` hold at their peak on one node: the larger of
    ``BUFFERS_PER_RANK x size`` and ``alloc_bytes``, per rank (torch itself not counted)."""
    return ranks * max(BUFFERS_PER_RANK * job.size, job.alloc_bytes)


def oversized(trial: Trial, job: CheckJob) -> Oversize | None:
    """The size no rank of ``trial`` could allocate, or None: every rank failed its first failing
    step with an allocation error (:data:`ALLOC_FAILED`), and that step is one an option sizes
    (:data:`SIZED_STEPS`, or ``alloc`` on CPU). One rank short of memory among others that
    allocate is not this: that may be its node."""
    if not trial.ranks:
        return None
    found: set[str] = set()
    error = ""
    for r in trial.ranks:
        step = r.failed_step
        res = r.result(step) if step else None
        if res is None or res.ok or not ALLOC_FAILED.search(res.error or ""):
            return None
        found.add(step or "")
        error = error or (res.error or "")
    if len(found) != 1:
        return None
    step = found.pop()
    if step in SIZED_STEPS:
        return Oversize(SIZED_STEPS[step], job.size, step, error)
    if step == "alloc" and not any(r.on_gpu for r in trial.ranks):
        return Oversize("--alloc-bytes", job.alloc_bytes, step, error)
    return None


def port_in_use(trial: Trial) -> str | None:
    """Rank 0's error when it could not listen on the trial's rendezvous port (``EADDRINUSE`` at
    ``rendezvous`` or ``init``, :data:`ADDR_IN_USE`), else None."""
    zero = next((r for r in trial.ranks if r.rank == 0), None)
    if zero is None:
        return None
    for step in ("rendezvous", "init"):
        res = zero.result(step)
        if res is not None and not res.ok and ADDR_IN_USE.search(res.error or ""):
            return res.error
    return None


def port_holder(port: int) -> str | None:
    """Who holds TCP ``port`` on this node, or None when it is free: a test bind on all
    addresses (as torch's TCPStore server binds), then the listening process by psutil
    (``pid NAME``; "another user's process" when its owner is not visible).

    Raises nothing: a bind that fails for another reason than EADDRINUSE (a port below 1024
    for a user that is not root) is said as that reason."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return f"it cannot be bound here: {exc.strerror or exc}"
        else:
            return None
    return f"it is in use by {_listener(port)}"


def _listener(port: int) -> str:
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return "another process (psutil cannot list the sockets: run as root to see which)"
    for c in conns:
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN:
            if c.pid is None:
                return "another user's process"
            try:
                p = psutil.Process(c.pid)
                command = " ".join(" ".join(mask_argv(p.cmdline())).split())  # one line, secrets masked
                return f"pid {c.pid} ({p.name()}: {command[:200]})"
            except psutil.Error:
                return f"pid {c.pid}"
    return "a socket of another process (none listening: one in TIME_WAIT or connecting)"
