"""What blocks a rank outside torch.distributed: a vocabulary of blocked states, each named in the finding.

Each entry of :data:`VOCABULARY` (a :class:`Blocker`) is a state a thread can be blocked in, with the
phrase the finding says, what to do about it, and the source its frame names come from. This module
reads the stack alone (pure; a saved dump has nothing else): :func:`stack_blocker`. What ``/proc``
adds on a live dump (the child's pid and command line, the full pipe and its reader, the lock's
holder, the socket's peer, the D state) is :mod:`hangdbg.stacks.blocker_facts`.

Function names are compared by bare name (:func:`hangdbg.frames.bare_name`): py-spy prints
``Popen.communicate``, ``Condition.wait``, ``Pdb.interaction`` on CPython 3.11+ (``co_qualname``)
and ``communicate``, ``wait``, ``interaction`` before. Files are compared by their last components,
so py-spy's short names and ``--full-filenames`` both match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..frames import Frame
from ..model import Thread
from .places import CONDITION_WAITS, condition_wait, read_source

__all__ = ["Blocker", "Blocked", "VOCABULARY", "DEBUGGER", "CHILD", "OUTPUT", "EVENT", "FILE_LOCK", "SOCKET", "D_STATE",
           "stack_blocker", "lock_path", "action_of", "LONE_BLOCKERS"]


@dataclass(frozen=True, slots=True)
class Blocker:
    """One blocked state of the vocabulary.

    Attributes:
        name: the key (:attr:`hangdbg.waits.RankWait.blocker`).
        detail: what the finding says from the stack alone.
        action: what to do.
        source: where the frame names or the facts come from.
    """

    name: str
    detail: str
    action: str
    source: str


DEBUGGER = Blocker(
    "debugger", "sits in {debugger}",
    "the rank waits for a person at its debugger prompt: type `c` (continue) or `q` (quit) on its terminal or stdin; "
    "a breakpoint() in a distributed job stops one rank while the others wait in their next collective (guard it to one "
    "rank and make the others wait with a long timeout, or debug with one process)",
    "CPython 3.8-3.13 Lib/pdb.py (Pdb.interaction, Pdb._cmdloop), Lib/bdb.py (Bdb.trace_dispatch, Bdb.dispatch_line), "
    "Lib/cmd.py (Cmd.cmdloop reads input() or stdin.readline()); ipdb (ipdb/__main__.py); IPython "
    "(IPython/core/debugger.py, IPython/terminal/debugger.py)")
CHILD = Blocker(
    "child process", "waits for its child process",
    "see what the child does (py-spy dump --pid CHILD, strace -p CHILD, its output); kill it if it is stuck, and give the "
    "call a timeout (subprocess.run(..., timeout=...), Popen.wait(timeout=...))",
    "CPython 3.8-3.13 Lib/subprocess.py (Popen.wait, Popen._wait, Popen._try_wait, Popen.communicate, "
    "Popen._communicate, run, call, check_call, check_output), Lib/selectors.py under communicate; os.waitpid "
    "(wait4(2)); /proc/PID/task/*/children and cmdline (proc(5))")
OUTPUT = Blocker(
    "output", "blocked writing its output (to a full pipe or a stopped terminal?)",
    "let the output flow: drain or restart what reads the rank's output (the process holding the pipe's read end), "
    "resume a terminal stopped with Ctrl-S (Ctrl-Q), or send the rank's output to a file",
    "pipe(7): a write to a pipe blocks while the pipe is full; builtins.print / sys.stdout.write / logging.StreamHandler "
    "(CPython Lib/logging/__init__.py: StreamHandler.emit, flush); write(2) in native frames; /proc/PID/fd, fdinfo")
EVENT = Blocker(
    "event", "waits on a threading.{what}",
    "find the code that should set it (Event.set(), Condition.notify()): when the thread meant to do it has exited, "
    "look for its exception in the rank's stderr ('Exception in thread ...', threading.excepthook); give the wait a "
    "timeout",
    "CPython 3.8-3.13 Lib/threading.py (Condition.wait, Condition.wait_for, Event.wait, Semaphore.acquire, Barrier.wait)")
FILE_LOCK = Blocker(
    "file lock", "waits for a file lock",
    "see who holds the lock (lslocks, /proc/locks, fuser FILE): when its holder is gone, kill the process that kept its "
    "descriptor or remove the stale lock file; else see what the holder does (py-spy dump --pid HOLDER)",
    "fcntl.flock / fcntl.lockf (CPython Modules/fcntlmodule.c: fcntl_flock, fcntl_lockf; flock(2), fcntl(2)); filelock "
    "3.x (filelock/_api.py BaseFileLock.acquire polls with time.sleep) and 4.x (filelock/_core/_acquire.py "
    "_poll_until_acquired); /proc/locks (proc(5))")
SOCKET = Blocker(
    "socket", "blocked on a socket",
    "check the service or peer the rank talks to (the address, its process, a firewall)",
    "psutil Process.net_connections() (/proc/net/tcp, tcp6, unix), /proc/PID/task/TID/syscall (proc(5))")
D_STATE = Blocker(
    "D state", "in uninterruptible sleep (D state)",
    "the kernel waits on a device or a file system for it (a hung NFS/Lustre mount, a failing disk, a GPU driver): "
    "see dmesg, the mounts it uses, and cat /proc/PID/task/TID/stack (as root); kill -9 cannot end it until the kernel "
    "call returns",
    "proc(5): /proc/PID/task/TID/stat field 3 (state 'D') and /proc/PID/task/TID/wchan")

VOCABULARY: tuple[Blocker, ...] = (DEBUGGER, CHILD, OUTPUT, EVENT, FILE_LOCK, SOCKET, D_STATE)
"""Every blocked state hangdbg names."""

LONE_BLOCKERS = frozenset({"debugger", "output", "file lock", "socket", "D state"})
"""Blockers that wait on nothing inside the job: a rank blocked in one is a cause even when no other rank of the
dumps waits for it (saved dumps of a few ranks). A rank waiting on an Event or a child process may wait for the
job's own work."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """A thread recognised in a blocked state: the entry, the frame to show, the finding's phrase,
    what it waits on (said after the site) and, for a file lock, its path when the locals show it."""

    blocker: Blocker
    site: Frame
    detail: str
    waiting_on: str = ""
    path: str = ""


def action_of(name: str) -> str:
    """The action of the vocabulary entry ``name`` ('' for none)."""
    return next((b.action for b in VOCABULARY if b.name == name), "")


def _parts(f: Frame) -> str:
    return "/" + f.file.replace("\\", "/").lstrip("/")


def _base(f: Frame) -> str:
    return _parts(f).rsplit("/", 1)[-1]


_PDB_FILES = frozenset({"pdb.py", "bdb.py"})
_DEBUGGER_PATHS = ("/ipdb/", "/IPython/core/debugger.py", "/IPython/terminal/debugger.py")
_INPUT_PATHS = ("/cmd.py", "/prompt_toolkit/", "/asyncio/", "/selectors.py", "/IPython/", "/codecs.py", "/getpass.py")
"""Frames a debugger reads its input through (CPython Lib/cmd.py, prompt_toolkit under IPython's debugger)."""


def _debugger_name(f: Frame) -> str:
    path = _parts(f)
    if "/ipdb/" in path:
        return "ipdb"
    if "/IPython/" in path and any(p in path for p in _DEBUGGER_PATHS):
        return "IPython's debugger"
    return "pdb" if _base(f) in _PDB_FILES else ""


def _debugger(py: tuple[Frame, ...]) -> Blocked | None:
    """The debugger's frames are the innermost ones (input library frames inside them): a program run
    under ``python -m pdb`` has pdb frames only at its bottom and is not stopped."""
    names: list[str] = []
    i = 0
    while i < len(py):
        name = _debugger_name(py[i])
        if not name and not any(p in _parts(py[i]) for p in _INPUT_PATHS):
            break
        if name:
            names.append(name)
        i += 1
    if not names or i == 0:
        return None
    name = "ipdb" if "ipdb" in names else names[0]
    site = py[i] if i < len(py) else py[-1]
    return Blocked(DEBUGGER, site, DEBUGGER.detail.format(debugger=name), "waiting on stdin")


_SUBPROCESS_WAITS = frozenset({"wait", "_wait", "_try_wait", "communicate", "_communicate", "run", "call", "check_call",
                               "check_output", "getoutput", "getstatusoutput"})
_NATIVE_WAIT = re.compile(r"^(__)?(wait4|waitpid|waitid|wait)(64)?$|^os_waitpid")
_SRC_WAIT = re.compile(r"\bos\s*\.\s*(waitpid|wait|wait4|waitid)\s*\(")


def _top_natives(thread: Thread) -> list[str]:
    """The native frames above the innermost Python frame (what the thread is in), innermost first."""
    out = []
    for f in thread.frames:
        if not f.native:
            break
        out.append(f.bare)
    return out


def _child(thread: Thread, py: tuple[Frame, ...]) -> Blocked | None:
    i = 0
    while i < len(py) and _base(py[i]) == "selectors.py":
        i += 1
    j = i
    while j < len(py) and _base(py[j]) == "subprocess.py" and py[j].bare in _SUBPROCESS_WAITS:
        j += 1
    if j > i:
        return Blocked(CHILD, py[j] if j < len(py) else py[-1], CHILD.detail)
    if py and (any(_NATIVE_WAIT.search(n) for n in _top_natives(thread)) or _SRC_WAIT.search(read_source(py[0]))):
        return Blocked(CHILD, py[0], CHILD.detail)
    return None


_SRC_OUTPUT = re.compile(r"\bprint\s*\(|\b(sys\s*\.\s*)?(stdout|stderr)\s*\.\s*(write|flush|writelines)\s*\(")
_NATIVE_WRITE = re.compile(r"^(__libc_|__)?(write|writev)(64)?$|^_Py_write|^_bufferedwriter_(raw_write|flush)")
_LOGGING_WRITES = frozenset({"emit", "flush"})


def _output(thread: Thread, py: tuple[Frame, ...]) -> Blocked | None:
    if not py:
        return None
    if _base(py[0]) == "__init__.py" and "/logging/" in _parts(py[0]) and py[0].bare in _LOGGING_WRITES:
        site = next((f for f in py if "/logging/" not in _parts(f)), py[0])
        return Blocked(OUTPUT, site, OUTPUT.detail)
    if any(_NATIVE_WRITE.search(n) for n in _top_natives(thread)) or _SRC_OUTPUT.search(read_source(py[0])):
        return Blocked(OUTPUT, py[0], OUTPUT.detail)
    return None


_EVENT_CLASSES = {"Event": "Event", "Barrier": "Barrier", "Semaphore": "Semaphore", "BoundedSemaphore": "Semaphore",
                  "Condition": "Condition"}


def _event(py: tuple[Frame, ...]) -> Blocked | None:
    """A ``threading`` wait not under a queue, future or pool (those are :func:`wait_state._python_block`'s)."""
    if not condition_wait(py):
        return None
    i = 0
    what = "Condition"
    while i < len(py) and _base(py[i]) == "threading.py":
        cls = py[i].function.rsplit(".", 1)[0] if "." in py[i].function else ""
        if cls in _EVENT_CLASSES:
            what = _EVENT_CLASSES[cls]
        elif not cls and i and py[i].bare in CONDITION_WAITS:
            what = "Event"  # before 3.11: Event.wait -> Condition.wait, both ``wait``
        elif not cls and py[i].bare == "acquire":
            what = "Semaphore"
        i += 1
    site = py[i] if i < len(py) else py[-1]
    return Blocked(EVENT, site, EVENT.detail.format(what=what))


_FILELOCK_WAITS = frozenset({"acquire", "_poll_until_acquired", "_acquire_level", "_acquire"})
_SRC_FLOCK = re.compile(r"\b(fcntl\s*\.\s*)?(flock|lockf)\s*\(")
_NATIVE_FLOCK = re.compile(r"^(__)?(flock|lockf)(64)?$|^fcntl_(flock|lockf)")
_PATH_LOCALS = ("lock_filename", "lock_file", "_lock_file", "path", "filename")


def lock_path(frames: tuple[Frame, ...]) -> str:
    """The lock file's path from ``--locals`` of filelock's frames (``lock_filename``, ``lock_file``), '' when not
    shown."""
    for f in frames:
        if "/filelock/" not in _parts(f):
            continue
        values = dict(f.locals)
        for name in _PATH_LOCALS:
            m = re.fullmatch(r"""['"](.+)['"]""", values.get(name, "").strip())
            if m:
                return m.group(1)
    return ""


def _file_lock(thread: Thread, py: tuple[Frame, ...]) -> Blocked | None:
    hits = [i for i, f in enumerate(py[:8]) if "/filelock/" in _parts(f) and f.bare in _FILELOCK_WAITS]
    if hits:
        site = next((f for f in py[hits[0]:] if "/filelock/" not in _parts(f)), py[-1])
        path = lock_path(py)
        return Blocked(FILE_LOCK, site, FILE_LOCK.detail + " (filelock, polling)" + (f" on {path}" if path else ""),
                       path=path)
    if py and (any(_NATIVE_FLOCK.search(n) for n in _top_natives(thread)) or _SRC_FLOCK.search(read_source(py[0]))):
        return Blocked(FILE_LOCK, py[0], FILE_LOCK.detail + " (flock/lockf)")
    return None


def stack_blocker(thread: Thread, after_python_blocks: bool = False) -> Blocked | None:
    """The blocked state an idle ``thread``'s stack shows, or None.

    Args:
        thread: the thread that speaks for a rank (idle).
        after_python_blocks: False: the states that come before the standard library's waits of
            :mod:`hangdbg.stacks.wait_state` (a debugger, a child process, a file lock, a write); True: those
            that come after them (an Event or Condition wait, which a queue or a future also makes).
    """
    py = thread.python_frames
    if after_python_blocks:
        return _event(py)
    return _debugger(py) or _child(thread, py) or _file_lock(thread, py) or _output(thread, py)
