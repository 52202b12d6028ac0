"""Benchmark (issue 16): ``hangdbg report DIR --html FILE`` at 1k and 10k ranks: its size, and its
time against the same command without ``--html`` in the same run.

What is measured
----------------
* The synthetic job of ``bench/analyze_files.py`` (a tensor-parallel job hung in ``all_reduce``,
  one planted culprit, one saved py-spy file per rank).
* ``hangdbg report DIR --html FILE`` in a fresh process, best of ``--repeat`` runs: wall
  seconds, the children's peak RSS, the HTML's size in bytes (goal: under a few MB at 10,000
  ranks), and the number of table rows and tree nodes it holds (classes, not one row per rank).
* The baseline, in the same run: ``hangdbg report DIR`` (the same reading, analysis and terminal
  report, no HTML; ``-o`` is left out of both since it writes ``report.html`` too). Reported: the ratio and the seconds the HTML adds.
* Checked: the HTML names the planted culprit in its ``suspect-branch`` node.

Run: ``python bench/html_scale.py`` (about a minute; ``--sizes 1000`` for a quick run).
Results: ``bench/results/html_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import source_state  # noqa: E402
from analyze_files import timed, write_job  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "html_scale.json")
    args = ap.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="hangdbg-bench-html-"))
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            d = tmp / f"n{n}"
            write_job(n, d)
            html = tmp / f"report-{n}.html"
            plain = [sys.executable, "-m", "hangdbg", "report", str(d)]  # (-o would write report.html too)
            with_html = [sys.executable, "-m", "hangdbg", "report", str(d), "--html", str(html)]
            base = min(timed(plain)[0] for _ in range(args.repeat))
            runs = [timed(with_html) for _ in range(args.repeat)]
            best = min(r[0] for r in runs)
            text = html.read_text()
            culprit = n // 2 + 1
            assert re.search(rf'id="suspect-branch" class="suspect" data-ranks="{culprit}"', text), "culprit not shown"
            row = {"ranks": n, "html_bytes": len(text.encode()), "report_html_s": round(best, 3),
                   "report_s": round(base, 3), "ratio": round(best / base, 2), "html_adds_s": round(best - base, 3),
                   "table_rows": text.count("<tr"), "tree_nodes": text.count("<details"),
                   "peak_rss_mib": round(max(r[1] for r in runs) / 2**20)}
            rows.append(row)
            print(f"{n:>6} ranks  HTML {row['html_bytes'] / 2**20:5.2f} MiB  report --html {best:6.2f} s  "
                  f"report {base:6.2f} s  ratio {row['ratio']:4.2f}x  rows {row['table_rows']}  "
                  f"tree nodes {row['tree_nodes']}", flush=True)
            shutil.rmtree(d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"figures": rows, "load": os.getloadavg(), "cpus": os.cpu_count(),
                                    **source_state()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
