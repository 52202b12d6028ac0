"""The issue's "done when", end to end: a dead job's directory holding a real core file of a
segfaulted torch rank, NCCL_DEBUG logs, a torchrun log with watchdog timeouts, flight-recorder
dumps and a syslog with an Xid; `hangdbg report` prints one verdict and writes an HTML report that
renders in a real headless Chromium.

The story: rank 5 on gpu-node-07 segfaulted (its real core file says so, rank and host read from
the core's own environment) right after its GPU fell off the bus (Xid 79 on gpu-node-07); the other
ranks' watchdogs time out with rank 5 one SeqNum behind. Separate NCCL logs of the same dead
allocation (another job) show rank 3 on node-00 refused by node-02 and never completing init.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import FIXTURES, check_golden, run_cli, run_json, suspects
from infra.chromium import chromium, rendered_dom
from infra.cores import TORCH, TORCH_LINE, core_of, core_pattern, env, start

SYSLOG = (
    "Jan  5 09:59:58 gpu-node-07 kernel: [12340.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05\n"
    "Jan  5 10:00:00 gpu-node-07 kernel: [12350.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, "
    "GPU has fallen off the bus.\n"
    "Jan  5 10:00:01 gpu-node-07 kernel: [12351.000001] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
)


@pytest.fixture(scope="module")
def dead_job(tmp_path_factory):
    pytest.importorskip("torch")
    if core_pattern().startswith("|") or shutil.which("gdb") is None:
        pytest.skip("cores are not written to the process's directory here, or gdb is missing")
    d = tmp_path_factory.mktemp("deadjob")
    crash = d / "crash"
    crash.mkdir()
    proc = start(TORCH, crash, env(RANK="5", LOCAL_RANK="1", WORLD_SIZE="8", SLURMD_NODENAME="gpu-node-07"), str(crash / "store"))
    core = core_of(proc, crash)
    (d / "cores").mkdir()
    core.rename(d / "cores" / f"core.{proc.pid}")
    shutil.rmtree(crash)
    (d / "logs").mkdir()
    shutil.copy(FIXTURES / "torchlog" / "watchdog_pg_v24.log", d / "logs" / "torchrun.log")
    (d / "nccl").mkdir()
    shutil.copy(FIXTURES / "nccl" / "refused.log", d / "nccl" / "slurm-4242.out")
    (d / "syslog").mkdir()
    (d / "syslog" / "gpu-node-07.syslog").write_text(SYSLOG)
    (d / "README.txt").write_text("collected by the on-call engineer at 3 a.m.\n")
    return d


def test_report_names_rank_5_on_gpu_node_07(dead_job, tmp_path):
    rc, doc = run_json("report", dead_job, "--html", tmp_path / "report.html", timeout=600)
    assert rc == 3
    kinds = {(s["kind"], tuple(s["ranks"]), tuple(s["hosts"])) for s in suspects(doc)}
    # the GPU that fell off the bus comes first, backed by the rank-5 core on the same node
    first = suspects(doc)[0]
    assert first["kind"] == "gpu-lost" and first["hosts"] == ["gpu-node-07"]
    assert doc["headline"].startswith("Xid 79 on gpu-node-07") and "core-crash" in doc["headline"]
    core = next(s for s in suspects(doc) if s["kind"] == "core-crash")
    assert core["ranks"] == [5] and core["hosts"] == ["gpu-node-07"]
    assert core["summary"].startswith("rank 5 on gpu-node-07 crashed with SIGSEGV")
    assert f"prog.py:{TORCH_LINE} train_step()" in core["summary"]
    assert ("seq-lagging", (5,), ()) in kinds
    refused = next(s for s in suspects(doc) if s["kind"] == "nccl-connect-failed")
    assert refused["hosts"] == ["node-02"] and "Connection refused" in refused["summary"]
    init = next(s for s in suspects(doc) if s["kind"] == "nccl-init-incomplete")
    assert init["ranks"] == [3] and init["hosts"] == ["node-00"]
    # the rank table has the core's and the log's view of rank 5; the core's stacks were analyzed
    assert {s["source"] for s in doc["ranks"] if s["rank"] == 5} >= {"core", "torch-log"}
    assert core["source"] == "core" and refused["source"] == "nccl" and first["source"] == "gpu"
    stacks = {r["rank"]: r for r in doc["stacks"]["ranks"]}  # the core's, and the C++ frames in the log
    assert stacks[5]["host"] == "gpu-node-07" and stacks[5]["rank_source"] == "RANK"
    assert not any(s["kind"] == "missing" for s in suspects(doc))  # a rank without a core is no finding
    files = {f["file"].rsplit("/", 1)[-1]: f["kinds"] for f in doc["files"]}
    assert files["torchrun.log"] == ["stack-text", "torch-log", "error-lines"]
    assert files["gpu-node-07.syslog"] == ["gpu", "error-lines"]
    assert [u["reason"] for u in doc["unparsed"] if u["file"].endswith("README.txt")] == ["no reader recognised its content"]
    check_golden(doc, "report")


@pytest.mark.skipif(chromium() is None, reason="chromium is not installed")
def test_html_report_renders(dead_job, tmp_path):
    html = tmp_path / "report.html"
    res = run_cli("report", dead_job, "--html", html, timeout=600)
    assert res.returncode == 3, res.stderr
    text = " ".join(res.stdout.split())
    assert "failure found" in text and "Xid 79 on gpu-node-07" in text
    dom = rendered_dom(html)
    verdict = dom.split('id="verdict"', 1)[1].split("</div>", 1)[0]
    assert "Xid 79 on gpu-node-07" in verdict
    suspects = dom.split('id="suspects"', 1)[1].split("</table>", 1)[0]
    for needle in ("crashed with SIGSEGV", "node-02", "Connection refused", "never completed init", "gpu-lost", "seq-lagging"):
        assert needle in suspects, needle
    assert 'id="tree"' in dom and "train_step" in dom.split('id="tree"', 1)[1]
