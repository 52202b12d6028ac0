"""Collect the stacks of this node's ranks: py-spy on every rank in parallel, raw text to disk.

Each raw dump is written to ``OUT/raw/rank-NNNN[.sample-K].txt`` the moment it arrives, with a
``# hangdbg rank=... pid=... host=... state=...`` header line, so an interrupted run keeps
everything it took and ``hangdbg analyze OUT`` can redo the analysis later (``state``: the
:class:`~hangdbg.enums.DumpState` py-spy's run found, ``gone`` for a process that exited;
``unix``: when the sample was taken and ``started``: when the process started, Unix seconds, the
times of :attr:`~hangdbg.model.RankDump.sample_times` and :attr:`~hangdbg.model.RankDump.started`;
the fan-out's coordinator rebuilds them from these headers).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import psutil

from ..model import RankDump, Thread
from ..stacks.window import Window
from ..enums import DumpState
from ..outdir import OutDir
from ..stacks.pyspy_text import parse_pyspy_dump
from .procs import RankProcess
from ..tools.pyspy import PySpyOptions, PySpyResult, kill_running, run_pyspy

__all__ = ["CollectOptions", "collect", "raw_name", "raw_text", "header_line", "threads_of", "process_start", "RAW"]


@dataclass(frozen=True, slots=True)
class CollectOptions:
    """How to collect.

    Attributes:
        pyspy: options passed to every py-spy run.
        samples: dumps per rank (>= 1).
        interval: seconds between the starts of two sample rounds.
        jobs: py-spy processes run at once (bounded pool).
        out: the run's output directory (raw outputs go to its ``raw/``: :data:`RAW`), or
            ``None`` to keep nothing on disk.
        window: progress before blame (:class:`~hangdbg.stacks.window.Window`): the adaptive
            collection samples ranks on CPU until it is covered; None: two extra samples, as
            before the window existed.
    """

    pyspy: PySpyOptions = PySpyOptions()
    samples: int = 1
    interval: float = 1.0
    jobs: int = 8
    out: OutDir | None = None
    window: Window | None = None


def raw_name(rank: int, sample: int, samples: int) -> str:
    """File name of one raw dump: ``rank-0003.txt``, ``rank-0003.sample-2.txt`` with samples."""
    return f"rank-{rank:04d}.txt" if samples == 1 else f"rank-{rank:04d}.sample-{sample}.txt"


def header_line(p: RankProcess, sample: int, state: DumpState | None = None, at: float | None = None,
                started: float | None = None) -> str:
    """The ``# hangdbg key=value ...`` line that starts every raw file (values without spaces);
    ``state``: how the py-spy run of this file went (left out when None); ``at``: when the sample
    was taken (Unix seconds: ``time`` and ``unix``; now when None); ``started``: when the process
    started (Unix seconds, left out when None)."""
    when = datetime.fromtimestamp(at, timezone.utc) if at is not None else datetime.now(timezone.utc)
    fields = {
        "rank": p.rank,
        "pid": p.pid,
        "host": p.host,
        "local_rank": p.local_rank,
        "world_size": p.world_size,
        "local_world_size": p.local_world_size,
        "rank_source": p.rank_source.replace(" ", "_"),
        "sample": sample,
        "state": state.value if state is not None else None,
        "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "unix": f"{at:.3f}" if at is not None else None,
        "started": f"{started:.3f}" if started is not None else None,
    }
    return "# hangdbg " + " ".join(f"{k}={v}" for k, v in fields.items() if v is not None and v != "")


def raw_text(p: RankProcess, sample: int, res: PySpyResult, steps: str = "", at: float | None = None,
             started: float | None = None) -> str:
    """What is kept of one py-spy run: the header line (with the run's state, its time ``at`` and
    the process's start, Unix seconds, and the adaptive ``steps`` that took it when given),
    hangdbg's diagnosis, py-spy's output."""
    body = res.text if res.text.endswith("\n") or not res.text else res.text + "\n"
    if res.error:
        body = f"Error: {res.error}\n{body}"
    return header_line(p, sample, res.state, at, started) + (f" steps={steps}" if steps else "") + "\n" + body


def process_start(pid: int) -> float | None:
    """When process ``pid`` started, Unix seconds (psutil ``create_time``, from the ``starttime`` field of
    ``/proc/PID/stat``, proc(5)); None when it cannot be read (gone, another namespace)."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


RAW = Path("raw")
"""Where the raw outputs go in an output directory: ``raw/rank-NNNN.txt`` (``raw/HOST/`` for the
fan-out), each written atomically as it arrives (:meth:`hangdbg.outdir.OutDir.save_text`: a dump
that cannot be written is recorded as not saved, never raised)."""


PARSE_FLOOR = 2.0
"""Seconds the parse of one py-spy output may always take, even when py-spy used the budget."""


def threads_of(res: PySpyResult, timeout: float | None = None
               ) -> tuple[tuple[Thread, ...], DumpState, str | None, str | None]:
    """``(threads, state, error, python version)`` of the process ``res.pid`` in one py-spy run
    (the first process when the text names none); a text naming only other pids is an error
    (``unreadable``), a failed run keeps its state (``gone`` or ``unreadable``).

    Args:
        res: the run.
        timeout: the per-rank time budget (``--timeout``, seconds): parsing stops when what py-spy
            left of it (at least ``PARSE_FLOOR``) is spent; ``None``: no limit.
    """
    if res.error:
        return (), res.state, res.error, None
    deadline = None if timeout is None else time.monotonic() + max(PARSE_FLOOR, timeout - res.seconds)
    procs, _garbled = parse_pyspy_dump(res.text, deadline)
    if not procs:
        return (), DumpState.UNREADABLE, "py-spy printed no stack", None
    first = next((p for p in procs if p.pid == res.pid), procs[0])
    if first.pid is not None and first.pid != res.pid:
        # a wrapper or a confused py-spy answering for another process: its stack is not this rank's
        return (), DumpState.UNREADABLE, f"py-spy printed the stacks of pid {first.pid}, not of pid {res.pid}", None
    state = DumpState.OK if first.error is None else DumpState.UNREADABLE
    return first.threads, state, first.error, first.python


def collect(
    ranks: list[RankProcess],
    opts: CollectOptions = CollectOptions(),
    on_result: Callable[[RankProcess, int, PySpyResult], None] | None = None,
) -> list[RankDump]:
    """Dump every rank ``opts.samples`` times, in parallel, and return one RankDump per rank.

    Args:
        ranks: the processes to dump (from :func:`hangdbg.collect.procs.find_ranks`).
        opts: collection options.
        on_result: called in the calling thread after each py-spy run (progress bars).

    A rank whose dump failed keeps its process facts and gets ``error`` and ``state``; the others
    are kept. A rank found gone after a sample was taken is ``gone`` with its samples.
    """
    samples: dict[int, list[tuple[Thread, ...]]] = {p.pid: [] for p in ranks}
    times: dict[int, list[float]] = {p.pid: [] for p in ranks}
    started = {p.pid: process_start(p.pid) for p in ranks}
    errors: dict[int, tuple[DumpState, str] | None] = {p.pid: None for p in ranks}
    pythons: dict[int, str | None] = {p.pid: None for p in ranks}
    gone: dict[int, str] = {}
    workers = max(1, min(opts.jobs, len(ranks)))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="py-spy")
    try:
        for k in range(1, opts.samples + 1):
            round_start = time.monotonic()
            futures = {pool.submit(run_pyspy, p.pid, opts.pyspy): p for p in ranks if errors[p.pid] is None or k == 1}
            for fut in as_completed(futures):
                p = futures[fut]
                res = fut.result()
                at = time.time()  # when the run returned: the stack was read during it
                if opts.out is not None:
                    opts.out.save_text(RAW / raw_name(p.rank, k, opts.samples), raw_text(p, k, res, "", at, started[p.pid]))
                threads, state, error, python = threads_of(res, opts.pyspy.timeout)
                if error:
                    errors[p.pid] = state, error
                    if samples[p.pid] and state == DumpState.GONE:
                        gone[p.pid] = error  # exited between samples: a dead rank, not a stale stack
                else:
                    samples[p.pid].append(threads)
                    times[p.pid].append(at)
                    pythons[p.pid] = python or pythons[p.pid]
                if on_result is not None:
                    on_result(p, k, res)
            if k < opts.samples:
                time.sleep(max(0.0, opts.interval - (time.monotonic() - round_start)))
    except BaseException:
        # Ctrl-C: what arrived is already on disk; do not wait for the py-spy runs still queued
        pool.shutdown(wait=False, cancel_futures=True)
        kill_running()
        raise
    pool.shutdown(wait=True)
    dumps = []
    for p in ranks:
        got = tuple(samples[p.pid])
        failed = errors[p.pid]
        if p.pid in gone:  # found gone after a sample: its samples are kept, the rank is dead
            failed = DumpState.GONE, gone[p.pid]
        elif got:
            failed = None
        state, error = failed if failed is not None else (DumpState.OK, None)
        dumps.append(
            RankDump(
                rank=p.rank,
                pid=p.pid,
                host=p.host,
                local_rank=p.local_rank,
                world_size=p.world_size,
                local_world_size=p.local_world_size,
                threads=got[-1] if got else (),
                samples=got,
                error=error,
                rank_source=p.rank_source,
                cmdline=p.cmdline,
                python=pythons[p.pid],
                state=state,
                sample_times=tuple(times[p.pid]),
                started=started[p.pid],
            )
        )
    return sorted(dumps, key=lambda d: d.rank)
