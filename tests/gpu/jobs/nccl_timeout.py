"""Case 2 of tests/gpu: one NCCL rank whose all_reduce waits behind a CUDA kernel that never ends: the
ProcessGroupNCCL watchdog times out (timeout=20 s) and, with TORCH_NCCL_DUMP_ON_TIMEOUT=1, dumps the flight
recorder to TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank. The program a previous H200 session ran
(shared/gpu-h200/nccl_timeout.py)."""
import datetime

import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=20), device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
for _ in range(5):
    dist.all_reduce(x)
torch.cuda.synchronize()
print("ready", flush=True)
torch.cuda._sleep(10**13)  # the GPU is busy for ~1.5 h
dist.all_reduce(x)  # enqueued behind it: never completes
torch.cuda.synchronize()
print("unreachable", flush=True)
