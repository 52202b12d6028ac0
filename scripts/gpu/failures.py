"""Per-rank program of scripts/gpu/make_failures.sh: one real GPU failure per MODE, on one GPU.

Each mode makes one failure that users report, so that hangdbg's post-mortem readers can be checked against
what torch 2.11 / NCCL 2.28 print on real hardware (not written by hand).  Run under torchrun; MODE is argv[1].
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

MODE = sys.argv[1]
RANK = int(os.environ.get("RANK", 0))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))


def gloo_steps(n: int = 3) -> torch.Tensor:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    torch.cuda.set_device(0)
    x = torch.ones(1 << 12)
    for _ in range(n):
        dist.all_reduce(x)
    print(f"rank {RANK}: {n} steps done", flush=True)
    return x


if MODE == "cuda_oom_rank1":            # rank 1 asks its GPU for far more memory than it has
    x = gloo_steps()
    if RANK == 1:
        w = torch.empty(1 << 40, dtype=torch.float32, device="cuda")   # 4 TiB
    dist.all_reduce(x)                  # rank 0 waits here for rank 1
    time.sleep(120)

elif MODE == "invalid_ordinal":         # one rank per LOCAL_RANK on a node with one GPU: rank 1 asks for cuda:1
    torch.cuda.set_device(LOCAL_RANK)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", LOCAL_RANK))
    x = torch.ones(16, device="cuda")
    dist.all_reduce(x)

elif MODE == "device_assert_rank1":     # rank 1 indexes out of bounds in a CUDA kernel
    x = gloo_steps()
    if RANK == 1:
        t = torch.arange(10, device="cuda")
        idx = torch.tensor([3, 42], device="cuda")
        print(t[idx].sum().item(), flush=True)
    dist.all_reduce(x)
    time.sleep(120)

elif MODE == "illegal_address_rank1":   # rank 1's kernel writes through a bad pointer
    x = gloo_steps()
    if RANK == 1:
        import cupy as cp
        k = cp.RawKernel(r'extern "C" __global__ void k(int* p) { p[0] = 1; }', "k")
        k((1,), (1,), (cp.uint64(0x10),))
        y = torch.ones(1 << 20, device="cuda") * 2
        torch.cuda.synchronize()
    dist.all_reduce(x)
    time.sleep(120)

elif MODE == "nccl_init_gpu_full":      # the GPU is full before NCCL initialises (another allocation took it)
    torch.cuda.set_device(0)
    _free, total = torch.cuda.mem_get_info()
    hog = []
    chunk = 1 << 30
    while True:
        try:
            hog.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            if chunk <= 1 << 16:
                break
            chunk //= 2
    print(f"rank {RANK}: holding {sum(h.numel() for h in hog) / 2**30:.1f} GiB of {total / 2**30:.1f} GiB", flush=True)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", 0))
    x = hog[-1][:1024]                  # a uint8 view: no new allocation
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {RANK}: all_reduce done", flush=True)

elif MODE == "nccl_env":                # a bad NCCL environment variable (set by the driver script)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 10, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {RANK}: all_reduce done", flush=True)
    dist.destroy_process_group()

elif MODE == "no_gpu_visible":          # CUDA_VISIBLE_DEVICES hides every GPU (set by the driver script)
    torch.cuda.set_device(LOCAL_RANK)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60))

else:
    sys.exit(f"unknown mode {MODE}")
