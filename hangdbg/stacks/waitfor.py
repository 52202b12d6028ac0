"""The wait-for graph of a job: who waits for whom, and the ranks at its roots.

Edges (heuristics, ours, after the way people read STAT trees and flight-recorder dumps):

* a rank in a **collective** waits for the members of its process group that are not in the same
  collective. Membership comes from the op record (``hangdbg.hooks.record_collectives``) when
  there is one; otherwise from the stacks: ranks further along in program order (at a later line
  of a function the stacks share) have passed this collective, so they are not members (another
  group, as in data x tensor parallelism) unless nobody is behind it at all (then they skipped
  it: a collective mismatch). The candidates are the ranks behind it or elsewhere.
* a **point-to-point** op waits for its peer (``--locals``, op records);
* a **store wait** waits for the ranks whose keys the store does not hold (:func:`key_owners`: the
  integer in which the waited keys differ names the rank, ``step2/done/3``; else a key's last integer);
* **init** waits for the ranks not in init.

The **roots** are the ranks that wait on nothing inside the job (blocked in I/O, computing, a
lock, unreadable, gone) that some waiting rank reaches. With no root, every waiting rank is in a
cycle; it is resolved by what does not match (:mod:`hangdbg.stacks.cycles`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..model import Thread
from ..frames import Frame
from ..waits import ROOT_KINDS, RankWait, WaitEdge, WaitKind, rank_keys

__all__ = ["WaitGraph", "build_graph", "program_order", "key_rank", "key_owners"]

_KEY_RANK = re.compile(r"(\d+)(?!.*\d)")


def key_rank(key: str) -> int | None:
    """The rank a store key names: its last integer (``step2/done/3`` -> 3), else ``None``."""
    m = _KEY_RANK.search(key)
    return int(m.group(1)) if m else None


def key_owners(w: RankWait) -> dict[str, int]:
    """Each missing key of the store wait ``w`` -> the rank that should set it: its number in the family
    of ``w.keys`` (:func:`hangdbg.waits.rank_keys`: the one integer in which the keys differ), else
    :func:`key_rank`. Keys that name no rank are left out."""
    family = rank_keys(w.keys)
    out: dict[str, int] = {}
    for k in w.missing_keys:
        owner = family.get(k, key_rank(k))
        if owner is not None:
            out[k] = owner
    return out


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
        edges: who waits for whom, one edge per place (see :class:`hangdbg.waits.WaitEdge`).
        roots: ranks of a root kind (``ROOT_KINDS``) that a waiting rank reaches, sorted.
        unresolved: waiting ranks that wait for someone the evidence does not name (a p2p op
            without its peer, a store wait without its keys).
    """

    waits: Mapping[int, RankWait]
    edges: tuple[WaitEdge, ...]
    roots: tuple[int, ...]
    unresolved: tuple[int, ...]
    out: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """rank -> indexes into ``edges`` of the edges it waits by."""

    def targets(self, rank: int) -> tuple[int, ...]:
        """The ranks ``rank`` waits for directly, sorted."""
        idx = self.out.get(rank, ())
        if len(idx) == 1:
            return self.edges[idx[0]].targets
        return tuple(sorted({t for i in idx for t in self.edges[i].targets}))

    def distances_to(self, rank: int) -> dict[int, int]:
        """The ranks from which ``rank`` is reached, with the number of edges on the way (the
        reverse graph walked edge by edge: the edges are few, their rank sets large)."""
        target_sets = [frozenset(e.targets) for e in self.edges]
        dist: dict[int, int] = {}
        used: set[int] = set()
        frontier, level = {rank}, 0
        while frontier:
            level += 1
            nxt: set[int] = set()
            for i, ts in enumerate(target_sets):
                if i not in used and not ts.isdisjoint(frontier):
                    used.add(i)
                    nxt.update(w for w in self.edges[i].waiters if w not in dist and w != rank)
            for w in nxt:
                dist[w] = level
            frontier = nxt
        return dist


def _outer(thread: Thread | None) -> tuple[Frame, ...]:
    return tuple(reversed(thread.python_frames)) if thread is not None else ()


def build_graph(waits: Mapping[int, RankWait], threads: Mapping[int, Thread], everyone: Iterable[int]) -> WaitGraph:
    """Build the graph.

    Args:
        waits: rank -> what it waits on (every readable, unreadable and gone rank).
        threads: rank -> its chosen thread (program order), for the readable ranks.
        everyone: every rank of the job that should exist (missing ones included).

    Cost: linear in the number of ranks times the number of distinct places, plus the distinct
    places squared times the stack depth (program order is decided once per pair of places).
    """
    everyone = sorted(set(everyone) | set(waits))
    edges: list[WaitEdge] = []
    unresolved: list[int] = []
    # every rank's place: (kind, op, call site, group, seq); the waiting ones decide per place
    members: dict[tuple, list[int]] = {}
    by_object: dict[int, list[int]] = {}  # ranks of a class share one RankWait object: group by identity first
    for r in everyone:
        w = waits.get(r)
        if w is None:
            members[("gone", r)] = [r]
        else:
            by_object.setdefault(id(w), []).append(r)
    for rs in by_object.values():
        w = waits[rs[0]]
        members.setdefault((w.kind, w.op, w.site.key if w.site else None, w.group, w.seq), []).extend(rs)
    rep = {key: _outer(threads.get(rs[0])) for key, rs in members.items()}
    for key, inside in members.items():
        kind, group = key[0], key[3] if len(key) > 3 else None
        if kind not in (WaitKind.COLLECTIVE, WaitKind.INIT):
            continue
        if kind is WaitKind.INIT:
            targets = [r for r in everyone if waits.get(r) is None or waits[r].kind is not WaitKind.INIT]
        elif group is not None:
            mine = set(inside)
            targets = [r for r in group if r not in mine]
        else:
            behind: list[int] = []
            ahead: list[int] = []
            for other, rs in members.items():
                if other == key:
                    continue
                (ahead if rep[other] and program_order(rep[other], rep[key]) == 1 else behind).extend(rs)
            targets = sorted(behind or ahead)
        if targets:
            edges.append(WaitEdge(tuple(sorted(inside)), tuple(targets), "init" if kind is WaitKind.INIT else "collective"))
    for r, w in sorted(waits.items()):
        if w.kind is WaitKind.P2P:
            if w.peer is not None and w.peer != r:
                edges.append(WaitEdge((r,), (w.peer,), "p2p"))
            else:
                unresolved.append(r)
        elif w.kind is WaitKind.STORE:
            owners = sorted({o for o in key_owners(w).values() if o != r})
            if owners:
                edges.append(WaitEdge((r,), tuple(owners), "store"))
            else:
                unresolved.append(r)
    # rank -> its edges, one shared tuple object per set of edges (waiting_groups groups by identity);
    # dict.fromkeys does the per-rank work in C: most ranks wait by one edge
    out: dict[int, tuple[int, ...]] = {}
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}
    for i, e in enumerate(edges):
        clash = out.keys() & e.waiters
        out.update(dict.fromkeys(e.waiters, shared.setdefault((i,), (i,))))
        for r in clash:
            both = tuple(sorted({*out[r], i})) if out[r] != (i,) else (i,)
            out[r] = shared.setdefault(both, both)
    roots = _reached_roots(waits, edges)
    return WaitGraph(waits, tuple(edges), roots, tuple(sorted(unresolved)), out)


def _reached_roots(waits: Mapping[int, RankWait], edges: Sequence[WaitEdge]) -> tuple[int, ...]:
    """Ranks of a root kind reached from the waiting ranks. Every edge starts at waiting ranks,
    so the ranks reached are the targets of all edges."""
    seen: set[int] = set().union(*(e.targets for e in edges)) if edges else set()
    return tuple(sorted(r for r in seen if (w := waits.get(r)) is None or w.kind in ROOT_KINDS))
