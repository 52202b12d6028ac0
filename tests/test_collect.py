"""`hangdbg collect`: evidence from the nodes' local disks over a real sshd (ssh pool and pdsh).

Both "nodes" are this machine: each node's files live under ROOT/<host>/ and the globs say
`{host}`, which the agent on each node replaces by its own name.
"""

from __future__ import annotations

import os

import pytest

from hangdbg.outdir import OutDir

from conftest import FIXTURES, check_golden, main_json, read_json, run_json, run_main, suspects
from infra.cores import SEGV, core_of, core_pattern, env, start


@pytest.fixture(scope="module")
def node_disks(tmp_path_factory):
    root = tmp_path_factory.mktemp("disks")
    for host in ("node1", "node2"):
        d = root / host
        d.mkdir()
        (d / "train.log").write_text(f"epoch 1 on {host}\n")
        (d / "trace-{}-0-1.txt".format(host)).write_text("# tracer v1\n")
    big = bytes(range(256)) * (3 * 4096 + 7)  # 3 MiB + a bit: four chunks
    (root / "node2" / "big.bin").write_bytes(big)
    return root


def _collect(sshd, *args):
    return run_json("collect", *args, "--ssh-config", sshd.config_path, "--connect-timeout", "3")


@pytest.mark.parametrize("launcher", ["ssh", "pdsh"])
def test_collect_writes_each_nodes_files(sshd, node_disks, tmp_path, launcher):
    out = tmp_path / "out"
    rc, doc = _collect(sshd, "--hosts", "node[1-2]", "--launcher", launcher,
                       "--logs", f"{node_disks}/{{host}}/*.log", "--logs", f"{node_disks}/{{host}}/*.bin",
                       "--traces", f"{node_disks}/{{host}}/trace-*.txt", "--dmesg", "-o", out)
    assert rc == 0, doc
    nodes = {n["host"]: n for n in doc["nodes"]}
    assert nodes["node1"]["status"] == nodes["node2"]["status"] == "ok"
    assert sorted(nodes["node1"]["files"]) == ["dmesg/kernel-node1.log", "logs/train.log", "traces/trace-node1-0-1.txt"]
    assert (out / "node1" / "logs" / "train.log").read_text() == "epoch 1 on node1\n"
    assert (out / "node2" / "logs" / "train.log").read_text() == "epoch 1 on node2\n"
    assert (out / "node2" / "logs" / "big.bin").read_bytes() == (node_disks / "node2" / "big.bin").read_bytes()
    assert (out / "node1" / "dmesg" / "kernel-node1.log").stat().st_size > 0
    assert not list(out.rglob("*.part"))
    assert read_json(out / "collect.json")["nodes"] == doc["nodes"]
    check_golden(doc, "collect")
    assert not doc["found"] and doc["findings"] == []


def test_collect_cuts_big_files_and_reports_dead_nodes(sshd, node_disks, tmp_path):
    out = tmp_path / "out"
    rc, doc = _collect(sshd, "--hosts", "node2,deadnode", "--launcher", "ssh", "--logs", f"{node_disks}/{{host}}/big.bin",
                       "--logs", "/nonexistent/{host}/x.log", "--max-bytes", "1500000", "-o", out)
    assert rc == 1  # a node not read: the tool could not do all of its job (never 3: it is no finding about the job)
    nodes = {n["host"]: n for n in doc["nodes"]}
    assert nodes["deadnode"]["status"] == "unreachable"
    (dead,) = doc["findings"]
    assert (dead["kind"], dead["severity"], dead["hosts"], dead["source"]) == ("node-failed", "warning", ["deadnode"], "nodes")
    assert not doc["found"] and "deadnode" in doc["headline"]
    assert nodes["node2"]["status"] == "ok"
    got = (out / "node2" / "logs" / "big.bin").read_bytes()
    assert got == (node_disks / "node2" / "big.bin").read_bytes()[-1500000:]


def test_collect_usage_errors(tmp_path):
    res = run_main("collect", "--hosts", "node1", "-o", tmp_path)
    assert res.returncode == 2 and "nothing to collect" in res.stderr
    res = run_main("collect", "--dmesg", "-o", tmp_path)
    assert res.returncode == 2 and "--jobid, --hosts or --hostfile" in res.stderr


def test_file_sink_rejects_path_escapes(tmp_path):
    import base64

    from hangdbg.collect.fanout import FileSink

    sink = FileSink(OutDir(tmp_path / "out"))
    data = base64.b64encode(b"x").decode()
    sink.write("../evil", {"name": "../../etc/passwd", "data": data, "offset": 0, "last": True})
    sink.write("node1", {"name": "/abs/../a", "data": data, "offset": 0, "last": True})
    sink.write("node1", {"name": "b", "data": "not base64!", "offset": 0, "last": True})
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["out/.._evil/etc/passwd", "out/node1/abs/a"]
    assert sink.bad == 1
    assert not os.path.exists(tmp_path / "etc")


@pytest.fixture(scope="module")
def crashed_node(tmp_path_factory):
    """node1's disk holds a real core file of a segfaulted rank 3; node2's an NCCL log."""
    import shutil

    if core_pattern().startswith("|") or shutil.which("gdb") is None:
        pytest.skip("cores are not written to the process's directory here, or gdb is missing")
    root = tmp_path_factory.mktemp("crashed")
    (root / "node1").mkdir()
    proc = start(SEGV, root / "node1", env(RANK="3", WORLD_SIZE="16", SLURMD_NODENAME="node1"))
    core = core_of(proc, root / "node1")
    core.rename(root / "node1" / f"core.{proc.pid}")
    (root / "node2").mkdir()
    shutil.copy(FIXTURES / "nccl" / "refused.log", root / "node2" / "nccl.node2.4242")
    return root


def test_collect_reads_cores_and_splits_nccl_logs_on_the_nodes(sshd, crashed_node, tmp_path):
    out = tmp_path / "out"
    rc, doc = _collect(sshd, "--hosts", "node[1-2]", "--launcher", "ssh",
                       "--cores", f"{crashed_node}/{{host}}/core.*", "--nccl-logs", f"{crashed_node}/{{host}}/nccl.*", "-o", out)
    assert rc == 0, doc
    nodes = {n["host"]: n for n in doc["nodes"]}
    core_files = nodes["node1"]["files"]
    assert [f for f in core_files if f.endswith(".json")] and all(f.startswith("cores/") for f in core_files)
    assert not [p for p in (out / "node1").rglob("core.*") if not p.name.endswith((".json", ".txt"))]  # no core crossed
    assert "nccl/rank03.log" in nodes["node2"]["files"] and len(nodes["node2"]["files"]) >= 16  # split per rank
    rc, rep = main_json("report", out)
    assert rc == 3
    crash = next(s for s in suspects(rep) if s["kind"] == "core-crash")
    assert crash["ranks"] == [3] and crash["summary"].startswith("rank 3 on node1 crashed with SIGSEGV")
    assert any(s["kind"] == "nccl-connect-failed" and s["hosts"] == ["node-02"] for s in suspects(rep))
    assert any(s["kind"] == "nccl-init-incomplete" and s["ranks"] == [3] for s in suspects(rep))
    kinds = {f["file"].rsplit("/", 1)[-1]: f["kinds"] for f in rep["files"]}
    assert kinds["rank03.log"] == ["nccl", "error-lines"] and any(k == ["core-json"] for k in kinds.values())
