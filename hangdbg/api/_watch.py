"""The ``watch`` use case: watch a running job, dump it when it stalls (before a watchdog kills it),
and tell someone.

Signals (:mod:`hangdbg.watch.stall`): log files that stop growing (with a pattern: no new
matching line, :mod:`hangdbg.watch.logtail`; a log missing, deleted or replaced is a warning and
the stacks are watched instead), heartbeat files that stop changing, or the ranks' stacks, sampled
with non-blocking py-spy, that stop changing while ranks wait in torch.distributed. Time the job
or the watcher was stopped is no stall time (:mod:`hangdbg.watch.clock`). At most ``max_stalls``
stalls, ``stall_gap`` seconds apart, are handled. On a stall: the same collection
and analysis as ``dump`` (:func:`hangdbg.api.dump`, called directly) into
``OUT/stall-YYYYmmdd-HHMMSS/``, then the plan's ``on_hang`` command and its ``then`` action.
``OUT/watch.json`` (the ``watch`` document) is rewritten after every stall and at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Hashable

import psutil

from ..collect.fanout import agent_argv, fan_out
from ..collect.plan import DumpPlan
from ..collect.local import collect, raw_text
from ..collect.procs import Ignored, RankProcess, find_ranks
from ..collect.ray_ranks import ray_ranks
from ..collect.result import StacksResult
from ..errors import HangdbgError, UsageError
from ..events import Events
from ..model import RankDump
from ..enums import DumpState, NodeStatus
from ..outdir import OutDir
from ..report.build import watch_document
from ..report.schema import to_json
from ..tools.pyspy import find_pyspy
from ..tools.subproc import Popen, communicate_capped, run
from ..transport.slurm_actions import requeue_excluding
from ..watch.notify import post_webhook, shown_url, suspect_places, webhook_payload
from ..transport.slurm import WAITING_STATES, job_state, show_job
from ..transport.ray_state import read_cluster
from ..transport.targets import Targets, ray_targets, resolve
from ..watch.plan import SIGNALS, Ended, StallRecord, WatchPlan, WatchResult
from ..watch.cpu_straggler import CpuBook
from ..watch.keep_last import LastRing, pyspy_like
from ..watch.records import StragglerReport
from ..watch.straggler import StepBook, StepMark, straggler_report
from ..tools.pyspy import PySpyResult
from ..watch.clock import WatchClock
from ..watch.identity import Identity, children_of, identify, kill_identified, launchers_of, refused_target
from ..watch.probes import HeartbeatProbe, LogProbe, job_stopped, pids_alive, watch_loop
from ..watch.stall import Observation, Stall, StallDetector, stacks_signature, waiting_or_idle
from ._dump import claim_out, dump

__all__ = ["watch", "ON_HANG_TIMEOUT"]

ON_HANG_TIMEOUT = 600.0
"""Seconds ``on_hang`` may run before it is killed (the watch goes on)."""

ON_HANG_OUTPUT_CAP = 1 << 20
"""Bytes of ``on_hang``'s output kept (in ``STALL_DIR/on-hang.log``); the rest is read and dropped,
so a hook that prints without end costs neither memory nor a flooded terminal (issue 31)."""

WARNINGS_KEPT = 100
"""Warnings kept for ``watch.json`` (the later ones are only said)."""

ON_HANG_SHOWN = 20
"""Lines of ``on_hang``'s output shown on the console (its last ones; the file has the rest)."""


def watch(plan: WatchPlan, events: Events | None = None, *, claimed: OutDir | None = None,
          stall_rule: Callable[[dict[int, list[StepMark]]], float] | None = None,
          sleep: Callable[[float], None] | None = None) -> WatchResult:
    """Watch the job of ``plan`` until it ends (or, with ``once``, until the first stall was handled).

    Ctrl-C and SIGTERM end the watch (``ended``: ``interrupted``) and still write ``watch.json``.

    Args:
        claimed: the output directory, already claimed by the caller (``hangdbg run``, which
            writes its marker and starts the job first); None: ``plan.out`` is claimed here.
        stall_rule: called at each observation with the heartbeat rings (``{rank: marks}``,
            :meth:`~hangdbg.watch.probes.HeartbeatProbe.rings`); returns the stall threshold in
            seconds from then on (``hangdbg run``'s default: :class:`hangdbg.watch.auto_stall.AutoStall`).
            None: ``plan.stall`` throughout.
        sleep: waits between two observations (seconds; default :func:`time.sleep`); ``hangdbg
            run`` returns early when its job exits, so that the end is seen at once.

    Raises:
        HangdbgError: py-spy is not installed; the job cannot be reached.
        UsageError: the output directory cannot be used.
    """
    if find_pyspy(plan.py_spy) is None:
        raise HangdbgError("py-spy not found", help="pip install py-spy (or pass --py-spy PATH)")
    watcher = _Watcher(plan, events or Events(), claimed, stall_rule)
    watcher.sleep = sleep or time.sleep
    return watcher.run()


class _Watcher:
    """One watch: its probes, its stalls so far, and the document it keeps up to date."""

    def __init__(self, plan: WatchPlan, events: Events, claimed: OutDir | None = None,
                 stall_rule: Callable[[dict[int, list[StepMark]]], float] | None = None) -> None:
        self.plan = plan
        self.events = events
        self.launchers = self._identify_launchers()  # before the output directory: a refusal leaves nothing
        self.out = claimed or claim_out(plan.out, "watch", plan.argv or plan.to_argv(), plan.force, prefix="hangdbg-watch")
        self.stall_rule = stall_rule
        self.detector: StallDetector | None = None
        self.sleep: Callable[[float], None] = time.sleep
        self.log_probe = LogProbe(list(plan.logs), plan.pattern()) if plan.logs else None
        self.beat_probe = HeartbeatProbe(plan.heartbeat) if plan.heartbeat else None
        self.stalls: list[StallRecord] = []
        self.observations = 0
        self.no_ranks = 0
        self.ignored_said: set[int] = set()  # --pid pids said once to give no rank
        self.seen_ranks = False
        self.remote: Targets | None = None
        every = plan.straggler_every
        self.step_book = StepBook() if every and plan.heartbeat else None
        self.cpu_book = CpuBook() if every and not plan.heartbeat else None
        self.next_report = every or 0
        self.stragglers: StragglerReport | None = None
        self.ring = LastRing(self.out, plan.keep_last) if plan.keep_last else None
        self.warnings: list[str] = []
        self.fallback = False  # the stacks are sampled because a --log cannot be trusted
        self.suspended = False  # the SLURM job was SUSPENDED at the last look

    def _identify_launchers(self) -> list[Identity]:
        """``--pid P`` that is no process: refused. ``--then kill --pid P``: P refused when it is pid 1, hangdbg or one of its ancestors
        (:func:`hangdbg.watch.identity.refused_target`), else identified now by (pid, start time).

        Raises:
            UsageError: a pid that may never be signalled.
        """
        gone = [p for p in self.plan.target.pids if not psutil.pid_exists(p)]
        if gone:  # a watch of nothing would end at once with "no stall seen" (exit 0): a false all-clear
            raise UsageError(f"no process with pid {' '.join(map(str, gone))}",
                             help="give the pid of a running launcher (torchrun...) or of the ranks (`pgrep -f torchrun`)")
        if self.plan.then != "kill" or not self.plan.target.pids:
            return []
        for pid in self.plan.target.pids:
            why = refused_target(pid)
            if why is not None:
                raise UsageError(f"--then kill --pid {pid}: {why}",
                                 help="give the launcher's (torchrun's) or the ranks' pids; hangdbg signals only "
                                      "the processes it identified as the job's")
        return [i for i in (identify(p, f"launcher pid {p}") for p in self.plan.target.pids) if i is not None]

    def run(self) -> WatchResult:
        plan = self.plan
        if plan.target.jobid:
            self._wait_for_start(plan.target.jobid)
        if plan.target.remote:
            self.remote = resolve(plan.target)
        self.events.note(f"watching {plan.target.describe()}: {', '.join(plan.signals)}; stall after {plan.stall:g} s, "
                         f"every {plan.interval:g} s; dumps under {self.out}")
        clock = WatchClock()  # stands still while the watcher is stopped: that time is no stall time
        detector = self.detector = StallDetector(plan.stall, plan.grace, clock.now(), min_gap=plan.stall_gap)
        self._write("running")
        ended: Ended = "interrupted"
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            end = watch_loop(detector, self.observe, self.alive, self.on_stall, plan.interval, plan.once, self.events.log,
                             clock=clock.now, sleep=self.sleep)
            ended, self.observations = end.reason, end.observations
            if ended == "job-ended" and self.ring is not None:
                self.ring.end()
            if ended == "job-ended" and self.plan.straggler_every:
                self._straggler_check(final=True)  # the steps since the last report
        except KeyboardInterrupt:
            self.events.note("interrupted")
        finally:
            signal.signal(signal.SIGTERM, previous)
            clock.close()
            result = self._write(ended)
        return result

    # -- observing --------------------------------------------------------------------------------
    def observe(self, now: float) -> Observation:
        obs = Observation(now, log=self._log_progress(), heartbeat=self.beat_probe.picture() if self.beat_probe else None,
                          stopped=self._job_stopped())
        self.observations += 1
        if self.stall_rule is not None:
            self._adjust_stall()
        if self.sampling:
            dumps = self._sample()
            if dumps and (self.plan.samples_stacks or self.fallback):
                obs = replace(obs, stacks=stacks_signature(dumps), waiting=waiting_or_idle(dumps))
        if self.plan.straggler_every:
            self._straggler_check()
        return obs

    @property
    def sampling(self) -> bool:
        """Stack samples are taken now (:attr:`WatchPlan.takes_samples`, or a ``--log`` that cannot
        be trusted: :attr:`fallback`)."""
        return self.plan.takes_samples or self.fallback

    def _log_progress(self) -> Hashable | None:
        """The logs' progress (:class:`~hangdbg.watch.logtail.LogProbe`); their warnings said and
        kept for ``watch.json``; the stacks watched while a log cannot be trusted."""
        probe = self.log_probe
        if probe is None:
            return None
        progress = probe.progress()
        warnings, notes = probe.take_warnings()
        for w in warnings:
            self._warn(w)
        for n in notes:
            self.events.note(n)
        fallback = probe.blind and not self.plan.samples_stacks
        if fallback and not self.fallback and self.detector is not None:
            self.detector.forget("stacks")  # samples from now on: an old one says nothing about now
        self.fallback = fallback
        return progress

    def _warn(self, text: str) -> None:
        """A warning, said and kept for ``watch.json`` (at most :data:`WARNINGS_KEPT`)."""
        self.events.warn(text)
        if len(self.warnings) < WARNINGS_KEPT:
            self.warnings.append(text)

    def _job_stopped(self) -> bool:
        """The job is stopped: every process of its ``--pid`` trees stopped or frozen
        (:func:`hangdbg.watch.probes.job_stopped`), or its SLURM job SUSPENDED."""
        t = self.plan.target
        if t.pids:
            return job_stopped(list(t.pids))
        return self.suspended

    def _adjust_stall(self) -> None:
        """The stall threshold of ``stall_rule`` from the heartbeat rings (a change is logged)."""
        assert self.stall_rule is not None
        rings = self.beat_probe.rings() if self.beat_probe is not None else {}
        seconds = self.stall_rule(rings)
        if self.detector is not None and seconds != self.detector.stall:
            self.events.log(f"stall threshold now {seconds:.3g} s (from the heartbeats' step times)")
            self.detector.stall = seconds

    # -- stragglers -------------------------------------------------------------------------------
    def _straggler_check(self, final: bool = False) -> None:
        """Every ``straggler_every`` steps (heartbeat steps, else stack samples): the straggler
        report, printed, written to ``OUT/straggler/`` and kept for ``watch.json``; ``final``: at the
        job's end, over the steps since the last report (if any)."""
        every = int(self.plan.straggler_every or 0)
        if self.step_book is not None and self.beat_probe is not None:
            for rank, marks in self.beat_probe.rings().items():
                self.step_book.add(rank, marks)
            at = self.step_book.latest
        else:
            at = self.observations
        last = self.stragglers.step if self.stragglers is not None else -1
        if at is None or (at < self.next_report and not (final and at > last)):
            return
        self.next_report = (at // every + 1) * every
        report = straggler_report(self.step_book) if self.step_book is not None else (
            self.cpu_book.report() if self.cpu_book is not None else None)
        if report is None:
            self.events.log(f"straggler report at step {at}: too few steps compared yet")
            return
        self.stragglers = report
        self.events.note(f"stragglers at step {at}: {report.summary}")
        for r in report.ranks[:8]:
            self.events.log(f"  rank {r.rank}: {'chronic' if r.chronic else 'transient'}, {r.lag_seconds:.3g} s "
                            f"({r.lag_percent:.0f} %) behind, slow in {r.steps_slow}/{r.steps_seen} since {r.since_step}")
        self.out.save_text(f"straggler/step-{at:08d}.json", to_json(report) + "\n")
        self._write("running")

    def _cpu_sample(self, ranks: list[RankProcess]) -> None:
        """Each local rank's CPU seconds so far (psutil ``cpu_times``: user + system) for the
        CPU-time straggler report (:mod:`hangdbg.watch.cpu_straggler`)."""
        if self.cpu_book is None:
            return
        cpu = {}
        for p in ranks:
            try:
                t = psutil.Process(p.pid).cpu_times()
                cpu[p.rank] = t.user + t.system
            except psutil.Error:
                continue
        self.cpu_book.add(time.monotonic(), cpu)

    def _sample(self) -> list[RankDump]:
        """One non-blocking py-spy sample of every rank (no locals, no retry); [] when no rank was found."""
        sample = self.plan.sample_plan()
        if self.plan.target.ray:
            dumps = self._sample_ray(sample)
        elif self.remote is None:
            ignored: Ignored = []
            try:
                ranks = find_ranks(list(self.plan.target.pids), ignored=ignored)
            except HangdbgError as exc:
                self.events.log(f"no ranks to sample: {exc}")
                self.no_ranks += 1
                return []
            for pid, why in ignored:
                if pid not in self.ignored_said:
                    self.ignored_said.add(pid)
                    self.events.warn(f"--pid {pid} ignored: {why}")
            dumps = self._sample_here(ranks, sample)
        else:
            dumps = self._sample_nodes(self.remote, sample)
        self.no_ranks = 0 if dumps else self.no_ranks + 1
        self.seen_ranks = self.seen_ranks or bool(dumps)
        return dumps

    def _sample_ray(self, sample: DumpPlan) -> list[RankDump]:
        """``--ray``: the cluster's ranks found anew for each sample (:mod:`hangdbg.collect.ray_ranks`:
        actors come and go), sampled here, or by the agents of their nodes when some run elsewhere."""
        try:
            found = ray_ranks(read_cluster(self.plan.target.ray or "", self.plan.timeout))
        except HangdbgError as exc:
            self.events.log(f"no ranks to sample: {exc}")
            return []
        if found.elsewhere:
            return self._sample_nodes(ray_targets(self.plan.target, found.nodes), sample)
        return self._sample_here(found.here, sample)

    def _sample_here(self, ranks: list[RankProcess], sample: DumpPlan) -> list[RankDump]:
        """The ranks of this node sampled with py-spy; their CPU time (stragglers) and, with
        ``--keep-last``, their last stacks kept in the ring."""
        self._cpu_sample(ranks)
        if not sample.cmdline:  # --no-cmdline: the last stacks (keep_last) are written without them
            ranks = [replace(r, cmdline="") for r in ranks]
        raws: list[tuple[int, str, float]] = []

        def keep(p: RankProcess, k: int, res: PySpyResult) -> None:
            if res.error is None:
                now = time.time()
                raws.append((p.rank, raw_text(p, k, res, "", now), now))

        dumps = collect(ranks, sample.collect_options(None), keep if self.ring is not None else None)
        if self.ring is not None:  # exited: no longer among the job's processes, or gone under py-spy
            found = {p.rank for p in ranks}
            self.ring.add(raws, {r for r in self.ring.seen if r not in found}
                          | {d.rank for d in dumps if d.state == DumpState.GONE})
        return dumps

    def _sample_nodes(self, targets: Targets, sample: DumpPlan) -> list[RankDump]:
        argv = agent_argv(self.plan.target.remote_python, sample.agent_argv(with_host=not self.plan.target.jobid))
        with tempfile.TemporaryDirectory(prefix="hangdbg-watch-sample-") as tmp:
            fan = fan_out(targets.make_runner(targets.hosts), targets.hosts, argv, OutDir(tmp), 2 * self.plan.timeout + 30)
        for n in fan.nodes:
            if n.status not in (NodeStatus.OK, NodeStatus.NO_RANKS):
                self.events.log(f"node {n.host}: {n.status} {n.reason or ''}")  # a node that stops answering: go on
        if self.ring is not None:
            self.ring.add([(d.rank, pyspy_like(d), (d.sample_times or (time.time(),))[-1]) for d in fan.dumps if d.threads],
                          {d.rank for d in fan.dumps if d.state == DumpState.GONE})
        return fan.dumps

    def alive(self) -> bool:
        t = self.plan.target
        if t.pids:
            return pids_alive(list(t.pids))
        if t.jobid:
            try:
                self.suspended = job_state(t.jobid).state == "SUSPENDED"
                if self.suspended:  # scontrol suspend: stopped, not ended (its time is no stall time)
                    return True
                show_job(t.jobid)
                # RUNNING is alive even with no rank anywhere: the batch script is still setting up
                # (its first srun has not started), or it is between two steps
                return True
            except UsageError as exc:  # not RUNNING, or gone from the controller
                self.events.log(str(exc))
                return False
            except HangdbgError as exc:  # scontrol failed: say so, judge by the ranks meanwhile
                self.events.log(f"cannot ask SLURM: {exc}")
        # over ssh (or scontrol failing): no rank on any node twice in a row
        # (only once ranks were seen: a watcher may start before the job's ranks do)
        return not (self.sampling and self.seen_ranks and self.no_ranks >= 2)

    def _wait_for_start(self, jobid: str) -> None:
        """Wait while SLURM job ``jobid`` is pending (``sbatch ...; hangdbg watch --jobid ID``)."""
        said = ""
        while True:
            state = job_state(jobid).state
            if state not in WAITING_STATES:
                return
            if state != said:
                self.events.note(f"SLURM job {jobid} is {state}; waiting for it to run")
                said = state
            time.sleep(min(self.plan.interval, 10.0))

    # -- on a stall -------------------------------------------------------------------------------
    def on_stall(self, stall: Stall) -> bool:
        """Dump the stall, run the hook and the action; True when this was the ``max_stalls``-th
        stall (the watch ends: its dumps are capped)."""
        plan = self.plan
        t0 = time.monotonic()
        detected = datetime.now(timezone.utc).isoformat(timespec="seconds")
        stall_dir = _fresh(self.out.path / f"stall-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
        self.events.note(f"STALL: {stall.reason}; dumping into {stall_dir}")
        code, result = self._dump(stall_dir, stall.seconds)
        headline = result.headline if result is not None else None
        suspects = sorted({r for f in result.findings if f.is_suspect for r in f.ranks}) if result is not None else []
        dump_seconds = time.monotonic() - t0
        sig = stall.signal if stall.signal in SIGNALS else "stacks"
        record = StallRecord(detected, sig, round(stall.seconds, 1), stall.reason, str(stall_dir), code, headline,
                             tuple(suspects), round(dump_seconds, 2), None, None)
        self.stalls.append(record)  # at once: a Ctrl-C from here on still finds the stall in watch.json
        self._write("running")
        if result is not None:
            self.events.result(result)
        self.events.note(f"dump done in {dump_seconds:.1f} s: {headline or 'no answer'}")
        hook = self._on_hang(stall_dir, headline, suspects, stall) if plan.on_hang else None
        places = suspect_places(result.findings, result.analysis.ranks) if result is not None else []
        then = self._then([p["host"] for p in places if p["host"]], result) if plan.then else None
        if plan.notify_webhook:
            self._notify(stall_dir, detected, code, result, places)
        self.stalls[-1] = replace(record, on_hang_exit=hook, then=then)
        capped = len(self.stalls) >= plan.max_stalls and not plan.once
        if capped:
            self._warn(f"{len(self.stalls)} stalls dumped, the cap of --max-stalls {plan.max_stalls}: the watch ends "
                       "(no more dumps)")
        self._write("running")
        return capped

    def _dump(self, stall_dir: Path, observed: float = 0.0) -> tuple[int, StacksResult | None]:
        """The stall's ``dump`` (:func:`hangdbg.api.dump`, its adaptive steps included): its
        exit status and result (None when it failed; the watch goes on). ``observed``: the stall's
        seconds, counted into the dump's window (:attr:`hangdbg.collect.plan.DumpPlan.observed`)."""
        plan = self.plan.dump_plan(stall_dir, observed)
        self.events.log("dump: " + " ".join(plan.to_argv()))
        try:
            result = dump(plan, self.events)
        except HangdbgError as exc:
            self.events.warn(f"the stall dump failed: {exc}")
            return (2 if isinstance(exc, UsageError) else 1), None
        return result.status, result

    def _on_hang(self, stall_dir: Path, headline: str | None, suspects: list[int], stall: Stall) -> int | None:
        """Run ``on_hang`` through ``sh -c`` (the user's own command line, as they wrote it; our values
        only in its environment). Its output (stdout and stderr, the first :data:`ON_HANG_OUTPUT_CAP`
        bytes) is written to ``STALL_DIR/on-hang.log``; its last :data:`ON_HANG_SHOWN` lines go to
        the events as notes (stdout may carry ``--json``), never the whole of it."""
        env = dict(os.environ, HANGDBG_DUMP_DIR=str(stall_dir), HANGDBG_JSON=str(stall_dir / "hangdbg.json"),
                   HANGDBG_HEADLINE=headline or "", HANGDBG_SUSPECTS=",".join(map(str, suspects)),
                   HANGDBG_STALL_REASON=stall.reason)
        try:
            proc = Popen(["/bin/sh", "-c", str(self.plan.on_hang)], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # stderr=STDOUT: one stream
        except OSError as exc:
            self.events.warn(f"--on-hang could not run: {exc}")
            return None
        out, _err, dropped, timed_out = communicate_capped(proc, ON_HANG_TIMEOUT, ON_HANG_OUTPUT_CAP)
        log = stall_dir / "on-hang.log"
        if out or dropped:
            note = f"\n# hangdbg: {dropped} more bytes of output dropped (kept: the first {ON_HANG_OUTPUT_CAP} bytes)\n"
            self.out.save_bytes(log, out + (note.encode() if dropped else b""))
        lines = out.decode("utf-8", "replace").rstrip().splitlines()
        if lines:
            shown = lines[-ON_HANG_SHOWN:]
            more = f"(last {len(shown)} of {len(lines)} lines; all in {log})\n" if len(lines) > len(shown) or dropped else ""
            self.events.output(more + "\n".join(shown))
        if dropped:
            self.events.warn(f"--on-hang printed more than {ON_HANG_OUTPUT_CAP >> 20} MiB: {dropped} bytes dropped")
        if timed_out:
            self.events.warn(f"--on-hang ran longer than {ON_HANG_TIMEOUT:g} s and was stopped")
            return None
        if proc.returncode != 0:
            self.events.warn(f"--on-hang exited with status {proc.returncode}")
        return proc.returncode

    def _notify(self, stall_dir: Path, detected: str, code: int, result: StacksResult | None,
                places: list[dict[str, Any]]) -> None:
        """POST the stall to ``--notify-webhook`` (:mod:`hangdbg.watch.notify`); a failure is a warning."""
        findings = result.findings if result is not None else ()
        top = next((f for f in findings if f.is_suspect), findings[0] if findings else None)
        payload = webhook_payload(headline=result.headline if result is not None else None, suspects=places,
                                  dump_dir=str(stall_dir), exit=code, kind=top.kind.value if top else None,
                                  command="watch", time=detected)
        self.events.log(f"POST {shown_url(str(self.plan.notify_webhook))}")
        failed = post_webhook(str(self.plan.notify_webhook), payload)
        if failed:
            self.events.warn(f"--notify-webhook: {failed}")

    def _requeue_excluding(self, jobid: str, hosts: list[str]) -> str | None:
        """``--exclude-suspects``: requeue the job held, ``hosts`` into its ``ExcNodeList``, release it
        (:func:`hangdbg.transport.slurm_actions.requeue_excluding`); what was done, in words. None
        when no suspect was named: the caller requeues as without the option."""
        if not hosts:
            self.events.warn("no suspect named: nothing excluded")
            return None
        try:
            done = requeue_excluding(jobid, hosts)
        except HangdbgError as exc:
            self.events.warn(f"--exclude-suspects: {exc}")
            return f"requeue excluding {','.join(sorted(set(hosts)))} failed: {exc}"
        self.events.note(f"requeued without the suspects' nodes: {done.describe()}")
        return (f"excluded {','.join(done.added) or 'nothing new'} (ExcNodeList={done.after}); "
                f"requeue: scontrol requeuehold/update/release {jobid} exited 0")

    def _then(self, hosts: list[str] | None = None, result: StacksResult | None = None) -> str:
        """``--then``: what it did, in words. ``hosts``: the suspects' nodes (``--exclude-suspects``);
        ``result``: the stall's dump, whose ranks are the only processes ``kill`` signals (with the
        launchers that hold them: :mod:`hangdbg.watch.identity`)."""
        t, then = self.plan.target, self.plan.then
        if then == "kill" and t.pids:
            ranks = [Identity(d.pid, d.started, f"rank {d.rank}") for d in (result.analysis.ranks if result else ())
                     if d.pid and d.started is not None]
            if not ranks:
                pids = " ".join(map(str, t.pids))
                return (f"kill: not done: the stall's dump identified no training process under pid {pids}; "
                        "nothing was signalled")
            return kill_identified([*launchers_of(self.launchers, ranks), *ranks, *children_of(ranks)])
        jobid = str(t.jobid)
        excluded = ""
        if then == "requeue" and self.plan.exclude_suspects:
            said = self._requeue_excluding(jobid, hosts or [])
            if said is not None:
                return said
            excluded = "no suspect named: nothing excluded; "
        argv = ["scancel", jobid] if then in ("kill", "scancel") else ["scontrol", "requeue", jobid]
        try:
            res = run(argv, timeout=60, text=True, errors="replace")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{excluded}{then}: {' '.join(argv)} failed: {exc}"
        said = (res.stderr or res.stdout).strip()[:200]
        return f"{excluded}{then}: {' '.join(argv)} exited {res.returncode}" + (f": {said}" if said else "")

    def _write(self, ended: Ended) -> WatchResult:
        plan = self.plan
        result = WatchResult(plan.target.describe(), str(self.out.path), plan.signals, plan.stall, plan.interval,
                             self.observations, ended, tuple(self.stalls), self.stragglers, tuple(self.warnings))
        self.out.save_text("watch.json", to_json(watch_document(result)) + "\n")
        return result


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _fresh(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``... when it exists (two stalls in one second)."""
    n, candidate = 1, path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate
