"""torch.distributed (gloo, CPU) jobs hung by something inside one rank's process, not by a rank's main thread.

Run under torchrun like ``job.py`` (``hangdbg demo`` and the tests do it through ``DemoJob``)::

    torchrun --nproc_per_node 4 in_process.py --scenario gil-thread --ready DIR

Every rank creates ``DIR/rank-N`` when it reaches the step where the job hangs (step 2). The truth
of each scenario (4 ranks):

- ``gil-thread``: every rank runs a ``log filter`` thread that waits on a queue for log lines and
  matches each with a regular expression. At step 2 rank 1's main thread enters its ``all_reduce``
  and hands its filter a line on which the expression backtracks for ever (catastrophic
  backtracking: ``re`` matches in C and never lets go of the GIL). The others join that
  ``all_reduce`` a second later, so it completes, but rank 1's main thread cannot take the GIL
  back to return from it: it sits on the same line as the others, who wait in the next step's
  ``all_reduce``. Culprit {1}: its ``log filter`` thread holds the GIL. Rank 1 creates its marker
  at step 2, the others at step 3 (when the hang is in place).
- ``pickle-gather``: at step 2 every rank shares its shard's metadata with ``all_gather_object``;
  rank 2's metadata holds a remote handle whose ``__reduce__`` fetches its state over a socket
  that never answers. Culprit {2}, still pickling; the others wait in the all_gather of sizes.
- ``pickle-broadcast``: at step 2 rank 1 broadcasts a config with ``broadcast_object_list``
  (``src=1``); the config holds such a remote handle. Culprit {1}; the others wait in the
  broadcast of sizes.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

SCENARIOS = ("gil-thread", "pickle-gather", "pickle-broadcast")
HANG_STEP = 2

_PATTERN = re.compile(r"^(\w+\s?)+$")
"""A log filter with nested quantifiers: on a long line of words that ends in a non-word character
the match backtracks through every split of the words (exponential time, inside ``re``'s C code)."""
_BAD_LINE = "warning " + "word " * 30 + "!"


def ready(args, rank: int) -> None:
    """Tell the caller this rank reached the step where it hangs."""
    if args.ready:
        Path(args.ready, f"rank-{rank}").touch()


def compute(x, n=200):
    """A little pure-Python work."""
    acc = 0.0
    for i in range(n):
        acc += (x * i) % 7
    return acc


def filter_logs(lines: "queue.Queue[str]", kept: list) -> None:
    """The ``log filter`` thread: keep the lines the pattern matches."""
    while True:
        line = lines.get()
        if _PATTERN.match(line):
            kept.append(line)


def run_gil_thread(dist, torch, args, rank: int, world: int) -> None:
    """Train with a log filter thread on every rank; rank 1's gets a line it never finishes matching."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=filter_logs, args=(lines, []), name="log filter", daemon=True).start()
    t = torch.ones(16)
    for step in range(args.steps):
        t.add_(compute(step) * 0)
        lines.put(f"step {step} ok")
        if step == HANG_STEP and rank == 1 % world:
            ready(args, rank)
            threading.Timer(0.5, lines.put, (_BAD_LINE,)).start()  # while this rank waits in the all_reduce
        elif step == HANG_STEP:
            time.sleep(1.5)  # the others come late to this all_reduce
        elif step == HANG_STEP + 1:
            ready(args, rank)  # rank 1 finished step 2's all_reduce with them, 1 s after its filter took the GIL
        dist.all_reduce(t)


class RemoteHandle:
    """A handle on state another service holds: pickling it fetches the state first."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def __reduce__(self):
        state = self.sock.recv(1 << 16)  # the service never answers
        return (bytes, (state,))


def metadata(rank: int, world: int, hang_rank: int, keep: list) -> dict:
    """This rank's metadata; the hanging rank's holds a remote handle whose service never answers."""
    meta: dict = {"rank": rank, "world": world, "shard": f"shard-{rank:05d}"}
    if rank == hang_rank:
        mine, theirs = socket.socketpair()
        keep.append(theirs)  # kept open and silent
        meta["handle"] = RemoteHandle(mine)
    return meta


def run_pickle_gather(dist, torch, args, rank: int, world: int) -> None:
    """all_reduce steps; at step 2 every rank shares its metadata with all_gather_object."""
    t, keep = torch.ones(16), list[socket.socket]()
    for step in range(args.steps):
        dist.all_reduce(t)
        if step == HANG_STEP:
            ready(args, rank)
            gathered: list = [None] * world
            dist.all_gather_object(gathered, metadata(rank, world, 2 % world, keep))


def run_pickle_broadcast(dist, torch, args, rank: int, world: int) -> None:
    """all_reduce steps; at step 2 rank 1 broadcasts its config with broadcast_object_list."""
    t, keep, src = torch.ones(16), list[socket.socket](), 1 % world
    for step in range(args.steps):
        dist.all_reduce(t)
        if step == HANG_STEP:
            ready(args, rank)
            config = [metadata(rank, world, src, keep) if rank == src else None]
            dist.broadcast_object_list(config, src=src)


RUNNERS = {"gil-thread": run_gil_thread, "pickle-gather": run_pickle_gather, "pickle-broadcast": run_pickle_broadcast}


def main(argv=None) -> None:
    """Parse the arguments, join the gloo job and run the scenario."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=SCENARIOS, default="gil-thread")
    ap.add_argument("--ready", default=None, help="directory for the ready markers")
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", timeout=timedelta(hours=2))
    RUNNERS[args.scenario](dist, torch, args, rank, world)
    dist.barrier()
    time.sleep(3600)


if __name__ == "__main__":
    main()
