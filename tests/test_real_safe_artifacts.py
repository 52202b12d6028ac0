"""Safe artifacts (issue 30): a real process holding secrets in its locals and on its command line,
dumped by the real command line with real py-spy under umask 022: no file of the dump is readable by
another user (files 0600, directories 0700), the secrets are masked in every file and on stdout, and
``--no-redact`` / ``--no-cmdline`` do what they say."""

from __future__ import annotations

import json
import shutil
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli

CHILD = r'''
import sys, time
def train(api_token, steps):
    password = "hunter2-FAKE-pw"
    secret_token = "sk-FAKE-local"
    config = {"hf_token": "sk-FAKE-dict", "lr": 0.1}
    tokenizer = "gpt2-visible"
    open(sys.argv[1], "w").close()  # ready
    time.sleep(600)
train("sk-FAKE-arg", 3)
'''


@pytest.fixture
def secret_proc(tmp_path):
    script = tmp_path / "secret_child.py"
    script.write_text(CHILD)
    ready = tmp_path / "ready"
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    proc = subprocess.Popen([sys.executable, str(script), str(ready), "--api-token", "sk-FAKE-argv",
                             "--run-name", "RUNNAME-unique"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), "the child did not start"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _dump(out: Path, *extra: str) -> subprocess.CompletedProcess:
    old = os.umask(0o022)
    try:
        return run_cli("dump", *extra, "-o", out, "--json", timeout=120)
    finally:
        os.umask(old)


def _texts(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()}


def test_secrets_masked_and_owner_only(secret_proc, tmp_path):
    out = tmp_path / "dump"
    res = _dump(out, "--pid", str(secret_proc.pid), "--locals")
    assert res.returncode in (0, 3), res.stderr
    texts = _texts(out)
    assert any(name.startswith("raw") for name in texts), sorted(texts)
    everything = res.stdout + res.stderr + "".join(texts.values())
    assert "FAKE" not in everything, [n for n, t in texts.items() if "FAKE" in t] or "stdout/stderr"
    assert "[Filtered]" in "".join(t for n, t in texts.items() if n.startswith("raw"))
    assert "gpt2-visible" in everything  # a tokenizer is no secret: locals are still useful
    assert "RUNNAME-unique" in everything  # the command line is kept, its secret masked
    marker = json.loads((out / ".hangdbg-run.json").read_text())
    assert marker["command"] == "dump"
    for p in [out, *out.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), f"{p}: {oct(mode)}"


def test_no_redact_keeps_the_values(secret_proc, tmp_path):
    out = tmp_path / "dump"
    res = _dump(out, "--pid", str(secret_proc.pid), "--locals", "--no-redact")
    assert res.returncode in (0, 3), res.stderr
    raw = "".join(t for n, t in _texts(out).items() if n.startswith("raw"))
    assert "sk-FAKE-local" in raw and "hunter2-FAKE-pw" in raw


def test_no_cmdline_drops_command_lines(secret_proc, tmp_path):
    out = tmp_path / "dump"
    res = _dump(out, "--pid", str(secret_proc.pid), "--no-cmdline")
    assert res.returncode in (0, 3), res.stderr
    texts = _texts(out)
    assert "RUNNAME-unique" not in res.stdout + "".join(texts.values()), \
        [n for n, t in texts.items() if "RUNNAME-unique" in t] or "stdout"
    doc = json.loads(res.stdout)
    assert doc["ranks"] if "ranks" in doc else True


@pytest.mark.skipif(shutil.which("gcore") is None, reason="gcore (gdb) not installed")
def test_cores_are_owner_only(secret_proc, tmp_path):
    out = tmp_path / "dump"
    res = _dump(out, "-p", str(secret_proc.pid), "--core", "--force")
    assert res.returncode in (0, 3), res.stderr
    cores = list(out.glob("core.rank0.*"))
    assert cores, sorted(p.name for p in out.iterdir())
    for p in [out, *out.rglob("*")]:
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), f"{p}: {oct(mode)}"
