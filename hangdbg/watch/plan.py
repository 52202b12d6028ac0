"""The plan of one ``hangdbg watch`` (:class:`WatchPlan`), and what it found (:class:`WatchResult`).

The command line builds the plan once from its options; :func:`hangdbg.api.watch` carries it
out and hands each stall's dump to :func:`hangdbg.api.dump` as a
:class:`~hangdbg.collect.plan.DumpPlan` (:meth:`WatchPlan.dump_plan`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..collect.plan import DumpPlan
from ..errors import UsageError
from ..transport.targets import TargetSpec
from .notify import check_webhook_url, shown_url
from .records import SIGNALS, Signal, StallRecord, StragglerReport  # re-exported: the records need no collect/ import

__all__ = ["WatchPlan", "WatchResult", "StallRecord", "THEN", "SIGNALS", "MAX_STALLS", "STALL_GAP"]

THEN = ("kill", "scancel", "requeue")
"""What ``--then`` may do after a stall's dump."""

Ended = Literal["running", "job-ended", "once", "max-stalls", "interrupted"]
"""Why a watch ended (``running``: it has not, a stall was just handled; ``max-stalls``: after
``max_stalls`` stalls)."""

MAX_STALLS = 10
"""Stalls (each with its dump, hook and action) one watch handles by default; then it ends."""

STALL_GAP = 60.0
"""Seconds that must pass, by default, between two stalls of one watch (their dumps)."""


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """Everything one ``watch`` needs (the defaults are the command's).

    Attributes:
        target: the job: ``pids`` on this node, a SLURM job, or ssh hosts (not "this node" alone).
        logs: training logs (globs allowed): a stall when they stop growing.
        log_pattern: with ``logs``: only lines matching this regular expression count.
        heartbeat: the directory of :func:`hangdbg.hooks.heartbeat` files: a stall when none changes.
        stacks: also sample the stacks (the default without ``logs``/``heartbeat``).
        stall: seconds without progress that make a stall.
        interval: seconds between observations.
        grace: seconds after the start with no stall declared (start-up, compilation).
        once: stop after the first stall.
        max_stalls: stop after this many stalls (each one dumped: the dumps of one watch are
            capped; :data:`MAX_STALLS`).
        stall_gap: seconds that must pass between two stalls (a stall due sooner is declared
            when they have passed, the quiet time counted all along; :data:`STALL_GAP`).
        on_hang: shell command run after a stall's dump (the user's own command line, run by
            ``sh -c``; hangdbg's values only in its environment).
        then: ``kill``, ``scancel`` or ``requeue`` the job after the dump.
        native, locals, timeout, py_spy: the stall dump's py-spy options.
        node_timeout: seconds a node may take in the stall dump (None: the dump's default).
        force: reuse an ``out`` that holds another run's output.
        out: the output directory (None: ``./hangdbg-watch-DATE``).
        verbose: log every decision and external command.
        straggler_every: print a straggler report every N steps (heartbeat steps; stack samples
            without ``heartbeat``) and write it under ``OUT/straggler/`` (None: no report).
        keep_last: keep each rank's latest N stack samples under ``OUT/last/`` (0: none); the
            stacks are then sampled every ``interval`` even when they are not a stall signal.
        redact, cmdline: as :class:`~hangdbg.collect.plan.DumpPlan`'s (``--no-redact``, ``--no-cmdline``),
            for the stall dumps and every stack sample.
        exclude_suspects: with ``then="requeue"``: requeue the job with the suspects' nodes added to
            its ``ExcNodeList`` (:func:`hangdbg.transport.slurm_actions.requeue_excluding`); nothing is
            excluded when the dump named no suspect (a plain requeue, with a warning).
        notify_webhook: an http(s) URL POSTed the stall's JSON (:mod:`hangdbg.watch.notify`), or None.
    """

    target: TargetSpec = field(default_factory=TargetSpec)
    logs: tuple[str, ...] = ()
    log_pattern: str | None = None
    heartbeat: str | None = None
    stacks: bool = False
    stall: float = 300.0
    interval: float = 10.0
    grace: float = 0.0
    once: bool = False
    max_stalls: int = MAX_STALLS
    stall_gap: float = STALL_GAP
    on_hang: str | None = None
    then: str | None = None
    native: bool = False
    locals: bool = False
    timeout: float = 20.0
    py_spy: str | None = None
    node_timeout: float | None = None
    force: bool = False
    out: Path | None = None
    verbose: bool = False
    straggler_every: int | None = None
    keep_last: int = 0
    redact: bool = True
    cmdline: bool = True
    exclude_suspects: bool = False
    notify_webhook: str | None = None
    argv: tuple[str, ...] = field(default=(), compare=False)
    """The command line that made this plan (``hangdbg.cli``), for the run marker; empty: :meth:`to_argv`."""

    def __post_init__(self) -> None:
        t = self.target
        if not t.pids and not t.remote and not t.ray:
            raise UsageError("watch what? give --pid PID (this node), --jobid ID, --hosts EXPR, --hostfile FILE or --ray ADDRESS")
        if self.then is not None and self.then not in THEN:
            raise UsageError(f"--then is one of {', '.join(THEN)}, not {self.then!r}")
        if self.then in ("scancel", "requeue") and not t.jobid:
            raise UsageError(f"--then {self.then} needs --jobid")
        if self.then == "kill" and not (t.pids or t.jobid):
            raise UsageError("--then kill needs --pid or --jobid (over ssh, stop the job with --on-hang)")
        if self.exclude_suspects and not (self.then == "requeue" and t.jobid):
            raise UsageError("--exclude-suspects goes with --then requeue and --jobid (it adds the suspects' nodes "
                             "to the job's ExcNodeList before the requeue)")
        if self.notify_webhook is not None:
            check_webhook_url(self.notify_webhook)
        if self.log_pattern and not self.logs:
            raise UsageError("--log-pattern goes with --log")
        if self.stall <= 0 or self.interval <= 0 or self.timeout <= 0:
            raise UsageError("--stall, --interval and --timeout take seconds > 0")
        if not 1 <= self.max_stalls <= 10_000:
            raise UsageError("--max-stalls takes a number of stalls from 1 to 10000")
        if self.stall_gap < 0:
            raise UsageError("--stall-gap takes seconds >= 0")
        if self.straggler_every is not None and self.straggler_every < 1:
            raise UsageError("--straggler-every takes a number of steps >= 1")
        if self.straggler_every is not None and not self.heartbeat and not self.samples_stacks:
            raise UsageError("--straggler-every compares the ranks' steps (--heartbeat DIR) or their CPU time between "
                             "stack samples (--stacks)")
        if not 0 <= self.keep_last <= 100:
            raise UsageError("--keep-last takes a number of samples per rank from 1 to 100")
        self.pattern()  # a bad regular expression is a usage error now, not at the first log line

    def pattern(self) -> re.Pattern[str] | None:
        """``log_pattern`` compiled.

        Raises:
            UsageError: it is not a regular expression.
        """
        try:
            return re.compile(self.log_pattern) if self.log_pattern else None
        except re.error as exc:
            raise UsageError(f"--log-pattern is not a regular expression: {exc}") from None

    @property
    def samples_stacks(self) -> bool:
        """The stacks are sampled (asked, or no other signal given)."""
        return self.stacks or not (self.logs or self.heartbeat)

    @property
    def takes_samples(self) -> bool:
        """Stack samples are taken at each observation (a stall signal, ``keep_last``, or the
        CPU-time straggler report of stacks mode)."""
        return self.samples_stacks or self.keep_last > 0

    @property
    def signals(self) -> tuple[Signal, ...]:
        """The signals watched, of :data:`SIGNALS`."""
        on = {"log": bool(self.logs), "heartbeat": bool(self.heartbeat), "stacks": self.samples_stacks}
        return tuple(s for s in SIGNALS if on[s])

    def dump_plan(self, out: Path, observed: float = 0.0) -> DumpPlan:
        """The ``dump`` a stall runs into ``out`` (its adaptive steps included); ``observed``: the
        seconds the stall lasted, which count into the dump's progress-before-blame window (the job
        was already seen without progress that long: :attr:`DumpPlan.observed`)."""
        return DumpPlan(target=self.target, native=self.native, locals=self.locals, timeout=self.timeout,
                        py_spy=self.py_spy, out=out, node_timeout=self.node_timeout, verbose=self.verbose,
                        observed=max(0.0, observed), redact=self.redact, cmdline=self.cmdline)

    def sample_plan(self) -> DumpPlan:
        """One cheap stack sample per observation: non-blocking py-spy, no locals, no adaptive steps."""
        return DumpPlan(target=self.target, nonblocking=True, timeout=self.timeout, py_spy=self.py_spy, adapt=False,
                        jobs=8, redact=self.redact, cmdline=self.cmdline)

    def to_argv(self) -> list[str]:
        """This plan as ``hangdbg watch`` options (without the word ``watch``), as the run marker keeps
        them: the ``--notify-webhook`` URL's path masked (:func:`hangdbg.watch.notify.shown_url`)."""
        argv = self.target.to_argv()
        argv += ["--log", *self.logs] if self.logs else []
        argv += ["--log-pattern", self.log_pattern] if self.log_pattern else []
        argv += ["--heartbeat", self.heartbeat] if self.heartbeat else []
        argv += ["--stacks"] if self.stacks else []
        argv += ["--stall", str(self.stall), "--interval", str(self.interval)]
        argv += ["--grace", str(self.grace)] if self.grace else []
        argv += ["--once"] if self.once else []
        argv += ["--max-stalls", str(self.max_stalls)] if self.max_stalls != MAX_STALLS else []
        argv += ["--stall-gap", str(self.stall_gap)] if self.stall_gap != STALL_GAP else []
        argv += ["--on-hang", self.on_hang] if self.on_hang is not None else []
        argv += ["--then", self.then] if self.then else []
        argv += [f"--{f}" for f in ("native", "locals") if getattr(self, f)]
        argv += ["--timeout", str(self.timeout)]
        argv += ["--py-spy", self.py_spy] if self.py_spy else []
        argv += ["--node-timeout", str(self.node_timeout)] if self.node_timeout is not None else []
        argv += ["--force"] if self.force else []
        argv += ["-o", str(self.out)] if self.out is not None else []
        argv += ["-v"] if self.verbose else []
        argv += ["--straggler-every", str(self.straggler_every)] if self.straggler_every is not None else []
        argv += ["--keep-last", str(self.keep_last)] if self.keep_last else []
        argv += [] if self.redact else ["--no-redact"]
        argv += [] if self.cmdline else ["--no-cmdline"]
        argv += ["--exclude-suspects"] if self.exclude_suspects else []
        argv += ["--notify-webhook", shown_url(self.notify_webhook)] if self.notify_webhook else []  # its path is a secret
        return argv


@dataclass(frozen=True, slots=True)
class WatchResult:
    """What one ``watch`` saw (also what ``OUT/watch.json`` says, rewritten after every stall).

    Attributes:
        targets: the job, as its options name it (``--pid 123``, ``--jobid 42``).
        out_dir: the output directory (``watch.json``, a ``stall-DATE/`` per stall).
        signals: the signals watched.
        stall, interval: the plan's seconds.
        observations: observations made.
        ended: ``running`` (a stall was just handled), ``job-ended``, ``once``, ``max-stalls``
            or ``interrupted``.
        stalls: every stall declared, oldest first.
        stragglers: the latest straggler report (``straggler_every``), or None.
        warnings: what made the watch less sure (a ``--log`` missing, deleted or replaced; the
            stall cap reached), oldest first.
    """

    targets: str
    out_dir: str
    signals: tuple[Signal, ...]
    stall: float
    interval: float
    observations: int
    ended: Ended
    stalls: tuple[StallRecord, ...] = ()
    stragglers: StragglerReport | None = None
    warnings: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        """A stall was declared (the CLI exits 3)."""
        return bool(self.stalls)
