"""Parse one op record: the file a rank keeps with :func:`hangdbg.hooks.record_collectives`.

Pure: takes the file's text, does no I/O, never raises. The format (version 1; written by
:mod:`hangdbg.hooks.recorder`, whose docstring is the reference) is one JSON object padded with
spaces::

    {"gen": 42, "version": 1, "pid": 4242, "rank": 1, "world_size": 4,
     "groups": {"WORLD": [0, 1, 2, 3], "1": [1, 2, 3]},
     "op": {"op": "recv", "group": "WORLD", "group_ranks": [0, 1, 2, 3], "peer": 0, "seq": 2,
            "state": "running", "async": false, "since": 1764000000.123456},
     "end": 42}

``gen`` and ``end`` are the torn-write guard: the writer sets ``end``, then the op, then ``gen``;
a text whose two differ was read in the middle of a write. ``op`` is ``null`` before the first
operation; ``rank``/``world_size`` are ``null`` when the rank did not know them yet. An op
without ``group_ranks`` takes its group's ranks from ``groups``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..rankset import rank_number
from ..text.jsondoc import load_json

__all__ = ["STATES", "CurrentOp", "OpRecord", "parse_op_record"]

STATES = ("issued", "running", "done", "failed")
"""``issued``: an async op not waited for; ``running``: called, not returned (or being waited
for); ``done``: returned; ``failed``: raised."""


@dataclass(frozen=True, slots=True)
class CurrentOp:
    """The operation a rank is in (or last left).

    ``op``: the ``torch.distributed`` function (``"all_reduce"``, ``"recv"``...). ``group``: the
    group's name (``"WORLD"`` for the default group). ``group_ranks``: its global ranks.
    ``peer``: global rank of the other side of a point-to-point op or the root of a rooted
    collective, else None. ``seq``: 1-based count of collectives this rank issued on the group,
    or for point-to-point ops of ops with ``peer`` on the group. ``state``: one of
    :data:`STATES`. ``async_``: issued with ``async_op=True``/``isend``/``irecv``/batch.
    ``since``: Unix time in seconds of the last change of state.
    """

    op: str
    group: str
    group_ranks: tuple[int, ...]
    peer: int | None
    seq: int
    state: str
    async_: bool
    since: float


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One rank's record: its pid, rank and world size (None when unknown), the groups it is in
    (``(name, global ranks)`` in the order they were first used) and its current op (None before
    the first one)."""

    pid: int
    rank: int | None
    world_size: int | None
    groups: tuple[tuple[str, tuple[int, ...]], ...]
    op: CurrentOp | None

    def group_ranks(self, name: str) -> tuple[int, ...] | None:
        """The global ranks of group ``name``, or None when the record does not have it."""
        for n, ranks in self.groups:
            if n == name:
                return ranks
        return None


def _int(v: object) -> int | None:
    return rank_number(v) if isinstance(v, int) else None


def _ranks(v: object) -> tuple[int, ...] | None:
    if not isinstance(v, list):
        return None
    out = tuple(x for x in v if isinstance(x, int) and rank_number(x) is not None)
    return out if len(out) == len(v) else None


def _op(v: object, groups: dict[str, tuple[int, ...]]) -> CurrentOp | None:
    if not isinstance(v, dict):
        raise ValueError("op")
    name, group, state = v.get("op"), v.get("group"), v.get("state")
    seq, since, is_async = _int(v.get("seq")), v.get("since"), v.get("async")
    peer = v.get("peer")
    if not (isinstance(name, str) and name and isinstance(group, str) and state in STATES and seq is not None
            and isinstance(is_async, bool) and isinstance(since, (int, float)) and not isinstance(since, bool)
            and math.isfinite(since) and (peer is None or _int(peer) is not None)):
        raise ValueError("op")
    ranks = _ranks(v["group_ranks"]) if "group_ranks" in v else groups.get(group)
    if ranks is None:
        raise ValueError("group_ranks")
    return CurrentOp(op=name, group=group, group_ranks=ranks, peer=_int(peer), seq=seq, state=str(state),
                     async_=is_async, since=float(since))


def parse_op_record(text: str) -> OpRecord | None:
    """The record in ``text`` (a record file's whole content, str), or None when the text is empty,
    not a version-1 record, garbled, or torn (``gen`` != ``end``: read during a write; read it
    again). Never raises."""
    try:
        doc = load_json(text.strip(" \t\r\n\x00"))
        if not isinstance(doc, dict) or doc.get("version") != 1:
            return None
        gen, end = _int(doc.get("gen")), _int(doc.get("end"))
        pid = _int(doc.get("pid"))
        if gen is None or gen != end or pid is None or pid <= 0:
            return None
        rank, world_size = doc.get("rank"), doc.get("world_size")
        if (rank is not None and _int(rank) is None) or (world_size is not None and _int(world_size) is None):
            return None
        raw = doc.get("groups")
        if not isinstance(raw, dict):
            return None
        groups: dict[str, tuple[int, ...]] = {}
        for name, ranks in raw.items():
            r = _ranks(ranks)
            if r is None:
                return None
            groups[name] = r
        op = None if doc.get("op") is None else _op(doc["op"], groups)
        return OpRecord(pid=pid, rank=_int(rank), world_size=_int(world_size), groups=tuple(groups.items()), op=op)
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
