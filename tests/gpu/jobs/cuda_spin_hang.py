"""Case 1 of tests/gpu: 2 ranks, gloo with CUDA tensors, both on cuda:0. Rank 1 starts a CUDA kernel that spins
for about 1.5 h (``torch.cuda._sleep``) and synchronizes on it; rank 0 waits in ``all_reduce``. A dump names
rank 1 and rank 0 as waiting for it. The program a previous H200 session ran (shared/gpu-h200/gpu_hang.py),
with a marker file per rank (argv[1]/rank-N) written when the rank reaches its hanging call."""
import datetime
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

ready = Path(sys.argv[1])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
r = dist.get_rank()
torch.cuda.set_device(0)
x = torch.ones(1 << 16, device="cuda")
for _ in range(3):
    dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank {r} ready", flush=True)
(ready / f"rank-{r}").write_text(str(os.getpid()))
if r == 1:
    torch.cuda._sleep(10**13)  # ~1.5 h of spinning on the GPU
    torch.cuda.synchronize()
dist.all_reduce(x)
print("unreachable", flush=True)
