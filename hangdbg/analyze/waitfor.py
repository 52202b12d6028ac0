"""The wait-for graph of a job: who waits for whom, and the ranks at its roots.

Edges (heuristics, ours, after the way people read STAT trees and flight-recorder dumps):

* a rank in a **collective** waits for the members of its process group that are not in the same
  collective. Membership comes from the op record (``hangdbg.hooks.record_collectives``) when
  there is one; otherwise from the stacks: ranks further along in program order (at a later line
  of a function the stacks share) have passed this collective, so they are not members (another
  group, as in data x tensor parallelism) unless nobody is behind it at all (then they skipped
  it: a collective mismatch). The candidates are the ranks behind it or elsewhere.
* a **point-to-point** op waits for its peer (``--locals``, op records);
* a **store wait** waits for the ranks whose keys the store does not hold (the last integer in
  a key names the rank: ``step2/done/3``);
* **init** waits for the ranks not in init.

The **roots** are the ranks that wait on nothing inside the job (blocked in I/O, computing, a
lock, unreadable, gone) that some waiting rank reaches. With no root, every waiting rank is in a
cycle; it is resolved by what does not match (:mod:`hangdbg.analyze.cycles`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..model import Frame, Thread
from ..waits import ROOT_KINDS, RankWait, WaitEdge, WaitKind

__all__ = ["WaitGraph", "build_graph", "program_order", "key_rank"]

_KEY_RANK = re.compile(r"(\d+)(?!.*\d)")


def key_rank(key: str) -> int | None:
    """The rank a store key names: its last integer (``step2/done/3`` -> 3), else ``None``."""
    m = _KEY_RANK.search(key)
    return int(m.group(1)) if m else None


def program_order(a: Sequence[Frame], b: Sequence[Frame]) -> int | None:
    """Compare two Python stacks (outermost frame first) in program order.

    Returns -1 when ``a`` is behind ``b`` (an earlier line of the first function where they
    part), 1 when ahead, 0 when one stack is a prefix of the other or they are equal, ``None``
    when they part in different functions (not comparable).
    """
    for fa, fb in zip(a, b):
        if fa.key == fb.key:
            continue
        if fa.function == fb.function and fa.file == fb.file and fa.line is not None and fb.line is not None:
            return -1 if fa.line < fb.line else 1
        return None
    return 0


@dataclass(frozen=True, slots=True)
class WaitGraph:
    """The wait-for graph.

    Attributes:
        waits: what each rank waits on (rank -> RankWait), unreadable and gone ranks included.
        edges: waiter -> target, one per pair.
        roots: ranks of a root kind (``ROOT_KINDS``) that a waiting rank reaches, sorted.
        unresolved: waiting ranks that wait for someone the evidence does not name (a p2p op
            without its peer, a store wait without its keys).
    """

    waits: Mapping[int, RankWait]
    edges: tuple[WaitEdge, ...]
    roots: tuple[int, ...]
    unresolved: tuple[int, ...]

    def targets(self, rank: int) -> tuple[int, ...]:
        """The ranks ``rank`` waits for directly, sorted."""
        return tuple(sorted(e.target for e in self.edges if e.waiter == rank))


def _outer(thread: Thread | None) -> tuple[Frame, ...]:
    return tuple(reversed(thread.python_frames)) if thread is not None else ()


def build_graph(waits: Mapping[int, RankWait], threads: Mapping[int, Thread], everyone: Iterable[int]) -> WaitGraph:
    """Build the graph.

    Args:
        waits: rank -> what it waits on (every readable, unreadable and gone rank).
        threads: rank -> its chosen thread (program order), for the readable ranks.
        everyone: every rank of the job that should exist (missing ones included).
    """
    everyone = sorted(set(everyone) | set(waits))
    edges: dict[tuple[int, int], str] = {}
    unresolved: list[int] = []
    # collectives and init: one decision per (kind, op, site) bucket
    buckets: dict[tuple, list[int]] = {}
    for r, w in waits.items():
        if w.kind in (WaitKind.COLLECTIVE, WaitKind.INIT):
            buckets.setdefault((w.kind, w.op, w.site.key if w.site else None, w.group, w.seq), []).append(r)
    outer = {r: _outer(threads.get(r)) for r in waits}
    for (kind, _op, _site, group, _seq), members in buckets.items():
        rep = outer[members[0]]
        inside = set(members)
        pool = [r for r in (group if group is not None else everyone) if r not in inside]
        if kind is WaitKind.INIT:
            targets = [r for r in pool if waits.get(r) is None or waits[r].kind is not WaitKind.INIT]
        elif group is not None:
            targets = pool
        else:
            behind: list[int] = []
            ahead: list[int] = []
            for r in pool:
                (ahead if outer.get(r) and program_order(outer[r], rep) == 1 else behind).append(r)
            targets = behind or ahead
        for m in members:
            for t in targets:
                edges.setdefault((m, t), "init" if kind is WaitKind.INIT else "collective")
    for r, w in waits.items():
        if w.kind is WaitKind.P2P:
            if w.peer is not None and w.peer != r:
                edges.setdefault((r, w.peer), "p2p")
            else:
                unresolved.append(r)
        elif w.kind is WaitKind.STORE:
            owners = {key_rank(k) for k in w.missing_keys} - {None, r}
            for t in sorted(o for o in owners if o is not None):
                edges.setdefault((r, t), "store")
            if not owners:
                unresolved.append(r)
    edge_list = tuple(WaitEdge(a, b, why) for (a, b), why in sorted(edges.items()))
    roots = _reached_roots(waits, edge_list, everyone)
    return WaitGraph(waits, edge_list, roots, tuple(sorted(unresolved)))


def _reached_roots(waits: Mapping[int, RankWait], edges: Sequence[WaitEdge], everyone: Sequence[int]) -> tuple[int, ...]:
    out: dict[int, set[int]] = {}
    for e in edges:
        out.setdefault(e.waiter, set()).add(e.target)
    start = [r for r, w in waits.items() if w.waiting]
    seen: set[int] = set(start)
    stack = list(start)
    while stack:
        r = stack.pop()
        for t in out.get(r, ()):
            if t not in seen:
                seen.add(t)
                stack.append(t)
    def is_root(r: int) -> bool:
        w = waits.get(r)
        return w is None or w.kind in ROOT_KINDS
    return tuple(sorted(r for r in seen if is_root(r)))
