"""Equivalence classes: ranks whose chosen thread has the same Python stack.

Fast path for large jobs: threads are first bucketed by the identities of their frame objects
(parsers intern equal frames, so this is a cheap C-level tuple of ``id``s), and each bucket is
classified once; buckets are then merged by the real frame keys, so the result is the same for
frames that were not interned.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import attrgetter

from ..model import Place, RankDump, Thread
from ..frames import Frame
from .places import lock_wait, place_of, primary_thread

__all__ = ["RankView", "classify_ranks", "group_ranks"]


@dataclass(frozen=True, slots=True)
class RankView:
    """One rank reduced to what the analysis compares.

    Attributes:
        rank: the rank.
        thread: the thread that speaks for it (see :func:`places.primary_thread`).
        place: where that thread is.
        key: the equivalence-class key (Python stack and place).
        lock_wait: that thread waits to acquire a mutex.
        lock_waiters: the rank's other threads that wait to acquire a mutex.
        has_locals: its frames carry ``--locals`` values (loop counters can be compared).
    """

    rank: int
    thread: Thread
    place: Place
    key: tuple
    lock_wait: bool = False
    lock_waiters: tuple[Thread, ...] = ()
    has_locals: bool = False


_VALUE = attrgetter("function", "file", "line", "native", "locals")


class _Facts:
    __slots__ = ("place", "key", "lock", "has_locals")

    def __init__(self, thread: Thread) -> None:
        self.place = place_of(thread)
        self.key = (thread.stack_key, self.place.kind, self.place.collective)
        self.lock = lock_wait(thread)
        self.has_locals = any(f.locals for f in thread.frames)


class _Cache:
    """Facts per distinct frame tuple, keyed by the frames' identities (see module docstring)."""

    def __init__(self) -> None:
        self.by_tuple: dict[tuple, tuple[tuple[Frame, ...], _Facts]] = {}
        self.by_ids: dict[tuple, _Facts] = {}
        self.by_value: dict[tuple, _Facts] = {}

    def lookup(self, thread: Thread) -> _Facts:
        # one frames tuple shared by many ranks (the fan-out's classes, the parsers' canonical
        # tuples): one lookup by the tuple's identity (the tuple is kept, so its id stays its own)
        hit = self.by_tuple.get((thread.status, id(thread.frames)))
        if hit is not None:
            return hit[1]
        facts = self._lookup(thread)
        self.by_tuple[(thread.status, id(thread.frames))] = (thread.frames, facts)
        return facts

    def _lookup(self, thread: Thread) -> _Facts:
        ids = (thread.status, *map(id, thread.frames))
        hit = self.by_ids.get(ids)
        if hit is None:  # frames not interned: fall back to their values
            value = (thread.status, *map(_VALUE, thread.frames))
            hit = self.by_value.get(value)
            if hit is None:
                hit = self.by_value[value] = self.by_ids[ids] = _Facts(thread)
        return hit


def classify_ranks(dumps: list[RankDump] | tuple[RankDump, ...]) -> list[RankView]:
    """Choose each readable rank's thread (see :func:`places.primary_thread`) and place it."""
    cache = _Cache()
    primary: dict[tuple, int] = {}  # the choice depends only on the threads' facts and names
    views = []
    for d in dumps:
        if not d.threads:
            continue
        looked = [cache.lookup(t) for t in d.threads]
        if len(looked) == 1:
            i = 0
        else:
            key = (*map(id, looked), *(t.name for t in d.threads))
            i = primary.get(key, -1)
            if i < 0:
                i = primary[key] = primary_thread(d.threads, [f.place for f in looked])
        facts, t = looked[i], d.threads[i]
        place = facts.place
        if place.thread != t.name:
            place = replace(place, thread=t.name)
        waiters = tuple(o for j, o in enumerate(d.threads) if j != i and looked[j].lock) if facts.lock else ()
        views.append(RankView(d.rank, t, place, facts.key, facts.lock, waiters, facts.has_locals))
    return views


def group_ranks(views: list[RankView]) -> list[tuple[tuple[Frame, ...], Place, tuple[int, ...], str | None]]:
    """Group rank views by stack key: ``(python frames, place, ranks, thread name)``, largest first."""
    groups: dict[tuple, list[RankView]] = {}
    for v in views:
        groups.setdefault(v.key, []).append(v)
    out = []
    for members in groups.values():
        first = members[0]
        out.append((first.thread.python_frames, first.place, tuple(sorted(m.rank for m in members)), first.thread.name))
    out.sort(key=lambda g: (-len(g[2]), g[2][0]))
    return out
