"""Every child hangdbg starts, tracked by process group, and one teardown that stops them all.

:class:`hangdbg.tools.subproc.Popen` registers each child started in a process group of its own
(``start_new_session=True``: hooks, py-spy, gdb, pystack, gcore, the check launchers, ssh, pdsh,
srun) here the moment it starts, and forgets it when it is reaped. :func:`stop` ends the groups
still registered: SIGTERM to each group, then SIGKILL to what is left after :data:`GRACE` seconds.
The command line (:func:`hangdbg.cli.main.main`) calls it when a command ends, whatever the way:
normal end, an error, Ctrl-C (SIGINT) or SIGTERM (which it turns into an unwind); :func:`close`
runs once the process is about to exit and refuses every child started after it (a worker thread
still running cannot start a new py-spy then).

Local launchers also die with their parent when it is SIGKILLed, which no handler sees:
:func:`die_with_parent` is the ``preexec_fn`` that sets ``PR_SET_PDEATHSIG`` (Linux prctl(2):
"the signal that the calling process will get when its parent dies"; the setting survives
execve(2) and is cleared on fork; "the parent" is the thread that forked the child, so a child
must be started from a thread that outlives it; the kernel sends it from
``forget_original_parent()`` / ``reparent_leader()`` in ``kernel/exit.c``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["GRACE", "ChildrenClosed", "track", "untrack", "mark", "stop", "close", "reopen", "tracked",
           "die_with_parent", "pdeathsig_preexec", "watch_stdin", "STOP_ON_EOF", "stop_on_stdin_eof",
           "RUN", "stop_run"]

RUN = "HANGDBG_RUN"
"""The token of one remote run, set in its agent's environment by the ssh and pdsh transports and
inherited by everything the agent starts: :func:`stop_run` finds them by it."""

STOP_ON_EOF = "HANGDBG_STOP_ON_EOF"
"""Set to ``1`` in a remote agent's environment by the ssh and pdsh transports
(:mod:`hangdbg.transport.runners`): the agent stops when its standard input ends
(:func:`stop_on_stdin_eof`)."""

GRACE = 5.0
"""Seconds between the SIGTERM of a teardown and its SIGKILL: long enough for a py-spy, an ssh
client or a check launcher to end its own children, short enough for a Ctrl-C."""

PR_SET_PDEATHSIG = 1
"""prctl(2) option number (linux/prctl.h)."""


class ChildrenClosed(OSError):
    """A child was started after :func:`close`: it was killed at once (the process is exiting)."""


@dataclass
class _Child:
    seq: int
    proc: subprocess.Popen
    pgid: int


_lock = threading.Lock()
_children: dict[int, _Child] = {}  # id(proc) -> child
_seq = itertools.count(1)
_last = [0]
_closed = [False]


def track(proc: subprocess.Popen) -> None:
    """Register ``proc``, the leader of a process group of its own (``start_new_session=True``).

    Raises:
        ChildrenClosed: :func:`close` was called: the group is killed and the child reaped.
    """
    with _lock:
        if not _closed[0]:
            seq = next(_seq)
            _last[0] = seq
            _children[id(proc)] = _Child(seq, proc, proc.pid)
            return
    _signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=GRACE)
    except subprocess.TimeoutExpired:
        pass
    raise ChildrenClosed(f"not started: hangdbg is stopping ({proc.args!r})")


def untrack(proc: subprocess.Popen) -> None:
    """Forget ``proc`` (it was reaped: its group id may be reused from now on)."""
    with _lock:
        _children.pop(id(proc), None)


def mark() -> int:
    """A point in time: :func:`stop` with ``since=mark()`` stops only the children started after it."""
    with _lock:
        return _last[0]


def tracked() -> list[subprocess.Popen]:
    """The children registered now (started, not yet reaped)."""
    with _lock:
        return [c.proc for c in _children.values()]


def _signal_group(pgid: int, sig: int) -> bool:
    """``killpg(pgid, sig)``; False when the group is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop(since: int = 0, grace: float = GRACE) -> int:
    """Stop every child registered after ``since`` (:func:`mark`) and still running: SIGTERM to
    its process group, then SIGKILL to the groups left after ``grace`` seconds (at once when the
    wait is interrupted). Returns how many groups were signalled."""
    with _lock:
        victims = [c for c in _children.values() if c.seq > since]
    if not victims:
        return 0
    try:
        for c in victims:
            _signal_group(c.pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_running(c) for c in victims):
            time.sleep(0.05)
    finally:
        for c in victims:
            _signal_group(c.pgid, signal.SIGKILL)  # the leader's group: its zombie keeps the id ours until reaped
            try:
                c.proc.wait(timeout=1)
            except (subprocess.TimeoutExpired, OSError):
                pass
            untrack(c.proc)
    return len(victims)


def _running(child: _Child) -> bool:
    """The leader is alive, or its group has members left."""
    try:
        if child.proc.poll() is None:
            return True
    except OSError:
        return False
    return _signal_group(child.pgid, 0)


def close(grace: float = GRACE) -> int:
    """The process is exiting: refuse every child started from now on (:class:`ChildrenClosed`)
    and :func:`stop` those registered. Returns how many groups were signalled."""
    with _lock:
        _closed[0] = True
    return stop(0, grace)


def reopen() -> None:
    """Accept children again after :func:`close` (a new command in the same process: tests)."""
    with _lock:
        _closed[0] = False


_libc: list[Callable[..., int] | None] = []


def _prctl() -> Callable[..., int] | None:
    if not _libc:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _libc.append(lib.prctl)
        except (OSError, AttributeError):
            _libc.append(None)
    return _libc[0]


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent (the thread that forked it)
    dies (prctl(2) ``PR_SET_PDEATHSIG``); when ``parent`` is given and is no longer the parent
    (it died before the call: the child was re-parented), ``sig`` is sent at once. Returns False
    where prctl is not available (not Linux)."""
    prctl = _prctl()
    if prctl is None:
        return False
    if prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)
    return True


def pdeathsig_preexec(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the child die with ``sig`` when
    this process dies (:func:`die_with_parent`, the race with the parent's death closed by the
    parent check). libc is loaded here, before the fork: the child only calls prctl."""
    _prctl()
    parent = os.getpid()

    def preexec() -> None:
        die_with_parent(sig, parent)

    return preexec


def watch_stdin(on_eof: Callable[[], None]) -> threading.Thread:
    """Read standard input (its bytes are ignored) in a daemon thread; call ``on_eof`` when it
    ends: the coordinator's ssh went away (a remote agent's stop, issue 31)."""

    def read() -> None:
        try:
            fd = 0
            while os.read(fd, 1 << 12):
                pass
        except OSError:
            pass
        on_eof()

    t = threading.Thread(target=read, daemon=True, name="stdin-eof")
    t.start()
    return t


def stop_on_stdin_eof(environ: dict[str, str] | None = None) -> bool:
    """When :data:`STOP_ON_EOF` is ``1`` in ``environ`` (default: ``os.environ``): once standard
    input ends (the coordinator's ssh went away: Ctrl-C, SIGTERM, a node timeout), refuse new
    children and stop those running (:func:`close`: no py-spy starts after that), SIGTERM this
    process (the command line unwinds: its ``finally`` blocks run), and exit after ``2 * GRACE``
    seconds if it has not. Returns whether the watch was started."""
    if (environ if environ is not None else os.environ).get(STOP_ON_EOF) != "1":
        return False

    def stop() -> None:
        with _lock:
            _closed[0] = True
        os.kill(os.getpid(), signal.SIGTERM)
        close()
        time.sleep(2 * GRACE)
        os._exit(1)

    watch_stdin(stop)
    return True


def stop_run(tokens: list[str], grace: float = GRACE) -> list[int]:
    """Stop this user's processes whose environment has ``HANGDBG_RUN`` set to one of ``tokens``
    (a remote run the coordinator gave up on: ``hangdbg agent --stop-run``): SIGTERM, then
    SIGKILL after ``grace`` seconds. This process and its ancestors are never signalled.
    Returns the pids signalled."""
    import psutil

    wanted = {t for t in tokens if t}
    me = psutil.Process()
    spared = {me.pid, *(p.pid for p in me.parents())}
    uid = os.getuid()
    victims = []
    for p in psutil.process_iter(["uids"]):
        if p.pid in spared or p.info["uids"] is None or p.info["uids"].real != uid:
            continue
        try:
            if p.environ().get(RUN) in wanted:
                victims.append(p)
        except psutil.Error:
            continue
    for p in victims:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(victims, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    return [p.pid for p in victims]
