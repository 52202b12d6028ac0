"""Shared fixtures: real hung torchrun/gloo jobs (started once per module) and a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run_cli(*args: str, timeout: float = 180, prefix: list[str] | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real command line (``python -m hangdbg ...``) and capture its output."""
    env = dict(env or os.environ, NO_COLOR="1", COLUMNS="160")
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "hangdbg", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )


def run_json(*args: str, **kw) -> tuple[int, dict]:
    res = run_cli(*args, "--json", **kw)
    assert res.stdout.strip(), f"no JSON printed; stderr:\n{res.stderr}"
    return res.returncode, json.loads(res.stdout)


@pytest.fixture(scope="module")
def hung_job(request):
    """A real demo job hung in the module's ``SCENARIO`` (and ``NPROC``, default 4)."""
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    scenario = request.module.SCENARIO
    nproc = getattr(request.module, "NPROC", 4)
    job = DemoJob(scenario, nproc).start()
    try:
        job.wait_ready()
        yield job
    finally:
        job.stop()


@pytest.fixture(scope="module")
def cluster():
    """A private 2-node SLURM cluster (tests/infra/slurm.py), one per test module."""
    from infra.slurm import LocalSlurm, SlurmUnavailable

    try:
        c = LocalSlurm().start()
    except SlurmUnavailable as exc:
        pytest.skip(f"no local SLURM cluster: {exc}")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def sshd():
    """A private sshd on 127.0.0.1 with node1..node3 aliases (tests/infra/sshd.py), one per module."""
    from infra.sshd import LocalSshd, SshdUnavailable

    try:
        server = LocalSshd().start()
    except SshdUnavailable as exc:
        pytest.skip(f"no local sshd: {exc}")
    try:
        yield server
    finally:
        server.stop()
