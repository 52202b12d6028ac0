"""What ``dump`` takes besides py-spy, with no change to the job: the torch debug server's stacks and
flight recorder, and the flight recorder's dump pipe. Each source is bounded by ``--timeout``, told
per rank when absent, and never required: a job without them dumps as before.

* The debug server (:mod:`hangdbg.tools.debug_server`): when the job's TCPStore holds the workers'
  URLs, every rank's ``dump_traceback`` and ``fr_trace_json`` are fetched; each answer is written as it
  arrives to ``OUT/debug_server/rank-NNNN.HANDLER.txt`` (the block format of the debug server's own
  dumps, ``=== Rank N: URL ===`` then the answer: :mod:`hangdbg.stacks.debug_server` reads it), and
  each flight-recorder answer to ``OUT/fr/debug_server_fr_rank_N.json`` (the rank at the end of the
  name, as :func:`hangdbg.evidence.flight_recorder.grammar.rank_from_path` reads it).
* The dump pipe (:mod:`hangdbg.tools.fr_pipe`, NCCL/XCCL only): the dump torch writes is copied to
  ``OUT/fr/pipe_trace_rank_N``.

The work runs in a thread next to py-spy (:func:`start`), so it adds no time to a dump whose sources
answer within py-spy's own time; a rank without ``MASTER_ADDR``/``MASTER_PORT`` and without a pipe
variable costs nothing (no child is started).

Scope: the ranks of this node (``dump``, ``dump --pid``, ``watch``'s stall dump, ``demo``). Not yet
for ``dump --jobid/--hosts``: the coordinator has neither the ranks' environment (``MASTER_ADDR``
is in each node's ``/proc/PID/environ``) nor, in general, a route to the workers' URLs (they carry
the nodes' host names, often resolvable only inside the cluster); the place for it is the agent on
each node (its own ranks), whose ``OUT/debug_server`` and ``OUT/fr`` files would travel back on the
fan-out's file channel like ``raw/``.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping

import psutil

from ..enums import DumpState
from ..evidence.flight_recorder.grammar import FrDump, FrDumpError, load_dump, rank_from_path
from ..model import RankDump, RankProcess
from ..outdir import OutDir
from ..stacks.debug_server import parse_debug_server_dump
from ..sources import RankSource
from ..tools.debug_server import HANDLERS, Fetched, fetch_all, worker_urls
from ..tools.fr_pipe import pipe_path, trigger

__all__ = ["LiveSources", "start", "collect_live", "pyspy_sources", "fill_stacks", "mark_used", "load_fr", "DEBUG_DIR", "FR_DIR"]

DEBUG_DIR = Path("debug_server")
FR_DIR = Path("fr")
_SOURCE = {"dump_traceback": "debug-server-stacks", "fr_trace_json": "debug-server-fr"}


@dataclass
class LiveSources:
    """What the sources gave: per-rank statuses, the stack texts (rank -> ``dump_traceback`` block,
    header included) and the flight-recorder files written under ``OUT/fr`` (the pipe's first)."""

    sources: list[RankSource] = field(default_factory=list)
    stacks: dict[int, str] = field(default_factory=dict)
    fr_files: list[str] = field(default_factory=list)


def _envs(ranks: list[RankProcess]) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for p in ranks:
        try:
            out[p.rank] = psutil.Process(p.pid).environ()
        except (psutil.Error, OSError):
            pass
    return out


def start(ranks: list[RankProcess], out: OutDir | None, timeout: float,
          log: Callable[[str], None] = lambda _m: None) -> "Future[LiveSources]":
    """:func:`collect_live` in a thread; the future's result is its :class:`LiveSources`."""
    def guarded() -> LiveSources:
        try:
            return collect_live(ranks, out, timeout, log)
        except Exception as exc:  # noqa: BLE001 (a source is never required: an unforeseen failure is told, not raised)
            log(f"debug server / FR pipe: {type(exc).__name__}: {exc}")
            return LiveSources([RankSource(p.rank, "debug-server-stacks", "error", f"{type(exc).__name__}: {exc}"[:300])
                                for p in ranks])

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-sources")
    fut = pool.submit(guarded)
    pool.shutdown(wait=False)
    return fut


def collect_live(ranks: list[RankProcess], out: OutDir | None, timeout: float,
                 log: Callable[[str], None] = lambda _m: None) -> LiveSources:
    """The debug server and the dump pipes of ``ranks`` (module docstring), each bounded by
    ``timeout`` seconds; never raises on a source that fails (its rank's status says why)."""
    got = LiveSources()
    envs = _envs(ranks)
    pipes = {p.rank: envs[p.rank] for p in ranks if p.rank in envs and pipe_path(envs[p.rank], p.rank)}
    thread = threading.Thread(target=_pipes, args=(pipes, out, timeout, got, log), name="fr-pipe") if pipes else None
    if thread is not None:
        thread.start()
    _debug_server(ranks, envs, out, timeout, got, log)
    if thread is not None:
        thread.join()
    got.fr_files.sort(key=lambda f: (not os.path.basename(f).startswith("pipe"), f))
    got.sources.sort(key=lambda s: (s.rank, s.source))
    return got


def _debug_server(ranks: list[RankProcess], envs: Mapping[int, Mapping[str, str]], out: OutDir | None,
                  timeout: float, got: LiveSources, log: Callable[[str], None]) -> None:
    """The debug server's part of :func:`collect_live`."""
    probe = next((p for p in ranks if "MASTER_ADDR" in envs.get(p.rank, {}) and "MASTER_PORT" in envs.get(p.rank, {})), None)

    def absent(status: str, detail: str) -> None:
        for p in ranks:
            for h in HANDLERS:
                got.sources.append(RankSource(p.rank, _SOURCE[h], status, detail))

    if probe is None:
        absent("no-server", "no MASTER_ADDR/MASTER_PORT in the ranks' environment: no store to ask")
        return
    world = max([p.world_size or 0 for p in ranks] + [max(p.rank for p in ranks) + 1])
    found = worker_urls(probe.pid, world, timeout)
    if found.error or not found.urls:
        why = found.error or "the job's store holds no debug_server/rank* key: the job runs no debug server"
        log(f"debug server: {why}")
        absent("no-server" if not found.error else "error", why)
        return
    mine = {p.rank: found.urls[p.rank] for p in ranks if p.rank in found.urls}
    for p in ranks:
        if p.rank not in found.urls:
            for h in HANDLERS:
                got.sources.append(RankSource(p.rank, _SOURCE[h], "no-url", f"the store holds no debug_server/rank{p.rank}"))
    log(f"debug server: asking {len(mine)} worker(s) for {', '.join(HANDLERS)}")
    lock = threading.Lock()

    def on_answer(a: Fetched) -> None:
        path = _save(a, out)
        with lock:
            got.sources.append(_status(a, path))
            if a.status == "answered" and a.handler == "dump_traceback":
                got.stacks[a.rank] = f"=== Rank {a.rank}: {a.url}? ===\n{a.text}"
            elif a.status == "answered" and path is not None and a.handler == "fr_trace_json":
                got.fr_files.append(path)

    fetch_all(mine, HANDLERS, timeout, on_answer)


def _status(a: Fetched, path: str | None) -> RankSource:
    status = "ok" if a.status == "answered" else a.status
    detail = a.detail if a.status != "http-error" else f"{a.detail}: {a.text.strip()[:200]}"
    return RankSource(a.rank, _SOURCE[a.handler], status, detail, path)


def _save(a: Fetched, out: OutDir | None) -> str | None:
    """Write one answer (module docstring); the path written, None when nothing was."""
    if out is None:
        return None
    raw = DEBUG_DIR / f"rank-{a.rank:04d}.{a.handler}.txt"
    body = a.text if a.status in ("answered", "http-error") else f"Error: {a.detail}\n"
    out.save_text(raw, f"=== Rank {a.rank}: {a.url}? ===\n{body}")
    if a.status == "answered" and a.handler == "fr_trace_json" and a.text.lstrip().startswith("{"):
        fr = FR_DIR / f"debug_server_fr_rank_{a.rank}.json"
        if out.save_text(fr, a.text):
            return str(out / fr)
    return str(out / raw) if a.handler != "fr_trace_json" else None


def _pipes(envs: Mapping[int, Mapping[str, str]], out: OutDir | None, timeout: float, got: LiveSources,
           log: Callable[[str], None]) -> None:
    """The dump pipe's part of :func:`collect_live`: every rank's pipe at once."""
    log(f"flight recorder: writing to the dump pipe of {len(envs)} rank(s)")
    with ThreadPoolExecutor(max_workers=min(16, len(envs)), thread_name_prefix="fr-pipe") as pool:
        results = list(pool.map(lambda r: trigger(envs[r], r, timeout), sorted(envs)))
    for res in results:
        if res is None:
            continue
        path = None
        if res.path is not None and out is not None:
            dest = FR_DIR / f"pipe_trace_rank_{res.rank}"
            try:
                data = Path(res.path).read_bytes()
            except OSError as exc:
                got.sources.append(RankSource(res.rank, "fr-pipe", "error", f"cannot read {res.path}: {exc.strerror or exc}"))
                continue
            if out.save_bytes(dest, data):
                path = str(out / dest)
                got.fr_files.append(path)
        status = "ok" if res.status == "written" else res.status
        got.sources.append(RankSource(res.rank, "fr-pipe", status, res.detail, path))



def pyspy_sources(dumps: list[RankDump]) -> list[RankSource]:
    """The ``py-spy`` status of each rank of the first round (``denied``: py-spy's ``Permission Denied``,
    diagnosed by :func:`hangdbg.errors.diagnose_pyspy_failure`)."""
    out = []
    for d in dumps:
        if d.threads:
            out.append(RankSource(d.rank, "py-spy", "ok", used=True))
            continue
        err = d.error or ""
        status = "gone" if d.state == DumpState.GONE else "denied" if err.startswith("permission denied") else "unreadable"
        out.append(RankSource(d.rank, "py-spy", status, err.splitlines()[0][:300] if err else ""))
    return out


def fill_stacks(dumps: list[RankDump], live: LiveSources) -> tuple[list[RankDump], set[int]]:
    """``dumps`` with each rank py-spy could not read (no thread, not gone) given the stack of its
    debug server's ``dump_traceback`` (read by :func:`hangdbg.stacks.debug_server.parse_debug_server_dump`;
    ``steps`` gains ``debug-server``); and the ranks so filled."""
    filled: set[int] = set()
    out = []
    for d in dumps:
        text = live.stacks.get(d.rank)
        if d.threads or d.state == DumpState.GONE or text is None:
            out.append(d)
            continue
        parsed = parse_debug_server_dump(text)
        proc = parsed[0][0] if parsed and parsed[0] else None
        if proc is None or not proc.threads:
            out.append(d)
            continue
        filled.add(d.rank)
        out.append(replace(d, threads=proc.threads, samples=(proc.threads,), error=None, state=DumpState.OK,
                           steps=(*d.steps, "debug-server"), sample_times=(time.time(),)))
    return out, filled


def mark_used(sources: list[RankSource], filled: set[int]) -> list[RankSource]:
    """``sources`` with the debug server's stacks marked ``used`` for the ranks :func:`fill_stacks` filled."""
    return [replace(s, used=True) if s.source == "debug-server-stacks" and s.rank in filled and s.status == "ok" else s
            for s in sources]


def load_fr(live: LiveSources) -> tuple[list[FrDump], list[RankSource]]:
    """The flight-recorder dumps written under ``OUT/fr`` (:func:`~hangdbg.evidence.flight_recorder.grammar.load_dump`),
    and an ``unparsed`` status for each file that is no readable dump."""
    dumps, bad = [], []
    for path in live.fr_files:
        try:
            dumps.append(load_dump(path))
        except FrDumpError as exc:
            r = rank_from_path(path)
            src = "fr-pipe" if os.path.basename(path).startswith("pipe") else "debug-server-fr"
            if r is not None:
                bad.append(RankSource(r, src, "unparsed", str(exc)[:300], path))
    return dumps, bad
