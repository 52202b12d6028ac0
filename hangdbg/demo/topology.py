"""torch.distributed (gloo, CPU) jobs whose hang has structure: groups, pipelines, p2p, stores.

Run under torchrun like ``job.py`` (``hangdbg demo`` and the tests do it through ``DemoJob``)::

    torchrun --nproc_per_node 8 topology.py --scenario tp-dp --ready DIR

Every rank creates ``DIR/rank-N`` when it enters the step where the job hangs (step 2), so the
caller knows when to dump. The truth of each scenario, at its default size:

- ``tp-dp`` (8 ranks): process groups {0-3} and {4-7}; each step does a group ``all_reduce``
  then a world ``all_reduce`` (two lines of ``train_step``). At step 2 rank 5 blocks in
  ``load_shard`` (opening a FIFO nobody writes) before its group all_reduce. Culprit {5};
  ranks 4,6,7 wait for it in the group all_reduce; ranks 0-3 wait in the world all_reduce.
- ``pipeline`` (4 ranks = 4 stages): per step, 4 micro-batches; stage k ``recv``s from k-1 and
  ``send``s to k+1, then every rank syncs the loss with a world ``all_reduce``. At step 2 stage 1
  skips its send of the last micro-batch. Culprit {1}; rank 2 waits in ``recv(src=1)``, rank 3
  in ``recv(src=2)``; ranks 0 and 1 wait in the loss all_reduce.
- ``p2p-ring`` (4 ranks): each step every rank ``isend``s to rank+1 and ``irecv``s from rank-1,
  waits both requests, then a world ``all_reduce``. At step 2 rank 2 posts its irecv from rank
  3 (the wrong neighbour). Culprit {2}; rank 2 waits its irecv (``src`` = 3); rank 1 waits its
  isend (``dst`` = 2: gloo sends only into a posted receive); ranks 0 and 3 finished both
  requests and wait in the all_reduce.
- ``p2p-ring-steps`` (4 ranks): the same ring with no collective between steps (the next step's
  exchange starts at once). At step 2 rank 2 posts its irecv from rank 3. Culprit {2}; rank 2
  waits its irecv from 3 (step 2) while rank 1 waits its isend to 2 (step 2); rank 3 finished
  step 2 and waits its irecv from 2 of step 3 (so ranks 2 and 3 receive from each other, a cycle
  rank 2's wrong peer made); rank 0 waits its isend to 1 of step 3 (rank 1 is a step behind it
  because it waits).
- ``store-barrier`` (4 ranks): a hand-made barrier on the job's TCPStore (a client of the store
  torchrun's agent hosts at MASTER_ADDR:MASTER_PORT, keys ``step2/done/R`` at its root). At step 2
  every rank but 3 sets its key; rank 0 then waits for all keys in ``store_barrier``; ranks 1-3
  go on to the world all_reduce. Culprit {3} (it never set its key, although it waits in the
  all_reduce like 1 and 2); rank 0 waits on the store for ``step2/done/3``; 1,2,3 wait in the
  all_reduce for rank 0.
- ``store-barrier-default`` (4 ranks): the same barrier on the job's *default* store, the one
  ``init_process_group`` made (``torch.distributed.distributed_c10d._get_default_store()``): its
  keys live in the TCPStore under the prefixes the default store adds (``default_pg/0//step2/done/R``
  in torch 2.x: ``PrefixStore("default_pg", ...)`` in ``init_process_group``, then the group's
  ``PrefixStore(f"{group_name}/", ...)``). Same truth as ``store-barrier``: culprit {3}.
- ``ddp-unused`` (4 ranks): a 3-layer DistributedDataParallel model (find_unused_parameters
  False). At step 2 rank 3's forward skips the hidden layer, so its gradient bucket never gets
  ready and its ``backward`` returns without reducing; it then logs the loss with an
  ``all_reduce`` on a "log" group. Culprit {3}; ranks 0-2 wait inside ``loss.backward()`` (DDP's
  reducer waits for the bucket all_reduce rank 3 never starts); rank 3 waits in the all_reduce
  (the loss is logged on a group of its own: on the world group, rank 3's all_reduce would be
  matched with the others' bucket all_reduce and the job would crash, not hang).
- ``healthy-midstep`` (4 ranks, control): never hangs; at step S rank R computes in Python for
  0.1 + 0.1*((R+S) % 4) s then all_reduces, so one sample finds some ranks computing and others
  waiting, and the slowest rank changes every step (a fixed order would make samples taken once
  a step, ~0.4 s apart, find every rank in the same place each time). Ready after step 3.
  Nobody is a culprit.
- ``group-order`` (4 ranks): two process groups over the whole world (gradient buckets); each step
  every rank runs ``for g in groups: dist.all_reduce(t, group=g)`` (one line). At step 2 rank 3
  walks the groups in the other order (the bug class of iterating a set or dict of groups whose
  order differs per rank). Gloo matches a group's collectives by their order in that group, so
  ranks 0-2 wait in group A's all_reduce (seq 3) for rank 3, which waits in group B's (seq 3)
  for them: every rank's stack is the same line. Culprit {3}, which only the flight recorder
  tells (A: rank 3 at seq 2, the others at 3; B: rank 3 at seq 3, the others at 2). The job
  turns the flight recorder on (``TORCH_FR_BUFFER_SIZE``, unless set) and serves it per rank
  (:func:`serve_debug`).
- ``pollers`` (4 ranks, control): after one all_reduce, rank R sleeps 0.7*R s, then loops in
  ``poll`` (``time.sleep(0.5); i += 1``) forever. No collective is pending: nobody is a culprit.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta
from pathlib import Path

SCENARIOS = ("tp-dp", "pipeline", "p2p-ring", "p2p-ring-steps", "store-barrier", "store-barrier-default", "ddp-unused",
             "healthy-midstep", "pollers", "group-order")
NPROC = {"tp-dp": 8}
"""Ranks a scenario needs when not 4."""
HANG_STEP = 2


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


def load_shard(path: Path) -> bytes:
    """Read a data shard: blocks in open(2), since nobody ever writes the FIFO."""
    if not path.exists():
        os.mkfifo(path)
    with open(path, "rb") as f:
        return f.read()


def run_tp_dp(dist, torch, args, rank: int, world: int) -> None:
    """Two halves of the world, each a process group (tensor parallel), plus the world (data parallel)."""
    half = world // 2
    groups = [dist.new_group(list(range(half))), dist.new_group(list(range(half, world)))]
    mygroup = groups[0] if rank < half else groups[1]
    t = torch.ones(16)
    for step in range(args.steps):
        train_step(dist, t, step, rank, half, mygroup, args)


def train_step(dist, t, step, rank, half, mygroup, args) -> None:
    """One tp-dp step: the group all_reduce, then the world all_reduce."""
    t.add_(compute(step) * 0)
    if step == HANG_STEP:
        ready(args, rank)
        if rank == half + 1:
            load_shard(Path(args.ready or ".", f"shard-{rank:05d}.fifo"))
    dist.all_reduce(t, group=mygroup)
    dist.all_reduce(t)


def forward_stage(x, stage: int):
    """This stage's share of the model."""
    return x * 0.5 + stage


def pipeline_step(dist, torch, step, stage, world, micro_batches=4):
    """Run every micro-batch through this stage: recv from the stage before, compute, send on."""
    loss = torch.zeros(1)
    for mb in range(micro_batches):
        x = torch.full((8,), float(mb))
        if stage > 0:
            src = stage - 1
            dist.recv(x, src=src)
        y = forward_stage(x, stage)
        skip = stage == 1 and step == HANG_STEP and mb == micro_batches - 1  # the bug
        if stage < world - 1 and not skip:
            dst = stage + 1
            dist.send(y, dst=dst)
        loss += y.sum()
    return loss


def run_pipeline(dist, torch, args, rank: int, world: int) -> None:
    """One pipeline stage per rank; the loss is synced over the world after each step."""
    for step in range(args.steps):
        if step == HANG_STEP:
            ready(args, rank)
        loss = pipeline_step(dist, torch, step, rank, world)
        dist.all_reduce(loss)  # loss sync


def ring_step(dist, t_out, t_in, step, rank, world, sync: bool = True) -> None:
    """Pass a tensor one hop around the ring (isend right, irecv left), then all_reduce (``sync``)."""
    dst = (rank + 1) % world
    src = (rank - 1) % world
    if step == HANG_STEP and rank == 2 % world:
        src = (rank + 1) % world  # the bug: receives from the wrong neighbour
    reqs = [dist.isend(t_out, dst=dst), dist.irecv(t_in, src=src)]
    for r in reqs:
        r.wait()
    if sync:
        dist.all_reduce(t_in)


def run_p2p_ring(dist, torch, args, rank: int, world: int, sync: bool = True) -> None:
    """A ring exchange every step (then an all_reduce: ``sync``)."""
    t_out, t_in = torch.full((16,), float(rank)), torch.zeros(16)
    for step in range(args.steps):
        if step == HANG_STEP:
            ready(args, rank)
        ring_step(dist, t_out, t_in, step, rank, world, sync)


def store_barrier(store, step: int, world: int) -> None:
    """Wait until every rank has set its ``step{N}/done/{rank}`` key."""
    keys = []
    for r in range(world):  # a loop, not a comprehension: py-spy --locals would show step as <cell at ...>
        keys.append(f"step{step}/done/{r}")
    store.wait(keys)


def run_store_barrier(dist, torch, args, rank: int, world: int, default: bool = False) -> None:
    """Rank 0 checks a hand-made store barrier each step; rank world-1 forgets its key at step 2.
    ``default``: on the job's default store (prefixed keys), else on a client of the TCPStore (keys at its root)."""
    if default:
        store = dist.distributed_c10d._get_default_store()
    else:
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=timedelta(hours=2))
    t = torch.ones(16)
    for step in range(args.steps):
        if step == HANG_STEP:
            ready(args, rank)
        if not (step == HANG_STEP and rank == world - 1):  # the bug: the last rank skips its key
            store.set(f"step{step}/done/{rank}", "1")
        if rank == 0:
            store_barrier(store, step, world)
        dist.all_reduce(t)


def make_model(torch):
    """Three Linear layers; ``forward(x, skip_hidden=True)`` leaves the hidden layer unused."""

    class Net(torch.nn.Module):  # type: ignore[name-defined]  # torch is a parameter: imported by the caller
        def __init__(self):
            super().__init__()
            self.inp, self.hidden, self.out = torch.nn.Linear(16, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 1)

        def forward(self, x, skip_hidden=False):
            h = torch.relu(self.inp(x))
            if not skip_hidden:
                h = torch.relu(self.hidden(h))
            return self.out(h)

    return Net()


def run_ddp_unused(dist, torch, args, rank: int, world: int) -> None:
    """DDP training; at step 2 the last rank skips a layer (an unused parameter)."""
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(make_model(torch), find_unused_parameters=False)
    log_group = dist.new_group(list(range(world)))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step in range(args.steps):
        if step == HANG_STEP:
            ready(args, rank)
        x = torch.randn(8, 16)
        skip = step == HANG_STEP and rank == world - 1  # the bug
        loss = ddp(x, skip_hidden=skip).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log_loss(dist, loss.detach(), log_group)


def log_loss(dist, loss_tensor, group) -> None:
    """Average the loss over the ranks for the log."""
    dist.all_reduce(loss_tensor, group=group)


def run_healthy_midstep(dist, torch, args, rank: int, world: int) -> None:
    """Never hangs: uneven compute (0.1 to 0.4 s; the slowest rank rotates), then all_reduce, forever."""
    t = torch.ones(16)
    step = 0
    while True:
        deadline = time.monotonic() + 0.1 + 0.1 * ((rank + step) % world)
        while time.monotonic() < deadline:
            compute(step)
        dist.all_reduce(t)
        if step == 3:
            ready(args, rank)
        step += 1


def poll() -> None:
    """Wait for work that never comes, checking twice a second."""
    i = 0
    while True:
        time.sleep(0.5)
        i += 1


def run_pollers(dist, torch, args, rank: int, world: int) -> None:
    """One all_reduce, a rank-dependent start-up delay, then idle polling forever."""
    dist.all_reduce(torch.ones(16))
    time.sleep(rank * 0.7)
    ready(args, rank)
    poll()


def run_group_order(dist, torch, args, rank: int, world: int) -> None:
    """Each step all_reduces over two groups in turn; at step 2 the last rank takes them in the other order."""
    groups = [dist.new_group(list(range(world))), dist.new_group(list(range(world)))]
    t = torch.ones(16)
    for step in range(args.steps):
        order = groups[::-1] if step == HANG_STEP and rank == world - 1 else groups  # the bug
        if step == HANG_STEP:
            ready(args, rank)
        for g in order:
            dist.all_reduce(t, group=g)


FR_SCENARIOS = ("group-order", "healthy-midstep")
"""Scenarios that record the flight recorder (:data:`FR_BUFFER`) and serve it (:func:`serve_debug`)."""
FR_BUFFER = "2000"
"""``TORCH_FR_BUFFER_SIZE`` set by those scenarios (entries per rank) when the environment has none."""


def serve_debug(dist) -> object:
    """Start this rank's worker of torch's debug server and publish its URL.

    The per-rank half of ``torch.distributed.debug.start_debug_server`` (torch 2.13,
    ``torch/distributed/debug/__init__.py``): a ``_WorkerServer`` on an ephemeral port, its URL set
    under ``debug_server/rank{RANK}`` in the job's TCPStore (``MASTER_ADDR:MASTER_PORT``), whose
    handlers answer HTTP POST ``URL/handler/NAME`` (``fr_trace_json``, ``dump_traceback``, ...).
    Rank 0's frontend (an aggregator in a forked child process on the fixed port 25999) is left
    out: it would add a process to the job and clash between jobs on one node.

    Returns:
        The server (kept alive by the caller).
    """
    import socket

    from torch._C._distributed_c10d import _WorkerServer
    from torch.distributed.debug import _handlers  # noqa: F401  (registers the handlers)
    from torch.distributed.debug._store import get_rank, tcpstore_client

    server = _WorkerServer("::", 0)
    tcpstore_client().set(f"rank{get_rank()}", f"http://{socket.gethostname()}:{server.port}")
    return server


RUNNERS = {
    "tp-dp": run_tp_dp, "pipeline": run_pipeline, "p2p-ring": run_p2p_ring, "p2p-ring-steps":
    lambda dist, torch, args, rank, world: run_p2p_ring(dist, torch, args, rank, world, False),
    "store-barrier": run_store_barrier,
    "store-barrier-default": lambda dist, torch, args, rank, world: run_store_barrier(dist, torch, args, rank, world, True),
    "ddp-unused": run_ddp_unused, "healthy-midstep": run_healthy_midstep, "pollers": run_pollers, "group-order": run_group_order,
}


def main(argv=None) -> None:
    """Parse the arguments, join the gloo job and run the scenario."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=SCENARIOS, default="tp-dp")
    ap.add_argument("--ready", default=None, help="directory for the ready markers")
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args(argv)

    if args.scenario in FR_SCENARIOS:  # before torch starts: the recorder reads it once
        os.environ.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER)
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", timeout=timedelta(hours=2))
    server = serve_debug(dist) if args.scenario in FR_SCENARIOS else None  # noqa: F841  (kept alive)
    if os.environ.get("HANGDBG_DEMO_RECORD"):  # opt in to hangdbg's op recorder (exact groups, seqs, peers)
        from hangdbg.hooks import record_collectives

        record_collectives()
    RUNNERS[args.scenario](dist, torch, args, rank, world)
    dist.barrier()
    time.sleep(3600)


if __name__ == "__main__":
    main()
