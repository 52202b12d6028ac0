"""A real 4-rank gloo job traced with `tracer`: rank 1 killed with SIGKILL, rank 2 frozen with
SIGSTOP; `hangdbg traces` says where every rank stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, of_kind, run_json

pytest.importorskip("torch")

JOB = textwrap.dedent("""\
    import os, signal, sys, time
    import tracer
    tracer.NicerTrace(outdir=sys.argv[1]).start()
    import torch, torch.distributed as dist

    def train_step(t, step, rank):
        if step == 2 and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # rank 1 dies here
        if step == 2 and rank == 2:
            open(os.path.join(sys.argv[1], "rank2-waiting"), "w").close()
            time.sleep(600)  # rank 2 is frozen here (SIGSTOP from outside)
        dist.all_reduce(t)

    def main():
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        t = torch.ones(4)
        for step in range(5):
            train_step(t, step, rank)

    main()
""")


def test_traces_of_killed_and_frozen_ranks(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "traces"
    out.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    try:
        for rank in range(4):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="4", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([sys.executable, str(script), str(out)], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        end = time.monotonic() + 180
        while not (out / "rank2-waiting").exists() or procs[1].poll() is None:
            assert time.monotonic() < end, "the job did not get to step 2"
            time.sleep(0.2)
        os.kill(procs[2].pid, signal.SIGSTOP)
        time.sleep(1.0)  # ranks 0 and 3 are now blocked in all_reduce
        rc, doc = run_json("traces", out, "--grep", "all_reduce")
        assert rc == 3
        ranks = {r["rank"]: r for r in doc["source"]["facts"]["traces"]}
        assert sorted(ranks) == [0, 1, 2, 3]
        assert ranks[1]["last_lines"][-1].endswith("| os.kill(os.getpid(), signal.SIGKILL)  # rank 1 dies here")
        assert ranks[2]["last_lines"][-1].endswith("| time.sleep(600)  # rank 2 is frozen here (SIGSTOP from outside)")
        for r in (0, 3):
            assert ranks[r]["last_lines"][-1].endswith("| dist.all_reduce(t)")
        (elsewhere,) = of_kind(doc, "trace-diverged")  # the same calls; ranks 1 and 2 stop away from all_reduce
        assert elsewhere["ranks"] == [1, 2] and elsewhere["severity"] == "suspect"
        assert "while ranks {0, 3} are at" in elsewhere["summary"] and "dist.all_reduce(t)" in elsewhere["summary"]
        (stopped,) = of_kind(doc, "trace-stopped")
        assert stopped["ranks"] == [0, 1, 2, 3] and stopped["severity"] == "warning"  # none ended: the job hangs
        assert ranks[0]["grep_count"] == ranks[3]["grep_count"] == 3  # steps 0, 1, 2
        assert ranks[1]["grep_count"] == ranks[2]["grep_count"] == 2
    finally:
        for p in procs:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
