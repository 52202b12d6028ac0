"""Which files ``collect`` takes from a node, and how it opens them: no planted link is followed.

``collect`` often runs as root (to read the kernel log, other users' core files) over directories
other users can write (``/tmp/nccl.*``). A link planted at a matched name (``/tmp/nccl.x ->
/etc/shadow``) must not bring its target into the output, nor another user's file be copied unasked.
So a matched path is taken only when:

- every component below the *root* of its pattern (the directory part before the first glob
  character, which the user named) is a directory and not a link, walked with ``openat(2)`` and
  ``O_NOFOLLOW`` from the root (nothing can be swapped in between);
- the file itself, by ``lstat``, is a regular file and not a link, and the descriptor opened with
  ``O_NOFOLLOW | O_NONBLOCK`` is the same file (``fstat``: device and inode) and still regular;
- it belongs to this user (effective uid), unless ``all_users`` (``collect --all-users``).

Anything else is :class:`Skipped` with the reason, which ``collect`` reports per node (never silently).
"""

from __future__ import annotations

import errno
import glob
import os
import pwd
import stat
from typing import BinaryIO, NamedTuple

__all__ = ["Skipped", "Match", "matches", "open_matched", "pattern_root"]


class Skipped(Exception):
    """A matched path that ``collect`` does not take; ``str(exc)`` says why (one line)."""


class Match(NamedTuple):
    """A path a pattern matched, and the root of that pattern (the part the user named)."""

    path: str
    root: str


def pattern_root(pattern: str) -> str:
    """The directory part of ``pattern`` before its first component with a glob character
    (``/tmp/job/*/nccl.*`` -> ``/tmp/job``; no glob character: the file's directory)."""
    parts = pattern.split(os.sep)
    fixed: list[str] = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    root = os.sep.join(fixed)
    if not root:
        return os.sep if pattern.startswith(os.sep) else "."
    return root


def matches(patterns: tuple[str, ...] | list[str], host: str) -> list[Match]:
    """The entries ``patterns`` match (``{host}`` replaced, ``~`` expanded), sorted, once each:
    anything but a directory (links, also links to directories, and special files are kept, for
    :func:`open_matched` to report as skipped)."""
    found: dict[str, str] = {}
    for pat in patterns:
        pat = os.path.expanduser(pat.replace("{host}", host))
        root = pattern_root(pat)
        for p in sorted(glob.glob(pat, recursive=True)):
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                found.setdefault(p, root)
    return [Match(p, r) for p, r in found.items()]


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def _link(name: str, dfd: int) -> str:
    try:
        return f"a symbolic link to {os.readlink(name, dir_fd=dfd)} (collect follows no link)"
    except OSError:
        return "a symbolic link (collect follows no link)"


def _below(path: str, root: str) -> list[str]:
    rel = os.path.relpath(path, root)
    parts = [p for p in rel.split(os.sep) if p not in ("", ".")]
    if not parts or parts[0] == "..":
        raise Skipped(f"not under {root}")
    return parts


def open_matched(m: Match, all_users: bool = False) -> tuple[BinaryIO, os.stat_result]:
    """Open the matched file ``m`` for reading as the module docstring says.

    Returns:
        the open file (binary, blocking) and its ``fstat``.

    Raises:
        Skipped: a link (the file or a directory below the root), not a regular file, another
            user's file without ``all_users``, replaced while being opened, or not readable (the reason).
    """
    parts = _below(m.path, m.root)
    try:
        dfd = os.open(m.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise Skipped(f"cannot open {m.root}: {exc.strerror or exc}") from None
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Skipped(f"{os.path.join(m.root, *parts[:i + 1])} is {_link(part, dfd)}") from None
                raise Skipped(f"cannot open {os.path.join(m.root, *parts[:i + 1])}: {exc.strerror or exc}") from None
            os.close(dfd)
            dfd = nfd
        return _open_file(parts[-1], dfd, all_users)
    finally:
        os.close(dfd)


def _open_file(name: str, dfd: int, all_users: bool) -> tuple[BinaryIO, os.stat_result]:
    try:
        lst = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError as exc:
        raise Skipped(f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISLNK(lst.st_mode):
        raise Skipped(_link(name, dfd))
    if not stat.S_ISREG(lst.st_mode):
        raise Skipped(f"{_kind(lst.st_mode)}, not a regular file")
    if not all_users and lst.st_uid != os.geteuid():
        raise Skipped(f"another user's file (owner {_owner(lst.st_uid)}); --all-users takes it")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Skipped("replaced by a symbolic link while being opened (collect follows no link)") from None
        raise Skipped(f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (lst.st_dev, lst.st_ino):
            raise Skipped("replaced while being opened")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise
