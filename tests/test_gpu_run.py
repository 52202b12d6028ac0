"""tests/gpu/ where there is no GPU (CI, this project's CPU machines): ``tests/gpu/run`` ends in a clean skip
that still writes its summary, the gpu-marked cases are collected and skipped, and the summary step reads the
cases' records and pytest's junit xml as a cut-short or failed GPU run leaves them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu import summary

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "gpu" / "run"


def _no_gpu_env() -> dict[str, str]:
    """This environment with every GPU hidden from CUDA (so that the skip path runs on a GPU machine too)."""
    path = os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p)
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable, "PYTHONPATH": path}


@pytest.mark.real
def test_run_without_a_gpu_is_a_clean_skip_with_a_summary(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "results"
    start = time.monotonic()
    res = subprocess.run([str(RUN), str(out)], capture_output=True, text=True, timeout=60, env=_no_gpu_env(), cwd=tmp_path)
    seconds = time.monotonic() - start
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no GPU: skipped" in res.stdout
    assert seconds < 30, f"the skip took {seconds:.1f} s"
    doc = json.loads((out / "summary.json").read_text())
    assert doc["skipped"] is True and doc["passed"] is False and doc["cases"] == []
    assert "no CUDA GPU" in doc["reason"] and doc["environment"]["torch"]
    assert "skipped" in (out / "summary.md").read_text()
    assert not list(tmp_path.glob("hangdbg-gpu-*")), "OUTDIR given, yet a default folder was made"


@pytest.mark.real
def test_the_gpu_cases_are_collected_and_skipped_without_a_gpu():
    pytest.importorskip("torch")
    env = _no_gpu_env()
    pytest_argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/gpu", "-o", "addopts="]
    listed = subprocess.run([*pytest_argv, "--collect-only", "-q"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    names = [line for line in listed.stdout.splitlines() if line.startswith("tests/gpu/") and "::" in line]
    assert listed.returncode == 0 and names, listed.stdout + listed.stderr
    not_gpu = subprocess.run([*pytest_argv, "--collect-only", "-q", "-m", "not gpu"], capture_output=True, text=True,
                             timeout=120, env=env, cwd=ROOT)
    assert not [line for line in not_gpu.stdout.splitlines() if "::" in line], "a test under tests/gpu lacks the gpu marker"
    ran = subprocess.run([*pytest_argv, "-m", "gpu", "-rs", "-q"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    skips = [line for line in ran.stdout.splitlines() if line.startswith("SKIPPED") and "no GPU:" in line]
    assert len(skips) == len(names) and f"{len(names)} skipped" in ran.stdout, ran.stdout


def _record(out: Path, name: str, outcome: str, figures: dict | None = None, message: str = "") -> None:
    (out / "cases").mkdir(parents=True, exist_ok=True)
    rec = {"case": name, "test": f"tests/gpu/test_x.py::{name}", "outcome": outcome, "message": message,
           "started": "", "seconds": 1.5, "figures": figures or {}, "notes": {},
           "commands": [{"label": "dump", "argv": ["x"], "rc": 3, "seconds": 1.0, "timed_out": False, "pid": 1}]}
    (out / "cases" / f"{name}.json").write_text(json.dumps(rec))


def test_summary_of_a_run_that_passed(tmp_path):
    _record(tmp_path, "test_a", "passed", {"dump_s": {"value": 4.25, "unit": "s"}})
    _record(tmp_path, "test_b", "skipped")
    summary.main(["summary", str(tmp_path), "--pytest-exit", "0", "--seconds", "12"])
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["passed"] is True and doc["skipped"] is False
    assert [(c["case"], c["outcome"]) for c in doc["cases"]] == [("test_a", "passed"), ("test_b", "skipped")]
    md = (tmp_path / "summary.md").read_text()
    assert md.startswith("# hangdbg GPU run: passed") and "| test_a | passed | 1.5 | dump_s 4.25 s |" in md


def test_summary_of_a_run_cut_short_and_a_teardown_failure(tmp_path):
    _record(tmp_path, "test_a", "running")
    _record(tmp_path, "test_b", "passed")
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite tests="3" failures="0" errors="1" skipped="0" time="9.5">'
        '<testcase name="test_b" time="2"><error message="processes still alive">x</error></testcase>'
        '<testcase name="test_c" time="0.1"><failure message="boom at set-up">x</failure></testcase>'
        '</testsuite></testsuites>')
    summary.main(["summary", str(tmp_path), "--pytest-exit", "124"])
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["passed"] is False and doc["junit"]["errors"] == 1
    assert {c["case"]: c["outcome"] for c in doc["cases"]} == {"test_a": "not finished", "test_b": "error", "test_c": "failed"}
    assert "## test_c: failed" in (tmp_path / "summary.md").read_text()


def test_no_case_is_no_pass(tmp_path):
    summary.main(["summary", str(tmp_path), "--pytest-exit", "0"])
    assert json.loads((tmp_path / "summary.json").read_text())["passed"] is False
