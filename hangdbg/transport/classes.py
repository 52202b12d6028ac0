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
from ..rankset import MAX_RANKS, rank_number
from .codec import NO_DEFAULT, WireError, decoder, field_defaults, to_wire

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
    defaults = {n: to_wire(v) for n, v in field_defaults(RankDump).items() if v is not NO_DEFAULT}
    for text, members in groups.items():
        same: dict[str, Any] = {}
        each: dict[str, Any] = {}
        columns = {f: [to_wire(getattr(d, f)) for d, _ in members] for f in _facts()}
        columns[_TIDS] = [tids for _, tids in members]
        for name, values in columns.items():
            first = values[0]
            if any(v != first for v in values):
                each[name] = values
            elif name not in defaults or first != defaults[name]:
                same[name] = first
        yield {"type": CLASS, "n": len(members), "stack": text, "same": same, "each": each}


@dataclass(frozen=True, slots=True)
class _Stacks:
    """One decoded ``stack`` text: per block (samples, then an explicit ``threads``) the field
    values of each thread but its ``thread_id`` (the first field of :class:`~hangdbg.model.Thread`)."""

    builders: tuple[tuple[tuple[Any, ...], ...], ...]
    explicit: bool


def _block(builders: tuple[tuple[Any, ...], ...], offsets: Any, base: int) -> tuple[Thread, ...]:
    """One sample's threads of a rank whose pid is ``base``, from its thread ids' ``offsets``
    (``builders``: each thread's field values after ``thread_id``, its first field)."""
    if type(offsets) is not list or len(offsets) != len(builders):
        raise WireError("thread ids that do not match the stacks")
    try:
        if type(sum(offsets, base)) is not int:
            raise TypeError
    except TypeError:
        raise WireError("a thread id that is not a number") from None
    return tuple([Thread(base + tid, *after) for after, tid in zip(builders, offsets)])


_PLAIN_HINTS: dict[Any, frozenset[type]] = {
    int: frozenset({int}), str: frozenset({str}),
    int | None: frozenset({int, type(None)}), str | None: frozenset({str, type(None)}),
}
"""Field types whose JSON values are the values themselves (an ``each`` column of them is checked
in one pass)."""


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
        self._defaults = field_defaults(RankDump)
        self._index = {name: i for i, name in enumerate(self._defaults)}
        assert self._thread_fields[0] == "thread_id", "Thread's first field is its id (see _block)"
        self._cache: dict[tuple[str, type, Any], Any] = {}

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
        if n > 1 and "rank" not in each:
            raise WireError("a class message whose ranks are all the same rank")
        stacks = self._stacks.get(text)
        if stacks is None:
            stacks = self._stacks[text] = self._decode_stacks(text)
        common = {name: self._same(name, v) for name, v in same.items() if name in self._hints and name not in _STACKS}
        names: list[str] = []
        columns: list[list[Any]] = []
        for name, values in each.items():
            if name == _TIDS or name not in self._hints or name in _STACKS:
                continue  # thread ids below; a field of a newer hangdbg
            if type(values) is not list or len(values) != n:
                raise WireError(f"the column {name!r} does not have one value per rank")
            names.append(name)
            columns.append(self._column(name, values))
        tids = each.get(_TIDS)
        if tids is None:
            tids = [same.get(_TIDS)] * n
        elif type(tids) is not list or len(tids) != n:
            raise WireError("the thread ids do not have one value per rank")
        builders = stacks.builders
        explicit = stacks.explicit
        template = [common.get(name, default) for name, default in self._defaults.items()]
        at = [self._index[name] for name in names]
        if any(v is NO_DEFAULT for i, v in enumerate(template) if i not in at):
            raise WireError("a class message without the ranks' numbers")
        i_pid, i_threads, i_samples = self._index["pid"], self._index["threads"], self._index["samples"]
        out = []
        for row, ids in zip(zip(*columns) if columns else [()] * n, tids):
            values = template.copy()  # positional: RankDump(**kw) took 2.5x as long
            for i, v in zip(at, row):
                values[i] = v
            if type(ids) is not list or len(ids) != len(builders):
                raise WireError("thread ids that do not match the stacks")
            base = values[i_pid] or 0
            blocks = tuple(_block(block, offsets, base) for block, offsets in zip(builders, ids))
            samples = blocks[:-1] if explicit else blocks
            values[i_samples] = samples
            values[i_threads] = blocks[-1] if explicit else (samples[-1] if samples else ())
            try:
                out.append(RankDump(*values))
            except (TypeError, ValueError) as exc:
                raise WireError(f"a rank of a class message: {exc}") from None
        return out

    def _same(self, name: str, value: Any) -> Any:
        """A ``same`` value read (once per distinct value and field: every node sends the job's
        world size, command line and Python version)."""
        key = (name, type(value), tuple(value) if type(value) is list else value)  # True == 1 == 1.0
        try:
            return self._cache[key]
        except KeyError:
            got = self._cache[key] = self._field(name, value)
            return got
        except TypeError:  # not hashable (a list of lists)
            return self._field(name, value)

    def _column(self, name: str, values: list[Any]) -> list[Any]:
        """An ``each`` column read: numbers and strings checked in one pass, else value by value."""
        plain = _PLAIN_HINTS.get(self._hints[name])
        if plain is not None and set(map(type, values)) <= plain:
            if name == "rank" or name in _RANK_NUMBERS:
                numbers = [v for v in values if v is not None]
                if not numbers or (min(numbers) >= 0 and max(numbers) < MAX_RANKS):
                    return values
            else:
                return values
        return [self._field(name, v) for v in values]

    def _field(self, name: str, value: Any) -> Any:
        got = decoder(self._hints[name])(value)
        if name == "rank":
            if rank_number(got) is None:
                raise WireError(f"rank {got!r} out of range")
        elif name in _RANK_NUMBERS and got is not None:
            got = rank_number(got)
        return got

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
                threads.append(tuple(frames if name == "frames" else getattr(t, name) for name in self._thread_fields[1:]))
            blocks.append(tuple(threads))
        return _Stacks(tuple(blocks), explicit)
