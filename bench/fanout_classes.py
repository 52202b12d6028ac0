"""Benchmark: the coordinator merging the nodes' equivalence classes, 12,500 nodes x 8 ranks.

Goal (issue 28, "merge at the nodes"): the coordinator's merge and analysis of 100,000 ranks
(12,500 nodes x 8) in <= 3 s and < 1 GB, with the same verdict as the raw-text path.

Recorded agent output, replayed by ``FakeRunner`` into ``fan_out`` and then ``analyze(whole_job=
True)``, as ``bench/fanout_scale.py`` does. The job is the one of ``fanout_scale.py`` (~40-frame
stacks, a ``pin_memory`` thread per rank, the last rank in ``broadcast`` while the others wait in
``all_reduce``). For each node the agent's part is done here, untimed: its 8 py-spy texts are
parsed (``load_dump_texts``, the parser ``dump`` uses) and sent the way ``hangdbg agent`` sends
them (``hello`` with wire 2, one ``class`` message per distinct stack, ``done``). Baseline in the
same run: today's raw-text path (wire 1: one ``rank`` message per rank with its py-spy text;
the coordinator writes ``OUT/raw/<host>/`` and parses every text).

Each measurement runs in a fresh subprocess (its peak RSS, ``ru_maxrss``, is the memory figure;
it includes the recorded lines the child reads, reported separately as ``input_mb``). The verdict
(headline and every finding: kind, severity, ranks, hosts, summary) of the two paths is compared
at ``--compare-nodes`` (default 1,000 nodes; equal or the script fails), and the odd rank is
checked as the one suspect at every size.

Usage: ``python bench/fanout_classes.py [--nodes 12500] [--ranks-per-node 8] [--repeat 3]
[--compare-nodes 1000] [--no-raw-at-scale]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import source_state  # noqa: E402
from fanout_scale import dump_text, recorded_outputs  # noqa: E402

from hangdbg.collect.agent import send_classes  # noqa: E402
from hangdbg.stacks.saved import load_dump_texts  # noqa: E402
from hangdbg.transport.wire import WIRE_VERSION, encode_message  # noqa: E402


def class_outputs(nodes: int, per_node: int) -> dict[str, list[str]]:
    """Every node's frame lines as a wire-2 agent sends them (module docstring)."""
    world = nodes * per_node
    odd = world - 1
    out: dict[str, list[str]] = {}
    for n in range(nodes):
        host = f"node{n + 1:04d}"
        lines: list[str] = []
        ids = iter(range(1, 1 << 30))

        def send(message: dict) -> None:
            lines.extend(encode_message(host, next(ids), message))

        send({"type": "hello", "host": host, "pid": 1, "version": "bench", "schema_version": 4, "wire": WIRE_VERSION})
        ranks = range(n * per_node, (n + 1) * per_node)
        texts = [(f"rank-{r:04d}.txt", dump_text(r, host, 10000 + r, world, odd)) for r in ranks]
        dumps, _ = load_dump_texts(texts)
        send_classes(host, dumps, send)
        send({"type": "done", "host": host, "status": "ok", "error": None, "ranks": list(ranks), "seconds": 0.5,
              "raw": {"dir": f"/out/raw/{host}", "saved": per_node, "not_saved": []}})
        out[host] = lines
    return out


def write_input(path: Path, outputs: dict[str, list[str]]) -> int:
    """The recorded lines as ``host<TAB>line`` text; their bytes."""
    with path.open("w") as f:
        for host, lines in outputs.items():
            for line in lines:
                f.write(f"{host}\t{line}\n")
    return path.stat().st_size


def child(input_path: str, out_dir: str) -> dict:
    """One coordinator run (in a fresh process): read the recorded lines, fan_out + analyze."""
    from hangdbg.collect.fanout import fan_out
    from hangdbg.outdir import OutDir
    from hangdbg.parallel import gc_paused
    from hangdbg.rankset import compress
    from hangdbg.stacks.analysis import analyze
    from hangdbg.transport.runners import FakeRunner

    outputs: dict[str, list[str]] = {}
    with open(input_path) as f:
        for row in f:
            host, _, line = row.rstrip("\n").partition("\t")
            outputs.setdefault(host, []).append(line)
    rss_input = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hosts = list(outputs)
    t0, c0 = time.perf_counter(), time.process_time()
    with gc_paused():  # as `dump` runs the analysis (hangdbg.api._dump: analyze under gc_paused)
        result = fan_out(FakeRunner(outputs), hosts, ["agent"], OutDir(out_dir), timeout=600)
        t1, c1 = time.perf_counter(), time.process_time()
        a = analyze(result.dumps, whole_job=True, store_keys=result.store_keys, ops=result.ops)
    t2, c2 = time.perf_counter(), time.process_time()
    return {
        "merge_s": t1 - t0, "analyze_s": t2 - t1, "total_s": t2 - t0,
        "merge_cpu_s": c1 - c0, "analyze_cpu_s": c2 - c1, "total_cpu_s": c2 - c0, "load_avg_1min": os.getloadavg()[0],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_after_input_mb": rss_input / 1024,
        "ranks": len(result.dumps), "nodes_ok": sum(n.status == "ok" for n in result.nodes),
        "headline": a.headline,
        # ranks and hosts as range text (the waiting finding lists 99,999 ranks)
        "findings": [[f.kind.value, f.severity.value, compress(f.ranks), compress_hosts(f.hosts), f.summary]
                     for f in a.findings],
        "suspects": [list(s.ranks) for s in a.suspects],
    }


def compress_hosts(hosts: tuple[str, ...]) -> str:
    """``node0001-node12500``-style text of the bench's host names (``nodeNNNN``)."""
    from hangdbg.rankset import compress
    return "node:" + compress(int(h[4:]) for h in hosts) if all(h[4:].isdigit() for h in hosts) else ",".join(hosts)


def run_child(input_path: Path, base_dir: str) -> dict:
    tmp = tempfile.mkdtemp(prefix="hangdbg-bench-", dir=base_dir)
    try:
        res = subprocess.run([sys.executable, __file__, "--child", str(input_path), tmp], capture_output=True, text=True,
                             timeout=1800)
        if res.returncode != 0:
            raise SystemExit(f"child failed:\n{res.stderr[-3000:]}")
        return json.loads(res.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(kind: str, nodes: int, per_node: int, repeat: int, work: Path, base_dir: str) -> dict:
    make = class_outputs if kind == "classes" else recorded_outputs
    t0 = time.perf_counter()
    outputs = make(nodes, per_node)
    made = time.perf_counter() - t0
    path = work / f"{kind}-{nodes}.txt"
    size = write_input(path, outputs)
    lines = sum(len(v) for v in outputs.values())
    del outputs
    runs = [run_child(path, base_dir) for _ in range(repeat)]
    path.unlink()
    world = nodes * per_node
    for r in runs:
        assert r["suspects"] == [[world - 1]], (kind, nodes, r["suspects"], r["headline"])
        assert r["ranks"] == world and r["nodes_ok"] == nodes, r
    total = [r["total_s"] for r in runs]
    cpu = [r["total_cpu_s"] for r in runs]
    return {
        "path": kind, "nodes": nodes, "ranks": world, "frame_lines": lines, "input_mb": size / 2**20,
        "agent_side_s": made,
        "total_s": {"best": min(total), "median": statistics.median(total), "all": total},
        "total_cpu_s": {"best": min(cpu), "median": statistics.median(cpu), "all": cpu},
        "merge_cpu_s_best": min(r["merge_cpu_s"] for r in runs),
        "analyze_cpu_s_best": min(r["analyze_cpu_s"] for r in runs),
        "load_avg_1min": [r["load_avg_1min"] for r in runs],
        "merge_s_median": statistics.median(r["merge_s"] for r in runs),
        "analyze_s_median": statistics.median(r["analyze_s"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "rss_after_input_mb": max(r["rss_after_input_mb"] for r in runs),
        "headline": runs[0]["headline"], "findings": runs[0]["findings"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=12500)
    ap.add_argument("--ranks-per-node", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare-nodes", type=int, default=1000, help="nodes where both paths run and their verdicts are compared")
    ap.add_argument("--no-raw-at-scale", action="store_true", help="skip the raw-text path at --nodes (its time and memory)")
    ap.add_argument("--dir", default="/dev/shm" if Path("/dev/shm").is_dir() else tempfile.gettempdir(),
                    help="where OUT goes (the raw path writes every rank's file there)")
    ap.add_argument("--out", default=str(Path(__file__).with_name("results") / "fanout_classes.json"))
    ap.add_argument("--child", nargs=2, metavar=("INPUT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0

    per = args.ranks_per_node
    with tempfile.TemporaryDirectory(prefix="hangdbg-bench-in-") as work_dir:
        work = Path(work_dir)
        rows = [measure("raw", args.compare_nodes, per, args.repeat, work, args.dir),
                measure("classes", args.compare_nodes, per, args.repeat, work, args.dir)]
        same = (rows[0]["headline"], rows[0]["findings"]) == (rows[1]["headline"], rows[1]["findings"])
        if args.nodes != args.compare_nodes:
            rows.append(measure("classes", args.nodes, per, args.repeat, work, args.dir))
            if not args.no_raw_at_scale:
                rows.append(measure("raw", args.nodes, per, 1, work, args.dir))
    res = {
        "benchmark": "fanout_classes",
        "goal": "coordinator merge + analysis of 12,500 nodes x 8 ranks in <= 3 s and < 1 GB, same verdict as the raw path",
        "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "load_avg": os.getloadavg(),
        "python": platform.python_version(), **source_state(),
        "same_verdict_at_compare_nodes": same, "compare_nodes": args.compare_nodes, "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"{'path':8} {'nodes':>6} {'ranks':>7} {'input MB':>9} {'best s':>7} {'median s':>8} {'CPU s':>6} "
          f"{'merge CPU':>9} {'analyze CPU':>11} {'peak RSS MB':>11}")
    for r in rows:
        t = r["total_s"]
        print(f"{r['path']:8} {r['nodes']:6d} {r['ranks']:7d} {r['input_mb']:9.1f} {t['best']:7.2f} {t['median']:8.2f} "
              f"{r['total_cpu_s']['best']:6.2f} {r['merge_cpu_s_best']:9.2f} {r['analyze_cpu_s_best']:11.2f} "
              f"{r['peak_rss_mb']:11.0f}")
    print(f"same verdict (headline and findings) at {args.compare_nodes} nodes: {same}")
    print(f"headline: {rows[-1]['headline']}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
