"""The plan of one ``hangdbg dump``: what to dump, how, and what to write (:class:`DumpPlan`).

The command line builds it once from its options; :func:`hangdbg.api.dump` carries it out, on this
node or through the agent on every node of a job (:meth:`DumpPlan.agent_argv`), and ``watch``
hands one to the same function for each stall. :meth:`DumpPlan.to_argv` gives it back as
``hangdbg dump`` options (a test checks that parsing them gives the same plan).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import UsageError
from ..outdir import OutDir
from ..stacks.window import DEFAULT_MIN_WINDOW, Window
from ..tools.pyspy import PySpyOptions
from ..transport.runners import HOST
from ..transport.targets import TargetSpec
from .local import CollectOptions

__all__ = ["DumpPlan", "SPEEDSCOPE_BY", "SpeedscopeBy"]

SpeedscopeBy = Literal["class", "rank"]
SPEEDSCOPE_BY: tuple[SpeedscopeBy, ...] = ("class", "rank")
"""A speedscope export has one profile per equivalence class or per rank."""


@dataclass(frozen=True, slots=True)
class DumpPlan:
    """Everything one ``dump`` needs (the defaults are the command's).

    Attributes:
        target: the ranks of this node, of a SLURM job or of ssh hosts.
        native: py-spy ``--native`` (C/C++ frames) for every rank.
        locals: py-spy ``--locals`` (enables the loop-iteration check).
        nonblocking: py-spy ``--nonblocking``: the ranks are not paused.
        timeout: seconds before one py-spy run is abandoned.
        samples: dumps per rank (>= 1); ranks whose stacks change are progressing.
        interval: seconds between samples.
        jobs: py-spy runs at once (None: 8; with ``native``, the number of CPUs).
        py_spy: the py-spy program (None: found on PATH or next to this Python).
        adapt: run the adaptive steps (retry, native/locals passes, samples, store lookup).
        core: also gcore every rank of this node after the stacks.
        force: write the cores even when they look too big; reuse an ``out`` holding another run.
        out: the output directory (None: ``./hangdbg-dump-DATE``).
        node_timeout: seconds a node may take (None: :meth:`node_budget`).
        speedscope: also write the stacks as a speedscope file here.
        speedscope_by: one speedscope profile per ``class`` or per ``rank``.
        folded: also write folded stacks (flamegraph.pl) here.
        verbose: the node agents send back the external commands they run (``-v``).
        min_window: progress before blame (``--min-window``, seconds; :mod:`hangdbg.stacks.window`):
            a rank on CPU outside any collective is named only once it was seen there this long
            (or for the job's estimated step time x 1.5 when longer); the adaptive collection
            samples until then, a rank moves, or ``max(timeout, min_window)`` has passed. 0: no
            window (two extra samples half a second apart decide, the rule before issue 28).
        observed: seconds the job was already seen without progress before this dump (``watch``'s
            stall), counted into the window.
        fetch_raw: with ``--jobid/--hosts``: the nodes send their raw py-spy outputs too, written
            to ``OUT/raw/<host>/`` here (by default each node keeps them under the same path on
            its own disk and sends only the equivalence classes).
        redact: mask secret-named locals and command-line secrets (``--no-redact``: False).
        cmdline: keep the ranks' command lines (``--no-cmdline``: False, dropped from every output).
    """

    target: TargetSpec = field(default_factory=TargetSpec)
    native: bool = False
    locals: bool = False
    nonblocking: bool = False
    timeout: float = 20.0
    samples: int = 1
    interval: float = 1.0
    jobs: int | None = None
    py_spy: str | None = None
    adapt: bool = True
    core: bool = False
    force: bool = False
    out: Path | None = None
    node_timeout: float | None = None
    speedscope: Path | None = None
    speedscope_by: SpeedscopeBy = "class"
    folded: Path | None = None
    verbose: bool = False
    min_window: float = DEFAULT_MIN_WINDOW
    observed: float = 0.0
    fetch_raw: bool = False
    redact: bool = True
    cmdline: bool = True
    argv: tuple[str, ...] = field(default=(), compare=False)
    """The command line that made this plan (``hangdbg.cli``), for the run marker; empty: :meth:`to_argv`."""

    def __post_init__(self) -> None:
        if self.target.remote and self.target.pids:
            raise UsageError("--pid is for this node; with --jobid/--hosts the agent finds the ranks")
        if self.target.remote and self.core:
            raise UsageError("--core writes cores of this node's ranks; run `hangdbg dump --core` on the node")
        if self.fetch_raw and not self.target.remote:
            raise UsageError("--fetch-raw is for --jobid/--hosts/--hostfile (the raw outputs of other nodes)")
        if self.samples < 1 or self.timeout <= 0 or self.interval <= 0 or (self.jobs is not None and self.jobs < 1):
            raise UsageError("--samples and --jobs take integers >= 1, --timeout and --interval seconds > 0")
        if not (0 <= self.min_window < float("inf")) or not (0 <= self.observed < float("inf")):
            raise UsageError("--min-window takes seconds >= 0")
        if self.speedscope_by not in SPEEDSCOPE_BY:
            raise UsageError(f"--speedscope-by is one of {', '.join(SPEEDSCOPE_BY)}")

    @property
    def pyspy(self) -> PySpyOptions:
        """The options of every py-spy run."""
        return PySpyOptions(native=self.native, locals=self.locals, nonblocking=self.nonblocking,
                            timeout=self.timeout, executable=self.py_spy, redact=self.redact, cmdline=self.cmdline)

    @property
    def window(self) -> Window | None:
        """The progress-before-blame window of this dump (None for ``min_window`` 0): its ``limit`` is
        ``max(timeout, min_window)``: ``--timeout`` bounds the observation too."""
        if not self.min_window:
            return None
        return Window(self.min_window, max(self.timeout, self.min_window), self.observed)

    def collect_options(self, raw_out: OutDir | None) -> CollectOptions:
        """How :func:`hangdbg.collect.local.collect` runs (``raw_out``: the run's
        :class:`~hangdbg.outdir.OutDir`, or None to keep nothing on disk)."""
        jobs = self.jobs or (max(2, os.cpu_count() or 2) if self.native else 8)
        return CollectOptions(self.pyspy, self.samples, self.interval, jobs, raw_out, self.window)

    def node_budget(self) -> float:
        """Seconds one node may take: ``node_timeout``, or room for the adaptive steps (a retry,
        pystack, a native pass, the samples of the window, a store lookup): 6 x ``timeout`` + the
        samples + the window's limit + 30 (2 x ``timeout`` + the samples + 30 without them)."""
        if self.node_timeout is not None:
            return self.node_timeout
        if not self.adapt:
            return 2 * self.timeout + self.samples * self.interval + 30
        w = self.window
        return 6 * self.timeout + self.samples * self.interval + ((w.limit or 0.0) if w is not None else 0.0) + 30

    def agent_argv(self, with_host: bool, keep_raw: Path | None = None) -> list[str]:
        """The options of ``hangdbg agent`` on every node (py-spy flags, timeouts, samples, the
        SLURM job, ``--match-env``; ``--node-name {host}`` when the transport does not tell the
        node its name; ``--keep-raw DIR``: where each node keeps its raw outputs, in
        ``DIR/<node>/``; ``--fetch-raw`` when the plan says so)."""
        out = self._pyspy_argv()
        if keep_raw is not None:
            out += ["--keep-raw", str(keep_raw)]
        if self.fetch_raw:
            out.append("--fetch-raw")
        if self.verbose:
            out.append("-v")  # the agents send their external commands back as log frames
        out += self.target.to_argv(agent=True)
        if with_host:
            out += ["--node-name", HOST]
        return out

    def _pyspy_argv(self) -> list[str]:
        out = [f"--{flag}" for flag in ("native", "locals", "nonblocking") if getattr(self, flag)]
        if not self.adapt:
            out.append("--no-adapt")
        out += ["--timeout", str(self.timeout), "--samples", str(self.samples), "--interval", str(self.interval)]
        if self.min_window != DEFAULT_MIN_WINDOW:
            out += ["--min-window", str(self.min_window)]
        if self.observed:
            out += ["--observed", str(self.observed)]
        if self.jobs:
            out += ["--jobs", str(self.jobs)]
        if self.py_spy:
            out += ["--py-spy", self.py_spy]
        out += [] if self.redact else ["--no-redact"]
        out += [] if self.cmdline else ["--no-cmdline"]
        return out

    def to_argv(self) -> list[str]:
        """This plan as ``hangdbg dump`` options (without the word ``dump``)."""
        argv = self._pyspy_argv() + self.target.to_argv()
        argv += ["--core"] if self.core else []
        argv += ["--force"] if self.force else []
        argv += ["-o", str(self.out)] if self.out is not None else []
        argv += ["--node-timeout", str(self.node_timeout)] if self.node_timeout is not None else []
        argv += ["--speedscope", str(self.speedscope)] if self.speedscope is not None else []
        argv += ["--speedscope-by", self.speedscope_by] if self.speedscope_by != "class" else []
        argv += ["--folded", str(self.folded)] if self.folded is not None else []
        argv += ["-v"] if self.verbose else []
        argv += ["--fetch-raw"] if self.fetch_raw else []
        return argv
