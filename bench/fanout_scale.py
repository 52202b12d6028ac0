"""Benchmark: the coordinator's merge and analysis of 1,000 nodes x 8 ranks.

Goal (issue "fan out across nodes"): the coordinator's merge and analysis of 1,000 nodes x 8
ranks completes in seconds. Measured on recorded agent outputs replayed by ``FakeRunner``: the
agent frames of every node (hello, one ``rank`` message per rank carrying a realistic ~40-frame
py-spy dump with its ``# hangdbg`` header, done) are produced once with the real encoder, then
``fan_out`` decodes them, writes every raw dump to disk, reads them back with the ``analyze``
loader, and ``analyze(whole_job=True)`` names the suspects. Baseline in the same process: the
same analysis from the raw files alone (``load_dumps`` + ``analyze``, what ``hangdbg analyze
OUT`` does), so the ratio shows what decoding frames and writing files add.

Usage: ``python bench/fanout_scale.py [--nodes 1000] [--ranks-per-node 8] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hangdbg.stacks.analysis import analyze  # noqa: E402
from hangdbg.collect.fanout import fan_out  # noqa: E402
from hangdbg.transport.wire import encode_message  # noqa: E402
from hangdbg.transport.runners import FakeRunner  # noqa: E402
from hangdbg.stacks.saved import load_dumps  # noqa: E402

SITE = "/venv/lib/python3.11/site-packages"


def stack(rank: int, odd: int) -> list[str]:
    """A ~40-frame py-spy stack (innermost first): DDP-style forward layers under train_step."""
    coll = ("broadcast", 3151) if rank == odd else ("all_reduce", 3252)
    frames = [
        f"{coll[0]} ({SITE}/torch/distributed/distributed_c10d.py:{coll[1]})",
        f"_exception_logger.<locals>.wrapper ({SITE}/torch/distributed/c10d_logger.py:83)",
        f"train_step (/work/train.py:{118 if rank == odd else 120})",
    ]
    for depth in range(34):
        frames.append(f"Block{depth}.forward (/work/model.py:{200 + depth})")
    frames += ["train (/work/train.py:300)", "main (/work/train.py:400)", "<module> (/work/train.py:410)"]
    return frames


def dump_text(rank: int, node: str, pid: int, world: int, odd: int) -> str:
    head = (f"# hangdbg rank={rank} pid={pid} host={node} local_rank={rank % 8} world_size={world} "
            f"local_world_size=8 rank_source=RANK sample=1 time=2026-11-22T00:00:00Z\n")
    body = f"Process {pid}: /venv/bin/python -u train.py\nPython v3.11.7 (/venv/bin/python3.11)\n\n"
    body += f'Thread {pid} (idle): "MainThread"\n' + "".join(f"    {f}\n" for f in stack(rank, odd))
    body += f'Thread {pid + 1} (idle): "pin_memory"\n    Condition.wait (/usr/lib/python3.11/threading.py:331)\n'
    body += "    _pin_memory_loop (" + SITE + "/torch/utils/data/_utils/pin_memory.py:53)\n"
    return head + body


def recorded_outputs(nodes: int, per_node: int) -> dict[str, list[str]]:
    world = nodes * per_node
    odd = world - 1
    out: dict[str, list[str]] = {}
    for n in range(nodes):
        host = f"node{n + 1:04d}"
        lines: list[str] = []
        msg = 0

        def send(message: dict) -> None:
            nonlocal msg
            msg += 1
            lines.extend(encode_message(host, msg, message))

        send({"type": "hello", "host": host, "pid": 1, "version": "bench", "schema_version": 1})
        procs = []
        for local in range(per_node):
            rank = n * per_node + local
            pid = 10000 + rank
            send({"type": "rank", "host": host, "rank": rank, "sample": 1, "name": f"rank-{rank:04d}.txt",
                  "text": dump_text(rank, host, pid, world, odd), "error": None})
            procs.append({"rank": rank, "pid": pid, "host": host})
        send({"type": "done", "host": host, "status": "ok", "error": None, "processes": procs, "seconds": 0.5})
        out[host] = lines
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--ranks-per-node", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dirs", default="/dev/shm," + tempfile.gettempdir(),
                    help="where OUT goes, comma-separated: tmpfs isolates the CPU cost, a disk adds the writes")
    ap.add_argument("--out", default=str(Path(__file__).with_name("results") / "fanout_scale.json"))
    args = ap.parse_args()

    outputs = recorded_outputs(args.nodes, args.ranks_per_node)
    lines = sum(len(v) for v in outputs.values())
    world = args.nodes * args.ranks_per_node
    hosts = list(outputs)
    runs = {}
    for base_dir in [d for d in args.dirs.split(",") if d and Path(d).is_dir()]:
        fan, base = [], []
        for _ in range(args.repeat):
            tmp = Path(tempfile.mkdtemp(prefix="hangdbg-bench-", dir=base_dir))
            try:
                t0 = time.perf_counter()
                result = fan_out(FakeRunner(outputs), hosts, ["agent"], tmp, timeout=60)
                a = analyze(result.dumps, whole_job=True)
                fan.append(time.perf_counter() - t0)
                assert [s.ranks for s in a.suspects] == [(world - 1,)], a.suspects
                assert len(result.dumps) == world and all(n.status == "ok" for n in result.nodes)
                t0 = time.perf_counter()
                dumps, _ = load_dumps([tmp / "raw" / h for h in hosts])
                b = analyze(dumps, whole_job=True)
                base.append(time.perf_counter() - t0)
                assert [s.ranks for s in b.suspects] == [(world - 1,)]
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        runs[base_dir] = {
            "coordinator_s": {"best": min(fan), "median": statistics.median(fan), "all": fan},
            "baseline_analyze_files_s": {"best": min(base), "median": statistics.median(base), "all": base},
            "ratio_coordinator_vs_baseline": statistics.median(fan) / statistics.median(base),
        }
    res = {
        "benchmark": "fanout_scale",
        "goal": "merge and analysis of 1,000 nodes x 8 ranks completes in seconds",
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "nodes": args.nodes,
        "ranks": world,
        "frame_lines": lines,
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"{args.nodes} nodes x {args.ranks_per_node} ranks = {world} ranks, {lines} frame lines")
    for base_dir, r in runs.items():
        c, b = r["coordinator_s"], r["baseline_analyze_files_s"]
        print(f"OUT under {base_dir}:")
        print(f"  coordinator (decode + write raw + load + analyze): best {c['best']:.2f} s, median {c['median']:.2f} s")
        print(f"  baseline `hangdbg analyze OUT` (load + analyze):   best {b['best']:.2f} s, median {b['median']:.2f} s")
        print(f"  ratio coordinator / baseline (medians): {r['ratio_coordinator_vs_baseline']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
