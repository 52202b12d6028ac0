"""Reading flight-recorder dumps: hangdbg's restricted unpickler and full `read()` vs plain pickle.load.

Writes NRANKS pickle dumps of ENTRIES entries each (the torch 2.13 layout, 8-frame stacks, as
`_dump_fr_trace` writes them; plain data, generated here so that plain pickle.load is safe to run
as the baseline, which is what torch's torchfrtrace does), then times, in the same process:
plain `pickle.load` of every file (baseline), hangdbg's RestrictedUnpickler on the same files, and
hangdbg's whole `read()` (restricted load + field parsing + cross-rank matching). Prints a table
and writes bench/results/fr_read.json.

    python bench/fr_read.py [--ranks 64] [--entries 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, source_state

sys.path.insert(0, str(ROOT))
from hangdbg.evidence.flight_recorder.reader import READER
from hangdbg.evidence.flight_recorder.grammar import RestrictedUnpickler


def dump(rank: int, nranks: int, entries: int) -> dict:
    frames = [{"name": n, "filename": f, "line": 10 + i} for i, (n, f) in enumerate([
        ("all_reduce", "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"),
        ("wrapper", "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"),
        ("step", "/job/train.py"), ("train", "/job/train.py"), ("main", "/job/train.py"),
        ("<module>", "/job/train.py"), ("run", "/usr/lib/python3.11/runpy.py"), ("_run_code", "runpy.py")])]
    ents = []
    for i in range(entries):
        ents.append({"frames": frames, "record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
                     "thread_name": "pt_main_thread", "thread_id": "140000000000", "collective_seq_id": i + 1,
                     "p2p_seq_id": 0, "op_id": i + 1, "profiling_name": "nccl:all_reduce",
                     "time_created_ns": 1_700_000_000_000_000_000 + i, "input_sizes": [[4096, 1024]],
                     "input_dtypes": ["BFloat16"], "output_sizes": [[4096, 1024]], "output_dtypes": ["BFloat16"],
                     "state": "completed" if i < entries - 1 or rank else "started", "time_discovered_started_ns": 1,
                     "time_discovered_completed_ns": 2, "retired": True, "timeout_ms": 600000, "is_p2p": False,
                     "duration_ms": 1.5})
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(nranks)))}},
            "comm_lib_version": "2.21.5", "pg_status": {"0": {"last_enqueued_collective": entries,
                                                              "last_started_collective": entries,
                                                              "last_completed_collective": entries - (rank == 0)}},
            "entries": ents}


def timed(fn) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "fr_read.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for r in range(a.ranks):
            p = os.path.join(tmp, f"nccl_trace_rank_{r}")
            Path(p).write_bytes(pickle.dumps(dump(r, a.ranks, a.entries), protocol=2))
            paths.append(p)
        total = sum(os.path.getsize(p) for p in paths)

        def plain():
            for p in paths:
                with open(p, "rb") as f:
                    pickle.load(f)

        def restricted():
            for p in paths:
                with open(p, "rb") as f:
                    RestrictedUnpickler(f).load()

        rep = READER.read(paths)
        assert not rep.errors and rep.facts.dumps == a.ranks
        del rep  # keep the heap the same size for every mode (the GC scans what is alive)
        modes = (("pickle.load (baseline)", plain), ("restricted unpickler", restricted),
                 ("hangdbg read()", lambda: READER.read(paths)))
        times: dict[str, list[float]] = {m: [] for m, _ in modes}
        for _ in range(a.repeat):  # interleaved rounds: a load spike on the machine hits every mode
            for m, fn in modes:
                times[m].append(timed(fn))
        rows = [{"mode": m, "seconds": round(min(times[m]), 3)} for m, _ in modes]
    base = rows[0]["seconds"]
    for r in rows:
        r["ratio_vs_pickle_load"] = round(r["seconds"] / base, 2)
        r["MB_per_s"] = round(total / 1e6 / r["seconds"], 1)
    print(f"{a.ranks} dumps x {a.entries} entries, {total / 1e6:.1f} MB")
    print(f"{'mode':<24} {'seconds':>8} {'MB/s':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['mode']:<24} {r['seconds']:>8} {r['MB_per_s']:>8} {r['ratio_vs_pickle_load']:>6}")
    res = {"benchmark": "fr_read", "cpus": os.cpu_count(), "ranks": a.ranks, "entries": a.entries,
           "bytes": total, "rows": rows, **source_state()}
    Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    print("->", a.json)


if __name__ == "__main__":
    main()
