"""Unit tests of :mod:`hangdbg.check.mistakes` and of the port a check's run takes (issue 31, item 7):
the trials are built from hand-written step messages (test_check_analyze's helper); the real runs
are in test_harm_mistakes.py."""

from __future__ import annotations

import socket

from hangdbg.check import run as check_run
from hangdbg.check.mistakes import memory_needed, oversized, port_holder, port_in_use
from hangdbg.check.node import CheckJob
from hangdbg.check.run import Checker, CheckSetup
from test_check_analyze import TIMEOUT, TWO, _trial

CPU_OOM = {"error": "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                    "memory: you tried to allocate 1073741824000 bytes. Error code 12 (Cannot allocate memory)"}
CUDA_OOM = {"error": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 931.32 GiB. GPU 0 has a total "
                     "capacity of 79.10 GiB of which 78.5 GiB is free."}
IN_USE = {"error": "DistNetworkError: The server socket has failed to listen on any local network address. port: "
                   "29777, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"}
JOB = CheckJob(size=1000 << 30, alloc_bytes=64 << 20)


def test_every_rank_failing_to_allocate_the_size_is_the_size():
    t = _trial(TWO, {r: ("bandwidth", CPU_OOM if r % 2 else CUDA_OOM) for r in range(4)})
    big = oversized(t, JOB)
    assert big is not None and (big.option, big.nbytes, big.step) == ("--size", 1000 << 30, "bandwidth")
    assert "can't allocate memory" in big.error or "CUDA out of memory" in big.error
    cpu_alloc = oversized(_trial(TWO, {r: ("alloc", CPU_OOM) for r in range(4)}), JOB)
    assert cpu_alloc is not None and cpu_alloc.option == "--alloc-bytes" and cpu_alloc.nbytes == 64 << 20


def test_one_rank_short_of_memory_or_another_error_is_not_the_size():
    # one rank fails to allocate, the others wait for it: that may be its node
    assert oversized(_trial(TWO, {0: ("bandwidth", TIMEOUT), 1: ("bandwidth", CPU_OOM), 2: ("bandwidth", TIMEOUT),
                                  3: ("bandwidth", TIMEOUT)}), JOB) is None
    assert oversized(_trial(TWO, {r: ("bandwidth", TIMEOUT) for r in range(4)}), JOB) is None
    assert oversized(_trial(TWO, {}), JOB) is None  # passed
    # an allocation failure at a step no option sizes (barrier) is not the user's size
    assert oversized(_trial(TWO, {r: ("barrier", CPU_OOM) for r in range(4)}), JOB) is None
    # ranks failing at two different steps
    assert oversized(_trial(TWO, {0: ("alloc", CPU_OOM), 1: ("alloc", CPU_OOM), 2: ("bandwidth", CPU_OOM),
                                  3: ("bandwidth", CPU_OOM)}), JOB) is None


def test_memory_needed_is_two_size_buffers_or_the_allocation_per_rank():
    assert memory_needed(CheckJob(size=1 << 30, alloc_bytes=64 << 20), 4) == 4 * 2 * (1 << 30)
    assert memory_needed(CheckJob(size=1 << 20, alloc_bytes=1 << 30), 3) == 3 * (1 << 30)


def test_rank_0_that_cannot_listen_is_the_port():
    for step in ("rendezvous", "init"):
        t = _trial(TWO, {0: (step, IN_USE), 1: (step, TIMEOUT), 2: (step, TIMEOUT), 3: (step, TIMEOUT)})
        assert "EADDRINUSE" in (port_in_use(t) or "")
    assert port_in_use(_trial(TWO, {1: ("rendezvous", IN_USE)})) is None  # not rank 0: not the rendezvous port
    assert port_in_use(_trial(TWO, {0: ("init", TIMEOUT)})) is None


def test_port_holder_names_this_process_and_a_free_port_is_free():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
        s.listen()
        held = port_holder(port)
        assert held is not None and held.startswith("it is in use by pid ")
    assert port_holder(port) is None


def _checker(master_port, in_use_on):
    """A Checker whose runs are fakes: a run on a port of ``in_use_on`` fails with EADDRINUSE."""
    plan = CheckSetup(TWO, {}, lambda hosts: None, "python3", True, master_port=master_port)
    checker = Checker(plan)
    ports: list[int] = []

    def run_once(number, layout, purpose, ifname, port, attempt):
        ports.append(port)
        busy = {0: ("rendezvous", IN_USE), 1: ("rendezvous", TIMEOUT)} if port in in_use_on else {}
        return _trial(layout, busy, number=number, purpose=purpose)

    checker._run_once = run_once  # type: ignore[method-assign]
    return checker, ports


def test_the_users_port_in_use_is_not_retried_and_later_runs_retry_on_a_free_one(monkeypatch):
    monkeypatch.setattr(check_run, "_free_port", lambda: 31999)
    checker, ports = _checker(29777, {29777, 29778})
    first = checker.run(TWO, "all")
    assert ports == [29777] and port_in_use(first)  # the user's port: told as such, never another
    second = checker.run(TWO, "bisect nodes")
    assert ports == [29777, 29778, 31999] and second.passed  # before: the retry took 29778 again
    checker, ports = _checker(None, {31999})
    monkeypatch.setattr(check_run, "_free_port", iter([31999, 32000]).__next__)
    assert checker.run(TWO, "all").passed and ports == [31999, 32000]
