"""A heartbeat per rank for ``hangdbg watch --heartbeat DIR``: call :func:`heartbeat` once per step,
right before the step's collective (the rank's *arrival* at the sync point), and optionally
:func:`synced` right after it returns.

    from hangdbg.hooks.heartbeat import heartbeat, synced

    for step, batch in enumerate(loader):
        loss = model(batch).backward()      # this rank's own work
        heartbeat(step)                     # arrived at the step's sync point
        optimizer.step()                    # DDP's all-reduce / the step's collective
        synced()                            # optional: the collective returned

Each write replaces ``DIR/heartbeat.rank{R}`` (a temporary file renamed over the old one, so a
reader never sees half a file); at most once per ``min_interval`` seconds (default 1). Its first
line is unchanged since the first version: the wall-clock time in seconds, the step, the pid. The
lines after it (format ``hangdbg-heartbeat 2``) are the ring of the last :data:`RING` steps this
rank reached, one ``s STEP ARRIVE COMPUTE`` line each: ``ARRIVE`` the wall-clock time (Unix
seconds) of the :func:`heartbeat` call of that step, ``COMPUTE`` the seconds from the previous
:func:`synced` to it (the rank's own work in the step), or the ``compute`` the caller measured
itself (``heartbeat(step, compute=seconds)``, e.g. with CUDA events, whose kernels run
asynchronously); ``-`` when neither is known.

Why the arrival: in a synchronous job every rank's step *period* is the same (the collective makes
them wait for each other); a straggler shows in *when* it arrives at the collective (last) and in
how long it computed before it (longest), while the others wait for it. ``hangdbg watch
--straggler-every N`` compares the ranks on exactly that (:mod:`hangdbg.watch.straggler`):
``COMPUTE`` when every rank has it (no clock is compared across nodes), else ``ARRIVE`` (node
clocks must then agree, as NTP/PTP keeps them to milliseconds).

Per step the hook costs two clock reads and a ring append; the file is written at most once per
``min_interval``. ``DIR`` is the ``directory`` argument, else ``$HANGDBG_HEARTBEAT_DIR``, else
``./hangdbg-heartbeat``; it should be on a file system the watcher can read (a shared one when the
watcher runs on a login node). ``R`` is the rank (:func:`hangdbg.hooks.rankinfo.rank_info`), or the
pid when no rank is known. The watcher times changes of the files with its own clock for the stall
decision (node clocks may differ). Never raises: a heartbeat that cannot be written is skipped
(training goes on) and said once on stderr. ``DIR`` is created with mode 0o700; an existing one (and
a link at its name) must be this user's: another user's directory, or a link another user planted
there, is never written into. Each write makes a new temporary file of a random name with
``O_EXCL | O_NOFOLLOW`` (nothing planted at a temporary name is followed or overwritten) and renames
it over the file. Standard library only.
"""

from __future__ import annotations

import os
import stat
import time
from collections import deque

from ._private import fresh_temp, warn
from .rankinfo import rank_info

__all__ = ["heartbeat", "synced", "heartbeat_path", "DEFAULT_DIR", "ENV_DIR", "RING", "FORMAT_LINE"]

ENV_DIR = "HANGDBG_HEARTBEAT_DIR"
DEFAULT_DIR = "hangdbg-heartbeat"
RING = 64
"""Steps kept in the file's ring (a few KiB)."""
FORMAT_LINE = "# hangdbg-heartbeat 2: s STEP ARRIVE_UNIX COMPUTE_SECONDS"
"""The second line of a heartbeat file that carries the step ring."""
_last: dict[str, float] = {}
_ring: dict[str, deque[tuple[int, float, float | None]]] = {}
_synced_at: list[float | None] = [None]


def heartbeat_path(directory: str | None = None) -> str:
    """The file this process beats into (see the module docstring)."""
    d = directory or os.environ.get(ENV_DIR) or DEFAULT_DIR
    rank = rank_info().rank
    return os.path.join(d, f"heartbeat.rank{rank}" if rank is not None else f"heartbeat.pid{os.getpid()}")


def synced() -> None:
    """Mark that this step's collective returned (the start of the next step's own work): the next
    :func:`heartbeat` records the seconds since as that step's compute time. Never raises."""
    _synced_at[0] = time.monotonic()


def heartbeat(step: int | None = None, directory: str | None = None, min_interval: float = 1.0,
              compute: float | None = None) -> bool:
    """Record that this rank reached ``step``'s sync point (see the module docstring).

    Args:
        step: the training step (int); None records progress without a step (no ring entry).
        directory: where to write; default ``$HANGDBG_HEARTBEAT_DIR`` or ``./hangdbg-heartbeat``.
        min_interval: seconds; a call closer than this to the last write only records the step in
            memory (written with the next write).
        compute: seconds this rank computed in this step before its sync point, measured by the
            caller (e.g. CUDA events around forward/backward); default: since the last :func:`synced`.

    Returns:
        True when the file was written by this call.
    """
    path = heartbeat_path(directory)
    now, wall = time.monotonic(), time.time()
    if step is not None:
        since = _synced_at[0]
        if compute is None and since is not None:
            compute = max(0.0, now - since)
        ring = _ring.setdefault(path, deque(maxlen=RING))
        ring.append((int(step), wall, None if compute is None else float(compute)))
    if now - _last.get(path, -1e18) < min_interval:
        return False
    _last[path] = now
    return _write(path, wall, step)


def _write(path: str, wall: float, step: int | None) -> bool:
    lines = [f"{wall:.3f} {'' if step is None else step} {os.getpid()}"]
    ring = _ring.get(path)
    if ring:
        lines.append(FORMAT_LINE)
        lines += [f"s {s} {t:.4f} {'-' if c is None else format(c, '.4f')}" for s, t, c in ring]
    directory = os.path.dirname(path) or "."
    why = _not_ours(directory)
    if why:
        warn("heartbeat-dir:" + directory, f"heartbeat not written: {directory} is {why} (another user's directory or "
             f"link is never written into); step {step} reached at {wall:.3f}; training goes on")
        return False
    tmp = ""
    try:
        tmp, fd = fresh_temp(path)  # O_EXCL | O_NOFOLLOW, a random name: nothing planted is written into
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)  # a link at ``path`` is replaced, not followed
    except OSError as exc:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        warn("heartbeat-write:" + directory, f"heartbeat not written into {directory}: {exc.strerror or exc}; "
             f"step {step} reached at {wall:.3f}; training goes on")
        return False
    return True


def _not_ours(directory: str) -> str:
    """Why the heartbeat must not be written into ``directory`` ("" when it may): it is created
    (mode 0o700) when missing; an existing one, and a symbolic link there (this user's own link is
    followed), must be this user's (effective uid)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        lst, st = os.lstat(directory), os.stat(directory)
    except OSError as exc:
        return f"not usable ({exc.strerror or exc})"
    me = os.geteuid()
    if lst.st_uid != me:
        return f"{'a link' if stat.S_ISLNK(lst.st_mode) else 'a directory'} of uid {lst.st_uid}"
    if st.st_uid != me:
        return f"a link to a directory of uid {st.st_uid}"
    return ""
