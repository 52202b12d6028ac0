"""A heartbeat per rank for ``hangdbg watch --heartbeat DIR``: call :func:`heartbeat` once per step.

    from hangdbg.hooks.heartbeat import heartbeat

    for step, batch in enumerate(loader):
        ...
        heartbeat(step)

Each call writes ``DIR/heartbeat.rank{R}`` (one line: the wall-clock time in seconds, the step,
the pid) by writing a temporary file and renaming it over the old one, so a reader never sees half
a line; at most once per ``min_interval`` seconds (default 1), so a fast loop costs one
``time.monotonic()`` per step. ``DIR`` is the ``directory`` argument, else ``$HANGDBG_HEARTBEAT_DIR``,
else ``./hangdbg-heartbeat``; it should be on a file system the watcher can read (a shared one
when the watcher runs on a login node). ``R`` is the rank (:func:`hangdbg.hooks.rankinfo.rank_info`),
or the pid when no rank is known. The watcher times changes of the files with its own clock (node
clocks may differ). Never raises: a heartbeat that cannot be written is skipped (training goes on).
"""

from __future__ import annotations

import os
import time

from .rankinfo import rank_info

__all__ = ["heartbeat", "heartbeat_path", "DEFAULT_DIR", "ENV_DIR"]

ENV_DIR = "HANGDBG_HEARTBEAT_DIR"
DEFAULT_DIR = "hangdbg-heartbeat"
_last: dict[str, float] = {}


def heartbeat_path(directory: str | None = None) -> str:
    """The file this process beats into (see the module docstring)."""
    d = directory or os.environ.get(ENV_DIR) or DEFAULT_DIR
    rank = rank_info().rank
    return os.path.join(d, f"heartbeat.rank{rank}" if rank is not None else f"heartbeat.pid{os.getpid()}")


def heartbeat(step: int | None = None, directory: str | None = None, min_interval: float = 1.0) -> bool:
    """Record that this rank made progress (see the module docstring).

    Args:
        step: the training step (written into the file, for people reading it), or None.
        directory: where to write; default ``$HANGDBG_HEARTBEAT_DIR`` or ``./hangdbg-heartbeat``.
        min_interval: seconds; calls closer together than this to the last write do nothing.

    Returns:
        True when the file was written by this call.
    """
    path = heartbeat_path(directory)
    now = time.monotonic()
    if now - _last.get(path, -1e18) < min_interval:
        return False
    _last[path] = now
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(tmp, "w") as f:
            f.write(f"{time.time():.3f} {'' if step is None else step} {os.getpid()}\n")
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True
