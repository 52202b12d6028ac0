"""The GPU cases (issue 27 part 4): real jobs on one CUDA GPU, run by ``tests/gpu/run`` on a GPU machine.

Every test here is marked ``gpu`` (declared in pyproject.toml) and skipped, at set-up, when torch is not
installed or ``torch.cuda.is_available()`` is False: on CI and on this project's CPU machines they are
collected and skipped. Each test takes a :class:`Case` (the ``case`` fixture): a folder of its own under the
results folder (``$HANGDBG_GPU_OUT``, set by ``tests/gpu/run``; else a pytest temporary folder), commands run
with a hard timeout in their own process group (killed as a group when the time is up), background jobs
killed as a group at the end of the test, and ``cases/NAME.json``: the figures, the commands, their exit
statuses and seconds, and the outcome, rewritten as the test goes (a case cut short by the run's time limit
still says what it had done). ``tests/gpu/summary.py`` builds summary.json and summary.md from those files.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs"
OUT_ENV = "HANGDBG_GPU_OUT"
"""The results folder ``tests/gpu/run`` hands to pytest."""

_CASE = pytest.StashKey["Case"]()


@functools.lru_cache(maxsize=1)
def gpu_missing() -> str | None:
    """Why the GPU cases cannot run here (None: they can): torch missing, or no CUDA device visible."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)"
    return None


def pytest_collection_modifyitems(items):
    for item in items:  # (only this folder's items reach a folder conftest's hook through item.ihook; check anyway)
        if Path(str(item.fspath)).resolve().is_relative_to(Path(__file__).resolve().parent):
            item.add_marker(pytest.mark.gpu)
            item.add_marker(pytest.mark.real)


@pytest.fixture(autouse=True)
def _needs_gpu():
    why = gpu_missing()
    if why:
        pytest.skip(f"no GPU: {why}")


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory) -> Path:
    out = os.environ.get(OUT_ENV)
    path = Path(out).resolve() if out else tmp_path_factory.mktemp("hangdbg-gpu")
    (path / "cases").mkdir(parents=True, exist_ok=True)
    return path


def child_env(**extra: str) -> dict[str, str]:
    """The environment of every command: this one, the checkout first on PYTHONPATH (``python3 -m hangdbg``
    runs the checkout, never an installed copy), no colour, a fixed width, unbuffered output."""
    path = [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "NO_COLOR": "1", "COLUMNS": "160",
            "PYTHONUNBUFFERED": "1", **extra}


def kill_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), SIGKILL it after ``grace``
    seconds, and reap ``proc``; ranks that outlive their launcher are in the same group and die with it."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM:
                continue  # the launcher is gone; SIGKILL what is left of the group
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(timeout=grace)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies left out), read from /proc."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "(comm)": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(d.name))
    return pids


@dataclass
class Ran:
    """A finished command: exit status (None when it was killed at its timeout), output, seconds."""

    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Job:
    """A background job (a torchrun launcher and its ranks) in its own process group, its output in ``log``."""

    def __init__(self, case: "Case", label: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.label, self.log = label, cwd / f"{label}.log"
        self.started = time.monotonic()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, cwd=cwd, start_new_session=True)
        self.entry = {"label": label, "argv": argv, "pid": self.proc.pid, "log": str(self.log.relative_to(case.out)),
                      "background": True, "rc": None, "seconds": None}
        case.record["commands"].append(self.entry)
        case.save()
        self.case = case

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_for(self, done, timeout: float, what: str) -> float:
        """Poll ``done()`` every 0.2 s until it is true; its seconds since the start. Fails the test (with the
        end of the log) when the job exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return time.monotonic() - self.started
            if not self.alive():
                if done():
                    return time.monotonic() - self.started
                pytest.fail(f"{self.label} exited (status {self.proc.returncode}) before {what}:\n{self.tail()}")
            time.sleep(0.2)
        pytest.fail(f"{self.label}: no {what} within {timeout:g} s:\n{self.tail()}")

    def tail(self, lines: int = 25) -> str:
        """The first error line of the log (a rank's exception, above torchrun's report) and its last lines."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        first = next((line for line in text if re.search(r"\w(?:Error|Exception)\b|\bWARN\b", line)
                      and "ChildFailedError" not in line), None)
        return (f"first error line: {first}\n" if first else "") + "\n".join(text[-lines:])

    def stop(self) -> list[int]:
        """Kill the job's process group; the pids of the group still alive afterwards (none, normally)."""
        kill_group(self.proc)
        self.entry["rc"] = self.proc.returncode
        self.entry["seconds"] = round(time.monotonic() - self.started, 3)
        self.case.save()
        deadline = time.monotonic() + 15  # (a rank killed inside a CUDA kernel exits once the driver tore its context down)
        while group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        return group_members(self.proc.pid)


class Case:
    """One GPU case: its folder ``OUT/NAME``, its record ``OUT/cases/NAME.json`` and its processes."""

    def __init__(self, name: str, out: Path, nodeid: str) -> None:
        self.name, self.out = name, out
        self.dir = out / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.jobs: list[Job] = []
        self.started = time.monotonic()
        self.record: dict = {"case": name, "test": nodeid, "outcome": "running", "message": "",
                             "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
                             "seconds": None, "figures": {}, "notes": {}, "commands": []}
        self.save()

    def save(self) -> None:
        path = self.out / "cases" / f"{self.name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1, default=str) + "\n")
        tmp.replace(path)

    def figure(self, key: str, value, unit: str = "") -> None:
        """A figure of the summary (seconds, TFLOP/s, GB/s...)."""
        self.record["figures"][key] = {"value": round(value, 3) if isinstance(value, float) else value, "unit": unit}
        self.save()

    def note(self, key: str, value) -> None:
        """A fact of the case that is not a figure (a headline, a finding's summary, a file's size)."""
        self.record["notes"][key] = value
        self.save()

    def run(self, label: str, argv: list[str], timeout: float, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> Ran:
        """Run ``argv`` to its end or ``timeout`` seconds (then its process group is killed); its output is
        kept in ``LABEL.out`` and ``LABEL.err`` of the case's folder."""
        out_path, err_path = self.dir / f"{label}.out", self.dir / f"{label}.err"
        entry = {"label": label, "argv": argv, "rc": None, "seconds": None, "timed_out": False,
                 "stdout": str(out_path.relative_to(self.out)), "stderr": str(err_path.relative_to(self.out))}
        self.record["commands"].append(entry)
        self.save()
        start = time.monotonic()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env or child_env(),
                                    cwd=cwd or ROOT, start_new_session=True)
            entry["pid"] = proc.pid  # (its process group: tests/gpu/summary.py reap kills what a cut-short run left)
            self.save()
            try:
                proc.wait(timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            kill_group(proc)  # (also what it left behind when it ended in time)
        seconds = time.monotonic() - start
        ran = Ran(None if timed_out else proc.returncode, out_path.read_text(errors="replace"),
                 err_path.read_text(errors="replace"), seconds, timed_out)
        entry.update(rc=ran.rc, seconds=round(seconds, 3), timed_out=timed_out)
        self.save()
        return ran

    def hangdbg(self, label: str, *args: str, timeout: float) -> Ran:
        """``python3 -m hangdbg ARGS`` (this interpreter, the checkout on PYTHONPATH)."""
        return self.run(label, [sys.executable, "-m", "hangdbg", *args], timeout)

    def torchrun(self, label: str, nproc: int, script: str, *args: str, env: dict[str, str] | None = None,
                 where: Path | None = None) -> Job:
        """Start ``python3 -m torch.distributed.run --standalone --nproc-per-node NPROC jobs/SCRIPT ARGS`` in
        the background, in folder ``where`` (default: the case's), its output in ``LABEL.log`` there."""
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                "--monitor-interval", "1", str(JOBS / script), *args]
        where = where or self.dir
        where.mkdir(parents=True, exist_ok=True)
        job = Job(self, label, argv, child_env(OMP_NUM_THREADS="1", **(env or {})), where)
        self.jobs.append(job)
        return job

    def finish(self, outcome: str, message: str = "") -> None:
        self.record.update(outcome=outcome, message=message[-4000:], seconds=round(time.monotonic() - self.started, 3))
        self.save()


@pytest.fixture
def case(request, results_dir, _needs_gpu):
    """The test's :class:`Case`; at the end every job it started is killed, and a process of theirs still
    alive after that fails the test."""
    c = Case(request.node.name, results_dir, request.node.nodeid)
    request.node.stash[_CASE] = c
    yield c
    left = {job.label: job.stop() for job in c.jobs}
    left = {k: v for k, v in left.items() if v}
    c.note("left_running", left)
    assert not left, f"processes still alive after their group was killed: {left}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    c = item.stash.get(_CASE, None)
    if c is None:
        return
    if rep.skipped and isinstance(rep.longrepr, tuple):
        message = str(rep.longrepr[-1])
    else:  # (the failed assertion and its message; the whole traceback is in pytest.log and junit.xml)
        message = getattr(getattr(rep.longrepr, "reprcrash", None), "message", None) or rep.longreprtext[-2000:]
    if rep.when == "call":
        c.finish(rep.outcome, "" if rep.passed else message)
    elif rep.failed:  # set-up or teardown (a process left running)
        c.finish("error" if c.record["outcome"] in ("running", "passed") else c.record["outcome"],
                 f"{c.record['message']}\n{rep.when}: {message}".strip())


def suspects(doc: dict) -> list[dict]:
    """The findings of severity ``suspect`` of a hangdbg JSON document."""
    return [f for f in doc.get("findings", []) if f.get("severity") == "suspect"]


def load_json(ran: Ran, what: str) -> dict:
    """The JSON document a ``--json`` command printed; fails the test with its stderr when there is none."""
    assert not ran.timed_out, f"{what} did not end within its timeout; stderr:\n{ran.stderr[-3000:]}"
    try:
        return json.loads(ran.stdout)
    except ValueError:
        pytest.fail(f"{what} printed no JSON document (exit {ran.rc}); stderr:\n{ran.stderr[-3000:]}")
