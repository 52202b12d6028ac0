"""Read the op records of live ranks (:func:`hangdbg.hooks.record_collectives`) by pid.

Each recording rank keeps ``<dir>/<pid>.json`` (format: :mod:`hangdbg.stacks.op_record`). The
directory of a rank is the ``directory`` given, else (:func:`record_path`) the first that has the
file of: the ``HANGDBG_RECORD_DIR`` of the process's start environment (``/proc/<pid>/environ``;
a variable set by the script at run time is not there), the ``HANGDBG_RECORD_DIR`` of this
process, the default of :func:`hangdbg.hooks.recorder.record_dir` for the process's owner
(``/dev/shm/hangdbg-rec-<uid>``, or the ``hangdbg-rec-<uid>-XXXXXXXX`` a rank made next to it when that
name was another user's). Reader and ranks must share the pid and mount namespaces (same
node, same container).

A record is left out when its file is missing, unreadable, too large, torn on every one of a few
reads, garbled, of another pid, or stale: a rank holds an exclusive ``flock`` on its file while it
lives, so a file nobody holds belongs to a dead process (a killed rank, a reused pid). On a
filesystem without ``flock`` staleness cannot be told and the record is kept.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Iterable

import psutil

from ..hooks.record_dir import ENV_DIR, fallback_dirs, record_dir
from ..stacks.op_record import OpRecord, parse_op_record

__all__ = ["read_op_records", "record_path"]

MAX_BYTES = 16 << 20
"""Larger files are not records (the recorder grows past 4096 bytes only for huge groups)."""
TRIES = 5


def _candidates(pid: int) -> list[Path]:
    try:
        env = psutil.Process(pid).environ()
    except psutil.Error:
        env = {}
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        uid = os.getuid()
    dirs = [Path(d) for d in (env.get(ENV_DIR), os.environ.get(ENV_DIR)) if d]
    default = record_dir({}, uid)
    dirs += [*fallback_dirs(default), default]  # a fallback exists only when the default was someone else's
    return [d / f"{pid}.json" for d in dict.fromkeys(dirs)]


def record_path(pid: int, directory: str | None = None) -> Path:
    """Where the rank ``pid`` (int) keeps its record: ``<directory>/<pid>.json`` when a directory
    (str) is given; else the first that exists of: the directory of the ``HANGDBG_RECORD_DIR`` of
    the process's start environment, the one of this process's environment, the fallback directories
    of the process's owner (:func:`hangdbg.hooks.record_dir.fallback_dirs`) and its default directory (that last one when none exists). Never raises."""
    if directory:
        return Path(directory, f"{pid}.json")
    paths = _candidates(pid)
    return next((p for p in paths if p.exists()), paths[-1])


def _stale(fd: int) -> bool:
    """Nobody holds the file's lock: its writer is dead."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # held (EWOULDBLOCK), or no flock on this filesystem: cannot tell, keep it
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _read_one(path: Path, pid: int) -> OpRecord | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if _stale(fd):
            return None
        for attempt in range(TRIES):
            size = os.fstat(fd).st_size
            if size > MAX_BYTES:
                return None
            data = os.pread(fd, size, 0)  # one copy, front to back: the writer's order makes gen == end whole
            record = parse_op_record(data.decode("utf-8", errors="replace"))
            if record is not None:
                return record if record.pid == pid else None  # another pid's record: not this rank's
            time.sleep(0.001 * (attempt + 1))
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def read_op_records(pids: Iterable[int], directory: str | None = None) -> dict[int, OpRecord]:
    """The current op records of the processes ``pids`` (ints), by pid.

    Args:
        pids: the ranks' process ids (as this process sees them).
        directory (str | None): the directory of the records; default: each process's own (see the
            module docstring).

    Returns:
        ``{pid: OpRecord}`` for the pids with a live, whole record; the others are absent. Never
        raises for a file's content, absence or permissions.
    """
    out: dict[int, OpRecord] = {}
    for pid in pids:
        record = _read_one(record_path(pid, directory), pid)
        if record is not None:
            out[pid] = record
    return out
