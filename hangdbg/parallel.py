"""Using the whole machine on large inputs (issue 16: 100,000 saved dumps at disk speed on 2
cores): run one function over chunks on every core (:func:`fork_map`), and pause the cyclic
garbage collector while millions of acyclic objects are built (:func:`gc_paused`). Ground floor:
imports nothing from the project.

``fork_map`` forks only (the workers inherit the loaded modules, caches and the chunks
themselves, nothing is imported or pickled to them), and only from a single-threaded process
(forking a process with other threads can deadlock the child); otherwise, or when a worker fails,
the chunks are run here one after the other, so the result never depends on whether workers were
used.

``gc_paused``: reading 100,000 saved dumps builds millions of small objects (frames, threads,
dumps, JSON dicts) that hold no reference cycles; each full collection walks all of them, which
made loading super-linear (measured: 11.5 s with the collector, 6.9 s without, at 100,000 files).
Reference counting still frees everything as usual; the collector runs again on leaving.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, TypeVar, cast

__all__ = ["cores", "fork_map", "gc_paused"]

T = TypeVar("T")
R = TypeVar("R")


def cores() -> int:
    """The CPUs this process may run on (``sched_getaffinity``: a SLURM step or ``taskset`` limit
    counts), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_WORK: tuple[Callable[..., Any], Sequence[Any]] | None = None  # what the forked workers inherit (never pickled to them)


def _run(i: int) -> object:
    assert _WORK is not None
    fn, chunks = _WORK
    return fn(chunks[i])


def fork_map(fn: Callable[[T], R], chunks: Sequence[T], workers: int | None = None) -> list[R]:
    """``[fn(c) for c in chunks]``, the chunks after the first in forked worker processes.

    The workers inherit ``fn`` and ``chunks`` by forking (only a chunk's index is sent to them,
    so a chunk may be any objects, however costly to pickle); only the results are pickled back.

    Args:
        fn: the function (its result must be picklable: plain data is cheapest).
        chunks: the work, one item per call; its order is the result's order.
        workers: processes at most, this one included (default :func:`cores`); 1 runs
            everything here.

    Raises:
        Whatever ``fn`` raises when run here (a chunk whose worker failed is run here again).
    """
    global _WORK
    n = min(len(chunks), workers or cores())
    if n < 2 or _WORK is not None or threading.active_count() > 1 \
            or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(c) for c in chunks]
    _WORK = (fn, chunks)
    try:
        with multiprocessing.get_context("fork").Pool(n - 1) as pool:
            pending = [pool.apply_async(_run, (i,)) for i in range(1, len(chunks))]
            results = [fn(chunks[0])]
            for c, p in zip(chunks[1:], pending):
                try:
                    results.append(cast(R, p.get()))
                except Exception:  # noqa: BLE001 - a worker that died or failed: do its chunk here
                    results.append(fn(c))
    finally:
        _WORK = None
    return results


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block (nested blocks are fine); restored after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
