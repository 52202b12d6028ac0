"""Benchmark: ``hangdbg.stacks.analysis.analyze`` on 1k / 10k / 100k synthetic ranks.

Goal (from the project plan): "Analysis of 100,000 synthetic ranks (stacks of ~40 frames, a few
hundred distinct shapes): under 2 s and 1 GB on this 2-core machine, with the 1k / 10k / 100k
times showing linear growth."

What is measured
----------------
* Time of ``analyze(dumps)`` only (building the dumps is not timed): ``--repeat`` runs per case
  (default 5), ``time.perf_counter``, best and median reported, plus microseconds per rank so
  that linear growth shows as a flat column. A ``gc.collect()`` precedes every run; the cyclic GC
  stays enabled during the run (as in the CLI), and the GC collections it triggered are counted.
* Two variants of the same synthetic job:
    - ``interned``: equal frames are the same ``Frame`` object (what a parser with a frame
      cache would produce); every rank still has its own ``Thread`` objects and frame tuples.
      This exercises the analyzer's fast path (bucketing threads by the ``id`` of their frames).
      hangdbg's parser (``hangdbg/stacks/pyspy_text.py``, ``_frame``) interns frames without
      locals since commit 7d4058e, so this is what ``hangdbg dump`` / ``analyze`` feed it.
    - ``fresh``: every rank has its own ``Frame`` objects (equal but not identical; strings are
      shared). This is the analyzer's fallback path: dumps taken with ``--locals`` (frames with
      locals are not interned), dumps built by other code, or the parser before 7d4058e.
* Memory, for 100k ranks, in a fresh subprocess per variant (``--child-memory``): RSS after
  building the dumps, peak RSS of the whole process after ``analyze`` (``VmHWM``, i.e. the
  ``ru_maxrss`` of this process image: interpreter + dumps + analysis), the RSS increase over
  the built dumps, and the memory attributable to ``analyze`` itself (``tracemalloc`` peak
  during a second ``analyze`` run, started after the dumps exist) and kept by its result.
* Correctness: every result is checked: the odd ranks planted in the synthetic job must be
  exactly the suspects, with the expected kinds, so the benchmark cannot silently time a broken
  analysis.

The synthetic job
-----------------
A Megatron-style tensor-parallel training job hung in ``all_reduce``: ``<module>`` -> main ->
torchelastic ``wrapper`` -> trainer run/fit/train_epoch/train_step -> DDP ``forward`` ->
nested ``nn.Module`` calls (3 frames per level) -> RowParallelLinear -> autograd ``apply`` ->
``_reduce`` -> ``c10d_logger.wrapper`` -> ``distributed_c10d.all_reduce``: 41 frames for the
majority shape (29 to 50 for its variants). Paths are absolute (hangdbg runs py-spy with
``--full-filenames``) and do not exist on this machine (offline analysis of saved dumps).

* Main thread: 192 benign variants (``<module>`` line x ``train_epoch`` line x module nesting
  depth x layer line), all waiting in the same ``all_reduce`` from the same call site; 90 % of
  the ranks are in variant 0, the rest spread uniformly. These ranks are *not* suspects.
* 85 % of ranks have a pin-memory thread (48 variants, 7 frames), 10 % a checkpoint-writer
  thread (16 variants, 6 frames): 1 to 3 threads per rank.
* Three odd ranks: rank N-1 in ``broadcast`` from another call site, rank N//3 in ``barrier``
  from ``save_checkpoint``, rank N//2+1 outside any collective, waiting for the data loader
  (``outside-collective``, the root of the wait-for graph and the only suspect since issue 12;
  the other two were ``different-collective`` suspects before).
* ``world_size`` = N, 8 ranks per node (``local_rank``, ``local_world_size``, ``host``), one
  sample per rank (as ``collect`` returns with ``--samples 1``).

``python bench/analyze_scale.py --files`` measures the whole ``hangdbg analyze DIR`` command on
saved per-rank files instead, against ``cat | sort | uniq -c`` (``bench/analyze_files.py``).

Run: ``python bench/analyze_scale.py`` (about 2 minutes); ``--sizes 1000,10000`` for a quick
run; ``--profile`` prints a cProfile of one 100k run per variant. Results are printed and
written to ``bench/results/analyze_scale.json``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import source_state  # noqa: E402
from hangdbg.stacks.analysis import analyze
from hangdbg.model import RankDump, Thread
from hangdbg.frames import Frame

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

GOAL_SECONDS = 2.0
GOAL_BYTES = 1 << 30



SP = "/opt/conda/envs/train/lib/python3.11/site-packages/"
STD = "/opt/conda/envs/train/lib/python3.11/"
APP = "/workspace/llm-train/"
MODULE = SP + "torch/nn/modules/module.py"
C10D = SP + "torch/distributed/distributed_c10d.py"
LOGGER = SP + "torch/distributed/c10d_logger.py"
DATALOADER = SP + "torch/utils/data/dataloader.py"
PIN = SP + "torch/utils/data/_utils/pin_memory.py"
RANKS_PER_NODE = 8

# ----------------------------------------------------------------------------------------------
# Stack shapes. Each shape is a list of (function, file, line), OUTERMOST first (reading order);
# they are reversed to py-spy's innermost-first order when turned into frames.
# ----------------------------------------------------------------------------------------------


def _module_call(function_file_line):
    """One nn.Module call as py-spy shows it: two torch frames, then the module's forward."""
    return [("_wrapped_call_impl", MODULE, 1751), ("_call_impl", MODULE, 1762), function_file_line]


def _outer(module_line, epoch_line):
    return [
        ("<module>", APP + "train.py", module_line),
        ("main", APP + "train.py", 398),
        ("wrapper", SP + "torch/distributed/elastic/multiprocessing/errors/__init__.py", 355),
        ("run", APP + "llm/trainer.py", 211),
        ("fit", APP + "llm/trainer.py", 240),
        ("train_epoch", APP + "llm/trainer.py", epoch_line),
    ]


MODULE_LINES = (412, 415)
EPOCH_LINES = (288, 291, 295, 301, 306, 310)
DEPTHS = tuple(range(8))  # extra nn.Module nesting levels (wrappers), 3 frames each
LAYER_LINES = (61, 64)
MAJORITY_VARIANT = (MODULE_LINES[0], EPOCH_LINES[0], 4, LAYER_LINES[0])  # 41 frames


def main_shape(module_line, epoch_line, depth, layer_line):
    """The majority's place: all_reduce from ``_reduce`` (mappings.py:25), at some depth."""
    s = _outer(module_line, epoch_line)
    s.append(("train_step", APP + "llm/trainer.py", 333))
    s += _module_call(("forward", SP + "torch/nn/parallel/distributed.py", 1637))  # DDP
    s.append(("_run_ddp_forward", SP + "torch/nn/parallel/distributed.py", 1464))
    s += _module_call(("forward", APP + "llm/model.py", 520))  # GPT
    s += _module_call(("forward", APP + "llm/model.py", 470))  # TransformerStack
    for level in range(depth):
        s += _module_call(("forward", APP + "llm/wrappers.py", 30 + 10 * level))
    s += _module_call(("forward", APP + "llm/blocks.py", 140))  # Block
    s += _module_call(("forward", APP + "llm/layers.py", layer_line))  # RowParallelLinear
    s += [
        ("reduce_from_tensor_model_parallel_region", APP + "llm/mappings.py", 120),
        ("apply", SP + "torch/autograd/function.py", 575),
        ("forward", APP + "llm/mappings.py", 72),
        ("_reduce", APP + "llm/mappings.py", 25),  # the call site
        ("wrapper", LOGGER, 81),
        ("all_reduce", C10D, 2806),
    ]
    return s


def odd_broadcast():
    """Rank N-1: broadcast from another call site (the demo's 'mismatch', at scale)."""
    return _outer(MODULE_LINES[0], EPOCH_LINES[0]) + [
        ("train_step", APP + "llm/trainer.py", 329),
        ("sync_rng_state", APP + "llm/utils.py", 44),
        ("wrapper", LOGGER, 81),
        ("broadcast", C10D, 2714),
    ]


def odd_barrier():
    """Rank N//3: barrier in save_checkpoint while the others reduce."""
    return _outer(MODULE_LINES[0], 318) + [
        ("save_checkpoint", APP + "llm/checkpoint.py", 97),
        ("wrapper", LOGGER, 81),
        ("barrier", C10D, 4635),
    ]


def odd_dataloader():
    """Rank N//2+1: not in any collective, waiting for its data loader workers."""
    return _outer(MODULE_LINES[0], 284) + [
        ("__next__", DATALOADER, 708),
        ("_next_data", DATALOADER, 1458),
        ("_get_data", DATALOADER, 1410),
        ("_try_get_data", DATALOADER, 1243),
        ("get", STD + "queue.py", 180),
        ("wait", STD + "threading.py", 331),
    ]


def pin_shape(loop_line, step_line, get_line, wait_line):
    return [
        ("_bootstrap", STD + "threading.py", 1002),
        ("_bootstrap_inner", STD + "threading.py", 1045),
        ("run", STD + "threading.py", 982),
        ("_pin_memory_loop", PIN, loop_line),
        ("do_one_step", PIN, step_line),
        ("get", STD + "queue.py", get_line),
        ("wait", STD + "threading.py", wait_line),
    ]


PIN_VARIANTS = list(itertools.product((55, 59), (28, 32, 35), (171, 180), (320, 324, 331, 359)))  # 48


def writer_shape(loop_line, wait_line):
    return [
        ("_bootstrap", STD + "threading.py", 1002),
        ("_bootstrap_inner", STD + "threading.py", 1045),
        ("run", STD + "threading.py", 982),
        ("_writer_loop", APP + "llm/checkpoint.py", loop_line),
        ("get", STD + "queue.py", 171),
        ("wait", STD + "threading.py", wait_line),
    ]


WRITER_VARIANTS = list(itertools.product((150, 152, 158, 161, 166, 170, 171, 175), (320, 331)))  # 16

# ----------------------------------------------------------------------------------------------
# Building the dumps
# ----------------------------------------------------------------------------------------------


class ShapeBook:
    """Every distinct stack shape, as interned frame tuples (innermost first)."""

    def __init__(self) -> None:
        self._frames: dict[tuple, Frame] = {}
        self.main_variants = list(itertools.product(MODULE_LINES, EPOCH_LINES, DEPTHS, LAYER_LINES))
        self.main = {v: self._intern(main_shape(*v)) for v in self.main_variants}
        self.pin = [self._intern(pin_shape(*v)) for v in PIN_VARIANTS]
        self.writer = [self._intern(writer_shape(*v)) for v in WRITER_VARIANTS]
        self.odd = {
            "broadcast": self._intern(odd_broadcast()),
            "barrier": self._intern(odd_barrier()),
            "dataloader": self._intern(odd_dataloader()),
        }

    def _intern(self, shape_outermost_first) -> tuple[Frame, ...]:
        out = []
        for key in reversed(shape_outermost_first):
            f = self._frames.get(key)
            if f is None:
                f = self._frames[key] = Frame(*key)
            out.append(f)
        return tuple(out)

    @property
    def distinct_shapes(self) -> int:
        return len(self.main) + len(self.pin) + len(self.writer) + len(self.odd)


def odd_ranks(n: int) -> dict[int, str]:
    """rank -> odd shape name; the suspects the analysis must name."""
    return {n // 3: "barrier", n // 2 + 1: "dataloader", n - 1: "broadcast"}


def expected_suspects(n: int) -> set[tuple[tuple[int, ...], str]]:
    # the wait-for graph blames only its root, the rank blocked in the data loader: the two ranks in
    # other collectives may be other process groups waiting for it (they get `waiting` findings)
    return {((n // 2 + 1,), "outside-collective")}


def build_dumps(n: int, variant: str, book: ShapeBook, seed: int = 2026) -> list[RankDump]:
    """N synthetic ranks. ``variant``: "interned" (shared Frame objects) or "fresh" (own Frames).

    Every rank gets its own Thread objects and its own frame tuples in both variants, as a
    parser would produce them; only the Frame objects differ.
    """
    rng = random.Random(seed)
    odd = odd_ranks(n)
    fresh = variant == "fresh"

    def frames_of(shape: tuple[Frame, ...]) -> tuple[Frame, ...]:
        if fresh:
            return tuple([Frame(f.function, f.file, f.line) for f in shape])
        return tuple(list(shape))  # a new tuple object holding the shared frames

    dumps = []
    others = [v for v in book.main_variants if v != MAJORITY_VARIANT]
    for r in range(n):
        pid = 41000 + (r % RANKS_PER_NODE) * 37
        if r in odd:
            shape = book.odd[odd[r]]
        elif rng.random() < 0.90:
            shape = book.main[MAJORITY_VARIANT]
        else:
            shape = book.main[rng.choice(others)]
        threads = [Thread(pid, "MainThread", "idle", frames_of(shape))]
        if rng.random() < 0.85:
            pin = book.pin[0] if rng.random() < 0.8 else rng.choice(book.pin)
            threads.append(Thread(pid + 12, "Thread-1 (_pin_memory_loop)", "idle", frames_of(pin)))
        if rng.random() < 0.10:
            threads.append(Thread(pid + 13, "checkpoint-writer", "idle", frames_of(rng.choice(book.writer))))
        threads = tuple(threads)
        dumps.append(RankDump(
            rank=r, pid=pid, host=f"node{r // RANKS_PER_NODE:05d}", local_rank=r % RANKS_PER_NODE,
            world_size=n, local_world_size=RANKS_PER_NODE, threads=threads, samples=(threads,),
            rank_source="RANK", cmdline="python -u train.py --config llm.yaml",
            python="3.11.7",
        ))
    return dumps


def shape_stats(dumps: list[RankDump]) -> dict:
    """Distinct thread shapes actually present, frames per main thread, threads per rank."""
    keys = {t.stack_key for d in dumps for t in d.threads}
    depths = [len(d.threads[0].frames) for d in dumps]
    nthreads = [len(d.threads) for d in dumps]
    return {
        "distinct_thread_shapes": len(keys),
        "main_frames_median": statistics.median(depths),
        "main_frames_min": min(depths),
        "main_frames_max": max(depths),
        "threads_per_rank": {k: nthreads.count(k) for k in sorted(set(nthreads))},
        "frame_objects": len({id(f) for d in dumps for t in d.threads for f in t.frames}),
    }


def check(analysis, n: int) -> None:
    """The odd ranks, and only they, are the suspects; all ranks were analyzed."""
    got = {(s.ranks, s.kind) for s in analysis.suspects}
    want = expected_suspects(n)
    if got != want:
        raise AssertionError(f"wrong suspects for {n} ranks: {sorted(got)} != {sorted(want)}")
    if len(analysis.places) != n or analysis.missing_ranks or analysis.unreadable:
        raise AssertionError(f"{n} ranks: {len(analysis.places)} placed, missing {analysis.missing_ranks}")
    majority = analysis.classes[0]
    if majority.place.collective != "all_reduce" or len(majority.ranks) < 0.85 * n:
        raise AssertionError(f"unexpected majority group: {majority.place} x {len(majority.ranks)}")


# ----------------------------------------------------------------------------------------------
# Measurements
# ----------------------------------------------------------------------------------------------


def gc_collections() -> list[int]:
    return [s["collections"] for s in gc.get_stats()]


def time_analyze(dumps: list[RankDump], n: int, repeat: int) -> dict:
    times, gcs = [], []
    for _ in range(repeat):
        gc.collect()
        before = gc_collections()
        t0 = time.perf_counter()
        result = analyze(dumps)
        dt = time.perf_counter() - t0
        gcs.append([a - b for a, b in zip(gc_collections(), before)])
        check(result, n)
        del result
        times.append(dt)
    best, median = min(times), statistics.median(times)
    return {
        "ranks": n,
        "runs": repeat,
        "best_s": best,
        "median_s": median,
        "all_s": times,
        "us_per_rank_best": best / n * 1e6,
        "us_per_rank_median": median / n * 1e6,
        "gc_collections_per_run_gen0_1_2": gcs[0],
    }


def _status(field: str) -> int:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def rss_bytes() -> int:
    return _status("VmRSS")


def child_memory(n: int, variant: str) -> dict:
    """Run in a fresh interpreter: build N dumps, analyze, report RSS and tracemalloc peaks."""
    import tracemalloc

    base = rss_bytes()
    book = ShapeBook()
    t0 = time.perf_counter()
    dumps = build_dumps(n, variant, book)
    build_s = time.perf_counter() - t0
    gc.collect()
    after_build = rss_bytes()
    t0 = time.perf_counter()
    result = analyze(dumps)
    analyze_s = time.perf_counter() - t0
    check(result, n)
    after_analyze = rss_bytes()
    # Peak RSS of this process. VmHWM is the high-water mark of this process image only;
    # ru_maxrss is also reported but on Linux it carries over the RSS of the parent at fork
    # time across exec, so it is only meaningful when the parent is small (the parent runs
    # these children before it builds any dumps for exactly that reason).
    peak = _status("VmHWM")
    ru_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    del result
    gc.collect()
    tracemalloc.start()
    result = analyze(dumps)
    traced_kept, traced_peak = tracemalloc.get_traced_memory()  # kept = the Analysis itself
    tracemalloc.stop()
    check(result, n)
    return {
        "ranks": n,
        "variant": variant,
        "rss_start_bytes": base,
        "rss_after_build_bytes": after_build,
        "rss_after_analyze_bytes": after_analyze,
        "peak_rss_bytes": peak,
        "ru_maxrss_bytes": ru_maxrss,
        "analyze_rss_increase_bytes": max(0, peak - after_build),
        "analyze_tracemalloc_peak_bytes": traced_peak,
        "analysis_result_bytes": traced_kept,
        "build_s": build_s,
        "analyze_s_untraced": analyze_s,
    }


def run_child(n: int, variant: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child-memory", str(n), "--variants", variant]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def profile(dumps: list[RankDump], variant: str, top: int = 18) -> str:
    import cProfile
    import io
    import pstats

    gc.collect()
    prof = cProfile.Profile()
    prof.enable()
    analyze(dumps)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return f"--- cProfile, {variant}, {len(dumps)} ranks (tottime) ---\n" + buf.getvalue()


def mib(b: int) -> str:
    return f"{b / 2**20:,.0f} MiB"


def main() -> int:
    if "--files" in sys.argv[1:]:  # the whole command on saved files (issue 16): bench/analyze_files.py
        import analyze_files

        sys.argv.remove("--files")
        return analyze_files.main()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="rank counts, comma-separated")
    ap.add_argument("--variants", default="interned,fresh", help="interned and/or fresh")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per case (best and median reported)")
    ap.add_argument("--no-memory", action="store_true", help="skip the 100k memory subprocesses")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one run at the largest size")
    ap.add_argument("--out", type=Path, default=RESULTS / "analyze_scale.json")
    ap.add_argument("--child-memory", type=int, metavar="N", help=argparse.SUPPRESS)
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    if args.child_memory:
        print(json.dumps(child_memory(args.child_memory, variants[0])))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]

    book = ShapeBook()
    print(f"analyze_scale: {book.distinct_shapes} distinct thread shapes defined; "
          f"majority main stack {len(book.main[MAJORITY_VARIANT])} frames; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    load_before = os.getloadavg()
    if load_before[0] > 0.5:
        print(f"  note: load average {load_before[0]:.2f} before the run: other work shares the CPUs, "
              "expect noisy medians (the best run is the least disturbed)")
    # Memory first, while this process is still small (see child_memory on ru_maxrss).
    memory = []
    if not args.no_memory:
        n = max(sizes)
        for variant in variants:
            print(f"  memory: fresh subprocess, {variant}, {n:,} ranks ...", flush=True)
            memory.append(run_child(n, variant))

    rows, stats, profiles = [], {}, []
    for variant in variants:
        for n in sizes:
            t0 = time.perf_counter()
            dumps = build_dumps(n, variant, book)
            build_s = time.perf_counter() - t0
            st = shape_stats(dumps)
            stats[f"{variant}/{n}"] = st
            row = {"variant": variant, "build_s": build_s, **time_analyze(dumps, n, args.repeat)}
            rows.append(row)
            print(f"  {variant:8} {n:>7} ranks: best {row['best_s']:.3f} s, median {row['median_s']:.3f} s "
                  f"({row['us_per_rank_median']:.2f} us/rank; {st['distinct_thread_shapes']} shapes present; "
                  f"built in {build_s:.1f} s)", flush=True)
            if args.profile and n == max(sizes):
                profiles.append(profile(dumps, variant))
            del dumps
            gc.collect()

    # ---- report ----
    print()
    print(f"Time of analyze(dumps) (GC enabled; best / median of {args.repeat} runs; goal judged on the best; "
          f"load average {load_before[0]:.2f} -> {os.getloadavg()[0]:.2f})")
    print(f"{'variant':10} {'ranks':>8} {'best s':>8} {'median s':>9} {'us/rank':>8} {'x vs 1k':>8} {'goal':>6}")
    base = {}
    for r in rows:
        base.setdefault(r["variant"], r["us_per_rank_median"])
        growth = r["us_per_rank_median"] / base[r["variant"]]
        goal = ("ok" if r["best_s"] < GOAL_SECONDS else "MISS") if r["ranks"] >= 100000 else ""
        r["per_rank_vs_smallest"] = growth
        print(f"{r['variant']:10} {r['ranks']:>8,} {r['best_s']:>8.3f} {r['median_s']:>9.3f} "
              f"{r['us_per_rank_median']:>8.2f} {growth:>8.2f} {goal:>6}")
    if memory:
        print()
        print(f"Memory, {max(sizes):,} ranks, fresh subprocess each")
        print(f"{'variant':10} {'RSS built':>10} {'peak RSS':>10} {'analyze +RSS':>13} {'tracemalloc':>12} {'result':>9} {'goal':>5}")
        for m in memory:
            goal = "ok" if m["peak_rss_bytes"] < GOAL_BYTES else "MISS"
            print(f"{m['variant']:10} {mib(m['rss_after_build_bytes']):>10} {mib(m['peak_rss_bytes']):>10} "
                  f"{mib(m['analyze_rss_increase_bytes']):>13} {mib(m['analyze_tracemalloc_peak_bytes']):>12} "
                  f"{mib(m['analysis_result_bytes']):>9} {goal:>5}")
    for p in profiles:
        print()
        print(p)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "analyze_scale",
        "goal": "100,000 ranks analyzed in < 2 s and < 1 GB; linear growth 1k/10k/100k",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "source": source_state(),
        "distinct_shapes_defined": book.distinct_shapes,
        "timing": rows,
        "shape_stats": stats,
        "memory": memory,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
