"""The steps of ``hangdbg check`` that measure one rank's device alone (run inside
:mod:`hangdbg.check.rank`, a script: stdlib and torch only; mixed into its ``RankCheck``)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["HealthSteps"]


class HealthSteps:
    """The steps that measure this rank's device alone (no peer involved), after the collectives.
    Figures are per GPU, and the coordinator compares them across the GPUs of the run (the
    median; ``--slow``): the approach of DCGM's diagnostic (``dcgmi diag``: its targeted stress,
    memory bandwidth and PCIe plugins), in seconds rather than minutes. On CPU the same code runs
    small and its figures are not compared (ranks share the cores)."""

    torch: Any
    device: Any
    use_cuda: bool
    rank: int
    job: Any

    def sync(self) -> None:
        if self.use_cuda:
            self.torch.cuda.synchronize()

    def matmul(self) -> dict:
        """bf16 matrix product of 8192 x 8192 x 8192 on a GPU (float32, 256 on CPU): TFLOP/s =
        2 n^3 x iters / seconds, after warm-up; a product that is not finite fails."""
        torch = self.torch
        n, dtype, warm, iters = (8192, torch.bfloat16, 3, 10) if self.use_cuda else (256, torch.float32, 1, 3)
        gen = torch.Generator(device=self.device).manual_seed(1234 + self.rank)
        a = torch.randn(n, n, device=self.device, dtype=dtype, generator=gen)
        b = torch.randn(n, n, device=self.device, dtype=dtype, generator=gen)
        c = a @ b
        for _ in range(warm - 1):
            c = a @ b
        self.sync()
        start = time.monotonic()
        for _ in range(iters):
            c = a @ b
        self.sync()
        took = max(time.monotonic() - start, 1e-9)
        out: dict = {"n": n, "dtype": str(dtype).replace("torch.", ""), "iters": iters, "time_s": took / iters,
                     "tflops": 2 * n ** 3 * iters / took / 1e12}
        if not bool(torch.isfinite(c).all()):
            out["wrong"] = "the matrix product has values that are not finite (inf/nan) from finite inputs"
        return out

    def copy(self) -> dict:
        """Device-memory copy bandwidth: a buffer copied into another (1 GiB, at most a quarter of
        the free memory, on a GPU; ``--alloc-bytes`` on CPU); GB/s count the bytes read and
        written (2 x size x iters / seconds, as nvbandwidth and DCGM's memory test do); the copy
        is checked."""
        torch = self.torch
        if self.use_cuda:
            free, _ = torch.cuda.mem_get_info()
            nbytes, iters = min(1 << 30, free // 4), 10
        else:
            nbytes, iters = self.job.alloc_bytes, 3
        n = max(1, nbytes // 4)
        src = torch.arange(n, dtype=torch.float32, device=self.device)
        dst = torch.empty_like(src)
        dst.copy_(src)
        self.sync()
        start = time.monotonic()
        for _ in range(iters):
            dst.copy_(src)
        self.sync()
        took = max(time.monotonic() - start, 1e-9)
        out: dict = {"bytes": n * 4, "iters": iters, "time_s": took / iters, "gbps": 2 * n * 4 * iters / took / 1e9}
        step = max(1, n // 4096)
        if not bool(torch.equal(dst[::step], src[::step])):
            out["wrong"] = "the copy differs from its source"
        del src, dst
        if self.use_cuda:
            torch.cuda.empty_cache()
        return out

    def host_copy(self) -> dict:
        """Host-to-device and device-to-host copy bandwidth over the bus (256 MiB of pinned host
        memory, 5 copies each way; GB/s = bytes x iters / seconds); skipped on CPU."""
        torch = self.torch
        if not self.use_cuda:
            return {"skipped": "no GPU"}
        n, iters = (256 << 20) // 4, 5
        host = torch.empty(n, dtype=torch.float32, pin_memory=True)
        dev = torch.empty(n, dtype=torch.float32, device=self.device)
        dev.copy_(host, non_blocking=True)
        self.sync()
        start = time.monotonic()
        for _ in range(iters):
            dev.copy_(host, non_blocking=True)
        self.sync()
        h2d = max(time.monotonic() - start, 1e-9)
        start = time.monotonic()
        for _ in range(iters):
            host.copy_(dev, non_blocking=True)
        self.sync()
        d2h = max(time.monotonic() - start, 1e-9)
        del host, dev
        return {"bytes": n * 4, "iters": iters, "h2d_gbps": n * 4 * iters / h2d / 1e9, "d2h_gbps": n * 4 * iters / d2h / 1e9}
