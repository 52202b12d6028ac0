"""`hangdbg check`'s GPU health: each GPU's figures compared across the run, NVML's memory counters,
and what the verdict and the view say of them (issue 27, part 2).

No GPU here: the figures are messages as the ranks send them (tests/test_real_check_local.py runs
the same steps for real on CPU; tests/gpu/ on a GPU), and NVML is a stand-in module whose
answers are those of the real H200 (tests/fixtures/gpu_h200/healthy_state/nvml.json).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from hangdbg.check.blame import STEPS, Trial, check_node, rank_result
from hangdbg.check.health import medians, slow_gpus, slow_links, slow_node_busbw
from hangdbg.check.nvml import GpuCounters, faults, read_gpus
from hangdbg.check.plan import CheckResult
from hangdbg.check.verdict import check_verdict
from hangdbg.enums import NodeStatus
from hangdbg.model import Kind, Severity
from hangdbg.report.build import check_document
from hangdbg.report.check_view import render_check
from conftest import validate
from hangdbg.report.schema import to_json

HEALTHY = json.loads((Path(__file__).resolve().parent / "fixtures" / "gpu_h200" / "healthy_state" / "nvml.json").read_text())
H200 = "GPU 0: NVIDIA H200 (UUID: GPU-f61bdbf9-6d2d-ef14-087c-b63363ee236d)"


class FakeNvml:
    """A stand-in for ``pynvml`` answering as NVML does (constants of nvml.h; NotSupported raised
    as the bindings raise it), for ``gpus`` dicts of per-GPU answers."""

    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1

    class NVMLError_NotSupported(Exception):
        pass

    def __init__(self, gpus: list[dict], init_error: Exception | None = None) -> None:
        self.gpus, self.init_error, self.shut = gpus, init_error, False

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def _get(self, h, key):
        v = h.get(key)
        if isinstance(v, Exception):
            raise v
        return v

    def nvmlDeviceGetName(self, h):
        return self._get(h, "name")

    def nvmlDeviceGetUUID(self, h):
        return self._get(h, "uuid")

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=self._get(h, "bus"))

    def nvmlDeviceGetEccMode(self, h):
        return [h["ecc_mode"], h["ecc_mode"]]

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        return self._get(h, ("unc" if kind == 1 else "cor") + ("_vol" if counter == 0 else "_agg"))

    def nvmlDeviceGetRemappedRows(self, h):
        return self._get(h, "rows")

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return self._get(h, "pending")


def _h200(**over) -> dict:
    rec = HEALTHY["gpus"][0]
    gpu = {"name": rec["name"], "uuid": "GPU-f61bdbf9-6d2d-ef14-087c-b63363ee236d", "bus": rec["bus"], "ecc_mode": rec["ecc_mode"],
           "unc_vol": rec["ecc_uncorrected_volatile"], "unc_agg": rec["ecc_uncorrected_aggregate"],
           "cor_vol": rec["ecc_corrected_volatile"], "cor_agg": rec["ecc_corrected_aggregate"],
           "rows": json.loads(rec["remapped_rows"]), "pending": FakeNvml.NVMLError_NotSupported("Not Supported")}
    gpu.update(over)
    return gpu


def test_nvml_counters_of_the_real_healthy_h200_show_no_fault():
    nvml = FakeNvml([_h200()])
    [rec] = read_gpus(nvml)
    assert rec["ecc_mode"] is True and rec["ecc_uncorrected_volatile"] == 0 and rec["remap_pending"] is False
    assert rec["retired_pages_pending"] is None  # not supported on an H200 (row remapping replaced it)
    assert rec["faults"] == [] and nvml.shut


def test_nvml_faults_name_the_action():
    [rec] = read_gpus(FakeNvml([_h200(unc_vol=3, rows=[0, 2, 1, 0])]))
    assert rec["remapped_uncorrectable"] == 2 and rec["remap_pending"] is True
    assert any("row remapping pending: reset the GPU" in f for f in rec["faults"])
    assert any("3 uncorrectable ECC error(s)" in f for f in rec["faults"])
    assert any("RMA" in f for f in faults({"remap_failed": True}))
    assert faults({"ecc_uncorrected_aggregate": 9}) == []  # lifetime counts alone are history


def test_nvml_that_cannot_be_read_says_why():
    said = read_gpus(FakeNvml([], init_error=RuntimeError("NVML Shared Library Not Found")))
    assert isinstance(said, str) and "NVML Shared Library Not Found" in said


def _gpu_trial(figures: list[dict], nvml: list[dict] | None = None, hosts: list[str] | None = None) -> Trial:
    """One passed trial, rank i on ``hosts[i]`` (default one node), with ``figures[i]`` for its health steps."""
    hosts = hosts or ["vm"] * len(figures)
    layout: dict[str, list[int]] = {}
    for h in hosts:
        layout.setdefault(h, []).append(len(layout.get(h, [])))
    ranks, rank = [], 0
    for h, slots in layout.items():
        for local in slots:
            f = figures[rank]
            steps = []
            for step in STEPS:
                msg: dict = {"step": step, "ok": True, "seconds": 0.1}
                if step == "facts":
                    msg.update(device=f"cuda:{local}", backend="nccl", gpu_name="NVIDIA H200", hostname=h)
                if step == "bandwidth":
                    msg.update(bytes=1 << 26, iters=5, time_s=0.001, algbw_gbps=60.0, busbw_gbps=90.0,
                               recv_gbps=f.get("recv", 100.0), recv_from=(rank - 1) % len(figures))
                if step == "node_bandwidth" and "node" in f:
                    msg.update(busbw_gbps=f["node"])
                if step == "matmul":
                    msg.update(tflops=f["tflops"], dtype="bfloat16")
                if step == "copy":
                    msg.update(gbps=f.get("copy", 4300.0))
                if step == "host_copy":
                    msg.update(h2d_gbps=55.0, d2h_gbps=55.0)
                steps.append(msg)
            ranks.append(rank_result(rank, h, local, local, steps, {"state": "exited", "exit": 0}))
            rank += 1
    nodes = tuple(check_node(h, tuple(s), {"hostname": h, "gpus": [H200 if i == 0 else H200.replace("GPU 0", f"GPU {i}")
                                                                    .replace("6d2d", f"6d2{i}") for i in s], "backend": "nccl",
                                           "nvml": nvml if h == hosts[0] else None}, NodeStatus.OK, None, "nccl")
                  for h, s in layout.items())
    return Trial(1, "all", tuple((h, tuple(s)) for h, s in layout.items()), None, "127.0.0.1:1", nodes, tuple(ranks), 5.0)


def test_one_gpu_gives_its_figures_and_no_bandwidth():
    t = _gpu_trial([{"tflops": 760.0}])
    v = check_verdict([t], None, None, {}, "auto")
    assert v.bandwidth is None  # one rank: no link, no algbw/busbw
    assert "algbw" not in v.headline and "busbw" not in v.headline
    assert "GPU vm:0" in v.headline and "bf16 matmul 760 TFLOP/s" in v.headline and "memory copy 4.3e+03 GB/s" in v.headline
    assert not v.findings


def test_a_slow_gpu_is_named_against_the_median_of_its_peers():
    t = _gpu_trial([{"tflops": 760.0}, {"tflops": 770.0}, {"tflops": 300.0}, {"tflops": 765.0}])
    assert [(s.what, s.words) for s in slow_gpus(t.ranks, 0.5)] == [("vm:2", "bf16 matmul")]
    assert slow_gpus(t.ranks, 0.3) == []
    v = check_verdict([t], None, None, {}, "auto")
    [f] = [f for f in v.findings if f.kind is Kind.CHECK_SLOW]
    assert f.gpus == ("vm:2",) and f.ranks == (2,) and f.severity is Severity.WARNING and "762 TFLOP/s" in f.summary
    assert v.bad_nodes == ()


def test_cpu_ranks_are_not_compared():
    steps = [{"step": s, "ok": True, "seconds": 0.1, **({"device": "cpu"} if s == "facts" else {}),
              **({"tflops": 0.01 * (i + 1)} if s == "matmul" else {})} for i, s in enumerate(STEPS)]
    ranks = [rank_result(r, "vm", r, r, [dict(m, tflops=m["tflops"] * (10 if r else 1)) if m["step"] == "matmul" else m
                                         for m in steps], {"state": "exited", "exit": 0}) for r in range(3)]
    assert ranks[0].matmul_tflops is not None and slow_gpus(ranks, 0.5) == [] and medians(ranks) == []


def test_an_nvml_fault_names_the_gpu_and_the_action():
    t = _gpu_trial([{"tflops": 760.0}], nvml=[read_gpus(FakeNvml([_h200(rows=[0, 1, 1, 0])]))[0]])
    v = check_verdict([t], None, None, {}, "auto")
    [f] = [f for f in v.findings if f.kind is Kind.ECC]
    assert f.severity is Severity.SUSPECT and f.gpus == ("vm:0",) and "reset the GPU" in f.action
    assert v.bad_gpus == ("vm:0",) and "GPU vm:0" not in v.headline
    res = CheckResult("--nproc-per-node 1", "auto", "o", (t,), v)
    assert res.status == 3


def test_slow_node_busbw_and_slow_links_between_nodes():
    figs = [{"tflops": 760.0, "node": 400.0, "recv": 40.0}, {"tflops": 760.0, "node": 400.0},
            {"tflops": 760.0, "node": 150.0, "recv": 5.0}, {"tflops": 760.0, "node": 150.0},
            {"tflops": 760.0, "node": 410.0, "recv": 41.0}, {"tflops": 760.0, "node": 405.0},
            {"tflops": 760.0, "node": 400.0, "recv": 39.0}, {"tflops": 760.0, "node": 400.0}]
    t = _gpu_trial(figs, hosts=["n1", "n1", "n2", "n2", "n3", "n3", "n4", "n4"])
    assert [s.what for s in slow_node_busbw(t.ranks, 0.5)] == ["n2"]
    assert [s.what for s in slow_links(t.ranks, 0.5)] == ["n1 -> n2"]
    v = check_verdict([t], None, None, {}, "auto")
    slow = {f.summary.split(" is slow")[0] for f in v.findings if f.kind is Kind.CHECK_SLOW}
    assert {"n2", "n1 -> n2"} <= slow


def test_document_and_view_carry_the_gpu_figures():
    t = _gpu_trial([{"tflops": 760.0}], nvml=[read_gpus(FakeNvml([_h200()]))[0]])
    v = check_verdict([t], None, None, {}, "auto")
    doc = check_document(CheckResult("--nproc-per-node 1", "auto", "o", (t,), v))
    data = validate(json.loads(to_json(doc)))
    assert data["ranks"][0]["matmul_tflops"] == 760.0 and data["bandwidth"] is None
    assert data["nodes"][0]["nvml"][0]["remap_pending"] is False
    buf = io.StringIO()
    Console(file=buf, width=200, no_color=True).print(render_check(doc))
    text = buf.getvalue()
    assert "GPUs (each alone)" in text and "760" in text and "one rank, no link to measure" in text
    assert "1: GPU 0" in text  # the Nodes row: one rank, on GPU 0 (not "slots 0")
    assert GpuCounters.read({"index": "0"}) is None
