"""``dump`` of a real torchrun/gloo job asks NCCL RAS once and adds what it says, with its source.

There is no NCCL here (torch CPU, gloo): the job's ranks get ``NCCL_RAS_ADDR`` pointing at a RAS
stand-in on 127.0.0.1 (tests/_ras_standin.py, the protocol of NCCL's ``rasClientEventLoop``),
which answers in NCCL's JSON format (``rasDumpCommsToJSON``) about the job's real rank pids:
rank 3 one AllReduce behind, as an NCCL job whose rank 3 called broadcast would look. What is
real: the job, its processes and their start environment that ``dump`` reads, py-spy, the socket
conversation and the files under OUT. What is stood in: the RAS service and its numbers. The
plain gloo job (no ``NCCL_*`` variable, no libnccl mapped) is not asked at all.
"""

from __future__ import annotations

import psutil
import pytest
from _ras_standin import Rank, RasStandIn, json_report

from conftest import read_json, run_cli, run_json, suspects

pytestmark = pytest.mark.real


def _rank_pids(agent_pid: int) -> dict[int, int]:
    out = {}
    for c in psutil.Process(agent_pid).children(recursive=True):
        try:
            r = c.environ().get("RANK")
        except psutil.Error:
            continue
        if r is not None and r.isdigit():
            out[int(r)] = c.pid
    return out


def test_dump_of_a_job_with_nccl_ras_addr_adds_the_ras_finding(tmp_path):
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    with RasStandIn() as ras:
        job = DemoJob("mismatch", 4, env={"NCCL_RAS_ADDR": f"127.0.0.1:{ras.port}"}).start()
        try:
            job.wait_ready()
            pids = _rank_pids(job.pid)
            assert sorted(pids) == [0, 1, 2, 3]
            ranks = [Rank(r, "127.0.0.1", pid, r, counts={"AllReduce": 41 if r == 3 else 42}) for r, pid in pids.items()]
            ras.json_texts = [json_report([(0x5EED, 1, 2, 4, sorted(ranks, key=lambda x: x.rank), [])])]
            out = tmp_path / "out"
            rc, doc = run_json("dump", "--pid", job.pid, "-o", out)
            res = run_cli("dump", "--pid", job.pid, "-o", tmp_path / "out2")
        finally:
            job.stop()
    assert rc == 3
    by_source = {(f["source"], tuple(f["ranks"])) for f in suspects(doc)}
    assert ("stacks", (3,)) in by_source and ("nccl-ras", (3,)) in by_source
    assert all(3 in f["ranks"] for f in suspects(doc))  # the ranks that wait (0-2) are never suspects
    assert doc["ras"]["state"] == "answered" and doc["ras"]["format"] == "json" and doc["ras"]["queries"] == 2
    assert doc["ras"]["address"] == f"127.0.0.1:{ras.port}"
    assert (out / "ras" / "ras-1.json").read_text() == ras.json_texts[0]
    assert read_json(out / "hangdbg.json")["ras"] == doc["ras"]
    assert ras.commands.count("SET FORMAT json") == 4  # 2 queries per dump, 2 dumps
    assert "RAS: answered (127.0.0.1:" in res.stdout


def test_a_plain_gloo_job_is_not_asked(tmp_path):
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    with RasStandIn() as ras:
        job = DemoJob("mismatch", 2).start()
        try:
            job.wait_ready()
            rc, doc = run_json("dump", "--pid", job.pid, "-o", tmp_path / "out")
        finally:
            job.stop()
    assert doc["ras"]["state"] == "not-queried" and "not an NCCL job" in doc["ras"]["line"]
    assert not ras.commands and not (tmp_path / "out" / "ras").exists()
    assert {f["source"] for f in doc["findings"]} == {"stacks"}
