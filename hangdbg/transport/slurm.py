"""What SLURM says about a job: its state and node list (``scontrol show job``, SLURM 20-24).

``scontrol show job ID`` prints ``Key=Value`` pairs (``JobState=RUNNING``, ``NodeList=node[1-4,7]``,
``NumNodes=5``); node lists are expanded with python-hostlist. (``squeue --json`` ignores ``-j``
in 22.05 and ``scontrol --json`` does not exist there, so the text form is used.)
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from ..errors import HangdbgError, UsageError
from ..tools.subproc import run
from .hosts import expand_hosts

__all__ = ["JOBID", "SlurmJob", "show_job", "job_state", "parse_show_job", "node_addresses", "WAITING_STATES"]


JOBID = re.compile(r"\d+(_\d+)?")
"""A SLURM job id: digits, ``_`` and the task for an array job (``4242_7``)."""


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """A job as ``scontrol show job`` prints it: ``excluded`` is its ``ExcNodeList`` as SLURM wrote
    it (a host list; '' when ``(null)``)."""

    jobid: str
    state: str
    nodes: tuple[str, ...]
    excluded: str = ""


def parse_show_job(text: str, jobid: str) -> SlurmJob:
    """Parse ``scontrol show job`` output (one line with ``-o``, or several)."""
    fields = dict(re.findall(r"(\w+)=(\S*)", text))
    state = fields.get("JobState", "UNKNOWN")
    nodelist = fields.get("NodeList", "")
    nodes = expand_hosts(nodelist) if nodelist and nodelist != "(null)" else []
    excluded = fields.get("ExcNodeList", "")
    return SlurmJob(jobid, state, tuple(nodes), "" if excluded == "(null)" else excluded)


def job_state(jobid: str, env: dict[str, str] | None = None) -> SlurmJob:
    """Ask ``scontrol show job JOBID``, whatever the job's state (PENDING, RUNNING, COMPLETED...).

    Raises:
        UsageError: not a job id, or no such job.
        HangdbgError: scontrol is missing or fails otherwise.
    """
    if not JOBID.fullmatch(jobid):
        raise UsageError(f"--jobid takes a SLURM job id (digits), not {jobid!r}")
    try:
        res = run(["scontrol", "show", "job", jobid], timeout=30, text=True, env=env)
    except FileNotFoundError:
        raise HangdbgError("scontrol not found", help="run dump --jobid on a SLURM login node (or use --hosts)") from None
    except subprocess.TimeoutExpired:
        raise HangdbgError("scontrol show job timed out after 30 s (is slurmctld up?)") from None
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip()
        if "Invalid job id" in msg:
            raise UsageError(f"SLURM job {jobid} does not exist (or has left the controller's memory)")
        help = "is this a SLURM login node, and is SLURM_CONF set?" if "configuration source" in msg else None
        raise HangdbgError(f"scontrol show job {jobid} failed: {msg}", help=help)
    return parse_show_job(res.stdout, jobid)


WAITING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED"})
"""States of a job that has not run yet, or will run again (``watch`` waits through them)."""


def show_job(jobid: str, env: dict[str, str] | None = None) -> SlurmJob:
    """:func:`job_state` of a job that must be running.

    Raises:
        UsageError: no such job, or it is not running.
        HangdbgError: scontrol is missing or fails otherwise.
    """
    job = job_state(jobid, env)
    if job.state != "RUNNING" or not job.nodes:
        raise UsageError(f"SLURM job {jobid} is {job.state}, not RUNNING: nothing to dump")
    return job


def node_addresses(nodes: list[str], env: dict[str, str] | None = None) -> dict[str, str]:
    """``NodeAddr`` of each node (``scontrol -o show node NAME``; SLURM sets it to the node's
    name when slurm.conf gives none). A node scontrol does not know keeps its name.

    Raises:
        HangdbgError: scontrol is missing.
    """
    out: dict[str, str] = {}
    for node in nodes:
        try:
            res = run(["scontrol", "-o", "show", "node", node], timeout=30, text=True, env=env)
        except FileNotFoundError:
            raise HangdbgError("scontrol not found", help="run check --jobid on a SLURM login node (or use --hosts)") from None
        except subprocess.TimeoutExpired:
            res = None
        m = re.search(r"\bNodeAddr=(\S+)", res.stdout) if res is not None and res.returncode == 0 else None
        out[node] = m.group(1) if m else node
    return out
