"""fork_map runs chunks in forked workers (or here), always giving the serial result."""

from __future__ import annotations

import os
import threading

from hangdbg import parallel
from hangdbg.parallel import fork_map
from hangdbg.parallel import gc_paused


def _pid_and_sum(chunk: list[int]) -> tuple[int, int]:
    return os.getpid(), sum(chunk)


def test_chunks_run_in_workers_in_order():
    chunks = [[1, 2], [3], [4, 5, 6]]
    got = fork_map(_pid_and_sum, chunks, workers=3)
    assert [s for _, s in got] == [3, 3, 15]
    assert got[0][0] == os.getpid() and {p for p, _ in got[1:]} - {os.getpid()}  # the others were forked


class _Unpicklable:
    def __init__(self, n: int) -> None:
        self.n = n
        self.lock = threading.Lock()  # a lock cannot be pickled: the workers must inherit it


def _count(chunk: list[_Unpicklable]) -> int:
    return sum(x.n for x in chunk)


def test_chunks_are_inherited_not_pickled():
    assert fork_map(_count, [[_Unpicklable(1)], [_Unpicklable(2), _Unpicklable(3)]], workers=2) == [1, 5]


def _fail_in_worker(chunk: int) -> int:
    if os.getpid() != PARENT:
        raise RuntimeError("worker failure")
    return chunk * 2


PARENT = os.getpid()


def test_a_failed_worker_chunk_is_done_here():
    assert fork_map(_fail_in_worker, [1, 2, 3], workers=3) == [2, 4, 6]


def test_serial_with_other_threads_or_one_worker():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        got = fork_map(_pid_and_sum, [[1], [2]], workers=2)
    finally:
        stop.set()
        t.join()
    assert got == [(os.getpid(), 1), (os.getpid(), 2)]
    assert fork_map(_pid_and_sum, [[1], [2]], workers=1) == [(os.getpid(), 1), (os.getpid(), 2)]
    assert parallel._WORK is None


def test_gc_paused_restores_the_collector():
    import gc

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
