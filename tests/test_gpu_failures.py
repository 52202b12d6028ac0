"""`hangdbg report` on real GPU failures made on an H200 (tests/fixtures/gpu_failures_h200, made by
scripts/gpu/make_failures.sh; the right readings were written down before the run in scripts/gpu/EXPECTED.md)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import main_json

RUNS = Path(__file__).resolve().parent / "fixtures" / "gpu_failures_h200"

# scenario -> (the ranks that must be blamed, a regex for the cause in the first finding, ranks never blamed)
# An empty blamed set: the launch or the environment is at fault, and no rank may be a suspect.
EXPECTED = {
    "cuda_oom_rank1": ({1}, r"out of memory", {0}),
    "device_assert_rank1": ({1}, r"assert", {0}),
    "illegal_address_rank1": ({1}, r"illegal memory access|invalid address", {0}),
    "nccl_init_gpu_full": ({0}, r"out of memory", set()),
    "invalid_ordinal_2ranks_1gpu": (set(), r"launch configuration.*(more ranks per node than GPUs|beyond the visible GPUs)", {0, 1}),
    "nccl_socket_ifname_missing": (set(), r"NCCL_SOCKET_IFNAME", {0}),
    "nccl_socket_ifname_missing_nodebug": (set(), r"NCCL_SOCKET_IFNAME|no socket interface", {0}),
    "no_gpu_visible": (set(), r"launch configuration.*no GPU", {0, 1}),
}


def _suspect_ranks(doc: dict) -> set[int]:
    return {r for f in doc["findings"] if f["severity"] == "suspect" for r in f["ranks"]}


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_a_real_gpu_failure_is_read_as_written_down_before_the_run(scenario: str) -> None:
    blamed, cause, innocent = EXPECTED[scenario]
    rc, doc = main_json("report", str(RUNS / scenario))
    assert rc == 3, doc["headline"]
    first = doc["findings"][0]
    assert re.search(cause, first["summary"], re.I), first["summary"]
    assert blamed <= _suspect_ranks(doc), doc["headline"]
    assert not (_suspect_ranks(doc) & innocent), f"an innocent rank is blamed: {doc['headline']}"
    if not blamed:
        assert first["ranks"] == [], "a launch or environment cause names no rank"
    assert "unrecognised error line: “" + "/work/main/scripts/gpu/failures.py FAILED" not in str(doc["findings"])


def test_an_unknown_nccl_proto_value_still_runs_and_reads_healthy() -> None:
    rc, doc = main_json("report", str(RUNS / "nccl_proto_bogus"))
    assert rc == 0 and not [f for f in doc["findings"] if f["severity"] == "suspect"]


def test_the_rank_of_a_line_that_carries_only_torchruns_local_rank_comes_from_the_same_file() -> None:
    """[default1]: alone is a local rank; the file's [default1]:[rank1]: lines say it is global rank 1."""
    rc, doc = main_json("report", str(RUNS / "device_assert_rank1"))
    first = doc["findings"][0]
    assert first["ranks"] == [1] and "Assertion" in first["summary"]


def test_a_kernels_assert_line_without_any_prefix_takes_the_rank_of_the_cuda_error_after_it() -> None:
    """Plain torchrun output (no --tee): the GPU's printf line has no rank prefix; rank 1's
    ``device-side assert triggered`` follows it, so the assert is rank 1's and leads the verdict."""
    rc, doc = main_json("report", str(RUNS / "device_assert_rank1_plain"))
    first = doc["findings"][0]
    assert rc == 3 and first["ranks"] == [1] and "Assertion" in first["summary"], doc["headline"]
    assert 0 not in _suspect_ranks(doc)


def test_the_agents_report_of_a_waiters_exit_is_no_first_failure() -> None:
    """Rank 0 timed out in gloo's recv (rank 1 spun in a CUDA kernel and printed nothing): neither rank 0 nor the
    agent's ``failed (exitcode: 1) local_rank: 0`` line is a suspect; the log cannot name rank 1."""
    rc, doc = main_json("report", str(RUNS / "gpu_spin_gloo_timeout"))
    assert rc == 0 and not [f for f in doc["findings"] if f["severity"] == "suspect"], doc["headline"]
    assert "outside it" in doc["headline"]


def test_a_cpu_tensor_given_to_nccl_blames_the_rank_that_did_it() -> None:
    rc, doc = main_json("report", str(RUNS / "nccl_cpu_tensor"))
    assert rc == 3 and _suspect_ranks(doc) == {0}
    assert any("No backend type associated with device type cpu" in f["summary"] for f in doc["findings"])


HEALTHY = Path(__file__).resolve().parent / "fixtures" / "gpu_h200" / "healthy_state"


@pytest.mark.parametrize("name", ["nvidia-smi-q-ecc.txt", "query.csv"])
def test_a_healthy_gpus_counters_at_zero_are_no_warning(name: str) -> None:
    """nvidia-smi -q's 'Uncorrectable Error : 0' rows and its 'ECC Errors' title, and --query-gpu's CSV header of
    error counters, are no error lines: a healthy H200 reads clean."""
    rc, doc = main_json("gpu", str(HEALTHY / name))
    assert not [f for f in doc["findings"] if f["severity"] in ("suspect", "warning")], doc["headline"]
