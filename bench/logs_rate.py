"""`hangdbg logs` / `hangdbg gpu` readers over large logs vs `LC_ALL=C grep -c` on the same file.

Builds a MB-sized torchrun log (app prints, NCCL INFO lines, tqdm bars, glog warnings from 8 ranks)
ending in the watchdog lines of tests/fixtures/torchlog/watchdog_pg_v24.log, and a syslog of kernel
lines ending in the Xid lines of tests/fixtures/xid/syslog. Each reader runs in a child process
(`python -c`, timed inside it, peak RSS from getrusage) right after grep on the same file, in the same
run. Prints a table and writes bench/results/logs_rate.json.

    python bench/logs_rate.py [--mb 256]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, source_state

READER = """
import json, resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
if kind == "torch-log":
    from hangdbg.evidence.torch_log.reader import READER as m
else:
    from hangdbg.evidence.gpu.reader import READER as m
t0 = time.perf_counter()
rep = m.read([path])
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "lines": rep.lines_read, "first": rep.findings[0].summary if rep.findings else "",
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

TORCH_NOISE = [
    "[rank{r}]:step 12345 loss 2.3141 lr 1.0e-04 tokens/s 123456.7 mem 71.2GiB",
    "gpu-node1:4242:4300 [{r}] NCCL INFO Channel 02/0 : {r}[{r}] -> 4[4] via P2P/IPC/read",
    "Epoch 3:  41%|####      | 410/1000 [12:01<17:18,  1.76s/it]",
    "[rank{r}]:[W1122 10:00:00.000000000 ProcessGroupNCCL.cpp:1400] [PG ID 0 PG GUID 0(default_pg) Rank {r}] slow op",
    "2026-11-22 10:00:00,123 - INFO - trainer.py:88 - saving checkpoint to /ckpt/step_12345",
]
KERNEL_NOISE = [
    "Jan  5 09:{m:02d}:00 gpu-node{r} kernel: [12345.100000] IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
    "Jan  5 09:{m:02d}:01 gpu-node{r} systemd[1]: Started Session {m} of user alice.",
    "Jan  5 09:{m:02d}:02 gpu-node{r} kernel: [12346.000000] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver",
    "Jan  5 09:{m:02d}:03 gpu-node{r} kernel: [12347.000000] mlx5_core 0000:0c:00.0: mlx5_cmd_check:794: health compromised",
]


def make(path: Path, noise: list[str], tail: Path, mb: int) -> None:
    rnd = random.Random(1)
    block_lines = [rnd.choice(noise).format(r=rnd.randrange(8), m=rnd.randrange(60)) for _ in range(5000)]
    block = ("\n".join(block_lines) + "\n").encode()
    with open(path, "wb") as f:
        f.writelines(block for _ in range(max(1, (mb << 20) // len(block))))
        f.write(tail.read_bytes())


def run(kind: str, path: Path, pattern: str) -> dict:
    t0 = time.perf_counter()
    g = subprocess.run(["grep", "-c", pattern, str(path)], capture_output=True, text=True, check=False,
                       env={**os.environ, "LC_ALL": "C"})
    grep_s = time.perf_counter() - t0
    out = subprocess.run([sys.executable, "-c", READER, kind, str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    r = json.loads(out.stdout)
    return {"reader": kind, "mb": round(path.stat().st_size / 2**20), "lines": r["lines"], "grep_count": int(g.stdout or 0),
            "grep_s": round(grep_s, 3), "reader_s": round(r["seconds"], 3), "ratio_vs_grep": round(r["seconds"] / grep_s, 1),
            "lines_per_s": round(r["lines"] / r["seconds"]), "max_rss_mb": round(r["max_rss_mb"]), "first_finding": r["first"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "logs_rate.json"))
    a = ap.parse_args()
    fx = ROOT / "tests" / "fixtures"
    with tempfile.TemporaryDirectory() as tmp:
        tl, sl = Path(tmp) / "torchrun.log", Path(tmp) / "syslog"
        make(tl, TORCH_NOISE, fx / "torchlog" / "watchdog_pg_v24.log", a.mb)
        make(sl, KERNEL_NOISE, fx / "xid" / "syslog", a.mb)
        rows = [run("torch-log", tl, "Watchdog caught"), run("gpu", sl, "NVRM: Xid")]
    print(f"{'reader':<10} {'MB':>5} {'lines':>10} {'grep s':>7} {'reader s':>9} {'x grep':>7} {'lines/s':>10} {'RSS MB':>7}")
    for r in rows:
        print(f"{r['reader']:<10} {r['mb']:>5} {r['lines']:>10} {r['grep_s']:>7} {r['reader_s']:>9} {r['ratio_vs_grep']:>7} "
              f"{r['lines_per_s']:>10} {r['max_rss_mb']:>7}")
    res = {"benchmark": "logs_rate", "cpus": os.cpu_count(), "rows": rows, **source_state()}
    Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    print("->", a.json)


if __name__ == "__main__":
    main()
