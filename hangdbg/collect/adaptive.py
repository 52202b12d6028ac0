"""Adaptive collection: after the first round of ``hangdbg dump``, take what the analysis lacks.

Steps, in order (each recorded in :attr:`hangdbg.model.RankDump.steps` and written to
``OUT/raw/rank-NNNN.sample-K.txt`` with a ``steps=...`` header field, as it arrives):

1. ``retried``: a rank py-spy could not read (``Failed to find a python interpreter`` while it
   starts or exits, a timeout) is dumped once more; ``pystack``: if that fails too, pystack
   reads it (``pystack remote``). A rank that stays unreadable is reported as unknown.
2. ``native`` / ``locals``: the passes :func:`hangdbg.collect.needs.needs` asks for.
3. ``resampled``: more rounds with ``--locals`` when the ranks the others wait for are on CPU (a
   slow step or a hang?): of every rank of small equivalence classes, a few of large ones. With
   a window (:attr:`CollectOptions.window`, ``dump --min-window``; :mod:`hangdbg.stacks.window`)
   the rounds go on, ``RESAMPLE_INTERVAL`` seconds apart and then twice as far each time up to
   ``RESAMPLE_MAX_INTERVAL``, until the analysis no longer says ``still observing`` (a rank
   moved: the job progresses; or the window covers the ranks on CPU: they are named), or the
   window's ``limit`` (``max(--timeout, --min-window)`` after the first sample) has passed.
   Without a window: ``RESAMPLE_ROUNDS`` rounds ``RESAMPLE_INTERVAL`` seconds apart.
0. the op records of ``hangdbg.hooks.record_collectives`` are read (no attach), for jobs that
   opt in: the exact process group, sequence number and peer of each rank's op
   (``OUT/ops.json``);
4. ``/proc`` facts (:func:`hangdbg.collect.proc_facts.proc_facts`) of the ranks blocked outside
   torch.distributed (at most ``PROC_FACTS_MAX``): what blocks them (:mod:`hangdbg.stacks.blockers`);
5. the store keys that store waits name are looked up in the job's store
   (:func:`hangdbg.tools.store.lookup_keys`), saved to ``OUT/store.json``.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Callable

from ..stacks.analysis import analyze
from .needs import needs
from ..model import Analysis, RankDump, RankProcess, Thread
from ..frames import Frame
from ..enums import DumpState, ThreadStatus
from ..stacks.op_record import CurrentOp
from .op_records import read_op_records
from ..tools.pyspy import PySpyResult, run_pyspy
from ..tools.pystack import PystackResult, run_pystack_remote
from ..tools.store import lookup_keys
from ..stacks.window import Window, wants_samples
from .local import RAW, CollectOptions, raw_text, threads_of
from .proc_facts import proc_facts
from ..stacks.blocker_facts import BLOCKED_KINDS
from ..stacks.blockers import lock_path

__all__ = ["adapt", "AdaptResult", "RawSink"]

RESAMPLE_ROUNDS = 2
"""Rounds of step 3 at least (two samples with ``--locals``: loop counters can be compared)."""
RESAMPLE_INTERVAL = 0.5
"""Seconds between the first rounds of step 3."""
RESAMPLE_MAX_INTERVAL = 2.0
"""The longest pause between two rounds of step 3 (a step boundary is found within it: the staggered
ranks of a long-step job spend seconds computing, not milliseconds)."""
DEFAULT_LIMIT = 20.0
"""Seconds step 3 may watch when the window gives no ``limit`` (``dump``'s default ``--timeout``)."""
PROC_FACTS_MAX = 32
"""Blocked ranks whose ``/proc`` facts are read (the first by rank; the others keep what their stack says)."""


@dataclass(frozen=True, slots=True)
class AdaptResult:
    """The dumps after the adaptive steps, the store's answer, the op records, and the analysis of
    them all (the last one the steps made, or one more when a step changed the dumps after it:
    the caller never analyzes again)."""

    dumps: list[RankDump]
    store_keys: dict[str, bool]
    ops: dict[int, CurrentOp]
    """rank -> the op its in-job recorder says it is in (jobs that call
    ``hangdbg.hooks.record_collectives``)."""
    analysis: Analysis


RawSink = Callable[[RankProcess, str, str], None]
"""Called with ``(rank process, file name, raw text)`` for every raw output of the adaptive steps."""


def adapt(ranks: list[RankProcess], dumps: list[RankDump], opts: CollectOptions,
          log: Callable[[str], None] = lambda _m: None, on_raw: RawSink | None = None) -> AdaptResult:
    """Run the adaptive steps (module docstring) on the first round's ``dumps`` of ``ranks``.

    Args:
        ranks: the processes (pids, hosts) of the dumps.
        dumps: the first round, one per rank.
        opts: the first round's options (timeout, executable, out dir).
        log: called with one line per decision (``-v``).
        on_raw: receives every raw output (the node agent sends it to the coordinator); by
            default it is written to ``opts.out/raw`` (when ``opts.out`` is set).
    """
    if on_raw is None:
        out = opts.out

        def on_raw(_p: RankProcess, name: str, text: str) -> None:
            if out is not None:
                out.save_text(RAW / name, text)

    by_rank = {p.rank: p for p in ranks}
    current = {d.rank: d for d in dumps}
    records = read_op_records([p.pid for p in ranks])
    rank_of = {p.pid: p.rank for p in ranks}
    ops = {rank_of[pid]: rec.op for pid, rec in records.items() if rec.op is not None}
    if records:
        log(f"adaptive: op records of {len(records)} rank(s) (hangdbg.hooks.record_collectives)")
        if opts.out is not None:
            opts.out.save_text("ops.json", json.dumps({r: asdict(op) for r, op in sorted(ops.items())}, indent=1) + "\n")
    jobs = max(1, opts.jobs)

    def run(selected: list[int], native: bool, locals_: bool, step: str) -> None:
        popts = replace(opts.pyspy, native=native or opts.pyspy.native, locals=locals_ or opts.pyspy.locals)
        with ThreadPoolExecutor(max_workers=min(jobs, len(selected)) or 1, thread_name_prefix="py-spy") as pool:
            for r, res in zip(selected, pool.map(lambda r: run_pyspy(by_rank[r].pid, popts), selected)):
                current[r] = _add_sample(current[r], by_rank[r], res, step, on_raw, popts.timeout)

    # 1. retry what py-spy could not read, then pystack
    failed = [d.rank for d in dumps if not d.threads and d.state == DumpState.UNREADABLE and d.rank in by_rank]
    if failed:
        log(f"adaptive: retrying py-spy on {len(failed)} unreadable rank(s)")
        time.sleep(0.5)
        run(failed, False, False, "retried")
        still = [r for r in failed if not current[r].threads and current[r].state != DumpState.GONE]
        for r in still:
            log(f"adaptive: pystack remote on rank {r}")
            current[r] = _from_pystack(current[r], by_rank[r], run_pystack_remote(by_rank[r].pid, opts.pyspy.timeout), on_raw)

    def analysis(store_keys: dict[str, bool] | None = None) -> Analysis:
        return analyze(sorted(current.values(), key=lambda d: d.rank), store_keys=store_keys, ops=ops,
                       window=opts.window)

    a = analysis()
    want = needs(a)
    # 2. native and locals passes
    native = sorted(r for r in want.native if r in by_rank and current[r].threads)
    local = sorted(r for r in want.locals if r in by_rank and current[r].threads)
    if native:
        log(f"adaptive: --native --locals pass on {len(native)} rank(s) in an opaque C/C++ call")
        run(native, True, True, "native,locals")
    if local:
        log(f"adaptive: --locals pass on {len(local)} rank(s) in a p2p op or store wait")
        run(local, False, True, "locals")
    if native or local:
        a = analysis()
        want = needs(a)
    changed = False  # since ``a`` was made
    # 3. more samples when the ranks the others wait for are on CPU
    if want.resample:
        readable = [r for r in sorted(want.resample) if r in by_rank and current[r].threads]
        if readable:
            starts = [current[r].sample_times[0] for r in readable if current[r].sample_times]
            a = _observe(readable, lambda: run(readable, False, True, "resampled"), analysis, opts.window,
                         min(starts) if starts else time.time(), log)
    # 4. what /proc says of the ranks blocked outside torch.distributed
    blocked = [r for r, w in sorted(a.waits.items()) if w.kind in BLOCKED_KINDS and r in by_rank and current[r].threads]
    if blocked:
        log(f"adaptive: /proc facts of {min(len(blocked), PROC_FACTS_MAX)} blocked rank(s)")
        for r in blocked[:PROC_FACTS_MAX]:
            frames = tuple(f for t in current[r].threads for f in t.frames)
            current[r] = replace(current[r], proc=proc_facts(by_rank[r].pid, tuple(filter(None, [lock_path(frames)]))))
        changed = True
    # 5. the job's store
    store: dict[str, bool] = {}
    keys = want.store_keys
    if keys:
        probe = next((by_rank[r] for r, w in a.waits.items() if w.keys and r in by_rank), None)
        if probe is not None:
            found = lookup_keys(probe.pid, keys, timeout=min(opts.pyspy.timeout, 30.0))
            under = f" (under the prefix {found.prefix!r})" if found.prefix else ""
            log(f"adaptive: asked the job's store for {len(keys)} key(s): {found.error or 'ok'}{under}")
            store = dict(found.keys)
            changed = changed or bool(store)
            if opts.out is not None:
                opts.out.save_text("store.json", json.dumps({"keys": store, "prefix": found.prefix, "error": found.error}, indent=1) + "\n")
    if changed:
        a = analysis(store)
    return AdaptResult(sorted(current.values(), key=lambda d: d.rank), store, ops, a)


def _observe(ranks: list[int], sample: Callable[[], None], analysis: Callable[[], Analysis], window: Window | None,
             start: float, log: Callable[[str], None]) -> Analysis:
    """Step 3 (module docstring): call ``sample`` (one round of ``ranks``) until ``analysis()`` no longer
    wants samples or the window's limit has passed since ``start`` (Unix seconds, the first sample);
    the analysis of the last round."""
    if window is None:
        log(f"adaptive: {RESAMPLE_ROUNDS} more samples of {len(ranks)} ranks (--locals): a slow step or a hang?")
        for k in range(RESAMPLE_ROUNDS):
            if k:
                time.sleep(RESAMPLE_INTERVAL)
            sample()
        return analysis()
    limit = window.limit if window.limit is not None else max(DEFAULT_LIMIT, window.min_seconds)
    log(f"adaptive: sampling {len(ranks)} ranks (--locals) until one moves or {window.min_seconds:g} s (at most "
        f"{limit:g} s) have passed: a slow step or a hang?")
    pause, k = RESAMPLE_INTERVAL, 0
    while True:
        if k:
            time.sleep(max(0.0, min(pause, start + limit - time.time())))
            pause = min(2 * pause, RESAMPLE_MAX_INTERVAL)
        sample()
        k += 1
        if k < RESAMPLE_ROUNDS:
            continue
        a = analysis()
        elapsed = time.time() - start
        if not wants_samples(a.findings):
            log(f"adaptive: decided after {k} rounds, {elapsed:.1f} s")
            return a
        if elapsed >= limit:
            log(f"adaptive: still observing after {k} rounds, {elapsed:.1f} s: the limit ({limit:g} s) has passed")
            return a


def _add_sample(d: RankDump, p: RankProcess, res: PySpyResult, step: str, on_raw: RawSink,
                timeout: float | None = None) -> RankDump:
    """``d`` with one more sample from ``res`` (its raw text kept first, with the time it returned); a
    failed run keeps ``d`` (a rank found gone is marked so)."""
    k = len(d.samples) + 1 if d.samples else 1
    at = time.time()
    on_raw(p, f"rank-{p.rank:04d}.sample-{k}.txt", raw_text(p, k, res, step, at, d.started))
    threads, state, error, python = threads_of(res, timeout)
    steps = tuple(dict.fromkeys((*d.steps, *step.split(","))))
    if error:
        if state == DumpState.GONE:
            return replace(d, error=error, state=state, steps=steps)
        return d if d.threads else replace(d, error=error, state=state, steps=steps)
    return replace(d, threads=threads, samples=(*d.samples, threads), error=None, state=DumpState.OK,
                   python=python or d.python, steps=steps, sample_times=_times(d, at))


def _times(d: RankDump, at: float) -> tuple[float, ...]:
    """``d``'s sample times with ``at`` added, or none when ``d``'s were not known for every sample."""
    return (*d.sample_times, at) if len(d.sample_times) == len(d.samples) else ()


def _from_pystack(d: RankDump, p: RankProcess, res: PystackResult, on_raw: RawSink) -> RankDump:
    """``d`` read by pystack (Python frames only; the thread holding the GIL is ``active``)."""
    on_raw(p, f"rank-{p.rank:04d}.pystack.json", json.dumps({"threads": res.threads, "error": res.error}))
    if res.error or not res.threads:
        why = res.error or "pystack found no thread"
        return replace(d, error=f"{d.error}; then {why}" if d.error else why, state=DumpState.UNREADABLE,
                       steps=(*d.steps, "pystack"))
    threads = []
    for t in res.threads:
        frames = tuple(Frame(f.get("function") or "?", f.get("file") or "?", f.get("line")) for f in reversed(t["frames"]))
        name = "MainThread" if t.get("tid") == p.pid else None
        threads.append(Thread(int(t.get("tid") or 0), name, ThreadStatus.ACTIVE if t.get("gil") else ThreadStatus.IDLE, frames))
    threads.sort(key=lambda t: t.name != "MainThread")
    got = tuple(threads)
    return replace(d, threads=got, samples=(*d.samples, got), error=None, state=DumpState.OK, python=res.python,
                   steps=(*d.steps, "pystack"), sample_times=_times(d, time.time()))
