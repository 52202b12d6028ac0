"""Real jobs started without torchrun: ranks launched by hand (part of a 2-node job) and mp.spawn."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from conftest import run_json, suspects

pytest.importorskip("torch")

INIT_ONLY = textwrap.dedent("""\
    import torch.distributed as dist
    from datetime import timedelta
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
""")

SPAWN = textwrap.dedent("""\
    import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
    from datetime import timedelta
    def worker(rank, world, port):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(hours=1))
        t = torch.ones(4)
        open(os.path.join(sys.argv[2], f"ready-{rank}"), "w").close()
        if rank == world - 1:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
    if __name__ == "__main__":
        mp.spawn(worker, args=(3, int(sys.argv[1])), nprocs=3)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.3)
    raise AssertionError("timed out waiting for the job")


def _kill(procs):
    for p in procs:
        try:
            for c in psutil.Process(p.pid).children(recursive=True):
                c.kill()
        except psutil.Error:
            pass
        p.kill()
        p.wait()


def test_half_of_a_two_node_job_waits_in_rendezvous(tmp_path):
    """Ranks 0-3 of an 8-rank job (LOCAL_WORLD_SIZE=4): the other node never came; nobody here is to blame."""
    port = _free_port()
    script = tmp_path / "init_only.py"
    script.write_text(INIT_ONLY)
    procs = []
    try:
        for r in range(4):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="8", LOCAL_WORLD_SIZE="4",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            procs.append(subprocess.Popen([sys.executable, str(script)], env=env))
        # importing torch takes seconds on 2 cores; then the ranks wait in init_process_group
        end = time.monotonic() + 180
        for attempt in range(1000):  # one -o per run (a dir holding another run is refused)
            rc, doc = run_json("dump", "--pid", *[p.pid for p in procs], "-o", tmp_path / f"out-{attempt}")
            settled = not doc["stacks"]["progressing_ranks"]  # a dump that saw a rank reach init saw progress
            if settled and all((r["place"] or {}).get("kind") == "init" for r in doc["stacks"]["ranks"]) \
                    or time.monotonic() > end:
                break
            time.sleep(1)
        assert rc == 0, doc["headline"]
        assert suspects(doc) == [] and doc["stacks"]["missing_ranks"] == []
        assert all(r["place"]["kind"] == "init" for r in doc["stacks"]["ranks"])
        assert "4 ranks live on nodes not examined" in doc["headline"]
        assert "no single rank stands out" in doc["headline"]
    finally:
        _kill(procs)


def test_mp_spawn_children_numbered_by_start_order(tmp_path):
    script = tmp_path / "spawn_job.py"
    script.write_text(SPAWN)
    parent = subprocess.Popen([sys.executable, str(script), str(_free_port()), str(tmp_path)])
    try:
        _wait(lambda: len(list(tmp_path.glob("ready-*"))) == 3)
        time.sleep(1.5)
        rc, doc = run_json("dump", "--pid", parent.pid, "-o", tmp_path / "out")
        assert rc == 3
        assert [r["rank_source"] for r in doc["stacks"]["ranks"]] == ["order"] * 3
        assert [(s["ranks"], s["kind"]) for s in suspects(doc)] == [([2], "different-collective")]
    finally:
        _kill([parent])
