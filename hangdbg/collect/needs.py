"""What a first analysis lacks, and what ``hangdbg dump`` should collect next (adaptive collection).

Heuristics, ours, after what an expert does next with a py-spy dump:

* a rank whose Python stack ends in an opaque C/C++ call (``backward()``, ``req.wait()``, a C
  extension) or in a c10d wait of unknown kind gets a ``--native`` pass (with ``--locals``: the
  peer of a point-to-point wait is a local of the calling frame); in a large equivalence class
  a few ranks stand for the class (they share their Python stack, hence most likely the call);
  so does a rank waiting on its GPU (``torch.cuda.synchronize``, ``.item()``): the native frames
  name the CUDA call it waits in;
* a rank in a point-to-point op without its peer, or in a store wait without its keys, gets a
  ``--locals`` pass;
* when the ranks the others wait for are on CPU and were sampled once, or for less than the
  progress-before-blame window (:mod:`hangdbg.stacks.window`: the analysis says ``still
  observing``), the ranks are sampled again (with ``--locals``: loop counters show progress; in a
  large equivalence class a few ranks stand for the class) to tell a slow step from a hang;
* a rank polling a ``filelock`` lock gets a ``--locals`` pass (the lock file's path, ``lock_filename``);
* a rank whose other thread was seen holding the GIL in its one sample while its main thread waits
  in a collective (:mod:`hangdbg.stacks.threads_gil`) is sampled again;
* the keys of store waits are asked of the job's store (read-only).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Analysis
from ..stacks.window import wants_samples
from ..waits import WaitKind
from ..stacks.threads_gil import resample_ranks

__all__ = ["Needs", "needs"]


@dataclass(frozen=True, slots=True)
class Needs:
    """What to collect next.

    Attributes:
        native: ranks to dump again with ``--native`` (and ``--locals``).
        locals: ranks to dump again with ``--locals`` only.
        resample: ranks to sample again (slow step or hang?): the ranks on CPU and a few of
            each class of waiting ranks.
        store_keys: store keys to look up in the job's store.
    """

    native: frozenset[int] = frozenset()
    locals: frozenset[int] = frozenset()
    resample: frozenset[int] = frozenset()
    store_keys: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.native or self.locals or self.resample or self.store_keys)


def needs(a: Analysis) -> Needs:
    """What :func:`hangdbg.stacks.analysis.analyze`'s result ``a`` lacks (see the module docstring)."""
    native: set[int] = set()
    local: set[int] = set()
    keys: list[str] = []
    someone_waits = any(w.waiting for w in a.waits.values())
    for rank, w in a.waits.items():
        ev = w.evidence
        if w.kind in (WaitKind.BLOCKED, WaitKind.COMPUTE) and w.detail.startswith("inside") and "native" not in ev:
            native.add(rank)
        elif w.kind is WaitKind.GPU and "native" not in ev:
            native.add(rank)  # the CUDA call it waits in
        elif w.kind in (WaitKind.P2P, WaitKind.COLLECTIVE) and w.op == "wait" and "native" not in ev:
            native.add(rank)
        elif w.kind is WaitKind.P2P and w.peer is None and "locals" not in ev:
            local.add(rank)
        elif w.kind is WaitKind.STORE and not w.keys and "locals" not in ev:
            local.add(rank)
        elif w.blocker == "file lock" and "polling" in w.detail and "locals" not in ev:
            local.add(rank)  # filelock's frames hold the lock file's path
        elif w.kind is WaitKind.STORE and w.keys and "store" not in ev:
            keys.extend(k for k in w.keys if k not in keys)
    if not someone_waits and len(native) < len(a.waits):
        native.clear()  # nobody waits: a rank in backward() alone is no hang to explain
    undecided = wants_samples(a.findings)
    resample = _one_per_class(a, {r for r, w in a.waits.items() if w.kind is not WaitKind.UNKNOWN}) if undecided else set()
    resample |= resample_ranks(a.findings)  # a thread seen holding the GIL once (stacks/threads_gil.py)
    return Needs(frozenset(_one_per_class(a, native)), frozenset(local - native), frozenset(resample), tuple(keys))


CLASS_SAMPLE = 2
"""Ranks that stand for an equivalence class of more than ``2 * CLASS_SAMPLE`` ranks (the first
and the last): a native pass costs about a second of CPU per rank (libtorch's symbols)."""


def _one_per_class(a: Analysis, ranks: set[int]) -> set[int]:
    """Every one of ``ranks`` in small equivalence classes; in a class of more than
    ``2 * CLASS_SAMPLE`` ranks, ``CLASS_SAMPLE`` of them spread over the class. The ranks of a class
    share their Python stack, so they are most likely in the same C/C++ call; the analysis extends
    the native frames of the sampled ranks to the class only when they all agree."""
    out = set()
    for g in a.classes:
        hit = [r for r in g.ranks if r in ranks]
        if len(hit) > 2 * CLASS_SAMPLE:
            step = (len(hit) - 1) / (CLASS_SAMPLE - 1)
            hit = [hit[round(i * step)] for i in range(CLASS_SAMPLE)]
        out.update(hit)
    return out | (ranks - {r for g in a.classes for r in g.ranks})
