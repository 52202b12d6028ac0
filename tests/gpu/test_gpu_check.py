"""Case 4: ``hangdbg check`` on a node with one GPU.

* ``--nproc-per-node 2`` asks for more nccl ranks than there are GPUs: a setup error (exit 1), never a bad
  node. A previous H200 session's run (hangdbg at 322f8de; shared/gpu-h200/check_2ranks_1gpu) blamed the node
  and told to drain it, which is wrong.
* ``--nproc-per-node 1``: healthy (exit 0); one rank has no bus to measure (``bandwidth`` null, no algbw in the
  headline); the per-rank health figures (``matmul_tflops``, ``copy_gbps``, ``h2d_gbps``, ``d2h_gbps``) are
  positive and recorded, and the node's NVML counters (``nodes[0].nvml``) show no fault on a healthy GPU.
* ``--backend gloo --nproc-per-node 2``: healthy; its bus figures are recorded.

The step timeouts are shorter than the defaults (``--timeout 10 --init-timeout 30``) so that a check that
does not stop at the setup error stays inside the run's time budget."""

from __future__ import annotations

import json
import math

import pytest

from .conftest import load_json

BOUNDS = ("--timeout", "10", "--init-timeout", "30")
HEALTH = {"matmul_tflops": "TFLOP/s", "copy_gbps": "GB/s", "h2d_gbps": "GB/s", "d2h_gbps": "GB/s"}
"""The per-rank health figures of check.json and their units."""


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


@pytest.mark.timeout(200)
def test_check_more_ranks_than_gpus_is_a_setup_error(case):
    gpus = _gpu_count()
    case.note("gpus", gpus)
    if gpus != 1:
        pytest.skip(f"this case is for a node with one GPU; this one has {gpus}")
    out = case.dir / "check-2ranks"
    ran = case.hangdbg("check_2ranks", "check", "--nproc-per-node", "2", *BOUNDS, "-o", str(out), timeout=170)
    case.figure("check_2ranks_s", ran.seconds, "s")
    assert not ran.timed_out, "check --nproc-per-node 2 did not end within 170 s"
    text = ran.output.lower()
    if (out / "check.json").exists():
        doc = json.loads((out / "check.json").read_text())
        case.note("headline_2ranks", doc.get("headline"))
        assert not doc.get("exclude") and not doc.get("bad_nodes"), \
            f"check.json blames the node: exclude={doc.get('exclude')!r} bad_nodes={doc.get('bad_nodes')}"
    assert "--exclude" not in text and "exclude=" not in text and "drain" not in text, \
        f"the output tells to leave the node out:\n{ran.output[-3000:]}"
    assert ran.rc == 1, f"exit {ran.rc} (1: the check could not run: a setup error):\n{ran.output[-3000:]}"
    assert "2 ranks with nccl need 2 gpus" in text and "--nproc-per-node 1" in text, ran.output[-3000:]
    assert not out.exists(), "refused before any run: nothing written"


@pytest.mark.timeout(150)
def test_check_one_rank_on_the_gpu_is_healthy_with_its_figures(case):
    out = case.dir / "check-1rank"
    ran = case.hangdbg("check_1rank", "check", "--nproc-per-node", "1", *BOUNDS, "--json", "-o", str(out), timeout=120)
    doc = load_json(ran, "hangdbg check --nproc-per-node 1")
    case.figure("check_1rank_s", ran.seconds, "s")
    case.note("headline", doc.get("headline"))
    case.note("check_json", f"{out.name}/check.json")
    assert ran.rc == 0, f"exit {ran.rc} on a healthy GPU: {doc.get('headline')}"
    assert doc["bandwidth"] is None, f"one rank has no bus to measure, yet bandwidth = {doc['bandwidth']}"
    assert "algbw" not in doc["headline"], doc["headline"]
    (rank,) = doc["ranks"]
    assert rank["backend"] == "nccl" and str(rank["device"]).startswith("cuda"), (rank["backend"], rank["device"])
    for key, unit in HEALTH.items():
        value = rank[key]
        case.figure(key, value, unit)
        assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, f"{key} = {value!r}"
    assert "TFLOP/s" in doc["headline"], doc["headline"]
    node = doc["nodes"][0]
    case.note("nvml", node.get("nvml") or node.get("nvml_error"))
    assert node["nvml"] or node["nvml_error"], "NVML read, or why not"
    assert all(not c["faults"] for c in node["nvml"]), f"a healthy GPU with NVML faults: {node['nvml']}"


@pytest.mark.timeout(150)
def test_check_two_gloo_ranks_passes(case):
    out = case.dir / "check-gloo"
    ran = case.hangdbg("check_gloo", "check", "--backend", "gloo", "--nproc-per-node", "2", *BOUNDS, "--json",
                       "-o", str(out), timeout=120)
    doc = load_json(ran, "hangdbg check --backend gloo --nproc-per-node 2")
    case.figure("check_gloo_s", ran.seconds, "s")
    case.note("headline", doc.get("headline"))
    assert ran.rc == 0, f"exit {ran.rc}: {doc.get('headline')}"
    assert {r["backend"] for r in doc["ranks"]} == {"gloo"} and len(doc["ranks"]) == 2
    bw = doc["bandwidth"]
    assert bw and bw["algbw_gbps"] > 0, f"no bus figures from 2 gloo ranks: {bw}"
    case.figure("gloo_algbw_gbps", bw["algbw_gbps"], "GB/s")
    case.figure("gloo_busbw_gbps", bw["busbw_gbps"], "GB/s")
