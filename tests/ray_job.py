"""A Ray job for the ``--ray`` tests: plain actors that each init a gloo process group and all_reduce
in a loop; at step 2 the last rank blocks outside the collective (sleeps) while the others wait for it
in their all_reduce (the demo's default shape, :mod:`hangdbg.demo.job`).

    python tests/ray_job.py --address 127.0.0.1:PORT --ready DIR [--world 4] [--idle]

Each actor gets its rank through ``runtime_env`` ``env_vars`` (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``), as verl's ``RayWorkerGroup`` does, so the rank is in
the worker's start environment. ``--idle``: the same actors without torch.distributed (no rank
variables): a cluster with no training process. ``--train``: a Ray Train ``TorchTrainer`` instead.
The driver touches ``DIR/rank-N`` when rank N reached its hang, then waits forever.
"""

import argparse
import os
import socket
import time
from pathlib import Path

import ray


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@ray.remote(num_cpus=0)
class Worker:
    def run(self, ready: str) -> None:
        import torch
        import torch.distributed as dist

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", rank=rank, world_size=world)
        t = torch.ones(4)
        step = 0
        while True:
            step += 1
            if step == 2:
                Path(ready, f"rank-{rank}").touch()
                if rank == world - 1:
                    sleep_in_data_loader()
            dist.all_reduce(t)


@ray.remote(num_cpus=0)
class Idle:
    def run(self, ready: str) -> None:
        Path(ready, f"idle-{os.getpid()}").touch()
        while True:
            time.sleep(1)


def sleep_in_data_loader() -> None:
    while True:
        time.sleep(0.5)


def train_loop(config: dict) -> None:
    import torch
    import torch.distributed as dist
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    world = ray.train.get_context().get_world_size()
    t = torch.ones(4)
    step = 0
    while True:
        step += 1
        if step == 2:
            Path(config["ready"], f"rank-{rank}").touch()
            if rank == world - 1:
                sleep_in_data_loader()
        dist.all_reduce(t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--idle", action="store_true")
    ap.add_argument("--train", action="store_true")
    args = ap.parse_args()
    ray.init(address=args.address, log_to_driver=False)
    if args.train:
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer

        TorchTrainer(train_loop, train_loop_config={"ready": args.ready},
                     scaling_config=ScalingConfig(num_workers=args.world, resources_per_worker={"CPU": 0.5}),
                     torch_config=TorchConfig(backend="gloo"),
                     run_config=RunConfig(storage_path=os.path.join(args.ready, "train"))).fit()
        return
    if args.idle:
        actors = [Idle.remote() for _ in range(2)]
    else:
        port = free_port()
        actors = [Worker.options(runtime_env={"env_vars": {
            "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(args.world),
            "LOCAL_WORLD_SIZE": str(args.world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}}).remote()
            for r in range(args.world)]
    refs = [a.run.remote(args.ready) for a in actors]
    ray.get(refs)


if __name__ == "__main__":
    main()
