"""Real core files for tests: small programs that crash, hang or abort, started with
``ulimit -c unlimited`` in a directory where the kernel writes their core (core_pattern ``core``)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

SEGV = """\
import ctypes, sys, threading, time
ready = threading.Event()
def worker():
    ready.set()
    time.sleep(300)
threading.Thread(target=worker, name="loader", daemon=True).start()
ready.wait()
time.sleep(0.3)  # let the loader thread reach its sleep
def step():
    ctypes.string_at(0)
step()
"""
SEGV_LINE = 10  # ctypes.string_at(0) in step()

WAIT = """\
import sys, time
def wait_for_peers():
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    while True:
        time.sleep(0.05)
wait_for_peers()
"""
WAIT_LINE = 5

SETENV = """\
import os, signal
os.environ["RANK"] = "7"
os.environ["HOSTNAME"] = "node-late"
def crash():
    os.kill(os.getpid(), signal.SIGSEGV)
crash()
"""
SETENV_LINE = 5

TORCH = """\
import ctypes, sys
import torch
import torch.distributed as dist

def train_step(x):
    dist.all_reduce(x)
    ctypes.string_at(0)

dist.init_process_group("gloo", store=dist.FileStore(sys.argv[1], 1), rank=0, world_size=1)
train_step(torch.ones(4))
"""
TORCH_LINE = 7


def core_pattern() -> str:
    try:
        return Path("/proc/sys/kernel/core_pattern").read_text().strip()
    except OSError:
        return ""


def unlimited_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def env(**kw: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURMD_NODENAME", "HOSTNAME", "HOST")}
    env.update(kw)
    return env


def start(script: str, cwd: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "prog.py").write_text(script)
    return subprocess.Popen([sys.executable, str(cwd / "prog.py"), *args], cwd=cwd, env=env, preexec_fn=unlimited_cores,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def core_of(proc: subprocess.Popen, cwd: Path) -> Path:
    """Wait for ``proc`` to die and return the core the kernel wrote into its cwd (core_pattern
    ``core``: ``core`` or ``core.PID`` with core_uses_pid)."""
    proc.wait(timeout=60)
    for name in (f"core.{proc.pid}", "core"):
        if (cwd / name).is_file():
            return cwd / name
    pytest.fail(f"no core in {cwd} (core_pattern {core_pattern()!r}, exit {proc.returncode}, stderr {proc.stderr.read()[-300:]})")


