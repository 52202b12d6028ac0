"""Equivalence classes of rank dumps on the wire: what a node agent sends instead of raw stacks.

The idea is LLNL STAT's (its daemons merge their processes' stack traces into one prefix tree
labelled with rank sets before anything is sent, and the tool front end merges the trees): the
ranks of one node that have the same stacks travel as one ``class`` message holding those stacks
once, with the ranks' own facts beside them. The coordinator decodes each distinct stack once for
the whole job (a cache keyed by its text: the 8 ranks of every one of 12,500 nodes mostly share
two or three stacks) and builds every rank's :class:`~hangdbg.model.RankDump` from it, the frames
tuples shared by every rank (the analysis buckets stacks by identity first).

A ``class`` message (wire format 2, :data:`hangdbg.transport.wire.WIRE_VERSION`)::

    {"type": "class", "host": H, "n": N, "stack": TEXT, "same": {...}, "each": {...}}

* ``stack`` is the JSON text of ``{"samples": [[THREAD, ...], ...], "threads": null | [THREAD, ...]}``:
  every sample's threads, oldest first (``threads`` null: the last sample's, or none when there
  is no sample); a THREAD is a :class:`~hangdbg.model.Thread` as :func:`~.codec.to_wire` writes
  it (its frames with locals and native flags) without ``thread_id``.
* ``same`` holds the :class:`~hangdbg.model.RankDump` fields (all but ``threads``/``samples``) whose
  value the N ranks share, ``each`` those that differ, as a list of N values in rank order; a
  field at its default in every rank is left out. The pseudo-field ``@tids`` holds each rank's
  thread ids, per sample (and for an explicit ``threads``), minus the rank's pid.

Every field of :class:`~hangdbg.model.RankDump` is written and read generically (:mod:`.codec`), so
a new optional field travels without more code.
"""

from __future__ import annotations

import json
import typing
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..frames import Frame
from ..model import RankDump, Thread
from ..rankset import rank_number
from .codec import WireError, decoder, field_defaults, to_wire

__all__ = ["CLASS", "encode_classes", "ClassMerger", "WireError"]

CLASS = "class"
"""The ``type`` of a class message."""

_STACKS = ("threads", "samples")
_TIDS = "@tids"
_RANK_NUMBERS = ("local_rank", "world_size", "local_world_size")
"""Fields read like the numbers of a raw file's header (:func:`hangdbg.rankset.rank_number`):
a value out of range is dropped (None), never used to build a set of ranks."""


def _facts() -> list[str]:
    return [f for f in field_defaults(RankDump) if f not in _STACKS]


def _thread_wire(t: Thread) -> dict[str, Any]:
    w = to_wire(t)
    del w["thread_id"]
    return w


def _body(d: RankDump) -> tuple[str, list[list[int]]]:
    """The ``stack`` text of ``d`` and its thread ids relative to its pid."""
    base = d.pid or 0
    last = d.samples[-1] if d.samples else ()
    explicit = d.threads is not last and d.threads != last
    blocks = [*d.samples, d.threads] if explicit else list(d.samples)
    text = json.dumps({"samples": [[_thread_wire(t) for t in s] for s in d.samples],
                       "threads": [_thread_wire(t) for t in d.threads] if explicit else None},
                      separators=(",", ":"))
    return text, [[t.thread_id - base for t in block] for block in blocks]


def encode_classes(dumps: Sequence[RankDump]) -> Iterator[dict[str, Any]]:
    """The ``class`` messages (without ``host``) of ``dumps``: one per distinct stack text, its
    ranks in the order given.

    Raises:
        TypeError: a field value that is not JSON data (a model field of a new type).
    """
    groups: dict[str, list[tuple[RankDump, list[list[int]]]]] = defaultdict(list)
    for d in dumps:
        text, tids = _body(d)
        groups[text].append((d, tids))
    defaults = field_defaults(RankDump)
    for text, members in groups.items():
        same: dict[str, Any] = {}
        each: dict[str, Any] = {}
        columns = {f: [to_wire(getattr(d, f)) for d, _ in members] for f in _facts()}
        columns[_TIDS] = [tids for _, tids in members]
        for name, values in columns.items():
            first = values[0]
            if any(v != first for v in values):
                each[name] = values
            elif name == _TIDS or name not in defaults or first != to_wire(defaults[name]):
                same[name] = first
        yield {"type": CLASS, "n": len(members), "stack": text, "same": same, "each": each}


@dataclass(frozen=True, slots=True)
class _Stacks:
    """One decoded ``stack`` text: per block (samples, then an explicit ``threads``) the field
    values of each thread (``thread_id`` at index :attr:`tid_at`)."""

    blocks: tuple[tuple[tuple[Any, ...], ...], ...]
    explicit: bool
    tid_at: int


class ClassMerger:
    """Builds the :class:`~hangdbg.model.RankDump` objects of ``class`` messages from every node.

    Each distinct ``stack`` text is decoded once (later messages with the same text reuse it),
    equal frames and frames tuples become one object across the whole job.
    """

    def __init__(self) -> None:
        self._stacks: dict[str, _Stacks] = {}
        self._frames: dict[Frame, Frame] = {}
        self._tuples: dict[tuple[Frame, ...], tuple[Frame, ...]] = {}
        self._hints = typing.get_type_hints(RankDump)
        self._thread_fields = list(field_defaults(Thread))

    def add(self, msg: dict[str, Any]) -> list[RankDump]:
        """The dumps of one ``class`` message.

        Raises:
            WireError: a message that does not fit the format (module docstring): wrong types,
                columns of the wrong length, a rank out of range, a dump the model refuses.
        """
        n, text, same, each = msg.get("n"), msg.get("stack"), msg.get("same"), msg.get("each")
        if type(n) is not int or n < 1 or not isinstance(text, str) or not isinstance(same, dict) \
                or not isinstance(each, dict):
            raise WireError("a class message without n, stack, same and each")
        stacks = self._stacks.get(text)
        if stacks is None:
            stacks = self._stacks[text] = self._decode_stacks(text)
        common = {name: self._field(name, v) for name, v in same.items() if name in self._hints and name not in _STACKS}
        columns = {}
        for name, values in each.items():
            if name != _TIDS and (name not in self._hints or name in _STACKS):
                continue  # a field of a newer hangdbg
            if type(values) is not list or len(values) != n:
                raise WireError(f"the column {name!r} does not have one value per rank")
            columns[name] = values if name == _TIDS else [self._field(name, v) for v in values]
        tids_same = same.get(_TIDS)
        tids = columns.pop(_TIDS, None)
        out = []
        for i in range(n):
            kw = dict(common)
            for name, values in columns.items():
                kw[name] = values[i]
            blocks = self._threads(stacks, tids[i] if tids is not None else tids_same, kw.get("pid") or 0)
            samples = blocks[:-1] if stacks.explicit else blocks
            kw["samples"] = samples
            kw["threads"] = blocks[-1] if stacks.explicit else (samples[-1] if samples else ())
            try:
                out.append(RankDump(**kw))
            except (TypeError, ValueError) as exc:
                raise WireError(f"a rank of a class message: {exc}") from None
        return out

    def _field(self, name: str, value: Any) -> Any:
        got = decoder(self._hints[name])(value)
        if name == "rank":
            if rank_number(got) is None:
                raise WireError(f"rank {got!r} out of range")
        elif name in _RANK_NUMBERS and got is not None:
            got = rank_number(got)
        return got

    def _threads(self, stacks: _Stacks, tids: Any, base: int) -> tuple[tuple[Thread, ...], ...]:
        if type(tids) is not list or len(tids) != len(stacks.blocks):
            raise WireError("thread ids that do not match the stacks")
        out = []
        at = stacks.tid_at
        for block, ids in zip(stacks.blocks, tids):
            if type(ids) is not list or len(ids) != len(block):
                raise WireError("thread ids that do not match the stacks")
            threads = []
            for values, tid in zip(block, ids):
                if type(tid) is not int:
                    raise WireError(f"thread id {tid!r} is not a number")
                row = list(values)
                row[at] = base + tid
                threads.append(Thread(*row))
            out.append(tuple(threads))
        return tuple(out)

    def _decode_stacks(self, text: str) -> _Stacks:
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            raise WireError("a class message whose stack is not JSON") from None
        if not isinstance(body, dict) or type(body.get("samples")) is not list:
            raise WireError("a class message whose stack has no samples")
        explicit = body.get("threads") is not None
        raw = [*body["samples"], body["threads"]] if explicit else body["samples"]
        read = decoder(Thread)
        blocks = []
        for block in raw:
            if type(block) is not list:
                raise WireError("a sample that is not a list of threads")
            threads = []
            for w in block:
                if type(w) is not dict:
                    raise WireError("a thread that is not an object")
                t = read({**w, "thread_id": 0})
                frames = tuple(self._frames.setdefault(f, f) for f in t.frames)
                frames = self._tuples.setdefault(frames, frames)
                threads.append(tuple(frames if name == "frames" else getattr(t, name) for name in self._thread_fields))
            blocks.append(tuple(threads))
        return _Stacks(tuple(blocks), explicit, self._thread_fields.index("thread_id"))
