"""``hangdbg nccl summary`` over a big interleaved NCCL_DEBUG log vs ``LC_ALL=C grep -c 'NCCL INFO'``.

Builds an interleaved log of NRANKS ranks (64 hosts x 8 GPUs for 512) in the documented format
(tests/fixtures/nccl/nccl_gen.py: init, interface, plugin and channel lines, then collective lines
``AllReduce: opCount ...``), repeated until SIZE bytes (default 1 GB, in /dev/shm when it exists),
then times in the same run: ``LC_ALL=C grep -c 'NCCL INFO' FILE`` and the real command
``python -m hangdbg nccl summary FILE --json`` (best of --repeat runs each), with the peak RSS of
the hangdbg process tree (main process + scan workers, sampled with psutil) and of its largest
process (``getrusage``). Goal: within 2x of grep (3x until the C scan's threads and line cache),
memory under 200 MB. grep and hangdbg runs alternate (both see the same load).

The scan path used is recorded (``scan_path``: ``c`` when the ``hangdbg.evidence.nccl._cscan`` extension is
built, else ``python``: chunks in threads with the C scan, in worker processes without it); unless
--no-pure, the same command is also timed with ``HANGDBG_PURE=1`` (the pure-Python scan) in the
same run.

    python bench/nccl_summary.py [--size 1G] [--ranks 512] [--repeat 3] [--keep] [--no-pure]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, source_state  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "nccl"))
import nccl_gen  # noqa: E402


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B")
    return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)


def build(path: Path, size: int, nranks: int) -> dict:
    """Header (every rank's init) once, then a steady-state block of collectives repeated; the last
    block lets rank 7 stop early so that the summary has a suspect to find."""
    per_host = 8
    job = nccl_gen.Job(hosts=max(1, nranks // per_host), per_host=min(per_host, nranks), ops=24)
    per_rank = job.per_rank()
    head, body = {}, {}
    for r, lines in per_rank.items():
        k = next(i for i, ln in enumerate(lines) if ": opCount " in ln)
        head[r], body[r] = lines[:k], lines[k:]
    header = nccl_gen.text(nccl_gen.interleave(head, seed=1)).encode()
    block = nccl_gen.text(nccl_gen.interleave(body, seed=2)).encode()
    last = dict(body)
    last[7] = body[7][:12]
    tail = nccl_gen.text(nccl_gen.interleave(last, seed=3)).encode()
    n = 0
    with open(path, "wb") as f:
        f.write(header)
        n += len(header)
        while n + len(block) + len(tail) < size:
            f.write(block)
            n += len(block)
        f.write(tail)
        n += len(tail)
    return {"bytes": n, "block_bytes": len(block)}


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int, int, str, float]:
    """Run ``cmd``: (seconds, peak RSS of the process tree, peak RSS of one process, stdout,
    CPU seconds of the process and its children)."""
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); "
               "sys.stdout.buffer.write(r.stdout); "
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "sys.stderr.write(f'{u.ru_maxrss} {u.ru_utime + u.ru_stime}')")
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", wrapper, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak_tree = 0
    proc = psutil.Process(p.pid)
    import threading

    out: dict = {}

    def reader():
        out["stdout"], out["stderr"] = p.communicate()

    th = threading.Thread(target=reader)
    th.start()
    while th.is_alive():
        try:
            kids = proc.children(recursive=True)
            rss = sum(k.memory_info().rss for k in kids)
            peak_tree = max(peak_tree, rss)
        except psutil.Error:
            pass
        th.join(0.02)
    dt = time.perf_counter() - t0
    rss, cpu = out["stderr"].decode().strip().splitlines()[-1].split()
    return dt, peak_tree, int(rss) * 1024, out["stdout"].decode(), float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1G", help="log size (1G, 256M...)")
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the generated log")
    ap.add_argument("--no-pure", action="store_true", help="do not also time the pure-Python scan (HANGDBG_PURE=1)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "nccl_summary.json"))
    a = ap.parse_args()
    size = parse_size(a.size)
    tmpdir = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd, name = tempfile.mkstemp(prefix="hangdbg-nccl-bench-", suffix=".log", dir=tmpdir)
    os.close(fd)
    path = Path(name)
    try:
        t0 = time.perf_counter()
        info = build(path, size, a.ranks)
        print(f"built {path} ({info['bytes'] / 2**20:.0f} MiB, {a.ranks} ranks) in {time.perf_counter() - t0:.1f}s")
        genv = dict(os.environ, LC_ALL="C")
        # an installed tool runs from cached bytecode (pip compiles it at install): a sandbox's PYTHONDONTWRITEBYTECODE
        # would make every timed run compile hangdbg's modules again; one untimed run on a tiny log writes the cache
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT), NO_COLOR="1")
        cmd = [sys.executable, "-m", "hangdbg", "nccl", "summary", str(path), "--json"]
        tiny = path.with_name(path.name + ".warm")
        tiny.write_bytes(path.open("rb").read(1 << 16).rsplit(b"\n", 1)[0] + b"\n")
        subprocess.run(cmd[:-2] + [str(tiny), "--json"], env=env, capture_output=True)
        tiny.unlink()
        path_used = subprocess.run([sys.executable, "-c", "from hangdbg.evidence.nccl.scan import scan_path; print(scan_path())"],
                                   env=env, capture_output=True, text=True, check=True).stdout.strip()
        grep, hd = [], []
        for _ in range(a.repeat):  # alternating: both see the same load
            grep.append(timed(["grep", "-c", "NCCL INFO", str(path)], env=genv))
            hd.append(timed(cmd, env=env))
        pure = []
        if not a.no_pure and path_used != "python":
            pure = [timed(cmd, env=dict(env, HANGDBG_PURE="1")) for _ in range(a.repeat)]
        lines = int(grep[0][3].strip())
        doc = json.loads(hd[0][3])
        found = [f["kind"] + ":" + ",".join(map(str, f["ranks"])) for f in doc["findings"] if f["severity"] == "suspect"]
        g, h = min(x[0] for x in grep), min(x[0] for x in hd)
        res = {
            "benchmark": "nccl_summary", "cpus": len(os.sched_getaffinity(0)), "bytes": info["bytes"],
            "ranks": a.ranks, "nccl_info_lines": lines, "grep_seconds": round(g, 3), "hangdbg_seconds": round(h, 3),
            "ratio_vs_grep": round(h / g, 2), "scan_path": path_used,
            "grep_cpu_seconds": round(min(x[4] for x in grep), 3),
            "hangdbg_cpu_seconds": round(min(x[4] for x in hd), 3),
            "cpu_ratio_vs_grep": round(min(x[4] for x in hd) / min(x[4] for x in grep), 2),
            "load_average_1min": round(os.getloadavg()[0], 2), "hangdbg_mb_per_s": round(info["bytes"] / 2**20 / h, 1),
            "peak_rss_tree_mb": round(max(x[1] for x in hd) / 2**20, 1),
            "peak_rss_largest_process_mb": round(max(x[2] for x in hd) / 2**20, 1),
            "lines_read": doc["source"]["lines_read"], "records": doc["source"]["records"], "suspects": found,
            "goal": "ratio <= 2, peak RSS < 200 MB", **source_state(),
        }
        if pure:
            hp = min(x[0] for x in pure)
            assert json.loads(pure[0][3])["findings"] == doc["findings"], "the two scan paths disagree"
            res.update({"pure_python_seconds": round(hp, 3), "pure_python_ratio_vs_grep": round(hp / g, 2),
                        "pure_python_cpu_seconds": round(min(x[4] for x in pure), 3),
                        "pure_python_peak_rss_tree_mb": round(max(x[1] for x in pure) / 2**20, 1)})
    finally:
        if not a.keep:
            path.unlink(missing_ok=True)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
    print(f"grep -c 'NCCL INFO': {g:.3f}s ({lines} lines)   hangdbg nccl summary: {h:.3f}s "
          f"({res['hangdbg_mb_per_s']} MiB/s, {path_used} scan)   ratio {res['ratio_vs_grep']}x")
    if pure:
        print(f"pure-Python scan (HANGDBG_PURE=1): {res['pure_python_seconds']}s   ratio {res['pure_python_ratio_vs_grep']}x")
    print(f"CPU seconds: grep {res['grep_cpu_seconds']}, hangdbg {res['hangdbg_cpu_seconds']} "
          f"(ratio {res['cpu_ratio_vs_grep']}x); load average {res['load_average_1min']} on {res['cpus']} CPUs")
    print(f"peak RSS: process tree {res['peak_rss_tree_mb']} MB, largest process {res['peak_rss_largest_process_mb']} MB")
    print(f"suspects found: {found}  -> {a.json}")


if __name__ == "__main__":
    main()
