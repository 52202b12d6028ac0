"""Benchmark (a control): a healthy job with long, staggered steps must never be blamed (issue 28).

What is measured: a real 4-rank torchrun/gloo job (:class:`hangdbg.demo.launch.DemoJob`, scenario
``long-step``: at step S rank R computes ``torch.mm`` for ``--step-seconds`` x (1 + (R+S) % 4) / 4
seconds, 2 to 8 s by default, the slowest rank rotating, then all_reduces, forever) is dumped
``--runs`` times with a plain ``python -m hangdbg dump --pid LAUNCHER -o DIR --json`` (a fresh dump
each time; the job is reused), and as many times with the old short window (``--min-window 0``: two
extra samples half a second apart decide, what ``dump`` did before issue 28), alternating (the
order flips every run). Then the ``healthy-midstep`` control (0.1-0.4 s steps) is dumped
``--midstep`` times with a plain dump.

Reported per way: how many dumps blamed anyone (a suspect finding, exit 3), how many were undecided
(exit 1), median wall seconds of the whole command. Goal: 0 of 10 plain dumps blamed anyone.

Run: ``python bench/long_step_control.py`` (``--runs 10``, ``--step-seconds 8``, ``--midstep 3``).
About 4-6 minutes on 2 cores. Results: bench/results/long_step_control.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import ROOT, source_state  # noqa: E402

from hangdbg.demo.launch import DemoJob  # noqa: E402


def dump_once(pid: int, extra: list[str]) -> dict:
    """One whole ``hangdbg dump`` of ``pid``: its exit status, suspects, headline and wall seconds."""
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "hangdbg", "dump", "--pid", str(pid), "-o", out, "--json", *extra]
        start = time.perf_counter()
        res = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=600)
        seconds = time.perf_counter() - start
    doc = json.loads(res.stdout)
    named = sorted({r for f in doc["findings"] if f["severity"] == "suspect" for r in f["ranks"]})
    return {"rc": res.returncode, "suspects": named, "seconds": round(seconds, 2), "headline": doc["headline"][:300]}


def summary(runs: list[dict]) -> dict:
    return {"dumps": len(runs), "blamed": sum(1 for r in runs if r["suspects"]),
            "undecided": sum(1 for r in runs if r["rc"] == 1),
            "median_s": round(statistics.median(r["seconds"] for r in runs), 2) if runs else None,
            "max_s": max((r["seconds"] for r in runs), default=None), "runs": runs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="plain dumps of the long-step job (and as many baseline ones)")
    ap.add_argument("--step-seconds", type=float, default=8.0, help="the slowest rank's compute per step")
    ap.add_argument("--midstep", type=int, default=3, help="plain dumps of the healthy-midstep control")
    args = ap.parse_args()
    ways: dict[str, list[dict]] = {"plain": [], "min-window 0": []}
    with DemoJob("long-step", args=["--step-seconds", str(args.step_seconds)]) as job:
        job.wait_ready(timeout=600)
        for k in range(args.runs):
            order = ["plain", "min-window 0"] if k % 2 == 0 else ["min-window 0", "plain"]
            for way in order:
                got = dump_once(job.pid, [] if way == "plain" else ["--min-window", "0"])
                ways[way].append(got)
                print(f"long-step {way:>12} #{k + 1}: exit {got['rc']} in {got['seconds']:.1f} s: {got['headline'][:110]}",
                      flush=True)
    midstep: list[dict] = []
    if args.midstep:
        with DemoJob("healthy-midstep") as job:
            job.wait_ready(timeout=600)
            for k in range(args.midstep):
                got = dump_once(job.pid, [])
                midstep.append(got)
                print(f"healthy-midstep #{k + 1}: exit {got['rc']} in {got['seconds']:.1f} s: {got['headline'][:110]}",
                      flush=True)
    results = {"long_step": {"step_seconds": args.step_seconds, "ranks": 4,
                             **{way: summary(runs) for way, runs in ways.items()}},
               "healthy_midstep": summary(midstep)}
    for way in ways:
        s = results["long_step"][way]
        print(f"long-step, {way}: blamed {s['blamed']}/{s['dumps']}, undecided {s['undecided']}, median {s['median_s']} s")
    m = results["healthy_midstep"]
    print(f"healthy-midstep, plain: blamed {m['blamed']}/{m['dumps']}, undecided {m['undecided']}, median {m['median_s']} s")
    out = ROOT / "bench" / "results" / "long_step_control.json"
    out.write_text(json.dumps({"source": source_state(), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
