"""A healthy torch.distributed (gloo, CPU) job with long, staggered steps: a control that must never be blamed.

Run under torchrun like ``job.py`` (``hangdbg demo long-step`` and the tests do it through ``DemoJob``)::

    torchrun --nproc_per_node 4 long_step.py --scenario long-step --ready DIR --step-seconds 8

- ``long-step`` (4 ranks, control): never hangs; at step S rank R computes ``torch.mm`` (a
  1536 x 1536 product, ~0.1-0.5 s a call, always the same line) for ``--step-seconds`` x
  (1 + (R+S) % world) / world seconds (2, 4, 6 and 8 s by default, the slowest rank rotating),
  then all_reduces, forever. One sample, or a few a second apart, find ranks "stuck" in
  ``torch.mm`` while the others wait in the all_reduce: issue 28's false alarm. Every rank
  creates ``DIR/rank-N`` after step 1. Nobody is a culprit.

A script of its own (not a scenario of ``topology.py``): the recorded stacks of ``tests/fixtures``
name lines of ``topology.py`` and ``job.py``, which must not move.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta
from pathlib import Path

SCENARIOS = ("long-step",)


def ready(args, rank: int) -> None:
    """Tell the caller this rank is in its steady state."""
    if args.ready:
        Path(args.ready, f"rank-{rank}").touch()


def matmul_for(torch, a, seconds: float):
    """Multiply ``a`` by itself until ``seconds`` have passed (on CPU, in ``torch.mm``)."""
    deadline = time.monotonic() + seconds
    c = a
    while time.monotonic() < deadline:
        c = torch.mm(a, a)
    return c


def run_long_step(dist, torch, args, rank: int, world: int) -> None:
    """Each step computes torch.mm for a rank- and step-dependent share of ``--step-seconds`` (the
    slowest rank rotates), then all_reduces, forever."""
    a = torch.rand(1536, 1536)
    t = torch.ones(16)
    step = 0
    while True:
        matmul_for(torch, a, args.step_seconds * (1 + (rank + step) % world) / world)
        dist.all_reduce(t)
        if step == 1:
            ready(args, rank)
        step += 1


def main(argv=None) -> None:
    """Parse the arguments, join the gloo job and run."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=SCENARIOS, default="long-step")
    ap.add_argument("--ready", default=None, help="directory for the ready markers")
    ap.add_argument("--step-seconds", type=float, default=8.0, help="the slowest rank's compute per step (seconds)")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", timeout=timedelta(hours=2))
    run_long_step(dist, torch, args, rank, world)


if __name__ == "__main__":
    main()
