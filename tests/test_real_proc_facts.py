"""/proc facts of real blocked processes (hangdbg.collect.proc_facts): a socket read names its peer, a wait for a
child names the child; read by the collector, said by the analysis (hangdbg.stacks.blocker_facts.refine)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hangdbg.collect.proc_facts import proc_facts
from hangdbg.enums import ThreadStatus
from hangdbg.frames import Frame
from hangdbg.model import RankDump, Thread
from hangdbg.stacks.blocker_facts import refine
from hangdbg.waits import RankWait, WaitKind

SOCKET_READER = """import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
cli = socket.create_connection(srv.getsockname()); conn, _ = srv.accept()
print(srv.getsockname()[1], cli.getsockname()[1], flush=True)
cli.recv(10)
"""

CHILD_WAITER = """import subprocess, sys
p = subprocess.Popen(["sleep", "1000"])
print(p.pid, flush=True)
p.wait()
"""


@pytest.fixture
def started(request):
    proc = subprocess.Popen([sys.executable, "-c", request.param], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        yield proc, [int(x) for x in line]
    finally:
        for child in _children(proc.pid):
            subprocess.run(["kill", str(child)], check=False)
        proc.kill()
        proc.wait()


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.Error:
        return []


def _blocked(proc, facts, w: RankWait) -> RankWait:
    main = Thread(proc.pid, "MainThread", ThreadStatus.IDLE, (Frame("<module>", "<string>", 5),))
    return refine(w, main, RankDump(0, pid=proc.pid, threads=(main,), proc=facts))


def _settled(pid: int, call: str):
    """The facts once the main thread is in ``call`` (it gets there right after printing)."""
    import time

    for _ in range(100):
        facts = proc_facts(pid)
        task = next(t for t in facts.tasks if t.tid == pid)
        if task.syscall == call:
            return facts, task
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} never blocked in {call}: {task}")


@pytest.mark.parametrize("started", [SOCKET_READER], indirect=True)
def test_real_socket_read_names_its_peer(started):
    proc, (server_port, client_port) = started
    facts, task = _settled(proc.pid, "recvfrom")
    sock = next(f for f in facts.files if f.fd == task.fd)
    assert sock.target.startswith("socket:[") and sock.status == "ESTABLISHED"
    assert (sock.local, sock.remote) == (f"127.0.0.1:{client_port}", f"127.0.0.1:{server_port}")
    w = _blocked(proc, facts, RankWait(WaitKind.BLOCKED, detail="blocked on a socket", blocker="socket"))
    assert w.detail == (f"blocked reading a socket from 127.0.0.1:{server_port} (local 127.0.0.1:{client_port}, "
                        "ESTABLISHED)")


@pytest.mark.parametrize("started", [CHILD_WAITER], indirect=True)
def test_real_wait4_names_the_child(started):
    proc, (child,) = started
    facts, task = _settled(proc.pid, "wait4")
    assert task.arg == child
    assert [(c.pid, c.cmdline) for c in facts.children] == [(child, "sleep 1000")]
    w = _blocked(proc, facts, RankWait(WaitKind.BLOCKED, detail="waits for its child process", blocker="child process"))
    assert w.detail == f"waits for its child process pid {child} (`sleep 1000`)"
