"""Acting on a verdict through SLURM: leave nodes out of a job (``ExcNodeList``).

``scontrol -o show job ID`` prints the job on one line of ``Key=Value`` pairs, ``ExcNodeList=(null)``
when none is set; ``scontrol update JobId=ID ExcNodeList=LIST`` replaces the list (SLURM's
scontrol(1), "ExcNodeList=<nodes>"), so the job's own exclusions are read first and kept.
slurmctld takes the update of a pending job only ("Job is no longer pending execution" otherwise,
job_mgr.c's ESLURM_JOB_NOT_PENDING), and a plain ``scontrol requeue`` lets the scheduler start the job
again before the list could be changed; so :func:`requeue_excluding` requeues the job held
(``scontrol requeuehold``), updates the list, then releases it (``scontrol release``). Host lists
are merged and compressed with python-hostlist (``node[1-2,5]``). ``watch --then requeue
--exclude-suspects`` and ``check --jobid ID --exclude-bad`` both call :func:`exclude_nodes`.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass

import hostlist

from ..errors import HangdbgError
from ..tools.subproc import run
from .slurm import JOBID, parse_show_job

__all__ = ["Exclusion", "exclude_nodes", "exc_node_list", "merged_hostlist", "requeue_excluding", "leave_out"]

_SCONTROL_TIMEOUT = 30.0
"""Seconds one scontrol call may take."""


@dataclass(frozen=True, slots=True)
class Exclusion:
    """What :func:`exclude_nodes` did.

    Attributes:
        jobid: the job.
        before: its ``ExcNodeList`` before ('' for none), as SLURM printed it.
        after: the list set (a compressed SLURM host list).
        added: the nodes that were not excluded before, sorted.
    """

    jobid: str
    before: str
    after: str
    added: tuple[str, ...]

    def describe(self) -> str:
        """One line for a human."""
        if not self.added:
            return f"job {self.jobid} already excludes {self.after}"
        return f"job {self.jobid}: ExcNodeList={self.after} (added {hostlist.collect_hostlist(list(self.added))})"


def exc_node_list(show_job_text: str) -> str:
    """The ``ExcNodeList`` of ``scontrol -o show job`` output ('' when ``(null)`` or absent):
    :func:`hangdbg.transport.slurm.parse_show_job`'s ``excluded``."""
    return parse_show_job(show_job_text, "").excluded


def merged_hostlist(existing: str, nodes: Iterable[str]) -> tuple[str, tuple[str, ...]]:
    """``existing`` (a SLURM host list, '' for none) with ``nodes`` added: the compressed list and
    the nodes that were new (sorted).

    Raises:
        HangdbgError: ``existing`` or a node name is not a host list python-hostlist can expand.
    """
    try:
        old = hostlist.expand_hostlist(existing) if existing else []
        new = [h for n in nodes for h in hostlist.expand_hostlist(n)]
    except hostlist.BadHostlist as exc:
        raise HangdbgError(f"not a SLURM host list: {exc}") from None
    added = tuple(sorted(set(new) - set(old)))
    return hostlist.collect_hostlist(old + list(added)), added


def _scontrol(argv: list[str], env: dict[str, str] | None) -> str:
    try:
        res = run(["scontrol", *argv], timeout=_SCONTROL_TIMEOUT, text=True, errors="replace", env=env)
    except FileNotFoundError:
        raise HangdbgError("scontrol not found", help="run this on a SLURM login node") from None
    except OSError as exc:
        raise HangdbgError(f"scontrol could not run: {exc}") from None
    except subprocess.TimeoutExpired:
        raise HangdbgError(f"scontrol {argv[0]} timed out after {_SCONTROL_TIMEOUT:g} s (is slurmctld up?)") from None
    if res.returncode != 0:
        raise HangdbgError(f"scontrol {' '.join(argv)} failed: {(res.stderr or res.stdout).strip()[:300]}")
    return res.stdout


def exclude_nodes(jobid: str, nodes: Iterable[str], env: dict[str, str] | None = None) -> Exclusion:
    """Add ``nodes`` to SLURM job ``jobid``'s ``ExcNodeList`` (keeping the nodes it excludes already).

    A pending or requeued job is then not scheduled on them (scontrol(1): ``ExcNodeList`` may be
    updated while the job is pending; a running job keeps its nodes until it is requeued).

    Args:
        jobid: the SLURM job id (digits, ``_`` for an array task).
        nodes: node names or host lists (``node[2-3]``).
        env: the environment of scontrol (None: this process').

    Raises:
        HangdbgError: scontrol is missing, fails, times out; a name is not a host list; a bad job id.
    """
    if not JOBID.fullmatch(jobid):
        raise HangdbgError(f"not a SLURM job id: {jobid!r}")
    before = exc_node_list(_scontrol(["-o", "show", "job", jobid], env))
    after, added = merged_hostlist(before, nodes)
    if added:
        _scontrol(["update", f"JobId={jobid}", f"ExcNodeList={after}"], env)
    return Exclusion(jobid, before, after, added)


def requeue_excluding(jobid: str, nodes: Iterable[str], env: dict[str, str] | None = None,
                      settle: float = 30.0) -> Exclusion:
    """Requeue SLURM job ``jobid`` so that it does not run on ``nodes`` again: ``scontrol requeuehold``,
    :func:`exclude_nodes` (retried while slurmctld still says the job is not pending, for up to
    ``settle`` seconds: it is completing), then ``scontrol release`` (also when the update failed:
    the requeue asked for happens either way, and the error is raised after it).

    Raises:
        HangdbgError: scontrol is missing or one of its calls fails (the job cannot be requeued:
            not a batch job, ``--no-requeue``...), or the update still fails after ``settle`` seconds.
    """
    if not JOBID.fullmatch(jobid):
        raise HangdbgError(f"not a SLURM job id: {jobid!r}")
    _scontrol(["requeuehold", jobid], env)
    deadline = time.monotonic() + settle
    failed: HangdbgError | None = None
    while True:
        try:
            done = exclude_nodes(jobid, nodes, env)
            break
        except HangdbgError as exc:
            if "pending" not in str(exc) or time.monotonic() > deadline:
                failed = exc
                break
            time.sleep(0.5)
    _scontrol(["release", jobid], env)
    if failed is not None:
        raise failed
    return done


def leave_out(jobid: str, nodes: Iterable[str], env: dict[str, str] | None = None) -> tuple[Exclusion, bool]:
    """``nodes`` into job ``jobid``'s ``ExcNodeList``, whatever its state: a pending job's list is
    updated (:func:`exclude_nodes`); a job that runs (or completes) is requeued without them
    (:func:`requeue_excluding`), the only way SLURM takes the change. Returns what was excluded and
    whether the job was requeued.

    Raises:
        HangdbgError: as :func:`exclude_nodes` and :func:`requeue_excluding`.
    """
    if not JOBID.fullmatch(jobid):
        raise HangdbgError(f"not a SLURM job id: {jobid!r}")
    nodes = list(nodes)
    if parse_show_job(_scontrol(["-o", "show", "job", jobid], env), jobid).state == "PENDING":
        return exclude_nodes(jobid, nodes, env), False
    return requeue_excluding(jobid, nodes, env), True
