"""Start a demo job (``job.py`` or ``topology.py`` under torchrun) that hangs in a known way, and tear it down.

Used by ``hangdbg demo`` and by the tests: a real torch.distributed (gloo, CPU) job, never a
simulation. Requires torch (``pip install 'hangdbg[torch]'``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import HangdbgError
from ..tools.subproc import Popen
from . import in_process, job, long_step, topology

__all__ = ["JOB_SCRIPT", "SCENARIOS", "DemoJob", "default_nproc", "script_of"]

JOB_SCRIPT = Path(__file__).with_name("job.py")
TOPOLOGY_SCRIPT = Path(__file__).with_name("topology.py")
IN_PROCESS_SCRIPT = Path(__file__).with_name("in_process.py")
LONG_STEP_SCRIPT = Path(__file__).with_name("long_step.py")
SCENARIOS = job.SCENARIOS + topology.SCENARIOS + in_process.SCENARIOS + long_step.SCENARIOS
"""Every scenario: ``job.py``'s, then ``topology.py``'s, ``in_process.py``'s and ``long_step.py``'s."""


def script_of(scenario: str) -> Path:
    """The job script that runs ``scenario``."""
    if scenario in in_process.SCENARIOS:
        return IN_PROCESS_SCRIPT
    if scenario in long_step.SCENARIOS:
        return LONG_STEP_SCRIPT
    return TOPOLOGY_SCRIPT if scenario in topology.SCENARIOS else JOB_SCRIPT


def default_nproc(scenario: str) -> int:
    """Ranks a scenario is written for (4 unless it says otherwise)."""
    return topology.NPROC.get(scenario, 4)


class DemoJob:
    """A running demo job.

    Args:
        scenario: one of ``SCENARIOS`` (``job``, ``topology``, ``in_process`` or ``long_step.SCENARIOS``).
        nproc: ranks to start (``--nproc_per_node``; ``None``: the scenario's default, see
            :func:`default_nproc`).
        workdir: where markers and the job log go (a temporary directory by default).
        env: more environment variables for the ranks (e.g. ``HANGDBG_DEMO_RECORD=1``: the
            topology scenarios then call ``hangdbg.hooks.record_collectives()``).
        args: more arguments of the job script (``job.py``: ``--steps``, ``--hang-step``,
            ``--step-seconds``, ``--log-steps``, ``--exit``; ``long_step.py``: ``--step-seconds``).

    Use as a context manager: ``with DemoJob("mismatch") as job: job.wait_ready(); ...``; the job's
    whole process group is killed on exit.
    """

    def __init__(self, scenario: str = "mismatch", nproc: int | None = None,
                 workdir: str | os.PathLike | None = None, env: dict[str, str] | None = None,
                 args: list[str] | tuple[str, ...] = ()) -> None:
        self.scenario = scenario
        self.args = list(args)
        self.env = dict(env or {})
        self.nproc = default_nproc(scenario) if nproc is None else nproc
        self._tmp = None if workdir else tempfile.mkdtemp(prefix="hangdbg-demo-")
        self.workdir = Path(workdir if workdir is not None else str(self._tmp))
        self.ready_dir = self.workdir / "ready"
        self.log_path = self.workdir / "job.log"
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        """The torchrun launcher's pid (pass it to ``hangdbg dump --pid``)."""
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> "DemoJob":
        if importlib.util.find_spec("torch") is None:  # the ranks import it; hangdbg itself never does
            raise HangdbgError(
                "the demo needs torch", help="pip install 'hangdbg[torch]' (CPU build: pip install torch==2.13.0)"
            )
        self.ready_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", "torch.distributed.run",
            "--standalone", "--nproc_per_node", str(self.nproc),
            "--monitor_interval", "1",
            str(script_of(self.scenario)), "--scenario", self.scenario, "--ready", str(self.ready_dir),
            *self.args,
        ]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **self.env)
        with open(self.log_path, "wb") as log:
            self.proc = Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True, cwd=self.workdir,
            )
        return self

    def expected_ready(self) -> int:
        return self.nproc - 1 if self.scenario == "missing" else self.nproc

    def wait_ready(self, timeout: float = 180.0, settle: float = 1.5) -> None:
        """Wait until every rank reached its hanging call, then ``settle`` seconds more.

        Raises:
            HangdbgError: the job exited or did not get there within ``timeout`` seconds
            (the message carries the end of the job's log).
        """
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        want = self.expected_ready()
        while time.monotonic() < deadline:
            if len(list(self.ready_dir.glob("rank-*"))) >= want:
                time.sleep(settle)
                return
            if self.proc.poll() is not None:
                raise HangdbgError(f"the demo job exited early (status {self.proc.returncode}):\n{self.log_tail()}")
            time.sleep(0.2)
        raise HangdbgError(f"the demo job did not reach its hang within {timeout:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Kill the launcher and every rank (the whole session), then clean up."""
        if self.proc is not None and self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.proc is not None:
            try:  # ranks that outlived the launcher
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "DemoJob":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
