"""Complete a blocked rank's wait with what the dump saw beside its stack (pure): its other threads and, on a live
dump, ``/proc`` (:class:`hangdbg.waits.ProcFacts`, collected by :mod:`hangdbg.collect.proc_facts`).

Rules (the vocabulary is :mod:`hangdbg.stacks.blockers`):

* the thread's OS task (py-spy >= 0.3.10 prints the OS tid as the thread id) in state ``D``: uninterruptible
  sleep, with its ``wchan`` (proc(5)); when the thread cannot be mapped to a task, the process's tasks in D state;
* the system call it is blocked in (``/proc/PID/task/TID/syscall``) and its descriptor: ``write`` to a pipe (how
  full it is, who holds its read end: pipe(7)) or a terminal; ``flock``/``fcntl`` on a file (``/proc/locks``:
  its holder, alive or gone); ``read``/``recvfrom`` on a socket (its peer); ``wait4`` for a child;
* else what the stack said: a child process wait names the rank's children (pid, command line), a write of its
  output names its stdout/stderr pipe when full, a file lock the lock of ``/proc/locks`` the rank waits for or the
  lock file of filelock's locals (``SoftFileLock``: the file exists and nobody has it open: stale);
* an ``Event``/``Condition`` wait in a process with no other Python thread: nothing can set it (the thread meant
  to has exited).
"""

from __future__ import annotations

from dataclasses import replace

from ..model import RankDump, Thread
from ..waits import LockFact, OpenFile, ProcessRef, ProcFacts, RankWait, TaskState, WaitKind
from .blockers import CHILD, D_STATE, EVENT, FILE_LOCK, LONE_BLOCKERS, OUTPUT, SOCKET

__all__ = ["refine", "BLOCKED_KINDS", "NO_SETTER", "outside_the_job", "WRITE_CALLS", "READ_CALLS", "LOCK_CALLS", "WAIT_CALLS"]

WRITE_CALLS = frozenset({"write", "writev", "pwrite64", "pwritev", "sendto", "sendmsg"})
READ_CALLS = frozenset({"read", "readv", "pread64", "recvfrom", "recvmsg"})
LOCK_CALLS = frozenset({"flock", "fcntl"})
WAIT_CALLS = frozenset({"wait4", "waitid"})
_MAX_NAMED = 3
BLOCKED_KINDS = frozenset({WaitKind.BLOCKED, WaitKind.LOCK})
"""The kinds :func:`refine` completes: a thread blocked outside torch.distributed."""


def _proc(p: ProcessRef) -> str:
    cmd = f" (`{p.cmdline[:120]}`)" if p.cmdline else ""
    return f"pid {p.pid}{cmd}"


def _procs(ps: tuple[ProcessRef, ...] | list[ProcessRef]) -> str:
    more = f" and {len(ps) - _MAX_NAMED} more" if len(ps) > _MAX_NAMED else ""
    return ", ".join(_proc(p) for p in ps[:_MAX_NAMED]) + more


def _task(facts: ProcFacts, thread: Thread) -> TaskState | None:
    return next((t for t in facts.tasks if t.tid == thread.thread_id), None)


def _stream(fd: int) -> str:
    return {0: "stdin", 1: "stdout", 2: "stderr"}.get(fd, f"fd {fd}")


def _full(f: OpenFile) -> bool:
    """A pipe with less than a page free (pipe(7): the capacity is counted in pages, a write waits for room)."""
    return f.unread is not None and bool(f.capacity) and f.unread + 4096 > (f.capacity or 0)


def _output(f: OpenFile, pid: int | None) -> tuple[str, str]:
    """``(detail, waiting_on)`` of a write blocked on ``f``."""
    stream = f"{_stream(f.fd)}{f' (fd {f.fd})' if f.fd > 2 else ''}"
    if f.target.startswith("pipe:"):
        fill = f", {f.unread} of {f.capacity} bytes unread" if f.unread is not None and f.capacity else ""
        if not f.readers:
            who = "nobody holds its read end"
        elif all(r.pid == pid for r in f.readers):
            who = "its read end is held by this rank itself, which never reads it"
        else:
            who = f"its read end is held by {_procs(f.readers)}, which does not read it"
        return f"blocked writing to its {stream}, a {'full ' if _full(f) else ''}pipe ({f.target}{fill})", who
    if f.target.startswith(("/dev/pts/", "/dev/tty")):
        return f"blocked writing to its {stream}, a terminal ({f.target})", "the terminal is stopped (Ctrl-S) or not read"
    return f"blocked writing to its {stream} ({f.target})", ""


def _lock(lock: LockFact, how: str) -> tuple[str, str]:
    """``(detail, waiting_on)`` of a wait for ``lock``."""
    detail = f"waits for a file lock{how} on {lock.path}"
    gone = [h for h in lock.holders if not h.alive]
    if lock.holders and len(gone) == len(lock.holders):
        keep = f"; the lock lives on in {_procs(lock.openers)}, which inherited its descriptor" if lock.openers else ""
        return detail, f"a stale lock: held by {_procs(gone)}, which has exited{keep}"
    if lock.holders:
        return detail, f"held by {_procs(lock.holders)}"
    if not lock.exists:
        return detail, "no process holds it and the lock file is gone (the next poll should take it)"
    if lock.openers:
        return detail, f"no process holds a kernel lock on it; {_procs(lock.openers)} has it open"
    return detail, "a stale lock file: it exists, no process holds a lock on it or has it open"


def _socket(f: OpenFile) -> tuple[str, str]:
    peer = f" from {f.remote}" if f.remote else ""  # a Unix socket or a socketpair has no address
    state = f", {f.status}" if f.status else ""
    return f"blocked reading a socket{peer} ({f'local {f.local}' if f.local else f.target}{state})", ""


def _by_syscall(w: RankWait, task: TaskState, facts: ProcFacts, pid: int | None) -> RankWait | None:
    """The wait said from the system call the thread is blocked in, or None when it says nothing more."""
    f = next((x for x in facts.files if x.fd == task.fd), None) if task.fd is not None else None
    if task.syscall in WRITE_CALLS and f is not None and not f.target.startswith("socket:"):
        detail, on = _output(f, pid)
        return replace(w, detail=detail, waiting_on=on, blocker=OUTPUT.name)
    if task.syscall in LOCK_CALLS and f is not None:
        lock = next((x for x in facts.locks if x.path == f.target), LockFact(f.target))
        detail, on = _lock(lock, f" ({task.syscall})")
        return replace(w, detail=detail, waiting_on=on, blocker=FILE_LOCK.name)
    if task.syscall in READ_CALLS and f is not None and f.target.startswith("socket:") and w.blocker != "debugger":
        detail, on = _socket(f)
        return replace(w, detail=detail, waiting_on=on, blocker=SOCKET.name)
    if task.syscall in READ_CALLS and f is not None and w.blocker == OUTPUT.name:  # ``print(input())``: a read
        return replace(w, detail=f"blocked reading its {_stream(f.fd)} ({f.target})", waiting_on="", blocker="")
    if task.syscall in WAIT_CALLS and facts.children:
        kids = [c for c in facts.children if task.arg in (c.pid, None, -1) or task.arg is not None and task.arg <= 0]
        if kids:
            return replace(w, detail=f"waits for its child process {_procs(kids)}", blocker=CHILD.name)
    return None


def _by_stack(w: RankWait, facts: ProcFacts, pid: int | None) -> RankWait:
    """The stack's blocker completed with the facts that fit it."""
    if w.blocker == CHILD.name and facts.children:
        return replace(w, detail=f"waits for its child process {_procs(facts.children)}")
    if w.blocker == OUTPUT.name:
        full = [f for f in facts.files if f.fd in (1, 2) and f.target.startswith("pipe:") and _full(f)]
        if full:
            detail, on = _output(full[0], pid)
            return replace(w, detail=detail, waiting_on=on)
    if w.blocker == FILE_LOCK.name and facts.locks:
        lock = next((x for x in facts.locks if x.waiting), facts.locks[0])
        detail, on = _lock(lock, " (filelock, polling)" if "polling" in w.detail else "")
        return replace(w, detail=detail, waiting_on=on)
    if w.blocker == "debugger":
        stdin = next((f for f in facts.files if f.fd == 0), None)
        if stdin is not None:
            return replace(w, waiting_on=f"waiting on stdin ({stdin.target})")
    return w


def _event(w: RankWait, thread: Thread, threads: tuple[Thread, ...]) -> RankWait:
    others = [t for t in threads if t is not thread and t.python_frames]
    if others:
        names = ", ".join(t.name or str(t.thread_id) for t in others[:_MAX_NAMED])
        return replace(w, waiting_on=f"another thread must set it ({names} alive)")
    return replace(w, waiting_on=NO_SETTER)


NO_SETTER = ("no thread can set it: the process has no other Python thread (the one meant to set it has exited, "
             "unless a signal handler sets it)")
"""What an Event/Condition wait in a process without another Python thread waits on."""


def outside_the_job(w: RankWait) -> bool:
    """The blocker waits on nothing inside the job (:data:`hangdbg.stacks.blockers.LONE_BLOCKERS`, or an Event
    nobody can set): a rank blocked in it is a cause even when no dumped rank waits for it."""
    return w.blocker in LONE_BLOCKERS or w.blocker == EVENT.name and w.waiting_on == NO_SETTER


def refine(w: RankWait, thread: Thread, dump: RankDump) -> RankWait:
    """``w`` (what ``thread`` of ``dump`` waits on) completed with the dump's other threads and its ``/proc``
    facts (see the module docstring); a wait that is not blocked outside torch.distributed is returned as is."""
    if w.kind not in BLOCKED_KINDS:
        return w
    if w.blocker == "event":
        w = _event(w, thread, dump.threads)
    facts = dump.proc
    if facts is None:
        return w
    w = replace(w, evidence=(*w.evidence, "proc"))
    task = _task(facts, thread)
    d_tasks = [t for t in facts.tasks if t.state == "D"]
    if task is not None and task.state == "D" or task is None and d_tasks:
        shown = task or d_tasks[0]
        where = f" in the kernel's {shown.wchan}" if shown.wchan and shown.wchan != "0" else ""
        who = "" if task is not None else f" (threads {', '.join(str(t.tid) for t in d_tasks[:_MAX_NAMED])})"
        return replace(w, kind=WaitKind.BLOCKED, detail=f"{D_STATE.detail}{where}{who}", blocker=D_STATE.name,
                       waiting_on=w.detail if w.blocker else "")
    if task is not None and task.syscall:
        said = _by_syscall(w, task, facts, dump.pid)
        if said is not None:
            return replace(said, kind=WaitKind.BLOCKED)
    return _by_stack(w, facts, dump.pid)
