"""A small torch.distributed (gloo, CPU) training job that hangs in a chosen, known way.

Run under torchrun by ``hangdbg demo`` and by the tests::

    torchrun --nproc_per_node 4 job.py --scenario mismatch --ready DIR

Every rank creates ``DIR/rank-N`` just before the call where it will hang, so the caller knows
when to dump. Scenarios (the odd rank is the last rank unless said otherwise):

- ``mismatch``: at step 2 the odd rank calls ``broadcast`` while the others call ``all_reduce``.
- ``stuck-io``: at step 2 rank 1 blocks opening a FIFO nobody writes (stuck reading a file).
- ``missing``: rank 2 exits before ``init_process_group``; the others wait in rendezvous.
- ``deadlock``: rank 1's main thread and its "data prefetcher" thread take two locks in
  opposite order; the others wait in ``all_reduce``.
- ``behind``: rank 2 repeats step 4 (a retry), so it waits in the same ``all_reduce`` line one
  iteration behind the others (run the dump with ``--locals`` to see it). The steps alternate
  between two groups, so the retry makes rank 2 take them in another order: the flight recorder,
  which this scenario turns on and serves (``topology.serve_debug``), tells rank 2 apart too.
- ``busy``: rank 1 computes forever in pure Python (its stack keeps changing) while the others
  wait in ``all_reduce``.
- ``healthy``: nobody hangs; every rank keeps training (stacks change between samples); with
  ``--exit`` it stops after ``--steps`` and leaves cleanly.
- ``straggler``: as ``healthy``, but the last rank computes ``--slow-factor`` (default 1.3) times as long
  per step as the others (``--step-seconds``, default 0.3 here): slow, not hung.

``--heartbeat DIR`` (or ``HANGDBG_HEARTBEAT_DIR`` in the environment, as ``hangdbg run`` sets it) makes every
rank call :func:`hangdbg.hooks.heartbeat.heartbeat` right before each step's collective and
:func:`~hangdbg.hooks.heartbeat.synced` right after it (``watch --heartbeat DIR``).

``--step-seconds S`` makes each step compute for S seconds first (a slow job); ``--log-steps``
makes rank 0 print ``step N loss X`` after each step (a training log); ``--hang-step`` moves the
``stuck-io`` and ``busy`` hangs. ``HANGDBG_DEMO_DEBUG_SERVER=1`` in the ranks' environment makes every
rank start torch's debug server after ``init_process_group`` (with ``TORCH_FR_BUFFER_SIZE`` set, its
``fr_trace_json`` holds the gloo flight recorder).
- ``extra-collective``: the odd rank calls ``all_reduce`` twice at step 2 (a second call site),
  the others call ``barrier`` next.

Blocked ranks (at step 2 rank 1 blocks on something outside the job while the others wait in ``all_reduce``;
what hangdbg names is :mod:`hangdbg.stacks.blockers`):

- ``pdb``: rank 1 calls ``breakpoint()`` with its stdin a pipe it keeps open and never writes: pdb waits for a command.
- ``child-process``: rank 1 runs ``sleep 1000`` with ``subprocess.run`` and waits for it.
- ``full-pipe``: rank 1's stdout is a pipe whose read end it holds and never reads; it prints until the write blocks.
- ``dead-setter``: rank 1 waits on a ``threading.Event`` whose setter thread died of an exception.
- ``stale-lock``: a helper process takes ``flock`` on ``READY/train.lock``, leaves its descriptor to a ``sleep``
  child and exits; rank 1 then waits in ``fcntl.flock`` on that file (a stale lock: its holder is gone).
- ``stale-filelock``: the same stale lock, waited for with the ``filelock`` package's ``FileLock`` (it polls).
"""

from __future__ import annotations

import argparse
import fcntl
import importlib
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

FR_SCENARIOS = ("behind",)
"""Scenarios that record the flight recorder and serve it (as ``topology.FR_SCENARIOS``)."""

BLOCKED = ("pdb", "child-process", "full-pipe", "dead-setter", "stale-lock", "stale-filelock")
SCENARIOS = ("mismatch", "stuck-io", "missing", "deadlock", "behind", "busy", "healthy", "extra-collective", "straggler",
             *BLOCKED)


def ready(args, rank: int) -> None:
    if args.ready:
        Path(args.ready, f"rank-{rank}").touch()


def compute(x, n=200):
    acc = 0.0
    for i in range(n):
        acc += (x * i) % 7
    return acc


def train_step(dist, torch, t, step, rank, world, args, group=None):
    t.add_(compute(step) * 0)
    if args.scenario == "mismatch" and step == 2:
        ready(args, rank)
        if rank == world - 1:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
        return
    if args.scenario == "extra-collective" and step == 2:
        ready(args, rank)
        if rank == world - 1:
            dist.all_reduce(t)
            dist.all_reduce(t)
        else:
            dist.barrier()
        return
    if args.scenario == "stuck-io" and step == args.hang_step:
        ready(args, rank)
        if rank == 1:
            read_shard(Path(args.ready or ".", "shard-00001.fifo"))
        dist.all_reduce(t)
        return
    if args.scenario in BLOCKED and step == 2:
        if rank == 1:
            block(args.scenario, Path(args.ready or "."), lambda: ready(args, rank))
        else:
            ready(args, rank)
        dist.all_reduce(t)
        return
    if args.scenario == "busy" and step == args.hang_step:
        ready(args, rank)
        if rank == 1:
            while True:
                compute(step, 20000)
        dist.all_reduce(t)
        return
    dist.all_reduce(t, group=group)


def read_shard(path: Path) -> bytes:
    if not path.exists():
        os.mkfifo(path)
    with open(path, "rb") as f:  # blocks in open(2): no writer ever comes
        return f.read()


_KEPT: list[int] = []
"""Descriptors a blocked rank keeps open on purpose (the pipe end nobody uses)."""


def block(scenario: str, workdir: Path, mark) -> None:
    """Rank 1 of a ``BLOCKED`` scenario: call ``mark()`` and block (see the module docstring)."""
    if scenario == "pdb":
        r, w = os.pipe()  # stdin: a pipe this rank keeps open and never writes
        os.dup2(r, 0)
        _KEPT.append(w)
        mark()
        breakpoint()
        return  # pdb stops here
    if scenario == "child-process":
        mark()
        subprocess.run(["sleep", "1000"])
    elif scenario == "full-pipe":
        r, w = os.pipe()  # stdout: a pipe whose read end this rank holds and never reads
        os.dup2(w, 1)
        _KEPT.append(r)
        mark()
        while True:
            print("step log " + "x" * 200)
    elif scenario == "dead-setter":
        loaded = threading.Event()

        def load():
            raise RuntimeError("the loader thread failed before loaded.set()")

        loader = threading.Thread(target=load, name="loader")
        loader.start()
        loader.join()
        mark()
        loaded.wait()
    elif scenario in ("stale-lock", "stale-filelock"):
        path = workdir / "train.lock"
        subprocess.run([sys.executable, "-c", _LOCK_AND_LEAVE, str(path)], check=True)
        if scenario == "stale-filelock":
            from filelock import FileLock

            mark()
            FileLock(str(path)).acquire()
        fd = os.open(path, os.O_RDWR)
        mark()
        fcntl.flock(fd, fcntl.LOCK_EX)


_LOCK_AND_LEAVE = """import fcntl, os, subprocess, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
subprocess.Popen(["sleep", "1000"], pass_fds=(fd,))
"""
"""A process that takes a flock, leaves its descriptor to a child (``sleep``) and exits: the lock stays held."""


def deadlock(args, rank: int) -> None:
    lock_a, lock_b = threading.Lock(), threading.Lock()
    both = threading.Barrier(2)

    def prefetch():
        with lock_b:
            both.wait()
            with lock_a:
                pass

    threading.Thread(target=prefetch, name="data prefetcher", daemon=True).start()
    with lock_a:
        both.wait()
        ready(args, rank)
        with lock_b:
            pass


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=SCENARIOS, default="mismatch")
    ap.add_argument("--ready", default=None, help="directory for the ready markers")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--hang-step", type=int, default=2, help="stuck-io, busy: the step at which rank 1 blocks or spins")
    ap.add_argument("--step-seconds", type=float, default=0.0, help="seconds of computation per step (a slow, healthy job)")
    ap.add_argument("--log-steps", action="store_true", help="rank 0 prints `step N loss X` after every step")
    ap.add_argument("--exit", action="store_true", help="after --steps, leave cleanly (default: wait an hour)")
    ap.add_argument("--heartbeat", default=None, metavar="DIR", help="call hangdbg's heartbeat hook into DIR every step")
    ap.add_argument("--slow-factor", type=float, default=1.3, help="straggler: the last rank's compute, times the others'")
    args = ap.parse_args(argv)

    if args.scenario in FR_SCENARIOS:  # before torch starts: the recorder reads it once
        from hangdbg.demo.topology import FR_BUFFER

        os.environ.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER)
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.scenario == "missing":
        ready(args, rank)
        if rank == 2 % world:
            return  # exits before joining: the others wait in init_process_group
    dist.init_process_group("gloo", timeout=timedelta(hours=2))
    server = None
    if args.scenario in FR_SCENARIOS:
        from hangdbg.demo.topology import serve_debug

        server = serve_debug(dist)  # noqa: F841  (kept alive while the job runs)
    elif os.environ.get("HANGDBG_DEMO_DEBUG_SERVER") == "1":
        try:
            start_debug_server()
        except Exception as exc:  # its optional dependencies (aiohttp, jinja2, tabulate) missing: train without it
            print(f"rank {rank}: torch's debug server did not start: {exc!r}", file=sys.stderr, flush=True)
    t = torch.ones(16)
    groups = [dist.group.WORLD, dist.new_group(list(range(world)))]
    if args.scenario == "deadlock":
        if rank == 1:
            deadlock(args, rank)
        ready(args, rank)  # the others will wait for rank 1 in their first all_reduce
    if args.scenario == "behind":
        train_loop_behind(dist, torch, t, rank, world, args, groups)
        return
    endless = args.scenario in ("healthy", "straggler")
    steps = args.steps if not endless or args.exit else 10**9
    seconds = args.step_seconds or (0.3 if args.scenario == "straggler" else 0.0)
    if args.scenario == "straggler" and rank == world - 1:
        seconds *= args.slow_factor
    beats = args.heartbeat or os.environ.get("HANGDBG_HEARTBEAT_DIR")  # `hangdbg run` sets the variable
    hb = importlib.import_module("hangdbg.hooks.heartbeat") if beats else None
    # a finite run has few steps (--steps, 8 by default): each is written, so that a watcher sees the step
    # time even of a job that hangs within its first second (the hook's default writes at most once a second)
    every = 1.0 if endless else 0.0
    for step in range(steps):
        slow_compute(seconds)
        if hb is not None:
            hb.heartbeat(step, args.heartbeat, min_interval=every)  # arrived at the step's sync point (train_step's all_reduce)
        train_step(dist, torch, t, step, rank, world, args)
        if hb is not None:
            hb.synced()  # the step's collective returned
        if args.log_steps and rank == 0:
            print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
        if endless and step == 3:
            ready(args, rank)
    dist.barrier()
    if args.exit:
        dist.destroy_process_group()
        return
    time.sleep(3600)


def start_debug_server() -> None:
    """``HANGDBG_DEMO_DEBUG_SERVER=1``: start torch's debug server (``torch.distributed.debug.start_debug_server``:
    every rank's worker server on an ephemeral port, its URL in the job's store under ``debug_server/rank{i}``;
    rank 0's frontend on a free port), as a job that opts in does."""
    import socket

    from torch.distributed.debug import start_debug_server as start

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start(port=port)


def slow_compute(seconds: float) -> None:
    """Compute in pure Python for ``seconds`` (the rank is busy, its stack keeps changing)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        compute(1.0, 2000)


def train_loop_behind(dist, torch, t, rank, world, args, groups) -> None:
    step, retried = 0, False
    while step < args.steps:
        if step == 4:
            ready(args, rank)
        train_step(dist, torch, t, step, rank, world, args, group=groups[step % 2])
        if rank == 2 and step == 4 and not retried:
            retried = True  # "loss was nan, retry the step": one all_reduce too many
            continue
        step += 1


if __name__ == "__main__":
    main()
