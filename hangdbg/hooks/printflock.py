"""``print`` whose every call reaches the stream whole, even with many processes writing to it.

    from hangdbg.hooks.printflock import printflock as print

Each call formats its whole output first (``sep``/``end`` like ``print``), then takes an exclusive
``fcntl.flock`` on a lock file shared by all processes of the machine, writes the text in one go,
flushes and unlocks. The lock file is ``$HANGDBG_PRINTFLOCK`` or
``<tempdir>/hangdbg-printflock-<uid>.lock``.

flock locks are released when their holder dies, but a *stopped* holder (SIGSTOP, a debugger) keeps
its lock; so the lock is polled (``LOCK_NB``) for at most ``$HANGDBG_PRINTFLOCK_TIMEOUT`` seconds
(default 10) and then the text is printed anyway, without the lock: printing never hangs training.
Works across processes of one host (flock on NFS/Lustre may be local-only or unsupported; an error
taking the lock also falls back to an unlocked write).
"""

from __future__ import annotations

import fcntl
import os
import sys
import tempfile
import threading
import time

__all__ = ["lock_path", "printflock"]

_DEFAULT_TIMEOUT = 10.0
_fd_cache: dict[str, int] = {}
_thread_lock = threading.Lock()  # flock is per open file description: serialise our own threads too


def _after_fork() -> None:  # a fork while another thread printed must not leave the child's lock held
    global _thread_lock
    _thread_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def lock_path() -> str:
    return os.environ.get("HANGDBG_PRINTFLOCK") or os.path.join(
        tempfile.gettempdir(), f"hangdbg-printflock-{os.getuid()}.lock")


def _timeout() -> float:
    try:
        return float(os.environ.get("HANGDBG_PRINTFLOCK_TIMEOUT", _DEFAULT_TIMEOUT))
    except ValueError:
        return _DEFAULT_TIMEOUT


def _lock_fd(path: str) -> int:
    key = f"{os.getpid()}:{path}"  # a forked child must not share the parent's open file description
    fd = _fd_cache.get(key)
    if fd is None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            os.fchmod(fd, 0o666)  # usable by other users if they set HANGDBG_PRINTFLOCK to it
        except OSError:
            pass
        _fd_cache[key] = fd
    return fd


def _acquire(fd: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _write(file, text: str) -> None:
    file.write(text)
    file.flush()


def printflock(*args, sep: str | None = " ", end: str | None = "\n", file=None, flush: bool = False) -> None:
    """Like ``print``, but the whole output of the call is written under a cross-process lock.

    The stream is always flushed (``flush`` is accepted for compatibility with ``print``).
    """
    if file is None:
        file = sys.stdout
        if file is None:  # pythonw / closed stdout, like print
            return
    sep = " " if sep is None else sep
    end = "\n" if end is None else end
    text = sep.join(map(str, args)) + end
    acquired = False
    fd = -1
    with _thread_lock:
        try:
            fd = _lock_fd(lock_path())
            acquired = _acquire(fd, _timeout())
        except OSError:
            acquired = False
        try:
            try:
                file.flush()  # anything buffered earlier must not end up inside someone else's line
            except (AttributeError, ValueError, OSError):
                pass
            _write(file, text)  # always flush: the lock only helps if the bytes leave while we hold it
        finally:
            if acquired:
                fcntl.flock(fd, fcntl.LOCK_UN)
