"""Per-collective cost of ``hangdbg.hooks.record_collectives``: bare vs recorded, same run.

Two ranks (spawned processes, gloo, ``init_method=tcp://127.0.0.1:PORT``, ``OMP_NUM_THREADS=1``)
run blocks of N ``dist.all_reduce`` of 16 float32, in three variants, the order rotating every
round, a ``barrier`` lining the ranks up before each block:

* ``bare``: the original functions, nothing patched;
* ``recorded``: ``record_collectives()`` into a temporary directory on ``/dev/shm`` before the
  block, ``stop_recording()`` after it (both outside the timing);
* ``spin``: bare, but each ``all_reduce`` wrapped by a busy loop burning as much of the thread's
  CPU time as the recorder costs (half before, half after): the control.

First each rank times the recorder alone: its wrapper of ``all_reduce`` around a function that
does nothing, against that function, plus its ``Work.wait`` wrapper against a plain ``wait`` (a
synchronous op waits once inside torch) -- ``timeit`` on the thread's CPU time, best of 200
samples of 5,000 calls, while recording, so the group look-up, the lock and both record writes
(running, done) are in it. That is the CPU a job pays per op, with warm caches.

In every variant torch's ``all_reduce`` is called through a timing shim (the recorder wraps the
shim), so each block also gives the time spent *outside* torch's ``all_reduce`` per op: the
recorder's own wall-clock cost in the job, apart from the gloo round trip.

Figures: rank 0's medians over the rounds -- µs per collective (wall), its process's CPU µs per
collective (all threads), the ratio to bare and the added µs, the µs outside ``all_reduce``. On a
small VM the gloo round trip is dominated by its polling threads and wake-ups (its time moves by
tens of µs when anything changes), so the ratio is noisy; the ``spin`` row shows what plain CPU
work of the recorder's length does to it.

    python bench/recorder_overhead.py [--rounds 21] [--iters 1000]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import source_state  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "recorder_overhead.json"
VARIANTS = ("bare", "recorded", "spin")


def rank_main(rank: int, port: int, rounds: int, iters: int, rec_dir: str, queue) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.distributed as dist

    from hangdbg.hooks import recorder

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    t = torch.ones(16)

    # the recorder alone, around a no-op of all_reduce's signature
    path = recorder.record_collectives(rec_dir)

    def noop(tensor, op=None, group=None, async_op=False):
        return None

    class Work:  # a stand-in: the patched Work.wait looks the work up among the async ones, finds nothing
        def wait(self, timeout=None):
            return True

    def best_ns(fn) -> float:  # many short samples of this thread's CPU time: the least disturbed one counts
        return min(timeit.repeat(fn, number=5_000, repeat=200, timer=time.thread_time)) / 5_000 * 1e9

    wrapped, work, wrapped_wait = recorder._wrap("all_reduce", noop), Work(), recorder._wrap_wait(Work.wait)
    noop_ns, rec_ns = best_ns(lambda: noop(t)), best_ns(lambda: wrapped(t))
    wait_ns, wrapped_wait_ns = best_ns(lambda: Work.wait(work)), best_ns(lambda: wrapped_wait(work))
    added_ns = rec_ns - noop_ns + wrapped_wait_ns - wait_ns  # a synchronous op waits once, inside torch
    micro = {"noop_ns": noop_ns, "wrapped_noop_ns": rec_ns, "wait_ns": wait_ns, "wrapped_wait_ns": wrapped_wait_ns,
             "added_ns": added_ns, "record_file_bytes": os.path.getsize(path)}
    recorder.stop_recording()
    half = added_ns / 2e9

    bare_all_reduce, inside = dist.all_reduce, [0.0]
    clock, cpu_clock = time.perf_counter, time.thread_time

    @functools.wraps(bare_all_reduce)  # (the recorder reads all_reduce's signature through it)
    def timed_all_reduce(*args, **kwargs):  # time spent in torch's all_reduce itself
        t0 = clock()
        try:
            return bare_all_reduce(*args, **kwargs)
        finally:
            inside[0] += clock() - t0

    def spin_all_reduce(tensor):  # the recorder's CPU time as plain CPU work, half before, half after
        end = cpu_clock() + half
        while cpu_clock() < end:
            pass
        timed_all_reduce(tensor)
        end = cpu_clock() + half
        while cpu_clock() < end:
            pass

    def block(variant: str) -> tuple[float, float, float]:
        dist.all_reduce = timed_all_reduce
        if variant == "recorded":
            recorder.record_collectives(rec_dir)  # wraps timed_all_reduce
        op = spin_all_reduce if variant == "spin" else dist.all_reduce
        dist.barrier()
        inside[0] = 0.0
        c0, t0 = time.process_time(), clock()
        for _ in range(iters):
            op(t)
        wall, cpu = (clock() - t0) / iters * 1e6, (time.process_time() - c0) / iters * 1e6
        recorder.stop_recording()
        dist.all_reduce = bare_all_reduce
        return wall, cpu, inside[0] / iters * 1e6

    for variant in VARIANTS:  # warm every path
        block(variant)
    wall: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    outside: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for variant in VARIANTS[r % 3:] + VARIANTS[:r % 3]:
            w, c, i = block(variant)
            wall[variant].append(w)
            cpu[variant].append(c)
            outside[variant].append(w - i)
    dist.barrier()
    queue.put((rank, wall, cpu, outside, micro, torch.__version__))
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--iters", type=int, default=1000, help="all_reduces per timed block")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()

    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="hangdbg-bench-rec-", dir=base) as rec_dir:
        port = free_port()
        load_before = os.getloadavg()
        t0 = time.monotonic()
        procs = [ctx.Process(target=rank_main, args=(r, port, a.rounds, a.iters, rec_dir, queue)) for r in (0, 1)]
        for p in procs:
            p.start()
        results = {}
        for _ in procs:
            rank, wall, cpu, outside, micro, torch_version = queue.get(timeout=3600)
            results[rank] = (wall, cpu, outside, micro)
        for p in procs:
            p.join(timeout=60)
        wall_s = time.monotonic() - t0
        load_after = os.getloadavg()
        left = sorted(os.listdir(rec_dir))
    if any(p.exitcode for p in procs):
        raise SystemExit(f"a rank failed: exit codes {[p.exitcode for p in procs]}")

    wall, cpu, outside, micro = results[0]
    med = {v: statistics.median(s) for v, s in wall.items()}
    cpu_med = {v: statistics.median(s) for v, s in cpu.items()}
    out_med = {v: statistics.median(s) for v, s in outside.items()}
    med1 = {v: statistics.median(s) for v, s in results[1][0].items()}
    added = {v: med[v] - med["bare"] for v in VARIANTS}
    ratio = {v: med[v] / med["bare"] for v in VARIANTS}
    alone_us = micro["added_ns"] / 1e3

    print(f"2 ranks, gloo over loopback TCP, all_reduce of 16 float32, {a.rounds} rounds x {a.iters} ops, "
          f"torch {torch_version}, {os.cpu_count()} CPUs, load {load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"recorder alone (CPU): wrapped no-op {micro['wrapped_noop_ns'] / 1e3:.2f} us vs no-op "
          f"{micro['noop_ns'] / 1e3:.2f} us, wrapped wait {micro['wrapped_wait_ns'] / 1e3:.2f} us vs wait "
          f"{micro['wait_ns'] / 1e3:.2f} us -> {alone_us:.2f} us added per op (rank 1: "
          f"{results[1][3]['added_ns'] / 1e3:.2f} us); record file {micro['record_file_bytes']} bytes")
    print(f"{'variant':<10} {'us/op r0':>9} {'us/op r1':>9} {'CPU us/op r0':>13} {'ratio':>6} {'added us':>9} "
          f"{'outside us':>11}")
    for v in VARIANTS:
        print(f"{v:<10} {med[v]:>9.1f} {med1[v]:>9.1f} {cpu_med[v]:>13.1f} {ratio[v]:>6.3f} {added[v]:>+9.1f} "
              f"{out_med[v]:>11.1f}")
    print(f"in the job, around torch's all_reduce: recorded {out_med['recorded'] - out_med['bare']:+.1f} us, "
          f"spin {out_med['spin'] - out_med['bare']:+.1f} us per collective; files left after stop: {len(left)}")

    result = {
        "benchmark": "recorder_overhead",
        "workload": {"ranks": 2, "backend": "gloo", "init_method": "tcp://127.0.0.1", "op": "all_reduce",
                     "numel": 16, "dtype": "float32", "rounds": a.rounds, "iters_per_block": a.iters},
        "recorder_alone_us": {"noop": micro["noop_ns"] / 1e3, "wrapped_noop": micro["wrapped_noop_ns"] / 1e3,
                              "wait": micro["wait_ns"] / 1e3, "wrapped_wait": micro["wrapped_wait_ns"] / 1e3,
                              "added": alone_us, "added_rank1": results[1][3]["added_ns"] / 1e3},
        "us_per_collective": med,
        "us_per_collective_rank1": med1,
        "cpu_us_per_collective": cpu_med,
        "ratio_over_bare": ratio,
        "added_us_per_collective": added,
        "outside_all_reduce_us": out_med,
        "added_outside_all_reduce_us": {v: out_med[v] - out_med["bare"] for v in VARIANTS},
        "record_file_bytes": micro["record_file_bytes"],
        "files_left_after_stop": len(left),
        "samples_us_rank0": wall,
        "samples_cpu_us_rank0": cpu,
        "samples_outside_us_rank0": outside,
        "wall_s": wall_s,
        "loadavg_before": load_before, "loadavg_after": load_after,
        "cpus": os.cpu_count(),
        "versions": {"torch": torch_version, "python": platform.python_version()},
        **source_state(),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
