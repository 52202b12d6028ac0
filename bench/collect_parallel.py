"""Benchmark: collecting the stacks of 32 local hung ranks, parallel vs. one py-spy after another.

Goal (from the project plan): "Collection of 32 local hung ranks: wall time compared with
running the same py-spy dumps one after another (the serial loop of the recipe): at least 1.8x
faster on 2 cores."

What is measured
----------------
A real 32-rank torchrun/gloo job hung in the ``mismatch`` scenario (rank 31 in ``broadcast``,
ranks 0-30 in ``all_reduce``) is started with :class:`hangdbg.demo.launch.DemoJob`, its ranks
are found with ``find_ranks([job.pid])``, and then, in this one process, alternately for
``--rounds`` rounds (default 10; the order of the methods rotates every round, so no method always runs
first or last):

* ``serial recipe``: ``subprocess.run(["py-spy", "dump", "--pid", PID])`` for each rank, one
  after another (the ``for pid in ...; do py-spy dump --pid $pid; done`` recipe), output
  captured;
* ``serial hangdbg argv``: the same loop with exactly the argv hangdbg runs
  (``pyspy_argv(find_pyspy(), pid, PySpyOptions())``: the same executable, ``--full-filenames``),
  to compare like with like;
* ``collect jobs=J``: ``hangdbg.collect.local.collect(ranks, CollectOptions(jobs=J))`` for each
  J of ``--jobs`` (default 1, 2, 4, 8, 16; the CLI default is 8). This includes parsing every
  dump into RankDump objects, which the serial loops do not do;
* when ``find_pyspy()`` resolves to a wrapper script (e.g. a pyenv shim) and the real py-spy
  binary sits next to this Python, ``collect jobs=8, real binary`` and ``serial recipe, real
  binary`` show what the wrapper costs.

Wall time is ``time.perf_counter`` around the whole loop / ``collect`` call; CPU time of the
py-spy children is ``getrusage(RUSAGE_CHILDREN)`` (user + sys) over the same span, and "other
CPU" is what the rest of the machine used meanwhile (busy CPU from ``psutil.cpu_times()`` minus
py-spy minus this process): on a shared machine it shows which runs were disturbed. Rounds
start once the hung ranks are idle (their summed CPU use below 0.05 s/s). Reported:
median and best per method, the speedup (serial recipe median / method median) and the speedup
over the like-for-like serial loop, and the best J.

Once (``--no-native`` skips it): the same comparison with ``--native`` (C/C++ frames), serial
hangdbg argv vs. ``collect(jobs=J, native=True)`` for J in ``--native-jobs`` (default 2, 4, 8).

Checks, so that a broken collection cannot look fast: every ``collect`` run must return 32
RankDumps without error and with threads, and ``analyze()`` must name rank 31 (and only it) as
the suspect; every serial py-spy run must exit 0 and print a thread.

The job is always stopped (``job.stop()`` in ``finally``, also on Ctrl-C / SIGTERM). Needs
about 0.35 GB of free memory per rank (checked before start; the 32 ranks took 7 GiB RSS).
Takes about 2 minutes on 2 cores: ~30 s to start the job, ~30 s of plain rounds, ~50 s of
``--native`` runs.

Run: ``python bench/collect_parallel.py`` (``--rounds``, ``--jobs 1,2,4,8,16``, ``--nproc``,
``--no-native``). Results are printed and written to ``bench/results/collect_parallel.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from _common import source_state  # noqa: E402
from hangdbg.stacks.analysis import analyze
from hangdbg.collect.local import CollectOptions, collect
from hangdbg.collect.procs import find_ranks
from hangdbg.tools.pyspy import PySpyOptions, find_pyspy, pyspy_argv
from hangdbg.demo.launch import DemoJob

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
GOAL_SPEEDUP = 1.8
CLI_DEFAULT_JOBS = CollectOptions().jobs
BYTES_PER_RANK = 350 * 2**20  # a gloo/CPU torch rank idles at ~250-300 MB RSS




def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def is_script(path: str) -> bool:
    """True when ``path`` is a ``#!`` script (a pyenv shim, a wrapper), not a binary."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# The methods. Each returns nothing and raises AssertionError when its result is wrong.
# ---------------------------------------------------------------------------------------------


def serial(argvs: list[list[str]]) -> None:
    """One py-spy after another, output captured, as the shell recipe does."""
    for argv in argvs:
        res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if res.returncode != 0 or "Thread " not in res.stdout:
            raise AssertionError(f"{' '.join(argv)} failed ({res.returncode}): {res.stdout[-300:]}{res.stderr[-300:]}")


def check_collected(dumps, nproc: int) -> None:
    """All ranks collected without error, and the analysis names the last rank."""
    bad = [(d.rank, d.error) for d in dumps if d.error or not d.threads]
    if len(dumps) != nproc or bad:
        raise AssertionError(f"collected {len(dumps)}/{nproc} ranks; failures: {bad[:4]}")
    a = analyze(dumps)
    got = [(s.ranks, s.kind) for s in a.suspects]
    if got != [((nproc - 1,), "different-collective")]:
        raise AssertionError(f"analyze named {got}, expected rank {nproc - 1}: {a.headline}")


def parallel(ranks, jobs: int, opts: PySpyOptions, nproc: int, seconds: list[float]) -> None:
    dumps = collect(ranks, CollectOptions(pyspy=opts, jobs=jobs),
                    on_result=lambda p, k, res: seconds.append(res.seconds))
    check_collected(dumps, nproc)


def busy_cpu() -> float:
    """CPU seconds the whole machine spent busy so far (all processes, all CPUs)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0) + getattr(t, "steal", 0)


def measure(fn) -> tuple[float, float, float]:
    """Wall seconds, py-spy (children) CPU seconds, and CPU seconds used by anything else on the
    machine (not py-spy, not this process) during one call: other work disturbs the timing."""
    cpu0, own0, busy0, t0 = children_cpu(), time.process_time(), busy_cpu(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    child, own, busy = children_cpu() - cpu0, time.process_time() - own0, busy_cpu() - busy0
    return wall, child, max(0.0, busy - child - own)


def quiesce(ranks, limit: float = 0.05, timeout: float = 90.0) -> float:
    """Wait until the hung ranks use less than ``limit`` CPU (seconds per second, summed over all
    ranks): just after ``wait_ready`` some are still finishing their start-up. Returns the rate."""
    procs = [psutil.Process(r.pid) for r in ranks]
    deadline = time.monotonic() + timeout
    while True:
        before = sum(sum(p.cpu_times()[:2]) for p in procs)
        time.sleep(1.0)
        rate = sum(sum(p.cpu_times()[:2]) for p in procs) - before
        if rate < limit or time.monotonic() > deadline:
            return rate


# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, default=32, help="ranks of the hung demo job")
    ap.add_argument("--rounds", type=int, default=10, help="alternating rounds of every method (~3 s each)")
    ap.add_argument("--jobs", default="1,2,4,8,16", help="collect(jobs=J) values to measure")
    ap.add_argument("--no-native", action="store_true", help="skip the --native comparison")
    ap.add_argument("--native-jobs", default="2,4,8", help="collect(jobs=J, native=True) values to measure once")
    ap.add_argument("--ready-timeout", type=float, default=600.0, help="seconds for the job to hang")
    ap.add_argument("--out", type=Path, default=RESULTS / "collect_parallel.json")
    args = ap.parse_args()
    jobs_list = [int(j) for j in args.jobs.split(",") if j]
    native_jobs = [int(j) for j in args.native_jobs.split(",") if j]
    nproc = args.nproc

    avail = psutil.virtual_memory().available
    if avail < nproc * BYTES_PER_RANK:
        print(f"not enough free memory for {nproc} torch ranks: {avail / 2**30:.1f} GiB available, "
              f"about {nproc * BYTES_PER_RANK / 2**30:.1f} GiB needed", file=sys.stderr)
        return 2
    exe = find_pyspy()
    if exe is None:
        print("py-spy not found", file=sys.stderr)
        return 2
    beside = Path(sys.executable).parent / "py-spy"
    real = str(beside) if is_script(exe) and beside.exists() and not is_script(str(beside)) else None

    # SIGTERM -> SystemExit, so that the finally block below stops the job.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    job = DemoJob("mismatch", nproc)
    doc: dict = {
        "benchmark": "collect_parallel",
        "goal": f"{nproc} local hung ranks collected >= {GOAL_SPEEDUP}x faster than the serial py-spy loop",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "memory_available_gib": round(avail / 2**30, 1)},
        "pyspy": {"executable": exe, "is_wrapper_script": is_script(exe), "real_binary": real,
                  "version": subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()},
        "source": source_state(),
        "nproc": nproc,
        "rounds": args.rounds,
    }
    try:
        t0 = time.perf_counter()
        job.start()
        print(f"collect_parallel: starting a {nproc}-rank hung job (mismatch), torchrun pid {job.pid} ...", flush=True)
        job.wait_ready(timeout=args.ready_timeout)
        doc["job_start_s"] = time.perf_counter() - t0
        ranks = find_ranks([job.pid])
        if len(ranks) != nproc:
            raise AssertionError(f"find_ranks found {len(ranks)} ranks, expected {nproc}")
        rss = sum(psutil.Process(r.pid).memory_info().rss for r in ranks)
        doc["job_rss_gib"] = round(rss / 2**30, 2)
        print(f"  job hung after {doc['job_start_s']:.0f} s; {len(ranks)} ranks, RSS {rss / 2**30:.1f} GiB total, "
              f"{psutil.virtual_memory().available / 2**30:.1f} GiB still available; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)

        rate = quiesce(ranks)
        doc["ranks_idle_cpu_rate"] = rate
        print(f"  ranks idle: {rate:.3f} CPU-s/s summed over {nproc} ranks", flush=True)
        pids = [r.pid for r in ranks]
        plain = PySpyOptions()
        methods: dict[str, object] = {
            "serial recipe": lambda: serial([["py-spy", "dump", "--pid", str(p)] for p in pids]),
            "serial hangdbg argv": lambda: serial([pyspy_argv(exe, p, plain) for p in pids]),
        }
        latencies: dict[str, list[float]] = {}
        for j in jobs_list:
            latencies[f"collect jobs={j}"] = []
            methods[f"collect jobs={j}"] = (lambda j=j: parallel(ranks, j, plain, nproc, latencies[f"collect jobs={j}"]))
        if real:
            methods["serial recipe, real binary"] = lambda: serial([[real, "dump", "--pid", str(p)] for p in pids])
            latencies["collect jobs=8, real binary"] = []
            methods["collect jobs=8, real binary"] = lambda: parallel(
                ranks, 8, PySpyOptions(executable=real), nproc, latencies["collect jobs=8, real binary"])

        names = list(methods)
        walls: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        others: dict[str, list[float]] = {n: [] for n in names}
        for rnd in range(args.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for name in order:
                wall, cpu, other = measure(methods[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
                others[name].append(other)
                print(f"  round {rnd + 1}/{args.rounds}  {name:28} {wall:6.2f} s wall, {cpu:6.2f} s py-spy CPU, "
                      f"{other:5.2f} s other CPU", flush=True)

        rows = []
        ref = statistics.median(walls["serial recipe"])
        like = statistics.median(walls["serial hangdbg argv"])
        for name in names:
            med = statistics.median(walls[name])
            lat = latencies.get(name) or []
            rows.append({
                "method": name,
                "wall_s": walls[name],
                "median_s": med,
                "best_s": min(walls[name]),
                "pyspy_cpu_s_median": statistics.median(cpus[name]),
                "other_cpu_s_median": statistics.median(others[name]),
                "speedup_vs_serial_recipe": ref / med,
                "speedup_vs_serial_same_argv": like / med,
                "per_dump_latency_s_median": statistics.median(lat) if lat else None,
            })
        doc["results"] = rows
        coll = [r for r in rows if r["method"].startswith("collect jobs=") and "real" not in r["method"]]
        best = min(coll, key=lambda r: r["median_s"])
        default = next((r for r in coll if r["method"] == f"collect jobs={CLI_DEFAULT_JOBS}"), None)
        doc["best_jobs"] = int(best["method"].split("=")[1])
        doc["cli_default_jobs"] = CLI_DEFAULT_JOBS

        if not args.no_native:
            # --native dumps unwind C/C++ stacks with symbols: ~0.6 s of py-spy CPU each here,
            # so one run per method (about a minute in all).
            native = PySpyOptions(native=True)
            print("  native: serial hangdbg argv --native ...", flush=True)
            s_wall, s_cpu, s_other = measure(lambda: serial([pyspy_argv(exe, p, native) for p in pids]))
            doc["native"] = [{"method": "serial hangdbg argv --native", "wall_s": s_wall, "pyspy_cpu_s": s_cpu,
                              "other_cpu_s": s_other, "speedup": 1.0, "per_dump_latency_s_median": s_wall / nproc}]
            for j in native_jobs:
                print(f"  native: collect jobs={j} --native ...", flush=True)
                lat: list[float] = []
                p_wall, p_cpu, p_other = measure(lambda: parallel(ranks, j, native, nproc, lat))
                doc["native"].append({"method": f"collect jobs={j} --native", "wall_s": p_wall, "pyspy_cpu_s": p_cpu,
                                      "other_cpu_s": p_other, "speedup": s_wall / p_wall,
                                      "per_dump_latency_s_median": statistics.median(lat)})
        doc["loadavg_end"] = os.getloadavg()
    finally:
        job.stop()
        left = [p for p in psutil.process_iter(["cmdline"]) if str(job.workdir) in " ".join(p.info["cmdline"] or [])]
        if left:
            print(f"warning: {len(left)} demo processes still alive after stop()", file=sys.stderr)

    # ---- report ----
    print()
    print(f"Collection of {nproc} hung ranks, {os.cpu_count()} CPUs, {args.rounds} rounds "
          f"(median; speedup = serial recipe median / method median)")
    print(f"{'method':30} {'median s':>9} {'best s':>7} {'py-spy CPU s':>13} {'other CPU s':>12} {'per dump s':>11} "
          f"{'speedup':>8} {'vs same argv':>13}")
    for r in rows:
        lat = f"{r['per_dump_latency_s_median']:.3f}" if r["per_dump_latency_s_median"] else ""
        print(f"{r['method']:30} {r['median_s']:>9.2f} {r['best_s']:>7.2f} {r['pyspy_cpu_s_median']:>13.2f} "
              f"{r['other_cpu_s_median']:>12.2f} {lat:>11} {r['speedup_vs_serial_recipe']:>7.2f}x "
              f"{r['speedup_vs_serial_same_argv']:>12.2f}x")
    print()
    print(f"best J: {doc['best_jobs']} ({best['speedup_vs_serial_recipe']:.2f}x); CLI default J={CLI_DEFAULT_JOBS}: "
          + (f"{default['speedup_vs_serial_recipe']:.2f}x, "
             f"{'meets' if default['speedup_vs_serial_recipe'] >= GOAL_SPEEDUP else 'MISSES'} the {GOAL_SPEEDUP}x goal"
             if default else "not measured"))
    if "native" in doc:
        print()
        print("With --native (one run each; speedup = serial wall / method wall)")
        print(f"{'method':30} {'wall s':>9} {'py-spy CPU s':>13} {'other CPU s':>12} {'per dump s':>11} {'speedup':>8}")
        for n in doc["native"]:
            print(f"{n['method']:30} {n['wall_s']:>9.2f} {n['pyspy_cpu_s']:>13.2f} {n['other_cpu_s']:>12.2f} "
                  f"{n['per_dump_latency_s_median']:>11.3f} {n['speedup']:>7.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
