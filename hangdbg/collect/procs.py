"""Find the ranks of a training job on this node and map each pid to its rank.

Sources: ``/proc/PID/environ`` (through psutil) for the rank variables of the common launchers
(torchrun / torch.distributed.run: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``;
Open MPI: ``OMPI_COMM_WORLD_*``; MPICH/Intel MPI: ``PMI_*``; PMIx: ``PMIX_RANK``; srun:
``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NTASKS``), and the process tree for launchers.

Caveats handled here: a variable set with ``os.environ[...]`` after the process started is not
visible in ``/proc/PID/environ`` (``torch.multiprocessing.spawn`` children), so such children of a
launcher are numbered by start order; DataLoader workers and compile workers inherit their rank's
environment, so a process whose ancestor has the same rank is not a rank of its own.
"""

from __future__ import annotations

import os
import socket
from typing import Callable

import psutil

from ..errors import NoRanksFound, RanksUnreadable, UsageError
from ..launch_env import (LOCAL_RANK_VARS, LOCAL_WORLD_SIZE_VARS, WORLD_SIZE_VARS, first_int, host_from_environ,
    rank_from_environ)
from ..launchers import is_hangdbg, is_launcher
from ..model import RankProcess
from ..redact import mask_argv

__all__ = ["Ignored", "RankProcess", "Denied", "denied_note", "find_ranks", "scan_node", "ranks_of_pids", "rank_from_environ", "slurm_job_filter"]

JOB_VARS = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")


def _is_python(proc: psutil.Process) -> bool:
    try:
        name = os.path.basename(proc.exe() or proc.name())
    except (psutil.Error, OSError):
        return False
    return name.startswith(("python", "pypy"))


Denied = list[tuple[int, str]]
"""``(pid, user)`` of the Python processes whose environment could not be read (EACCES)."""

Ignored = list[tuple[int, str]]
"""``(pid, why)`` of the ``--pid`` pids that gave no rank (a shell, ``sleep``, a Python process
without a rank variable and nothing under it)."""


def _looks_python(proc: psutil.Process) -> bool:
    """Python by its name or first argument (``exe()`` needs the rights ``environ()`` lacks)."""
    try:
        names = [proc.name(), *proc.cmdline()[:1]]
    except (psutil.Error, OSError):
        return False
    return any(os.path.basename(n).startswith(("python", "pypy")) for n in names if n)


def _describe(proc: psutil.Process, denied: Denied | None = None) -> tuple[list[str], dict[str, str]] | None:
    """``(cmdline, environ)`` of ``proc``, or None; a Python process whose environment is
    refused (another user's, without root or CAP_SYS_PTRACE) is appended to ``denied``."""
    try:
        return proc.cmdline(), proc.environ()
    except (psutil.AccessDenied, PermissionError):
        if denied is not None and _looks_python(proc):
            try:
                user = proc.username()
            except (psutil.Error, OSError, KeyError):
                user = "?"
            denied.append((proc.pid, user))
        return None
    except (psutil.Error, OSError):
        return None


def _who(denied: Denied) -> tuple[str, str]:
    """``("alice, bob", "101,102,...")``: the users and (the first 8) pids of ``denied``."""
    users = ", ".join(sorted({u for _, u in denied}))
    return users, ",".join(str(p) for p, _ in denied[:8]) + ("..." if len(denied) > 8 else "")


def denied_note(denied: Denied, found: int) -> str:
    """One line for ``denied`` processes next to ``found`` ranks: who they belong to and the fix."""
    users, pids = _who(denied)
    return (f"{found} rank(s) found, but the environment of {len(denied)} more Python process(es) of user(s) "
            f"{users} cannot be read (pids {pids}): if they are ranks of this job they are not "
            "dumped; use sudo to read them")


def _denied_error(denied: Denied, where: str) -> RanksUnreadable:
    users, pids = _who(denied)
    return RanksUnreadable(
        f"permission denied: the environment of {len(denied)} Python process(es) {where} of user(s) "
        f"{users} cannot be read (pids {pids}), so their ranks are unknown; use sudo"
    )


EnvFilter = Callable[[dict[str, str]], bool]


def slurm_job_filter(jobid: str, node: str | None, own_step: str | None, cluster: str | None = None) -> EnvFilter:
    """Keep the processes of SLURM job ``jobid`` on ``node`` that belong to a job step.

    A process belongs to the job's ranks when its environment has ``SLURM_JOB_ID`` = ``jobid``,
    ``SLURMD_NODENAME`` = ``node`` (with emulated nodes every node sees every process of the
    machine), a ``SLURM_STEP_ID`` that is neither the agent's own step nor the batch step, and,
    when ``cluster`` is given, ``SLURM_CLUSTER_NAME`` = ``cluster`` (job ids are per cluster).
    """
    skip = {own_step, "batch", "extern", "4294967291", "4294967292", None}

    def keep(env: dict[str, str]) -> bool:
        return (
            env.get("SLURM_JOB_ID") == jobid
            and (node is None or env.get("SLURMD_NODENAME") == node)
            and env.get("SLURM_STEP_ID") not in skip
            and (cluster is None or env.get("SLURM_CLUSTER_NAME", cluster) == cluster)
        )

    return keep


def _candidate(proc: psutil.Process, keep: EnvFilter | None = None, denied: Denied | None = None) -> RankProcess | None:
    info = _describe(proc, denied)
    if info is None:
        return None
    cmdline, env = info
    if keep is not None and not keep(env):
        return None
    rank, source = rank_from_environ(env)
    if rank is None or is_launcher(cmdline) or is_hangdbg(cmdline) or not _is_python(proc):
        return None
    return RankProcess(
        pid=proc.pid,
        rank=rank,
        host=host_from_environ(env),
        local_rank=first_int(env, LOCAL_RANK_VARS)[0],
        world_size=first_int(env, WORLD_SIZE_VARS)[0],
        local_world_size=first_int(env, LOCAL_WORLD_SIZE_VARS)[0],
        rank_source=source or "",
        cmdline=" ".join(mask_argv(cmdline)),  # secrets never leave memory (--token X, password=X, URL passwords)
        job=tuple(env.get(v, "") for v in JOB_VARS),
    )


def _drop_inherited(cands: list[RankProcess]) -> list[RankProcess]:
    """Keep the top-most process of each (job, rank): DataLoader workers inherit the rank env."""
    by_pid = {c.pid: c for c in cands}
    keep = []
    for c in cands:
        inherited = False
        try:
            for parent in psutil.Process(c.pid).parents():
                other = by_pid.get(parent.pid)
                if other is not None and other.rank == c.rank and other.job == c.job:
                    inherited = True
                    break
        except psutil.Error:
            continue
        if not inherited:
            keep.append(c)
    return sorted(keep, key=lambda c: (c.job, c.rank, c.pid))


def scan_node(keep: EnvFilter | None = None, denied: Denied | None = None) -> list[RankProcess]:
    """All rank processes on this node (every job, or those whose environment ``keep`` accepts).

    ``denied`` (when given) receives ``(pid, user)`` of each Python process whose environment
    could not be read (EACCES: another user's process without root or CAP_SYS_PTRACE).
    """
    cands = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        c = _candidate(proc, keep, denied)
        if c is not None:
            cands.append(c)
    return _drop_inherited(cands)


def ranks_of_pids(pids: list[int], denied: Denied | None = None, ignored: Ignored | None = None) -> list[RankProcess]:
    """Ranks for explicit pids: a rank process is taken as is, any other process as a launcher.

    A launcher's descendants with a rank variable are its ranks. When none has one (e.g.
    ``torch.multiprocessing.spawn``, which sets the rank after start), its Python children are
    numbered by start time (``rank_source="order"``).

    ``denied`` (when given) receives ``(pid, user)`` of each Python process among them whose
    environment could not be read (EACCES); ``ignored`` receives ``(pid, why)`` of each pid that
    gave no rank (:func:`_why_ignored`: not Python, nothing under it), never dropped silently.

    Raises:
        UsageError: a pid does not exist or cannot be read.
    """
    found: list[RankProcess] = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise UsageError(f"no process with pid {pid}") from None
        c = _candidate(proc, denied=denied)
        if c is not None:
            found.append(c)
            continue
        try:
            children = proc.children(recursive=True)
        except psutil.Error as exc:
            raise UsageError(f"cannot read the process tree of pid {pid}: {exc}") from None
        sub = [c for c in (_candidate(ch, denied=denied) for ch in children) if c is not None]
        if not sub:
            sub = _ordered_children(proc, denied)
        if not sub and ignored is not None:
            ignored.append((pid, _why_ignored(proc, children)))
        found.extend(sub)
    unique = {c.pid: c for c in found}
    return _drop_inherited(list(unique.values()))


def _why_ignored(proc: psutil.Process, children: list[psutil.Process]) -> str:
    """Why ``--pid`` ``proc`` gave no rank, in words: its name, whether it is Python, and what runs under it."""
    try:
        name = proc.name()
    except psutil.Error:
        name = "?"
    python = sum(1 for c in children if _is_python(c))
    info = _describe(proc)
    if info is not None and is_hangdbg(info[0]):
        what = "hangdbg itself"
    elif _is_python(proc):
        what = "a Python process with no rank variable (RANK, SLURM_PROCID, ...)"
    else:
        what = "not a Python process"
    under = (f"{len(children)} process(es) under it, {python} of them Python, none a rank" if children
             else "no process under it")
    return f"{name}: {what}, {under}"


def _ordered_children(proc: psutil.Process, denied: Denied | None = None) -> list[RankProcess]:
    kids = []
    for child in proc.children():
        info = _describe(child, denied)
        if info is None or not _is_python(child) or is_launcher(info[0]):
            continue
        try:
            created = child.create_time()
        except psutil.Error:
            continue
        kids.append((created, child.pid, info[0]))
    kids.sort()
    host = socket.gethostname()
    return [
        RankProcess(pid, i, host, i, len(kids), len(kids), "order", " ".join(cmd), (str(proc.pid),))
        for i, (_, pid, cmd) in enumerate(kids)
    ]


def find_ranks(pids: list[int] | None = None, keep: EnvFilter | None = None,
               denied: Denied | None = None, ignored: Ignored | None = None) -> list[RankProcess]:
    """The ranks to dump: those of ``pids`` (see :func:`ranks_of_pids`) or of this node's one job
    (restricted to the processes whose environment ``keep`` accepts, e.g. one SLURM job).

    Args:
        denied: when given, receives ``(pid, user)`` of the Python processes whose environment
            could not be read although ranks were found (they may be ranks too: the caller says so).
        ignored: when given, receives ``(pid, why)`` of the ``pids`` that gave no rank although
            others did (the caller says so); when none gave one, the error names each and why.

    Raises:
        RanksUnreadable: nothing found, and the environment of Python processes of another user
            could not be read (permission denied: the error names the fix, sudo).
        NoRanksFound: nothing found.
        UsageError: the node runs several jobs and neither a pid nor a filter chose one.
    """
    seen: Denied = []
    dropped: Ignored = []
    ranks = ranks_of_pids(pids, seen, dropped) if pids else scan_node(keep, seen)
    seen = list(dict.fromkeys(seen))
    if not ranks and seen:
        raise _denied_error(seen, f"under pid(s) {pids}" if pids else "on this node")
    if denied is not None:
        denied.extend(seen)
    if not ranks:
        why = "".join(f"; pid {pid} is {what}" for pid, what in dropped)
        raise NoRanksFound("no training process found" + (f" under pid(s) {pids}" if pids else " on this node") + why)
    if ignored is not None:
        ignored.extend(dropped)
    jobs: dict[tuple[str, ...], list[RankProcess]] = {}
    for r in ranks:
        jobs.setdefault(r.job, []).append(r)
    if not pids and keep is None and len(jobs) > 1:
        lines = []
        for job, members in jobs.items():
            parents = sorted(p for p in {_parent(m.pid) for m in members} if p is not None)
            lines.append(
                f"  job {'/'.join(x for x in job if x) or '?'}: {len(members)} ranks, "
                f"pids {','.join(str(m.pid) for m in members[:8])}{'...' if len(members) > 8 else ''}"
                f" (parent pids {','.join(map(str, parents[:4]))})"
            )
        raise UsageError(
            f"this node runs {len(jobs)} jobs; choose one with --pid LAUNCHER_PID:\n" + "\n".join(lines)
        )
    return ranks


def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None
