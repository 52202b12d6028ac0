"""Case 3: two NCCL ranks on one GPU (both on cuda:0, jobs/nccl_dup.py), a launch mistake: NCCL refuses it at
communicator init ("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device ...", init.cc in NCCL 2.28,
as a previous H200 session's run of the same program logged: shared/gpu-h200/nccl_dup_2ranks_1gpu).
``hangdbg report`` of its logs must say so (a launch error, "Duplicate GPU") and blame no rank and no node."""

from __future__ import annotations

import pytest

from .conftest import load_json, suspects

JOB_TIMEOUT = 120
"""Seconds for the job to fail (start-up ~15 s; NCCL refuses at init)."""


@pytest.mark.timeout(240)
def test_report_calls_two_ranks_on_one_gpu_a_launch_mistake(case):
    logs = case.dir / "job"
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(logs / "nccl.%h.%p.log")}
    job = case.torchrun("torchrun", 2, "nccl_dup.py", env=env, where=logs)
    case.figure("job_s", job.wait_for(lambda: not job.alive(), JOB_TIMEOUT, "end of the job"), "s")
    case.note("job_exit", job.proc.returncode)
    assert not job.stop(), "processes of the job still alive after it ended"
    assert job.proc.returncode != 0, f"two NCCL ranks on one GPU ran to the end:\n{job.tail()}"

    ran = case.hangdbg("report", "report", str(logs), "--json", "-o", str(case.dir / "report"), timeout=120)
    doc = load_json(ran, "hangdbg report")
    case.figure("report_s", ran.seconds, "s")
    case.note("headline", doc.get("headline"))
    launch = [f for f in doc["findings"] if f["kind"] == "launch-error"]
    assert any("Duplicate GPU" in f["summary"] for f in launch), \
        f"no launch-error finding quotes NCCL's Duplicate GPU: {[(f['kind'], f['summary']) for f in doc['findings'][:6]]}"
    assert doc["findings"][0]["kind"] == "launch-error", f"first finding: {doc['findings'][0]['summary']}"
    blamed = [f for f in suspects(doc) if f["ranks"] or f["hosts"]]
    assert not blamed, f"a rank or node is blamed for a launch mistake: {[(f['ranks'], f['hosts'], f['summary']) for f in blamed]}"
    text = ran.stdout.lower()
    assert "--exclude" not in text and "drain" not in text, "the report tells to leave the node out"
