"""Write a core file of every rank of a stalled job with gdb's ``gcore``, after checking the room.

``gcore -o PREFIX PID`` (gdb's gcore script, gdb/gcore.in) attaches, writes ``PREFIX.PID`` and
detaches: the process goes on running (it is paused while its memory is written). gcore writes
every readable mapping whole, file-backed ones included (gdb 13, measured here: a torch process
with 222 MiB RSS gave a 657 MiB core; its readable mappings summed to 634 MiB), so the estimate
is the sum of the readable mappings' sizes (``/proc/PID/smaps`` through psutil), falling back to
the RSS; the ranks' sum is compared with the free space of the output file system first
(:func:`plan_cores`). A gcore run that times out is killed and the rank sent ``SIGCONT``, so no
rank is left stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..errors import ptrace_remedy
from ..outdir import FILE_MODE, make_dirs
from .procs import RankProcess
from ..tools.subproc import Popen, communicate_or_kill

__all__ = ["CorePlan", "GcoreResult", "plan_cores", "gcore_argv", "write_core", "write_cores", "find_gcore", "human_size", "core_size_estimate"]

HEADROOM = 1.1
"""The cores must fit in the free space with 10 % to spare (RSS is an estimate)."""


@dataclass(frozen=True, slots=True)
class CorePlan:
    """How big the cores will be and whether they fit.

    Attributes:
        needed: bytes, the estimated size of all the cores (see the module docstring).
        free: bytes free on the file system of ``out``.
        fits: ``needed * HEADROOM <= free``.
        per_rank: ``(rank, pid, bytes)`` for each rank (0 when the process is gone).
    """

    needed: int
    free: int
    fits: bool
    per_rank: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class GcoreResult:
    """One rank's core: ``path`` written (None on failure), ``error`` with the fix, ``size`` bytes, ``seconds``."""

    rank: int
    pid: int
    path: str | None
    size: int = 0
    seconds: float = 0.0
    error: str | None = None


def find_gcore() -> str | None:
    """``gcore`` on PATH (it ships with gdb), or None."""
    return shutil.which("gcore")


def core_size_estimate(pid: int) -> int:
    """Bytes gcore will write for ``pid``: its readable mappings (not ``[vvar]``/``[vsyscall]``),
    else its RSS, else 0 when the process is gone."""
    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return 0
    try:
        return sum(m.size for m in proc.memory_maps(grouped=False)
                   if "r" in m.perms and m.path not in ("[vvar]", "[vsyscall]", "[vvar_vclock]"))
    except (psutil.Error, OSError, AttributeError):
        try:
            return proc.memory_info().rss
        except psutil.Error:
            return 0


def plan_cores(ranks: list[RankProcess], out: Path) -> CorePlan:
    """Estimate the cores' size (:func:`core_size_estimate`) and the free space where they go."""
    rows = [(r.rank, r.pid, core_size_estimate(r.pid)) for r in ranks]
    needed = sum(x[2] for x in rows)
    free = shutil.disk_usage(out).free
    return CorePlan(needed, free, needed * HEADROOM <= free, tuple(rows))


def gcore_argv(gcore: str, prefix: Path, pid: int) -> list[str]:
    """``gcore -o PREFIX PID`` (gcore appends ``.PID`` to the prefix)."""
    return [gcore, "-o", str(prefix), str(pid)]


def write_core(rank: RankProcess, out: Path, timeout: float = 300.0, gcore: str | None = None) -> GcoreResult:
    """Write ``OUT/core.rank{R}.{PID}`` of one rank; never raises (``error`` says why).

    A core holds every byte of the rank's memory (tokens, keys, data): gcore runs with umask 077 and
    the core is chmod'ed to :data:`~hangdbg.outdir.FILE_MODE` (0600) after, as systemd-coredump(8)
    keeps cores out of other users' reach; ``OUT`` itself is 0700 (:func:`~hangdbg.outdir.make_dirs`)."""
    prog = gcore or find_gcore()
    if prog is None:
        return GcoreResult(rank.rank, rank.pid, None, error="gcore not found: install gdb (gcore ships with it)")
    prefix = out / f"core.rank{rank.rank}"
    path = Path(f"{prefix}.{rank.pid}")
    t0 = time.monotonic()
    proc = Popen(gcore_argv(prog, prefix, rank.pid), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, umask=0o077)
    got = communicate_or_kill(proc, timeout)
    try:
        os.chmod(path, FILE_MODE)  # gdb honours the umask above; this holds whatever gcore did
    except OSError:
        pass
    if got is None:
        _resume(rank.pid)
        partial = path.is_file()
        path.unlink(missing_ok=True)  # a cut core is of little use and would fill the disk for the rest
        return GcoreResult(rank.rank, rank.pid, None, seconds=time.monotonic() - t0,
                           error=f"gcore took longer than {timeout:g} s and was stopped (the rank was resumed"
                                 + ("; the partial core was removed)" if partial else ")"))
    dt = time.monotonic() - t0
    out_text = got[0].decode("utf-8", "replace")
    low = out_text.lower()
    short = _short_core(path)
    if proc.returncode == 0 and path.is_file() and not short and "no space left" not in low:
        return GcoreResult(rank.rank, rank.pid, str(path), path.stat().st_size, dt)
    if "no space left" in low or short:
        # a cut core fills the disk and is of little use: remove it so the rest of the dump can be written
        path.unlink(missing_ok=True)
        why = (f"no space left on the file system of {out}: the partial core was removed" if "no space left" in low or
               shutil.disk_usage(out).free < 1 << 20 else "gcore wrote a truncated core (removed)")
    elif "operation not permitted" in low or "permission denied" in low:
        why = f"permission denied attaching to pid {rank.pid}; fix: {ptrace_remedy()}"
    elif not psutil.pid_exists(rank.pid):
        why = f"process {rank.pid} is gone"
    else:
        last = [ln for ln in out_text.strip().splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
        why = f"gcore failed (exit status {proc.returncode}): {last[0][:200]}"
    return GcoreResult(rank.rank, rank.pid, None, seconds=dt, error=why)


def _short_core(path: Path) -> bool:
    """True when the core at ``path`` is shorter than its segments say (or unreadable)."""
    from ..evidence.core.elf import CoreFileError, read_core_info

    if not path.is_file():
        return False
    try:
        return read_core_info(str(path)).truncated
    except CoreFileError:
        return True


def human_size(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``; binary units up to TiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        pass


def write_cores(ranks: list[RankProcess], out: Path, timeout: float = 300.0, jobs: int = 2) -> list[GcoreResult]:
    """Write a core of every rank (``jobs`` gcore runs at once), sorted by rank."""
    make_dirs(out)
    prog = find_gcore()
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(ranks) or 1))) as pool:
        results = list(pool.map(lambda r: write_core(r, out, timeout, prog), ranks))
    return sorted(results, key=lambda r: r.rank)
