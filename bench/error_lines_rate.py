"""The error-lines reader (the catalog over every line) on a large log: its grep pass vs its own line
loop, against `LC_ALL=C grep -c` on the same file, in the same run.

Builds an interleaved NCCL_DEBUG log of 512 ranks in the documented format (tests/fixtures/nccl/nccl_gen.py)
of --mb MB with three NCCL WARN lines at its end, then times, each in a child process: `grep -c 'NCCL INFO'`
(the floor), the reader as shipped (files from 2 MiB get the `grep -F -i` first pass, hangdbg/tools/grep.py)
and the reader with that pass off (every line through the Python loop). Reports seconds and the ratios to
grep, checks that both readings found the same lines, and writes bench/results/error_lines_rate.json.

    python bench/error_lines_rate.py [--mb 256]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, source_state  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "nccl"))
import nccl_gen  # noqa: E402

CHILD = """
import json, sys, time
import hangdbg.evidence.error_lines.grammar as g
from hangdbg.evidence.error_lines.reader import READER
if sys.argv[2] == "loop":
    g.GREP_FROM_BYTES = 1 << 62
t = time.perf_counter()
rep = READER.read([sys.argv[1]])
print(json.dumps({"s": time.perf_counter() - t, "records": rep.records, "lines": rep.lines_read,
                  "findings": [f.summary for f in rep.findings]}))
"""
WARNS = ("node7:1234:1240 [3] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes\n"
         "node7:1234:1240 [3] transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4567> "
         "with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids ::ffff:10.0.0.2\n"
         "node7:1234:1240 [3] init.cc:904 NCCL WARN Duplicate GPU detected : rank 3 and rank 4 both on CUDA device 1b000\n")


def build(path: Path, size: int) -> None:
    """Every rank's init once, then its collective lines repeated to ``size`` bytes, then :data:`WARNS`."""
    per_rank = nccl_gen.Job(hosts=64, per_host=8, ops=24).per_rank()
    head, body = {}, {}
    for r, lines in per_rank.items():
        k = next(i for i, ln in enumerate(lines) if ": opCount " in ln)
        head[r], body[r] = lines[:k], lines[k:]
    block = nccl_gen.text(nccl_gen.interleave(body, seed=2)).encode()
    with path.open("wb") as f:
        f.write(nccl_gen.text(nccl_gen.interleave(head, seed=1)).encode())
        while f.tell() < size:
            f.write(block)
        f.write(WARNS.encode())


def child(path: Path, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=256)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as tmp:
        path = Path(tmp) / "nccl.log"
        build(path, args.mb << 20)
        t = time.perf_counter()
        subprocess.run(["grep", "-c", "NCCL INFO", str(path)], capture_output=True, env={"LC_ALL": "C"}, check=False)
        grep_s = time.perf_counter() - t
        shipped, loop = child(path, "grep"), child(path, "loop")
    same = shipped["findings"] == loop["findings"] and shipped["records"] == loop["records"]
    res = {"mb": args.mb, "grep_c_s": round(grep_s, 3), "reader_s": round(shipped["s"], 3),
           "reader_line_loop_s": round(loop["s"], 3), "reader_vs_grep": round(shipped["s"] / grep_s, 1),
           "line_loop_vs_reader": round(loop["s"] / shipped["s"], 1), "records": shipped["records"],
           "lines": shipped["lines"], "same_findings": same, **source_state()}
    print(json.dumps(res, indent=1))
    (ROOT / "bench" / "results" / "error_lines_rate.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
