"""The trace file: created owner-only, never through a planted link (stdlib only)."""

from __future__ import annotations

import os
import sys

__all__ = ["open_trace"]


def open_trace(path: str, flags: int = 0) -> tuple[int, str]:
    """Open ``path`` for the trace: created or truncated, mode 0600, ``O_NOFOLLOW``.

    A link at ``path`` (planted in a shared trace folder by another user) is never followed: the
    trace goes to a new file next to it, ``NAME.XXXXXX`` (``O_EXCL``), and stderr says so.

    Args:
        path: the trace file's path.
        flags: more ``os.open`` flags (``O_CLOEXEC``).

    Returns:
        ``(fd, path)``: the open descriptor (read-write) and the path actually used.

    Raises:
        OSError: the file cannot be made (no such folder, no permission, a full disk).
    """
    base = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | flags
    try:
        return os.open(path, base | os.O_TRUNC, 0o600), path
    except OSError:
        if not os.path.islink(path):  # ELOOP, or EACCES under fs.protected_symlinks
            raise
    fresh = f"{path}.{os.urandom(3).hex()}"
    fd = os.open(fresh, base | os.O_EXCL, 0o600)
    sys.stderr.write(f"tracer: {path} is a link, not followed; tracing into {fresh}\n")
    return fd, fresh
