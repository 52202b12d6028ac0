"""Case 3 of tests/gpu: 2 ranks with NCCL on the same single GPU (both cuda:0): NCCL refuses it at
communicator init ("Duplicate GPU detected", init.cc). The program a previous H200 session ran
(shared/gpu-h200/nccl_dup.py)."""
import datetime

import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", 0))
x = torch.ones(1024, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("all_reduce ok on rank", dist.get_rank(), flush=True)
dist.destroy_process_group()
