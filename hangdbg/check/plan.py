"""The plan of one ``hangdbg check`` (:class:`CheckPlan`: where, with which job parameters, how to
bisect) and what it found (:class:`CheckResult`).

The command line builds the plan once; :func:`hangdbg.api.check` resolves it into a
:class:`~hangdbg.check.run.CheckSetup` (nodes, slots, rendezvous addresses, a transport) and runs
it. :meth:`CheckPlan.to_argv` gives it back as ``hangdbg check`` options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..transport.targets import TargetSpec
from .blame import Trial
from .node import BACKENDS, CheckJob
from .verdict import CheckVerdict

__all__ = ["CheckPlan", "CheckResult"]


@dataclass(frozen=True, slots=True)
class CheckPlan:
    """Everything one ``check`` needs (the defaults are the command's).

    Attributes:
        target: this node, a SLURM job's nodes (``jobid``, ``nodes``) or ssh hosts; ``pids`` and
            ``match_env`` do not apply.
        job: the diagnostics job's parameters (backend, timeouts, sizes).
        nproc_per_node: ranks per node (None: the GPUs of this node or of the job's nodes; a
            hostfile's slots; else 2 on this node, 1 per remote node).
        slow: ranks and nodes below this fraction of the median bandwidth are slow.
        ifname: ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` on every node from the start (None:
            the nodes' own setting).
        master_port: rendezvous port of the first run (None: a free random one).
        bisect: retry on another interface and bisect a failure (False: one run).
        force: reuse an ``out`` that holds another run's output.
        out: the output directory (None: ``./hangdbg-check-DATE``).
        verbose: the nodes send back the external commands they run.
    """

    target: TargetSpec = field(default_factory=TargetSpec)
    job: CheckJob = field(default_factory=CheckJob)
    nproc_per_node: int | None = None
    slow: float = 0.5
    ifname: str | None = None
    master_port: int | None = None
    bisect: bool = True
    force: bool = False
    out: Path | None = None
    verbose: bool = False
    argv: tuple[str, ...] = field(default=(), compare=False)
    """The command line that made this plan (``hangdbg.cli``), for the run marker; empty: :meth:`to_argv`."""

    def __post_init__(self) -> None:
        if self.target.pids or self.target.match_env:
            raise UsageError("check runs its own ranks: --pid and --match-env do not apply")
        if self.target.ray:
            raise UsageError("check --ray is not supported yet: check starts its own torchrun test job on each node, "
                             "and on a Ray cluster it would have to run as Ray actors placed on the job's nodes; "
                             "run `hangdbg check --hosts` with the Ray nodes' addresses instead")
        if self.job.backend not in BACKENDS:
            raise UsageError(f"--backend is one of {', '.join(BACKENDS)}")
        if self.nproc_per_node is not None and self.nproc_per_node < 1:
            raise UsageError("--nproc-per-node takes an integer >= 1")
        if not 0 < self.slow:
            raise UsageError("--slow takes a fraction > 0")

    def to_argv(self) -> list[str]:
        """This plan as ``hangdbg check`` options (without the word ``check``)."""
        argv = self.target.to_argv() + self.job.argv()
        argv += ["--nproc-per-node", str(self.nproc_per_node)] if self.nproc_per_node else []
        argv += ["--slow", str(self.slow)] if self.slow != 0.5 else []
        argv += ["--ifname", self.ifname] if self.ifname else []
        argv += ["--master-port", str(self.master_port)] if self.master_port else []
        argv += ["--no-bisect"] if not self.bisect else []
        argv += ["--force"] if self.force else []
        argv += ["-o", str(self.out)] if self.out is not None else []
        argv += ["-v"] if self.verbose else []
        return argv


@dataclass(frozen=True)
class CheckResult:
    """What one ``check`` found.

    Attributes:
        targets: the nodes, as the options name them (``--nproc-per-node 4``, ``--jobid 42``).
        backend: the backend asked for (``auto``, ``gloo``, ``nccl``).
        out_dir: the output directory (``trials/``, ``check.json``).
        trials: every run, in order; the first ran on every node.
        verdict: the findings, the bad nodes and GPUs and the ``--exclude`` value, the bandwidth.
    """

    targets: str
    backend: str
    out_dir: str
    trials: tuple[Trial, ...]
    verdict: CheckVerdict

    @property
    def found(self) -> bool:
        """A bad node or GPU (or an unexplained failure) was named."""
        return any(f.is_suspect for f in self.verdict.findings)

    @property
    def status(self) -> int:
        """The exit status of ``hangdbg check``: 3 a suspect was named; 1 the first run failed and
        nothing was named (never an all-clear for a run that failed); else 0."""
        if self.found:
            return 3
        return 0 if self.trials and self.trials[0].passed else 1
