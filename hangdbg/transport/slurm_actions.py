"""Acting on a verdict through SLURM: leave nodes out of a job (``ExcNodeList``).

``scontrol -o show job ID`` prints the job on one line of ``Key=Value`` pairs, ``ExcNodeList=(null)``
when none is set; ``scontrol update JobId=ID ExcNodeList=LIST`` replaces the list (SLURM's
scontrol(1), "ExcNodeList=<nodes>"), so the job's own exclusions are read first and kept. Host lists
are merged and compressed with python-hostlist (``node[1-2,5]``). ``watch --then requeue
--exclude-suspects`` and ``check --jobid ID --exclude-bad`` both call :func:`exclude_nodes`.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

import hostlist

from ..errors import HangdbgError
from ..tools.subproc import run

__all__ = ["Exclusion", "exclude_nodes", "exc_node_list", "merged_hostlist"]

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
    """The ``ExcNodeList`` of ``scontrol -o show job`` output ('' when ``(null)`` or absent)."""
    m = re.search(r"\bExcNodeList=(\S*)", show_job_text)
    value = m.group(1) if m else ""
    return "" if value in ("", "(null)") else value


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
    if not re.fullmatch(r"\d+(_\d+)?", jobid):
        raise HangdbgError(f"not a SLURM job id: {jobid!r}")
    before = exc_node_list(_scontrol(["-o", "show", "job", jobid], env))
    after, added = merged_hostlist(before, nodes)
    if added:
        _scontrol(["update", f"JobId={jobid}", f"ExcNodeList={after}"], env)
    return Exclusion(jobid, before, after, added)
