"""Set-up mismatches of a check trial: ranks that could not meet, or could not start, because of
how the check was launched, told apart from a node that is at fault.

A node is at fault only when it fails with a set-up that passes elsewhere. So:

* **every** node's ranks do not fit its GPUs (more ranks than visible GPUs with nccl), or the
  ranks of one run used different backends (a rank that saw no GPU took gloo while the others
  took nccl: they never meet at init): the launch is wrong, no node is blamed (:attr:`Mismatch.everywhere`);
* **some** nodes differ from the others: fewer GPUs listed by ``nvidia-smi -L`` than the others
  list (a GPU lost: fallen off the bus, or not brought up by the driver) is a node fault
  (:attr:`Mismatch.lost`); a ``CUDA_VISIBLE_DEVICES`` of that node that hides GPUs is its
  environment (:attr:`Mismatch.hidden`): fix the variable there, nothing to drain.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..enums import NodeStatus
from .blame import CheckNode, Trial

__all__ = ["Mismatch", "mismatch"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """What differs in a trial's set-up.

    Attributes:
        everywhere: no node ran with a set-up that works: the launch is at fault (exit 1).
        summary: one line with the numbers (ranks, GPUs, backends, the variable).
        remedy: what to change.
        lost: nodes that list fewer GPUs than the others (``nvidia-smi -L``): leave out, drain.
        hidden: nodes whose own ``CUDA_VISIBLE_DEVICES`` hides GPUs the others show.
        others: how many GPUs the other nodes list (the median), when some nodes differ.
    """

    everywhere: bool
    summary: str
    remedy: str
    lost: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    others: int | None = None


def _gpus(n: CheckNode) -> int:
    return len(n.gpus)


def mismatch(trial: Trial) -> Mismatch | None:
    """The set-up mismatch of ``trial`` (its first run, on every node), or None when its nodes
    all started their ranks with one backend."""
    setup = [n for n in trial.nodes if n.status is NodeStatus.SETUP]
    ran = [n for n in trial.nodes if n.status is not NodeStatus.SETUP]
    backends = {n.backend for n in ran if n.backend}
    rank_backends = sorted({r.backend for r in trial.ranks if r.backend})
    if not setup and len(backends) <= 1:
        if len(rank_backends) > 1 and len(backends) == 0:  # ranks that chose their own backend (hangdbg 0.2.0)
            on = {b: sorted(r.rank for r in trial.ranks if r.backend == b) for b in rank_backends}
            said = "; ".join(f"rank{'s' if len(v) > 1 else ''} {', '.join(map(str, v))} {b}" for b, v in on.items())
            no_gpu = [r for r in trial.ranks if r.backend == "gloo" and r.device == "cpu"]
            why = f" (rank {no_gpu[0].rank} saw no GPU)" if no_gpu and "nccl" in on else ""
            return Mismatch(True, f"the ranks used different backends ({said}){why}: they cannot meet at init",
                            "one backend for every rank: one rank per visible GPU with nccl (--nproc-per-node at most the "
                            "GPUs of a node), or --backend gloo")
        return None
    if setup and not ran:
        first = setup[0]
        return Mismatch(True, first.setup_error or first.reason or NodeStatus.SETUP.doc,
                        first.setup_remedy or "run one rank per visible GPU, or --backend gloo")
    # some nodes differ from the others: compare them with the ones whose set-up works
    good = [n for n in ran if n.backend == "nccl"] if "nccl" in backends else ran
    bad = setup + [n for n in ran if n.backend and n.backend != "nccl" and "nccl" in backends]
    if not good or len(bad) > len(good):
        hosts = ", ".join(n.host for n in bad)
        return Mismatch(True, f"the nodes differ: {hosts} cannot run the ranks the others run with nccl "
                        f"({_what(bad[0])}), and they are not the minority", "make the nodes alike (the same GPUs "
                        "visible on each), or --backend gloo")
    others = int(statistics.median(_gpus(n) for n in good))
    lost = tuple(n.host for n in bad if _gpus(n) < others and n.cuda_visible_devices is None)
    hidden = tuple(n.host for n in bad if n.host not in lost)
    parts = []
    if lost:
        parts.append(f"{', '.join(lost)} list{'s' if len(lost) == 1 else ''} fewer GPUs than the other nodes "
                     f"({', '.join(f'{h}: {_gpus(n)}' for n in bad for h in [n.host] if h in lost)}; the others {others})")
    if hidden:
        parts.append(f"on {', '.join(hidden)} CUDA_VISIBLE_DEVICES hides GPUs the ranks need "
                     f"({'; '.join(_what(n) for n in bad if n.host in hidden)})")
    return Mismatch(False, "; ".join(parts), "", lost, hidden, others)


def _what(n: CheckNode) -> str:
    if n.setup_error:
        return n.setup_error
    cvd = f", CUDA_VISIBLE_DEVICES={n.cuda_visible_devices!r}" if n.cuda_visible_devices is not None else ""
    return f"{n.host} lists {_gpus(n)} GPU(s), {n.visible_gpus if n.visible_gpus is not None else '?'} visible{cvd}"
