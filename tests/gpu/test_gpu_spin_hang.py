"""Case 1: a live hang on the GPU. 2 ranks (gloo, CUDA tensors on cuda:0) under torchrun; rank 1 spins in a
CUDA kernel and synchronizes on it, rank 0 waits in all_reduce (jobs/cuda_spin_hang.py). ``hangdbg dump --pid
LAUNCHER`` (the ranks under torchrun; without --pid, a node that runs another job asks which), with and without
--native, must name rank 1 and say that rank 0 waits for it. A previous H200 session's dump of the same program
(shared/gpu-h200/live_cuda_spin_hang1.json) read: "suspect rank 1: computing in synchronize ... rank 0 waits
for it in all_reduce"."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from .conftest import load_json, suspects

READY_TIMEOUT = 120
"""Seconds for both ranks to reach their hanging call (torch import, CUDA and gloo start-up)."""
SETTLE = 2.0
"""Seconds from the markers (written just before the hanging calls) to the dump, as hangdbg's demo waits."""


def _check_dump(case, doc: dict, label: str) -> None:
    case.note(f"{label}_headline", doc.get("headline"))
    sus = suspects(doc)
    assert [f["ranks"] for f in sus] == [[1]], f"{label}: suspects {[(f['ranks'], f['summary']) for f in sus]}"
    waiting = [f for f in doc["findings"] if f["severity"] == "waiting"]
    assert any(f["ranks"] == [0] and f["waits_for"] == [1] for f in waiting), \
        f"{label}: rank 0 is not said to wait for rank 1: {[(f['ranks'], f['waits_for'], f['summary']) for f in waiting]}"
    reason = sus[0]["summary"]
    assert "waiting on its GPU" in reason and "synchronize" in reason, f"{label}: rank 1's reason: {reason}"
    if label == "dump_native":  # with native frames the CUDA call is named (py-spy --native: cudaDeviceSynchronize)
        assert re.search(r"\bcu(?:da)?[A-Z]\w*Synchronize", reason), f"{label}: no CUDA call named: {reason}"


@pytest.mark.timeout(330)
def test_dump_names_the_rank_spinning_on_its_gpu(case):
    ready = case.dir / "ready"
    ready.mkdir()
    job = case.torchrun("torchrun", 2, "cuda_spin_hang.py", str(ready))
    case.figure("ready_s", job.wait_for(lambda: len(list(ready.glob("rank-*"))) == 2, READY_TIMEOUT, "both ranks ready"), "s")
    time.sleep(SETTLE)

    ran = case.hangdbg("dump", "dump", "--pid", str(job.proc.pid), "--json", "-o", str(case.dir / "dump"), timeout=90)
    doc = load_json(ran, "hangdbg dump")
    case.figure("dump_s", ran.seconds, "s")
    assert ran.rc == 3, f"hangdbg dump exit {ran.rc} (3: suspects found); stderr:\n{ran.stderr[-2000:]}"
    _check_dump(case, doc, "dump")

    ran = case.hangdbg("dump_native", "dump", "--pid", str(job.proc.pid), "--native", "--timeout", "45", "--json", "-o",
                       str(case.dir / "dump-native"), timeout=120)
    doc = load_json(ran, "hangdbg dump --native")
    case.figure("dump_native_s", ran.seconds, "s")
    assert ran.rc == 3, f"hangdbg dump --native exit {ran.rc}; stderr:\n{ran.stderr[-2000:]}"
    _check_dump(case, doc, "dump_native")

    gdb = shutil.which("cuda-gdb")
    if gdb:  # the kernel in flight, as STAT's cuda-gdb backend reads it: recorded for `dump --gpu-kernels` (not built yet)
        pid = (ready / "rank-1").read_text().strip()
        ran = case.run("cuda_gdb_kernels", [gdb, "-nx", "-batch", "-p", pid, "-ex", "info cuda kernels", "-ex", "detach"],
                       timeout=60)
        case.figure("cuda_gdb_s", ran.seconds, "s")
        case.note("cuda_gdb_rc", ran.rc)
    else:
        case.note("cuda_gdb", "not on PATH")

    assert job.alive(), "the job ended while it was dumped"
    left = job.stop()
    assert not left, f"ranks still alive after the job's group was killed: {left}"
