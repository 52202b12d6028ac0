"""A rank in uninterruptible sleep is a finding about its node: "drain the host".

A task in state ``D`` (proc(5): ``/proc/PID/task/TID/stat`` field 3, "Waiting in uninterruptible disk
sleep") is blocked inside a kernel call that signals cannot interrupt: a wedged GPU driver, a hung
NFS/Lustre mount, a failing disk. The program did nothing wrong and ``kill -9`` cannot end it until
the call returns; SLURM's answer is to drain the node (scontrol(1): ``scontrol update NodeName=NODE
State=DRAIN Reason=...``; a drained node runs no new job) and look at it. So a suspect rank whose wait
:mod:`hangdbg.stacks.blocker_facts` found in D state (:data:`hangdbg.stacks.blockers.D_STATE`) is
named as its host (:attr:`hangdbg.kinds.Kind.NODE_UNHEALTHY`), with the exact ``scontrol`` line to run
(each argument quoted with :func:`shlex.quote`; the reason holds the rank and the kernel's ``wchan``
symbol, kept to the characters a kernel symbol has). Ranks that only wait for it are unchanged: they
wait for that rank. A rank whose host is not known, or in any other state, keeps its finding.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..model import Finding, Kind, RankDump, Severity
from ..waits import RankWait
from .blockers import D_STATE

__all__ = ["d_state_nodes", "drain_command"]


def drain_command(host: str, rank: int, wchan: str = "") -> str:
    """The shell line that drains ``host`` for ``rank`` in D state (``wchan``: the kernel function,
    '' when unknown), every argument quoted (:func:`shlex.join`)."""
    symbol = re.sub(r"[^\w.+-]", "", wchan)[:64] if wchan and wchan != "0" else ""
    reason = f"hangdbg: rank {rank} in D state" + (f" ({symbol})" if symbol else "")
    return shlex.join(["scontrol", "update", f"NodeName={host}", "State=DRAIN", f"Reason={reason}"])


def _wchan(dump: RankDump | None) -> str:
    if dump is None or dump.proc is None:
        return ""
    return next((t.wchan for t in dump.proc.tasks if t.state == "D" and t.wchan and t.wchan != "0"), "")


def d_state_nodes(findings: Sequence[Finding], waits: Mapping[int, RankWait], host_of: Mapping[int, str],
                  dumps: Mapping[int, RankDump]) -> list[Finding]:
    """``findings`` with each suspect rank in D state (``waits[r].blocker`` is ``D state``) named as its
    node: one :attr:`Kind.NODE_UNHEALTHY` finding per host (its ranks, the host, "drain the host" and
    the ``scontrol update ... State=DRAIN`` line), in the place of the rank's suspect finding; the other
    ranks of that finding keep it. Findings of other severities are returned as they are.

    Args:
        findings: the analysis' findings (with hosts).
        waits: what each rank waits on.
        host_of: each rank's node ('' or absent when unknown: the rank keeps its finding).
        dumps: each rank's dump (its ``proc`` facts give the ``wchan``).
    """
    out: list[Finding] = []
    for f in findings:
        stuck = [r for r in f.ranks if waits.get(r) is not None and waits[r].blocker == D_STATE.name and host_of.get(r)]
        if not f.is_suspect or not stuck:
            out.append(f)
            continue
        by_host: dict[str, list[int]] = {}
        for r in stuck:
            by_host.setdefault(host_of[r], []).append(r)
        for host, ranks in sorted(by_host.items()):
            first = ranks[0]
            wchan = _wchan(dumps.get(first))
            where = f" in the kernel's {wchan}" if wchan else ""
            who = f"rank {first}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"
            summary = (f"node {host}: {who} in uninterruptible sleep (D state){where}, blocked in the kernel (a wedged "
                       f"driver or file system), not by the program: drain the host")
            action = (f"drain the host: {drain_command(host, first, wchan)}; then look at it (dmesg, its mounts, "
                      f"cat /proc/PID/task/TID/stack as root): kill -9 cannot end a D-state process until its kernel call returns")
            out.append(Finding(Kind.NODE_UNHEALTHY, summary, tuple(ranks), (host,), f.gpus, Severity.SUSPECT,
                               f.evidence, action, f.source))
        rest = tuple(r for r in f.ranks if r not in stuck)
        if rest:
            out.append(replace(f, ranks=rest, hosts=tuple(sorted({host_of[r] for r in rest if host_of.get(r)})) or f.hosts))
    return out
