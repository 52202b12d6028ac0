"""The ``run`` use case: start a job with the debug environment set, watch it as ``watch --pid``
would, and write the post-mortem ``report`` of its output directory when it ends.

Steps (:func:`run_and_watch`):

1. claim ``OUT`` (marker ``command: run``) and create ``OUT/fr``, ``OUT/nccl``, ``OUT/heartbeat``,
   ``OUT/logs`` (NCCL and torch do not create the directories of their files);
2. start the command (an argv list, never a shell string) in its own session and process group,
   with the environment of :func:`hangdbg.watch.run_env.debug_env` (the user's values always win);
3. watch it: :func:`hangdbg.api.watch` with ``--pid <child>``, the heartbeat directory and the
   stacks as signals (the plan's other options as given); a stall is dumped into
   ``OUT/stall-DATE/``, then ``--on-hang`` and ``--then`` act, as in ``watch``. Without ``--then``
   the job is left running and the watch goes on (a job may recover; the user decides); with
   ``--once`` the watch stops after the first stall but ``run`` still waits for the job to end;
4. Ctrl-C (SIGINT) or SIGTERM to ``run``: SIGTERM to the job's process group (torchrun stops its
   workers with the signal it got; a rank blocked in a collective's C++ wait never reaches the
   Python handler of SIGINT, it would wait out torchrun's 30 s; SIGTERM's default action ends it
   at once), and after :data:`STOP_GRACE` seconds SIGKILL;
5. when the command has ended: :func:`hangdbg.api.report` of ``OUT`` and
   :func:`hangdbg.api.save_report` into ``OUT`` (``report.json``, ``report.html``), as
   ``hangdbg report OUT -o OUT`` would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import psutil

from ..errors import HangdbgError, UsageError
from ..events import Events
from ..hooks.heartbeat import ENV_DIR
from ..model import Verdict
from ..outdir import OutDir, claim, make_dirs, run_path
from ..watch.identity import START_TOLERANCE
from ..watch.run_env import DebugEnv, debug_env, out_dirs
from ..tools.pyspy import find_pyspy
from ..tools.subproc import Popen, kill_group
from ..transport.targets import TargetSpec
from ..watch.auto_stall import AutoStall
from ..watch.plan import WatchPlan, WatchResult
from ._report import report, save_report
from ._watch import watch

__all__ = ["RunResult", "run_and_watch", "STOP_GRACE"]

STOP_GRACE = 45.0
"""Seconds the job gets to stop after the forwarded SIGTERM before its process group is killed
(more than torchrun's own 30 s between its workers' signal and their SIGKILL)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one ``run`` did.

    Attributes:
        out: the output directory.
        argv: the command started.
        env: the debug variables set (and those the user had already).
        returncode: the command's exit status (``-N``: killed by signal N, as :mod:`subprocess` says).
        watch: the watch's result (stalls declared, ``OUT/watch.json``).
        verdict: the post-mortem verdict on ``OUT``.
        document: the ``report`` document of that verdict (``OUT/report.json``).
        not_saved: files of the report that could not be written.
        interrupted: ``run`` was interrupted (SIGINT/SIGTERM) and stopped the job.
    """

    out: Path
    argv: tuple[str, ...]
    env: DebugEnv
    returncode: int
    watch: WatchResult
    verdict: Verdict
    document: Any
    not_saved: tuple[Any, ...] = ()
    interrupted: bool = False


def run_and_watch(argv: Sequence[str], plan: WatchPlan, events: Events | None = None, *, auto_stall: bool = True,
                  nccl_debug: str | None = None, environ: dict[str, str] | None = None,
                  stdout: int | None = None) -> RunResult:
    """Run ``argv`` with the debug environment, watch it, and report on it (module docstring).

    Args:
        argv: the command, e.g. ``["torchrun", "--nproc-per-node", "4", "train.py"]``.
        plan: the watch's options; its ``target`` is replaced by the started command's pid, its
            ``heartbeat`` defaults to ``$HANGDBG_HEARTBEAT_DIR`` or ``OUT/heartbeat`` and ``stacks``
            is on; ``out`` is the run's directory (None: ``./hangdbg-run-DATE``).
        auto_stall: the threshold follows the job's step time (:class:`~hangdbg.watch.auto_stall.AutoStall`,
            starting from ``plan.stall``); False: ``plan.stall`` throughout.
        nccl_debug: ``NCCL_DEBUG`` to set for the job (None: left as the environment has it).
        environ: the environment to start from (default ``os.environ``).
        stdout: the job's standard output (a file descriptor; None: this process's, inherited).
            ``run --json`` gives 2 (stderr), so that its stdout carries the document only.

    Raises:
        UsageError: no command; the output directory cannot be used.
        HangdbgError: the command cannot be started; py-spy is not installed.
    """
    if not argv:
        raise UsageError("run what? give the command after --, e.g. hangdbg run -- torchrun --nproc-per-node 4 train.py")
    events = events or Events()
    if find_pyspy(plan.py_spy) is None:  # before the job starts (watch() would say it after)
        raise HangdbgError("py-spy not found", help="pip install py-spy (or pass --py-spy PATH)")
    environ = dict(os.environ if environ is None else environ)
    path = run_path(plan.out, "hangdbg-run").resolve()
    options = plan.to_argv()[len(plan.target.to_argv()):]  # the target is the job, not an option
    out = claim(path, "run", ["run", *options, "--", *argv], force=plan.force)
    for d in out_dirs(path):
        make_dirs(d)
    heartbeat = plan.heartbeat or environ.get(ENV_DIR) or str(path / "heartbeat")
    if plan.heartbeat and environ.get(ENV_DIR) and os.path.abspath(environ[ENV_DIR]) != os.path.abspath(plan.heartbeat):
        events.warn(f"the job's {ENV_DIR}={environ[ENV_DIR]} is not --heartbeat {plan.heartbeat}: "
                    "its heartbeat hooks write where this run does not look")
    denv = debug_env(environ, path, argv, nccl_debug, heartbeat)
    for name, value in denv.set.items():
        events.log(f"set {name}={value}")
    for name, value in denv.kept.items():
        events.log(f"kept the environment's {name}={value}")
    events.note(f"debug environment: {len(denv.set)} variables set ({', '.join(denv.set) or 'none'})"
                + (f", {len(denv.kept)} kept as they were" if denv.kept else ""))
    child = _start(list(argv), denv.env, stdout)
    stopper = _Stopper(child)
    try:
        watched = replace(plan, target=TargetSpec(pids=(child.pid,)), heartbeat=heartbeat, stacks=True, out=path)
        rule = AutoStall(before=plan.stall).update if auto_stall else None
        events.note(f"started {argv[0]} (pid {child.pid}); "
                    + ("stall threshold auto: %g s until the heartbeats show a step time" % plan.stall if auto_stall else ""))
        result = watch(watched, events, claimed=out, stall_rule=rule, sleep=stopper.sleep)
        if result.ended == "interrupted":
            stopper.stop()
        code = stopper.wait(events)
    finally:
        stopper.cleanup(events)
    events.note(f"{argv[0]} exited with status {code}; reading everything under {path}")
    verdict = report([path], events)
    doc, _html, lost = save_report(verdict, [path], path, events=events)
    return RunResult(path, tuple(argv), denv, code, result, verdict, doc, tuple(lost), stopper.stopped)


def _start(argv: list[str], env: dict[str, str], stdout: int | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session (its own process group: the terminal's Ctrl-C reaches only
    ``run``, which forwards it).

    Raises:
        HangdbgError: the program cannot be run (not found, not executable).
    """
    try:
        return Popen(argv, env=env, stdout=stdout, start_new_session=True)
    except OSError as exc:
        raise HangdbgError(f"cannot run {argv[0]}: {exc.strerror or exc}",
                           help="give the command as you would run it, e.g. -- torchrun --nproc-per-node 4 train.py") from None


def _left_in_group(pgid: int, started: float) -> list[psutil.Process]:
    """Live processes of process group ``pgid`` started at or after ``started`` (Unix seconds,
    less :data:`~hangdbg.watch.identity.START_TOLERANCE`)."""
    out = []
    for proc in psutil.process_iter(["create_time", "status"]):
        try:
            if (proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid
                    and proc.info["create_time"] >= started - START_TOLERANCE):
                out.append(proc)
        except (OSError, psutil.Error):
            continue
    return out


class _Stopper:
    """The job's end: the signal forwarding, the wait, and the process group's cleanup."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        try:
            self.started = psutil.Process(child.pid).create_time()
        except psutil.Error:  # ended already: nothing of its group is newer than now
            self.started = time.time()
        self.signal = signal.SIGTERM  # what a stop sends, whatever run received (module docstring)
        self.stopped = False
        self.previous = signal.signal(signal.SIGINT, self._on_signal)
        self.previous_term = signal.signal(signal.SIGTERM, self._on_signal)  # watch() sets its own meanwhile

    def _on_signal(self, _signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or until the job exits (it is reaped then: its status is kept)."""
        try:
            self.child.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        """SIGTERM to the job's process group (module docstring); SIGKILL comes from
        :func:`hangdbg.tools.subproc.kill_group`."""
        self.stopped = True
        try:
            os.killpg(self.child.pid, self.signal)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, events: Events) -> int:
        """Wait for the job to end (:data:`STOP_GRACE` seconds once stopped, then SIGKILL); its
        status. A signal to ``run`` now stops the job as well."""
        deadline: float | None = time.monotonic() + STOP_GRACE if self.stopped else None
        while True:
            try:
                timeout = None if deadline is None else max(0.1, deadline - time.monotonic())
                return self.child.wait(timeout=timeout)
            except KeyboardInterrupt:
                if self.stopped:
                    kill_group(self.child)
                else:
                    events.note(f"stopping the job ({self.signal.name} to its process group)")
                    self.stop()
                    deadline = time.monotonic() + STOP_GRACE
            except subprocess.TimeoutExpired:
                events.warn(f"the job did not stop within {STOP_GRACE:g} s: SIGKILL to its process group")
                kill_group(self.child)
                deadline = None

    def cleanup(self, events: Events | None = None) -> None:
        """Restore SIGINT; when the job was stopped (or ``run`` failed), kill what is left of its group.

        Whatever the end, processes left in the job's process group once its command has ended (a
        rank's daemon child orphaned when the rank was killed: torch's debug-server frontend) are
        killed, as SLURM kills what is left of a step when the step ends: they are found by their
        process group and a start time not before the command's (a pid or group id reused by an
        unrelated process is never signalled)."""
        signal.signal(signal.SIGINT, self.previous)
        signal.signal(signal.SIGTERM, self.previous_term)
        if self.stopped or self.child.poll() is None:
            kill_group(self.child)
            try:
                self.child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        left = _left_in_group(self.child.pid, self.started)
        for proc in left:
            try:
                proc.kill()
            except psutil.Error:
                pass
        if left and events is not None:
            events.warn(f"killed {len(left)} process(es) the job left in its process group after it ended "
                        f"(pid {', '.join(str(p.pid) for p in left)})")
