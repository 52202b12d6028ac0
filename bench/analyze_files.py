"""Benchmark (issue 16): the whole ``hangdbg analyze DIR`` command on 1k / 10k / 100k saved
per-rank py-spy files, against ``cat | sort | uniq -c`` over the same files in the same run.

What is measured
----------------
* The synthetic job of ``bench/analyze_scale.py`` (a tensor-parallel job hung in ``all_reduce``,
  ~41-frame stacks, 259 thread shapes, 1-3 threads per rank, one planted culprit), each rank
  written as the text ``py-spy dump`` prints (``Process``/``Python``/``Thread`` headers, one frame
  per line) into ``DIR/rank-NNNNNN.txt``: what a user saves from ``dump -o`` or the manual recipe.
* ``hangdbg analyze DIR --json > /dev/null`` in a fresh process (``python -m hangdbg``): wall
  seconds and the child's peak RSS (``ru_maxrss`` of the children), best of ``--repeat`` runs. The
  document is checked: the planted culprit must be the one suspect.
* The baseline, in the same run on the same (page-cached) files: ``find DIR -type f -print0 |
  xargs -0 cat | sort | uniq -c > /dev/null`` (a person's "which stacks are common" one-liner).
* Reported: seconds, the ratio ``analyze / baseline`` (issue 16's goal: within 2x), microseconds
  per rank (flat means linear), peak RSS of the command or any of its worker processes (goal:
  under 1.5 GB at 100k), the size of the JSON document printed.
* What makes it fast (issue 16): each distinct thread body is parsed once
  (``parse/pyspy_text.py``), files are read and parsed on every core and the rank list of the
  JSON is encoded on every core (``hangdbg/parallel.py``), the cyclic GC is paused while the
  acyclic objects are built, and each distinct stack is written once (``stacks.stack_table``,
  since schema_version 3).

Run: ``python bench/analyze_files.py`` (1k, 10k, 100k; ``--sizes 1000,10000`` for a shorter run).
Results: ``bench/results/analyze_files.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import ROOT, source_state  # noqa: E402
from analyze_scale import ShapeBook, build_dumps, expected_suspects  # noqa: E402


def pyspy_text(d) -> str:
    """One rank as ``py-spy dump`` prints it (py-spy 0.3/0.4 text format)."""
    lines = [f"Process {d.pid}: {d.cmdline}", f"Python v{d.python} (/usr/bin/python3.11)", ""]
    for t in d.threads:
        lines.append(f'Thread {t.thread_id} ({t.status}): "{t.name}"')
        lines += [f"    {f.function} ({f.file}:{f.line})" for f in t.frames]
    return "\n".join(lines) + "\n\n"


def write_job(n: int, where: Path) -> int:
    """Write ``n`` rank files; their total size in bytes."""
    where.mkdir(parents=True)
    total = 0
    for d in build_dumps(n, "interned", ShapeBook()):
        text = pyspy_text(d)
        (where / f"rank-{d.rank:06d}.txt").write_text(text)
        total += len(text)
    return total


def timed(argv: list[str], shell: bool = False) -> tuple[float, int, str]:
    """Wall seconds, the child's peak RSS (bytes) and stdout of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    res = subprocess.run(argv if not shell else argv[0], shell=shell, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if res.returncode not in (0, 3):
        raise SystemExit(f"{argv} failed ({res.returncode}): {res.stderr[-2000:]}")
    return dt, max(peak, before) * 1024, res.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "analyze_files.json")
    args = ap.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="hangdbg-bench-files-"))
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            d = tmp / f"n{n}"
            size = write_job(n, d)
            base = f"find {d} -type f -print0 | xargs -0 cat | sort | uniq -c > /dev/null"
            timed([base], shell=True)  # warm the page cache
            cmd = [sys.executable, "-m", "hangdbg", "analyze", str(d), "--json"]
            best_base = min(timed([base], shell=True)[0] for _ in range(args.repeat))
            runs = [timed(cmd) for _ in range(args.repeat)]
            best = min(r[0] for r in runs)
            doc = json.loads(runs[0][2])
            got = {(tuple(f["ranks"]), f["kind"]) for f in doc["findings"] if f["severity"] == "suspect"}
            assert got == expected_suspects(n), f"wrong suspects at {n}: {got}"
            peak = max(r[1] for r in runs)  # children's high-water mark so far (grows with n)
            row = {"ranks": n, "bytes": size, "json_bytes": len(runs[0][2]), "analyze_s": round(best, 3),
                   "baseline_s": round(best_base, 3),
                   "ratio": round(best / best_base, 2), "us_per_rank": round(best / n * 1e6, 1),
                   "peak_rss_mib": round(peak / 2**20)}
            rows.append(row)
            print(f"{n:>7} ranks {size / 2**20:7.1f} MiB  analyze {best:7.2f} s  cat|sort|uniq -c {best_base:6.2f} s  "
                  f"ratio {row['ratio']:5.2f}x  {row['us_per_rank']:7.1f} us/rank  peak {row['peak_rss_mib']} MiB",
                  flush=True)
            shutil.rmtree(d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"figures": rows, "load": os.getloadavg(), "cpus": os.cpu_count(),
                                    **source_state()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
