"""Real GPU failure scenarios for hangdbg's post-mortem readers, run under plain torchrun by make_plain.sh
(argv[1] names one; rank 1 fails after a warm-up while rank 0 waits in the next gloo all_reduce)."""
import datetime, os, sys, time
import torch, torch.distributed as dist

name = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))
local_rank = int(os.environ.get("LOCAL_RANK", "0"))
T = datetime.timedelta(seconds=int(os.environ.get("SCEN_TIMEOUT", "30")))


def gloo_then(fn):
    """2 ranks on gloo; rank 1 runs fn after a warm-up all_reduce, rank 0 waits in the next all_reduce."""
    dist.init_process_group("gloo", timeout=T)
    x = torch.ones(1024)
    for _ in range(3):
        dist.all_reduce(x)
    print(f"rank {rank}: warm-up done", flush=True)
    if rank == 1:
        fn()
    dist.all_reduce(x)
    print(f"rank {rank}: unreachable", flush=True)


if name == "oom_rank1":
    def f():
        torch.cuda.set_device(0)
        a = torch.empty(1 << 30, device="cuda")
        b = torch.empty(400 * (1 << 30), dtype=torch.uint8, device="cuda")  # 400 GiB
    gloo_then(f)
elif name == "device_assert_rank1":
    def f():
        torch.cuda.set_device(0)
        x = torch.randn(1000, device="cuda")
        idx = torch.tensor([5, 2000], device="cuda")
        y = x[idx]
        torch.cuda.synchronize()
    gloo_then(f)
elif name == "illegal_address_rank1":
    def f():
        import cupy
        torch.cuda.set_device(0)
        k = cupy.RawKernel(r'extern "C" __global__ void poke(float* p){ p[threadIdx.x + (1ull << 40)] = 1.0f; }', "poke")
        t = torch.zeros(32, device="cuda")
        k((1,), (32,), (cupy.uint64(t.data_ptr()),))
        t.add_(1)
        torch.cuda.synchronize()
    gloo_then(f)
elif name == "gpu_spin_gloo_timeout":
    def f():
        torch.cuda.set_device(0)
        torch.cuda._sleep(10**13)     # a CUDA kernel that does not end for ~1.5 h
        torch.cuda.synchronize()
    gloo_then(f)
elif name == "invalid_ordinal":
    # the classic: set_device(LOCAL_RANK) with more ranks than GPUs
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", timeout=T)
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
    print("done", flush=True)
elif name == "nccl_one":
    # one NCCL rank; the environment (set by the runner) holds the mistake
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=T, device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print("done", flush=True)
elif name == "nccl_cpu_tensor":
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=T)
    x = torch.ones(1024)          # a CPU tensor given to the NCCL group
    dist.all_reduce(x)
    print("done", flush=True)
elif name == "no_gpu_nccl":
    dist.init_process_group("nccl", timeout=T)
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
elif name == "oom_nccl_one":
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=T, device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    y = torch.empty(300 * (1 << 30), dtype=torch.uint8, device="cuda")
else:
    sys.exit(f"unknown scenario {name}")
