"""`hangdbg core` on the core of a torch process vs plain `gdb -batch -ex 'thread apply all bt'` on
the same core, same run (ratio of median wall times).

The core is made here: a torch process with a gloo process group (world size 1, FileStore) that
segfaults in its training step, with ``ulimit -c unlimited`` and core_pattern ``core`` (the core
lands in the working directory). Both commands run ``--repeat`` times, alternating; hangdbg's run
includes what gdb does (it runs gdb with the same command) plus pystack, the environment scan and
the report (its gdb run uses ``set print frame-arguments none`` and no auto-loading, which is why
it can come out faster than plain gdb). Prints a table and writes bench/results/core_read.json.

    python bench/core_read.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, source_state

TORCH = """\
import ctypes, sys
import torch
import torch.distributed as dist

def train_step(x):
    dist.all_reduce(x)
    ctypes.string_at(0)

dist.init_process_group("gloo", store=dist.FileStore(sys.argv[1], 1), rank=0, world_size=1)
train_step(torch.ones(4))
"""


def make_core(d: Path) -> Path:
    (d / "prog.py").write_text(TORCH)
    env = dict(os.environ, RANK="5", LOCAL_RANK="1", WORLD_SIZE="8", SLURMD_NODENAME="gpu-node-07")
    proc = subprocess.run([sys.executable, "prog.py", str(d / "store")], cwd=d, env=env, capture_output=True,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2))
    for name in (f"core.{proc.returncode}", "core"):
        if (d / name).is_file():
            return d / name
    found = sorted(d.glob("core*"))
    if not found:
        sys.exit(f"no core written (core_pattern {Path('/proc/sys/kernel/core_pattern').read_text().strip()!r})")
    return found[0]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "core_read.json"))
    a = ap.parse_args()
    gdb = shutil.which("gdb")
    if gdb is None:
        sys.exit("gdb is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    with tempfile.TemporaryDirectory() as tmp:
        core = make_core(Path(tmp))
        exe = os.path.realpath(sys.executable)
        plain = [gdb, "-batch", "-ex", "thread apply all bt", exe, str(core)]
        ours = [sys.executable, "-m", "hangdbg", "core", str(core), "--json"]
        times: dict[str, list[float]] = {"gdb": [], "hangdbg": []}
        doc = None
        frames_gdb = 0
        for _ in range(a.repeat):
            dt, res = timed(plain)
            times["gdb"].append(dt)
            frames_gdb = sum(1 for ln in res.stdout.splitlines() if ln.startswith("#"))
            dt, res = timed(ours, env)
            times["hangdbg"].append(dt)
            doc = json.loads(res.stdout)
        size = core.stat().st_size
    c = doc["cores"][0]
    crash = doc["findings"][0]["summary"]
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [{"tool": k, "median_s": round(med[k], 3), "min_s": round(min(v), 3), "runs": len(v)} for k, v in times.items()]
    print(f"core of a torch/gloo process: {size / 2**20:.0f} MiB, {len(c['threads'])} threads")
    print(f"{'tool':<9} {'median s':>9} {'min s':>7}")
    for r in rows:
        print(f"{r['tool']:<9} {r['median_s']:>9} {r['min_s']:>7}")
    res = {
        "benchmark": "core_read", "cpus": os.cpu_count(), "core_bytes": size, "threads": len(c["threads"]),
        "gdb_frames": frames_gdb, "hangdbg_frames": sum(len(t["frames"]) for t in c["threads"]),
        "python_frames": sum(1 for t in c["threads"] for f in t["frames"] if not f.get("native")),
        "rank": c["rank"], "host": c["host"], "finding": crash, "rows": rows,
        "ratio_vs_gdb": round(med["hangdbg"] / med["gdb"], 2),
        "ratio_of_fastest_runs": round(min(times["hangdbg"]) / min(times["gdb"]), 2), **source_state(),
    }
    Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    print(f"{crash}\nhangdbg core / plain gdb bt: {res['ratio_vs_gdb']:.2f}x (medians), "
          f"{res['ratio_of_fastest_runs']:.2f}x (fastest runs)  -> {a.json}")


if __name__ == "__main__":
    main()
