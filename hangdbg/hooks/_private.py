"""Per-user directories and fresh files for the in-model helpers (standard library only).

The helpers run inside the training process, often as root or as the job's user on a node shared
with others, and write into shared places (``/tmp``, ``/dev/shm``, a shared heartbeat directory).
Another user can plant a link or a file of theirs at a name a helper is going to use. So:

- a helper's default directory is a *private* one: a directory (``lstat``: not a link) owned by
  this user (the effective uid) and writable by no one else (mode without ``0o022``), created with
  mode ``0o700`` when missing; :func:`private_dir` tells which of some candidates is one, making
  the first that is missing;
- a file is made with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (:func:`create_excl`): never through a
  link, never into a file that was there before, never ``chmod``-ed afterwards;
- what cannot be written is said once on stderr (:func:`warn`) and the training goes on.
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
import threading

__all__ = ["is_private_dir", "private_dir", "create_excl", "fresh_temp", "warn"]

_warned: set[str] = set()
_warn_lock = threading.Lock()


def warn(key: str, text: str) -> None:
    """Print ``hangdbg: TEXT`` on stderr, once per ``key`` per process. Never raises."""
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    try:
        print(f"hangdbg: {text}", file=sys.stderr, flush=True)
    except Exception:  # a closed or broken stderr must not stop the training  # noqa: BLE001
        pass


def is_private_dir(path: str) -> str | None:
    """Why ``path`` is not a private directory of this user (see the module docstring), or None when it is.

    The check is ``lstat``: a symbolic link is never one, whatever it points to."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not {os.geteuid()}"
    if st.st_mode & 0o022:
        return f"writable by others (mode {st.st_mode & 0o777:o})"
    return None


def private_dir(candidates: list[str]) -> tuple[str | None, list[str]]:
    """The first of ``candidates`` that is (or, missing, could be made: ``mkdir`` mode 0o700, parents
    as :func:`os.makedirs` makes them) a private directory of this user.

    Returns:
        ``(directory or None, reasons)``: ``reasons`` says, one line each, why the candidates before
        it were refused (another user's directory, a link, a file in the way...). Never raises.
    """
    reasons = []
    for d in candidates:
        try:
            parent = os.path.dirname(d.rstrip("/"))
            if parent and not os.path.isdir(parent):
                os.makedirs(parent, exist_ok=True)
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            reasons.append(f"{d}: cannot create it: {exc.strerror or exc}")
            continue
        why = is_private_dir(d)
        if why is None:
            return d, reasons
        reasons.append(f"{d}: {why}")
    return None, reasons


def create_excl(path: str, mode: int = 0o600, flags: int = os.O_WRONLY) -> int:
    """A new file at ``path`` (``O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC``, ``flags`` added; ``mode``
    narrowed by the umask): its descriptor.

    Raises:
        FileExistsError: something (a file, a link, anything) is at ``path`` already.
        OSError: as :func:`os.open`.
    """
    return os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def fresh_temp(path: str, mode: int = 0o600) -> tuple[str, int]:
    """A new temporary file next to ``path`` (``PATH.PID.RANDOM.tmp``, :func:`create_excl`) for a
    write-then-rename: its name and descriptor (open for writing). A name taken already (a file or
    link someone planted) is left alone and another random one is tried.

    Raises:
        OSError: it cannot be created (no permission, read-only, full; after 16 names taken).
    """
    for _ in range(16):
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            return tmp, create_excl(tmp, mode)
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free temporary name")
