"""Equivalence classes: ranks whose chosen thread has the same Python stack.

Fast path for large jobs: threads are first bucketed by the identities of their frame objects
(parsers intern equal frames, so this is a cheap C-level tuple of ``id``s), and each bucket is
classified once; buckets are then merged by the real frame keys, so the result is the same for
frames that were not interned.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Frame, Place, RankDump, Thread
from .places import place_of, primary_thread

__all__ = ["RankView", "classify_ranks", "group_ranks"]


@dataclass(frozen=True, slots=True)
class RankView:
    """One rank reduced to what the analysis compares: its chosen thread and where it is."""

    rank: int
    thread: Thread
    place: Place
    key: tuple


class _Cache:
    def __init__(self) -> None:
        self.by_ids: dict[tuple[int, ...], tuple[Place, tuple]] = {}

    def lookup(self, thread: Thread) -> tuple[Place, tuple]:
        ids = tuple(map(id, thread.frames))
        hit = self.by_ids.get(ids)
        if hit is None:
            place = place_of(thread)
            hit = (place, (thread.stack_key, place.kind, place.collective))
            self.by_ids[ids] = hit
        return hit


def classify_ranks(dumps: list[RankDump] | tuple[RankDump, ...]) -> list[RankView]:
    """Choose each readable rank's thread (see :func:`places.primary_thread`) and place it."""
    cache = _Cache()
    views = []
    for d in dumps:
        if not d.threads:
            continue
        looked = [cache.lookup(t) for t in d.threads]
        if len(looked) == 1:
            i = 0
        else:
            i = primary_thread(d.threads, [p for p, _ in looked])
        place, key = looked[i]
        t = d.threads[i]
        if place.thread != t.name:
            place = Place(place.kind, place.collective, place.call_site, t.name)
        views.append(RankView(d.rank, t, place, key))
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
