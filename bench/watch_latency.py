"""``hangdbg watch`` on real torchrun/gloo demo jobs: how long from a hang to a finished dump, and
what the watcher costs while the job is healthy.

**(a) Stall to dump.** A 2-rank ``stuck-io`` job logs ``step N`` every ~0.5 s
(``--log-steps --step-seconds 0.5``); at step 6 rank 1 blocks reading a FIFO and rank 0 waits
in ``all_reduce``. A real ``python -m hangdbg watch --pid LAUNCHER --once --json --interval 1
--stall S`` is started after step 1, in log mode (``--log job.log --log-pattern '^step '``) or in
stack mode (no ``--log``: non-blocking py-spy samples), one mode at a time, a fresh job per round.
The hang starts when the ranks write their ready markers (the latest marker's mtime); the time
from it to the watcher's exit is split, with the fields of the ``watch`` document, into
``--stall`` + detection delay + ``dump_seconds`` (the stall's ``hangdbg dump``); the detection
delay is the rest: the sampling granularity (``quiet_seconds`` - ``--stall``), the start of the
quiet period relative to the hang (in log mode, the last step line is printed ~0.5 s before the
hang; in stack mode the first unchanged sample is taken after it), the hook-free stall handling
and the watcher's exit.

**(b) Watcher CPU while the job is healthy.** One 2-rank ``healthy`` job (``--step-seconds 1
--log-steps``: each rank computes in pure Python for 1 s per step, so the job keeps its 2 ranks
busy) runs while four watchers run one after the other, each for a window of ~30 s after 3 s of
warm-up: stack mode and log mode, at ``--interval 1`` and ``--interval 10`` (``--stall 300``:
never fires). CPU seconds are read with psutil at both ends of the window: the watcher's
user+system, plus its reaped children (``children_user/system``: the py-spy runs) plus its live
descendants; the job's the same way from the torchrun launcher (its ranks). Figures: watcher CPU
/ wall (a share of one core), and the ratio watcher CPU / job CPU over the same window (the
baseline).

    python bench/watch_latency.py [--rounds 2] [--window 30] [--stall 6] [--quick]

``--quick``: 1 round, 10 s windows. Results: ``bench/results/watch_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, source_state  # noqa: E402
from hangdbg.demo.launch import DemoJob  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "watch_latency.json"
WARMUP = 3.0


def watcher(*args: object, cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "hangdbg", "watch", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(path: Path, text: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{text!r} never appeared in {path}")


def latency_round(mode: str, stall: float, base: Path) -> dict:
    job = DemoJob("stuck-io", 2, workdir=base / "job",
                  args=["--hang-step", "6", "--step-seconds", "0.5", "--log-steps", "--steps", "100"]).start()
    try:
        wait_for_line(job.log_path, "step 1 ")
        signals = ["--log", job.log_path, "--log-pattern", "^step "] if mode == "log" else []
        w = watcher("--pid", job.pid, *signals, "--stall", stall, "--interval", "1", "--once", "--json",
                    "-o", base / "out", cwd=base)
        out, err = w.communicate(timeout=stall + 180)
        ended = time.time()
        markers = list(job.ready_dir.glob("rank-*"))
        if w.returncode != 3 or len(markers) != 2:
            raise RuntimeError(f"{mode}: watcher exit {w.returncode}, {len(markers)} ready markers:\n{err[-2000:]}")
        hung = max(m.stat().st_mtime for m in markers)
        [st] = json.loads(out)["stalls"]
        total = ended - hung
        return {"mode": mode, "stall": stall, "total_seconds": round(total, 2), "quiet_seconds": st["quiet_seconds"],
                "dump_seconds": st["dump_seconds"], "detection_delay": round(total - stall - st["dump_seconds"], 2),
                "suspects": st["suspects"], "signal": st["signal"]}
    finally:
        job.stop()


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``, its reaped children and its live descendants (0 when it is gone)."""
    try:
        p = psutil.Process(pid)
        t = p.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for c in p.children(recursive=True):
            try:
                ct = c.cpu_times()
                total += ct.user + ct.system
            except psutil.Error:
                continue
        return total
    except psutil.Error:
        return 0.0


def overhead_window(job: DemoJob, mode: str, interval: float, window: float, base: Path) -> dict:
    signals = ["--log", job.log_path, "--log-pattern", "^step "] if mode == "log" else []
    out = base / f"out-{mode}-{interval:g}"
    w = watcher("--pid", job.pid, *signals, "--stall", "300", "--interval", interval, "-o", out, cwd=base)
    try:
        time.sleep(WARMUP)
        t0, w0, j0 = time.monotonic(), cpu_seconds(w.pid), cpu_seconds(job.pid)
        time.sleep(window)
        t1, w1, j1 = time.monotonic(), cpu_seconds(w.pid), cpu_seconds(job.pid)
    finally:
        w.send_signal(signal.SIGTERM)
        _out, err = w.communicate(timeout=60)
    if w.poll() is None or "Traceback" in err:
        raise RuntimeError(f"{mode} --interval {interval:g}: {err[-2000:]}")
    doc = json.loads((out / "watch.json").read_text())
    wall, wcpu, jcpu = t1 - t0, w1 - w0, j1 - j0
    return {"mode": mode, "interval": interval, "wall_seconds": round(wall, 2), "watcher_cpu_seconds": round(wcpu, 3),
            "watcher_cpu_share": round(wcpu / wall, 4), "job_cpu_seconds": round(jcpu, 2),
            "job_cpu_share": round(jcpu / wall, 3), "watcher_vs_job": round(wcpu / jcpu, 5) if jcpu else None,
            "observations": doc["observations"], "stalls": len(doc["stalls"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="(a): rounds per mode (a fresh job each)")
    ap.add_argument("--window", type=float, default=30.0, help="(b): seconds measured per watcher")
    ap.add_argument("--stall", type=float, default=6.0, help="(a): --stall of the watchers")
    ap.add_argument("--quick", action="store_true", help="1 round, 10 s windows")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.window = 1, 10.0
    load_before = os.getloadavg()
    started = time.monotonic()
    latency: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="hangdbg-bench-watch-") as tmp:
        for i in range(args.rounds):
            for mode in ("log", "stacks"):
                r = latency_round(mode, args.stall, Path(tmp) / f"lat-{mode}-{i}")
                latency.append(r)
                print(f"(a) {mode:6} round {i}: hang -> dump done {r['total_seconds']:5.2f} s = --stall {args.stall:g}"
                      f" + detection {r['detection_delay']:5.2f} + dump {r['dump_seconds']:5.2f}"
                      f" (quiet {r['quiet_seconds']:g} s, suspects {r['suspects']})", flush=True)
        overhead: list[dict] = []
        job = DemoJob("healthy", 2, workdir=Path(tmp) / "healthy",
                      args=["--step-seconds", "1", "--log-steps"]).start()
        try:
            wait_for_line(job.log_path, "step 1 ")
            for mode in ("stacks", "log"):
                for interval in (1.0, 10.0):
                    r = overhead_window(job, mode, interval, args.window, Path(tmp))
                    overhead.append(r)
                    print(f"(b) {mode:6} --interval {interval:>4g}: watcher {100 * r['watcher_cpu_share']:6.2f} % of a core"
                          f" ({r['watcher_cpu_seconds']:.2f} CPU s in {r['wall_seconds']:.0f} s, {r['observations']} obs.);"
                          f" job {100 * r['job_cpu_share']:.0f} % -> watcher/job {r['watcher_vs_job']:.4f}", flush=True)
        finally:
            job.stop()
    summary = {}
    for mode in ("log", "stacks"):
        rows = [r for r in latency if r["mode"] == mode]
        summary[mode] = {k: statistics.median(r[k] for r in rows)
                         for k in ("total_seconds", "detection_delay", "dump_seconds", "quiet_seconds")}
    doc = {
        "benchmark": "watch_latency",
        "workload": {"ranks": 2, "backend": "gloo", "launcher": "torchrun", "stall": args.stall,
                     "latency_job": "stuck-io --hang-step 6 --step-seconds 0.5 --log-steps",
                     "overhead_job": "healthy --step-seconds 1 --log-steps", "window_seconds": args.window,
                     "rounds": args.rounds},
        "latency": latency, "latency_median": summary, "overhead": overhead,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "seconds": round(time.monotonic() - started, 1),
        "source": source_state(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"written {args.out} ({doc['seconds']:.0f} s; load average {doc['load_average'][0]} -> {doc['load_average'][1]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
