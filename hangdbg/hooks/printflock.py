"""``print`` whose every call reaches the stream whole, even with many processes writing to it.

    from hangdbg.hooks.printflock import printflock as print

Each call formats its whole output first (``sep``/``end`` like ``print``), then takes an exclusive
``fcntl.flock`` on a lock file shared by all processes of the machine, writes the text in one go,
flushes and unlocks. The lock file is ``$HANGDBG_PRINTFLOCK`` or
``<tempdir>/hangdbg-<uid>/printflock.lock``, in a directory of this user only (mode 0o700, checked
with ``lstat``: this user's, not a link; ``$XDG_RUNTIME_DIR/hangdbg`` when that one is another
user's or a link). The lock file is made with ``O_EXCL | O_NOFOLLOW`` (mode 0o600) or, made
already, opened with ``O_NOFOLLOW`` and used only when it is a regular file of this user (any
regular file for ``$HANGDBG_PRINTFLOCK``, a path the user chose); it is never ``chmod``-ed. A
``flock`` needs no write permission, so other users sharing ``$HANGDBG_PRINTFLOCK`` may lock a file
they can only read. When no safe lock file can be had, the text is printed without the lock and
stderr says why once.

flock locks are released when their holder dies, but a *stopped* holder (SIGSTOP, a debugger) keeps
its lock; so the lock is polled (``LOCK_NB``) for at most ``$HANGDBG_PRINTFLOCK_TIMEOUT`` seconds
(default 10) and then the text is printed anyway, without the lock: printing never hangs training.
Works across processes of one host (flock on NFS/Lustre may be local-only or unsupported; an error
taking the lock also falls back to an unlocked write).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import tempfile
import threading
import time

from ._private import create_excl, private_dir, warn

__all__ = ["lock_path", "printflock"]

_DEFAULT_TIMEOUT = 10.0
_fd_cache: dict[str, int] = {}
_path_cache: dict[tuple[int, str, str | None], str] = {}
_thread_lock = threading.Lock()  # flock is per open file description: serialise our own threads too


def _after_fork() -> None:  # a fork while another thread printed must not leave the child's lock held
    global _thread_lock
    _thread_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def lock_path() -> str:
    """The lock file (see the module docstring); ``""`` when no private directory could be had."""
    explicit = os.environ.get("HANGDBG_PRINTFLOCK")
    if explicit:
        return explicit
    key = (os.getpid(), tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR"))
    if key not in _path_cache:
        _path_cache[key] = _default_path()
    return _path_cache[key]


def _default_path() -> str:
    candidates = [os.path.join(tempfile.gettempdir(), f"hangdbg-{os.geteuid()}")]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        candidates.append(os.path.join(runtime, "hangdbg"))
    d, reasons = private_dir(candidates)
    if d is None:
        warn("printflock-dir", "printflock prints without its lock: no private directory for the lock file ("
             + "; ".join(reasons) + "); set HANGDBG_PRINTFLOCK=FILE")
        return ""
    return os.path.join(d, "printflock.lock")


def _timeout() -> float:
    try:
        return float(os.environ.get("HANGDBG_PRINTFLOCK_TIMEOUT", _DEFAULT_TIMEOUT))
    except ValueError:
        return _DEFAULT_TIMEOUT


def _lock_fd(path: str) -> int:
    """The descriptor to ``flock`` for ``path`` (one per process and path).

    Raises:
        OSError: ``path`` is empty (no private directory), cannot be made or opened, is a link (ELOOP),
            not a regular file, or (the default one) another user's file.
    """
    if not path:
        raise OSError(errno.ENOENT, "no lock file")
    key = f"{os.getpid()}:{path}"  # a forked child must not share the parent's open file description
    fd = _fd_cache.get(key)
    if fd is None:
        try:
            fd = create_excl(path, 0o644 if os.environ.get("HANGDBG_PRINTFLOCK") else 0o600, os.O_RDONLY)
        except FileExistsError:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise OSError(errno.EINVAL, f"{path} is not a regular file")
                if not os.environ.get("HANGDBG_PRINTFLOCK") and st.st_uid != os.geteuid():
                    raise OSError(errno.EPERM, f"{path} belongs to uid {st.st_uid}")
            except BaseException:
                os.close(fd)
                raise
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
        path = ""
        try:
            path = lock_path()
            fd = _lock_fd(path)
            acquired = _acquire(fd, _timeout())
        except OSError as exc:
            acquired = False
            if path:
                warn("printflock:" + path, f"printflock prints without its lock: {path}: {exc.strerror or exc}")
        try:
            try:
                file.flush()  # anything buffered earlier must not end up inside someone else's line
            except (AttributeError, ValueError, OSError):
                pass
            _write(file, text)  # always flush: the lock only helps if the bytes leave while we hold it
        finally:
            if acquired:
                fcntl.flock(fd, fcntl.LOCK_UN)
