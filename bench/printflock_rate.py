"""printflock lines/s under 8-process contention vs plain print, same run, same file kind.

Each of NPROC processes writes NLINES lines (~230 chars, 6 print args) to ONE shared file opened in
append mode; "plain" uses print() with the default buffer (fast but lines may be torn), "printflock"
takes the flock for each line and flushes. Prints a table and writes bench/results/printflock_rate.json.

    python bench/printflock_rate.py [--nproc 8] [--lines 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, source_state

WRITER = """
import sys
from hangdbg.hooks.printflock import printflock
me, path, mode, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
f = open(path, "a")
p = printflock if mode == "printflock" else print
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
for i in range(n):
    p(f"P{me}", f"L{i:06d}", "x" * 60, "y" * 60, "z" * 80, "END", file=f)
f.close()
"""
LINE_RE = re.compile(r"^P\d+ L\d{6} x{60} y{60} z{80} END$")


def run(mode: str, nproc: int, nlines: int, tmp: str) -> dict:
    out = os.path.join(tmp, f"{mode}.txt")
    env = dict(os.environ, PYTHONPATH=str(ROOT), HANGDBG_PRINTFLOCK=os.path.join(tmp, "lock"))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(i), out, mode, str(nlines)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(nproc)]
    for p in procs:  # start timing once every interpreter is up
        assert p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n"); p.stdin.flush()
    for p in procs:
        assert p.wait() == 0
    dt = time.perf_counter() - t0
    lines = Path(out).read_text().split("\n")[:-1]
    broken = sum(1 for ln in lines if not LINE_RE.match(ln))
    return {"mode": mode, "nproc": nproc, "lines": len(lines), "seconds": round(dt, 3),
            "lines_per_s": round(len(lines) / dt), "broken_lines": broken}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=8)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "printflock_rate.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run(m, a.nproc, a.lines, tmp) for m in ("plain", "printflock")]
    print(f"{'mode':<11} {'procs':>5} {'lines':>8} {'seconds':>8} {'lines/s':>10} {'broken':>7}")
    for r in rows:
        print(f"{r['mode']:<11} {r['nproc']:>5} {r['lines']:>8} {r['seconds']:>8} {r['lines_per_s']:>10} {r['broken_lines']:>7}")
    res = {"benchmark": "printflock_rate", "cpus": os.cpu_count(), "lines_per_proc": a.lines, "rows": rows,
           "slowdown_vs_plain": round(rows[0]["lines_per_s"] / rows[1]["lines_per_s"], 2), **source_state()}
    Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    print("slowdown vs plain print: %.2fx  -> %s" % (res["slowdown_vs_plain"], a.json))


if __name__ == "__main__":
    main()
