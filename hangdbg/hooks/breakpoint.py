"""A pdb breakpoint on one rank of a distributed job; the other ranks wait at a barrier.

    from hangdbg.hooks.breakpoint import breakpoint
    breakpoint(rank=0)

The "ForkedPdb" recipe: on the chosen rank, pdb reads from the terminal even when the process's
stdin is not one (torchrun workers, ``multiprocessing``/``mp.spawn`` children get /dev/null):
stdin is fd 0 if that is a tty, else ``/dev/tty`` (the controlling terminal of the job). pdb stops
in the *caller's* frame (so ``p dist.get_rank()`` works at once, no ``up`` needed). Other ranks
call ``torch.distributed.barrier()`` when a process group is initialised, after the collective
timeouts were raised to ``timeout_s`` like ``torch.distributed.breakpoint`` does.

Why not plain ``torch.distributed.breakpoint`` (torch 2.13)? It stops inside its own frame (you
must type ``up``) and reads ``/dev/stdin``, which is /dev/null under ``mp.spawn``. Pass
``use_torch=True`` to call it anyway (only when the process group is initialised).
Without an initialised process group, the chosen rank (from the environment) just breaks and the
others continue.
"""

from __future__ import annotations

import os
import pdb
import sys
from datetime import timedelta

from .rankinfo import initialized_dist, rank_info

__all__ = ["ForkedPdb", "breakpoint"]


class ForkedPdb(pdb.Pdb):
    """pdb whose input comes from the terminal even if sys.stdin was redirected."""

    def interaction(self, *args, **kwargs):
        saved_stdin, saved_stdout = sys.stdin, sys.stdout
        tty_in = None
        try:
            if not (sys.stdin is not None and _isatty(sys.stdin)):
                if _isatty_fd(0):
                    tty_in = os.fdopen(os.dup(0), "r")
                else:
                    try:
                        tty_in = open("/dev/tty", "r")
                    except OSError:
                        tty_in = None  # no terminal at all: pdb reads whatever stdin is
            if tty_in is not None:
                sys.stdin = self.stdin = tty_in
            pdb.Pdb.interaction(self, *args, **kwargs)
        finally:
            sys.stdin = self.stdin = saved_stdin
            sys.stdout = saved_stdout
            if tty_in is not None:
                tty_in.close()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _isatty_fd(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _interact_in(dbg: pdb.Pdb, frame) -> None:
    """Prompt in ``frame`` now (not at the next line of this module), with tracing set up so that
    ``n``/``s`` step on in the caller, ``c`` continues (into our barrier)."""
    dbg.reset()
    f = frame
    while f is not None:
        f.f_trace = dbg.trace_dispatch
        dbg.botframe = f
        f = f.f_back
    dbg._set_stopinfo(dbg.botframe, None, -1)  # type: ignore[attr-defined]  # bdb's own, as Bdb.set_continue uses it  # "continue" until a command says otherwise
    sys.settrace(dbg.trace_dispatch)
    dbg.interaction(frame, None)


def breakpoint(rank: int = 0, timeout_s: float | None = 3600, use_torch: bool = False) -> None:
    """Break into pdb on ``rank``; the other ranks wait in a barrier until it continues."""
    dist = initialized_dist()
    if dist is not None and use_torch and hasattr(dist, "breakpoint"):
        dist.breakpoint(rank=rank, timeout_s=timeout_s)
        return
    if dist is not None and timeout_s is not None:
        try:  # the same as torch.distributed.breakpoint: don't let a long session time out NCCL/gloo
            from torch.distributed import distributed_c10d as c10d
            for group in list(c10d._pg_map):
                c10d._set_pg_timeout(timedelta(seconds=timeout_s), group)
        except Exception:
            pass
    me = dist.get_rank() if dist is not None else rank_info().rank
    if me is None:
        me = 0
    if me == rank:
        dbg = ForkedPdb()
        dbg.message(f"hangdbg: breakpoint on rank {rank}; the other ranks wait at a barrier. 'c' to continue.")
        _interact_in(dbg, sys._getframe(1))
    if dist is not None:
        dist.barrier()
