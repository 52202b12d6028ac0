"""Where the op recorder (:mod:`hangdbg.hooks.recorder`) keeps its files: the default directory of a
user, a private one (``lstat``: a directory, not a link, this user's, writable by no one else), and
the fallback next to it when another user made that name first or planted a link there. Standard
library only.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Mapping

from ._private import is_private_dir, warn

__all__ = ["ENV_DIR", "record_dir", "fallback_dirs"]

ENV_DIR = "HANGDBG_RECORD_DIR"
"""The environment variable naming the record directory."""


def record_dir(env: Mapping[str, str] | None = None, uid: int | None = None) -> Path:
    """The record directory of a process of environment ``env`` (default ``os.environ``) and user
    ``uid`` (default this one): ``$HANGDBG_RECORD_DIR``, else ``/dev/shm/hangdbg-rec-<uid>``, else
    ``<tempdir>/hangdbg-rec-<uid>`` (tempdir: ``TMPDIR``/``TEMP``/``TMP``, :func:`tempfile.gettempdir`)."""
    env = os.environ if env is None else env
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR])
    name = f"hangdbg-rec-{os.getuid() if uid is None else uid}"
    if os.path.isdir("/dev/shm"):
        return Path("/dev/shm", name)
    return Path(env.get("TMPDIR") or env.get("TEMP") or env.get("TMP") or tempfile.gettempdir(), name)


def _make_dir(directory: Path, default: bool) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if default:  # the shared default name: only a private directory of this user (:func:`is_private_dir`)
        why = is_private_dir(str(directory))
        if why is not None:
            raise PermissionError(f"{directory}: not a private directory of uid {os.geteuid()} ({why}); set {ENV_DIR}")
    elif not stat.S_ISDIR(os.lstat(directory).st_mode):
        raise NotADirectoryError(f"{directory}: not a directory")


def fallback_dirs(default: Path) -> list[Path]:
    """The directories a recorder made when ``default`` (``.../hangdbg-rec-<uid>``) was not a private
    directory of its user (another user's, a link): ``default-XXXXXXXX`` next to it, made with
    :func:`tempfile.mkdtemp` (mode 0o700); only those that are private directories of the owner of
    the name's uid are listed (readers: :mod:`hangdbg.collect.op_records`). Never raises."""
    try:
        uid = int(default.name.rsplit("-", 1)[1])
        names = sorted(os.listdir(default.parent))
    except (OSError, ValueError, IndexError):
        return []
    found = []
    for n in names:
        if n.startswith(default.name + "-"):
            try:
                st = os.lstat(default.parent / n)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022:
                found.append(default.parent / n)
    return found


def _private_dir(default: Path) -> Path:
    """``default`` when it is (or could be made) a private directory of this user, else a new one
    next to it (:func:`fallback_dirs`), said on stderr.

    Raises:
        OSError: neither can be made.
    """
    try:
        _make_dir(default, default=True)
        return default
    except OSError as exc:
        why = str(exc)
    made = Path(tempfile.mkdtemp(prefix=default.name + "-", dir=default.parent))
    warn("recorder-dir", f"record_collectives: {why}; recording into {made} instead")
    return made
