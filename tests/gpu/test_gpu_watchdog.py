"""Case 2: the NCCL watchdog times out behind a stuck kernel. One NCCL rank (timeout 20 s) enqueues an
all_reduce behind a CUDA kernel that never ends (jobs/nccl_timeout.py); the watchdog fires and, with
TORCH_NCCL_DUMP_ON_TIMEOUT=1, dumps the flight recorder (torch's ProcessGroupNCCL documents both variables;
torch 2.11 names TORCH_NCCL_DEBUG_INFO_TEMP_FILE deprecated in favour of TORCH_FR_DUMP_TEMP_FILE, so both are
set). ``hangdbg report`` of the folder (the dump, the NCCL_DEBUG=INFO log, torchrun's output) must read the
dump and name rank 0, its GPU never having started the collective: state ``scheduled``, as a previous H200
session's run of the same program read (shared/gpu-h200/watchdog_timeout_behind_kernel)."""

from __future__ import annotations

import time

import pytest

from .conftest import load_json, suspects

DUMP_TIMEOUT = 150
"""Seconds for start-up (~15 s), the 20 s collective timeout and the dump."""


def _dump_written(path):
    """The dump is there and has not grown for a second (torch writes it in one go, but not atomically)."""
    def done() -> bool:
        if not path.exists():
            return False
        size = path.stat().st_size
        time.sleep(1.0)
        return size > 0 and path.stat().st_size == size
    return done


@pytest.mark.timeout(300)
def test_report_reads_the_flight_recorder_of_a_gpu_blocked_rank(case):
    logs = case.dir / "job"  # what the job left, and only that: the folder report reads
    fr = logs / "fr_rank_"
    env = {"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(fr), "TORCH_FR_DUMP_TEMP_FILE": str(fr),
           "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,COLL",
           "NCCL_DEBUG_FILE": str(logs / "nccl.%h.%p.log")}
    job = case.torchrun("torchrun", 1, "nccl_timeout.py", env=env, where=logs)
    dump = logs / "fr_rank_0"
    case.figure("fr_dump_s", job.wait_for(_dump_written(dump), DUMP_TIMEOUT, "flight-recorder dump (fr_rank_0)"), "s")
    case.note("fr_dump_bytes", dump.stat().st_size)
    case.note("job_exited_by_itself", not job.alive())
    left = job.stop()
    assert not left, f"ranks still alive after the job's group was killed: {left}"

    ran = case.hangdbg("report", "report", str(logs), "--json", "-o", str(case.dir / "report"), timeout=120)
    doc = load_json(ran, "hangdbg report")
    case.figure("report_s", ran.seconds, "s")
    case.note("headline", doc.get("headline"))
    read = [s for s in doc.get("sources", []) if s.get("kind") == "flight-recorder"]
    assert read and str(dump) in read[0]["files"] and read[0]["records"] >= 1, \
        f"the flight-recorder dump was not read: {[(s.get('kind'), s.get('files')) for s in doc.get('sources', [])]}"
    fr_ranks = {r["rank"]: r for r in read[0].get("ranks", [])}
    assert 0 in fr_ranks and fr_ranks[0]["state"].startswith("scheduled"), f"rank 0 in the dump: {fr_ranks.get(0)}"
    assert ran.rc == 3, f"hangdbg report exit {ran.rc} (3: suspects found)"
    first = suspects(doc)[0]
    case.note("suspect", first["summary"])
    assert first["kind"] == "gpu-blocked" and first["ranks"] == [0] and first["source"] == "flight-recorder", \
        (first["kind"], first["ranks"], first["source"], first["summary"])
    assert "scheduled" in first["summary"], first["summary"]
