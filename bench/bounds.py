"""Peak memory of hangdbg on one input of up to 2 GB (issue 31: "memory stays under 1 GB for any
single input of up to 2 GB").

Each case runs the real CLI in a child process and reads its peak resident memory from ``wait4`` (the
child and the processes it waited for: the fake py-spy and ssh are small):

- ``dump-<shape>``: ``hangdbg dump --pid RANK`` with a fake ``py-spy`` on the command line printing
  ``--mb`` MB: ``threads`` (a million one-frame threads, each its own stack), ``deep`` (one thread of
  distinct frames), ``line`` (one endless frame line);
- ``analyze-file`` / ``report-file``: a saved py-spy dump file of ``--mb`` MB of ``threads``;
- ``node``: ``hangdbg dump --hosts node1 --launcher ssh`` through a fake ssh that runs the remote
  command here, the node's ``--remote-python`` printing ``--mb`` MB of stderr and one ``--mb`` MB line.

The baseline in the same run is the input's own size, and ``--root DIR`` measures another checkout (the
code before the bounds: ``git worktree add /tmp/before main``). Prints a table and writes
bench/results/bounds.json.

    python bench/bounds.py [--mb 2000] [--cases dump-threads,analyze-file] [--root DIR]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, source_state

SHAPES = r"""
import sys
out = sys.stdout.buffer
total, shape, n, i = MB * 1_000_000, SHAPE, 0, 0
pid = sys.argv[sys.argv.index("--pid") + 1] if "--pid" in sys.argv else "1"
out.write(f"Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n".encode())
if shape != "threads":
    out.write(f'Thread {pid} (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2050)\n'.encode())
while n < total:
    if shape == "threads":  # a million one-frame threads (at 2000 MB), each its own stack
        s = "".join(f'Thread {j} (idle): "T{j}"\n    wait (threading.py:{j})\n    run (/job/a{j}.py:1)\n\n'
                    for j in range(i, i + 10000))
    elif shape == "line":  # one endless frame line
        s = "x" * 1_000_000
    else:  # a deep thread of distinct frames
        s = "".join(f"    f{j} (/job/mod{j}.py:{j})\n" for j in range(i, i + 10000))
    i += 10000
    out.write(s.encode())
    n += len(s)
out.write(b"\n    <module> (/job/train.py:20)\n")
"""
"""A fake ``py-spy dump`` (MB, SHAPE set above it): ``MB`` megabytes of one ``SHAPE``, ``threads``,
``deep`` or ``line``, for the ``--pid`` given."""

NODE = r"""
import sys
err, out = sys.stderr.buffer, sys.stdout.buffer
line = b"E" * 999 + b"\n"
for _ in range(MB * 1000):  # MB megabytes of stderr, line by line
    err.write(line)
block = b"x" * 1_000_000
for _ in range(MB):  # one MB-megabyte line on stdout
    out.write(block)
out.write(b"\nlast words\n")
err.write(b"node: the agent failed at the end\n")
sys.exit(5)
"""
"""A node's fake ``--remote-python`` (MB set above it): MB megabytes of stderr and one MB-megabyte
line, then a last stderr line and exit status 5."""

SSH = r"""
import os, sys
os.execvp("sh", ["sh", "-c", sys.argv[-1]])
"""

CASES = ("dump-threads", "dump-deep", "dump-line", "analyze-file", "report-file", "node")


def script(path: Path, body: str, **consts: object) -> Path:
    """Write the executable Python script ``path``: ``consts`` as assignments, then ``body``."""
    head = "".join(f"{k} = {v!r}\n" for k, v in consts.items())
    path.write_text(f"#!{sys.executable}\n{head}{body}")
    path.chmod(0o755)
    return path


def pyspy_printer(path: Path, shape: str, mb: int) -> Path:
    """A fake py-spy at ``path`` printing ``mb`` MB of ``shape`` (:data:`SHAPES`); also used by
    tests/test_harm_bounds.py."""
    return script(path, SHAPES, MB=mb, SHAPE=shape)


def node_printer(path: Path, mb: int) -> Path:
    """A node's fake ``--remote-python`` at ``path`` (:data:`NODE`); also used by tests/test_harm_bounds.py."""
    return script(path, NODE, MB=mb)


def measure(argv: list[str], root: Path, env: dict[str, str]) -> dict:
    """Run ``python -m hangdbg ARGV`` from ``root``: seconds, exit status, peak RSS (MiB), stderr's end."""
    env = dict(env, PYTHONPATH=str(root), NO_COLOR="1", COLUMNS="160")
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "hangdbg", *map(str, argv)], stdout=subprocess.DEVNULL,
                                stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=root)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode("utf-8", "replace")[-400:]
    return {"seconds": round(time.monotonic() - t0, 1), "exit": proc.returncode,
            "peak_rss_mib": round(usage.ru_maxrss / 1024), "traceback": "Traceback" in tail, "stderr_end": tail}


def run_case(case: str, mb: int, root: Path, work: Path, rank_pid: int) -> dict:
    env = dict(os.environ)
    out = work / f"out-{case}"
    if case.startswith("dump-"):
        exe = pyspy_printer(work / f"py-spy-{case}", case[5:], mb)
        return measure(["dump", "--pid", rank_pid, "--py-spy", exe, "--timeout", 600, "--no-adapt", "-o", out,
                        "--json"], root, env)
    if case in ("analyze-file", "report-file"):
        dump = work / "rank-0000.txt"
        if not dump.exists():
            gen = pyspy_printer(work / "gen", "threads", mb)
            with open(dump, "wb") as f:
                subprocess.run([str(gen), "--pid", "7"], stdout=f, check=True)
        return measure([case.split("-")[0], dump, "-o", out], root, env)
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    script(bin_dir / "ssh", SSH)
    node = node_printer(work / "node-python", mb)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return measure(["dump", "--hosts", "node1", "--launcher", "ssh", "--node-timeout", 600, "--remote-python", node,
                    "-o", out, "--json"], root, env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=2000, help="MB of each input (default 2000)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--root", type=Path, default=ROOT, help="the hangdbg checkout measured (default: this one)")
    ap.add_argument("--dir", type=Path, default=None, help="where the inputs go (default: a temporary folder)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "bounds.json")
    args = ap.parse_args()
    rank_env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], env=rank_env)
    rows = {}
    try:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            for case in args.cases.split(","):
                rows[case] = run_case(case, args.mb, args.root.resolve(), Path(tmp), rank.pid)
                r = rows[case]
                print(f"{case:14} {args.mb:6d} MB in  {r['peak_rss_mib']:6d} MiB peak RSS  {r['seconds']:7.1f} s  "
                      f"exit {r['exit']}{'  TRACEBACK' if r['traceback'] else ''}", flush=True)
    finally:
        rank.kill()
        rank.wait()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"mb": args.mb, "root": str(args.root), "cases": rows, "load": os.getloadavg(),
                                    "cpus": os.cpu_count(), **source_state()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
