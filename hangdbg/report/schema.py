"""Serialise the documents of :mod:`hangdbg.report.document`, and describe them as a JSON Schema.

Serialising is field by field, in declaration order (:func:`to_jsonable`): dataclasses become
objects, enums their value, tuples lists; a frozen object met twice in one document (the frames
shared by thousands of ranks) is converted once. The JSON Schema (draft 2020-12) that ``hangdbg
schema`` prints is derived from the very same dataclasses by pydantic (imported only for that);
the tests validate every command's real output against it. The enums (finding kinds, severities,
evidence kinds, place kinds, thread and node statuses, wait kinds) carry their one-line
descriptions from :mod:`hangdbg.model`, :mod:`hangdbg.enums` and :mod:`hangdbg.waits` into the
schema.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import uuid
from typing import Any, Sequence, Union

from .._version import __version__
from ..model import SCHEMA_VERSION, Kind, Severity, SourceKind
from ..enums import NodeStatus, PlaceKind, ThreadStatus
from ..parallel import cores, fork_map
from ..waits import WaitKind
from .document import DOCUMENTS

__all__ = ["json_parts", "to_json", "to_jsonable", "json_schema", "schema_text", "PRETTY_LIMIT", "SCHEMA_ID"]

PRETTY_LIMIT = 256 << 10
"""Documents up to this size (bytes, compact) are indented for people; bigger ones stay compact (the
indenting encoder is pure Python: 0.2 s for the 850 KB summary of a 512-rank NCCL log, which nobody
reads by eye; tools read either form)."""

SCHEMA_ID = f"https://hangdbg.invalid/schema/v{SCHEMA_VERSION}.json"
"""The schema's ``$id`` (an identifier, not a location: the schema is what ``hangdbg schema`` prints)."""

_FIELDS: dict[type, tuple[str, ...]] = {}
_PLAIN = (str, int, float, bool, type(None))
_PLAIN_SET = frozenset(_PLAIN)


_ENUM: tuple[str, ...] = ("<enum>",)  # marks an enum type in _FIELDS (compared by identity)
_OTHER: tuple[str, ...] = ("<other>",)  # marks any other type


def _kind(t: type) -> tuple[str, ...]:
    """The field names of a dataclass type, :data:`_ENUM` or :data:`_OTHER` (cached per type:
    ``is_dataclass``/``isinstance`` on each of millions of objects was most of the time)."""
    kind = _FIELDS.get(t)
    if kind is None:
        if issubclass(t, enum.Enum):
            kind = _ENUM
        elif dataclasses.is_dataclass(t):
            kind = tuple(f.name for f in dataclasses.fields(t))
        else:
            kind = _OTHER
        _FIELDS[t] = kind
    return kind


def to_jsonable(obj: Any) -> Any:
    """A document (or any part of one) as plain JSON data: dicts, lists, strings, numbers, None."""
    memo: dict[int, Any] = {}

    def conv(x: Any) -> Any:
        t = type(x)
        if t in _PLAIN:
            return x
        if t is tuple or t is list:
            if set(map(type, x)) <= _PLAIN_SET:  # rank lists: millions of ints in the tree at 100k ranks
                return list(x)
            return [conv(v) for v in x]
        kind = _FIELDS.get(t)
        if kind is None:
            kind = _kind(t)
        if kind is _ENUM:
            return x.value
        if kind is not _OTHER:
            got = memo.get(id(x))
            if got is None:
                got = memo[id(x)] = {n: conv(getattr(x, n)) for n in kind}
            return got
        if t is dict:
            return {(k.value if isinstance(k, enum.Enum) else k): conv(v) for k, v in x.items()}
        if isinstance(x, (str, int, float)):  # subclasses (a str enum is handled above)
            return x
        raise TypeError(f"not JSON data: {t.__name__}")

    return conv(obj)


PARALLEL_RANKS = 20_000
"""From this many ranks in a document's ``stacks.ranks`` on, :func:`to_json` encodes them on every
core (:func:`hangdbg.parallel.fork_map`)."""


def _encode(entries: Sequence[Any]) -> str:
    """``entries`` as the inside of a compact JSON list (no brackets)."""
    return json.dumps(to_jsonable(entries), separators=(",", ":"))[1:-1]


def _json_parts(doc: Any, ranks: Sequence[Any]) -> list[str]:
    """The compact JSON of a document with a large ``stacks.ranks``, in pieces to write one after
    the other: the ranks encoded in chunks on every core, the rest here, split at a placeholder no
    input text can hold."""
    mark = f"hangdbg-ranks-{uuid.uuid4().hex}"
    rest = dataclasses.replace(doc, stacks=dataclasses.replace(doc.stacks, ranks=(mark,)))
    head, sep, tail = json.dumps(to_jsonable(rest), separators=(",", ":")).partition(f'["{mark}"]')
    assert sep, "the placeholder of stacks.ranks was not written"
    n = cores()
    size = -(-len(ranks) // n)
    parts = fork_map(_encode, [ranks[i:i + size] for i in range(0, len(ranks), size)], n)
    pieces = [head, "["]
    for p in parts:
        if p:
            pieces += [",", p] if len(pieces) > 2 else [p]
    return pieces + ["]", tail]


def json_parts(doc: Any, pretty: bool | None = None) -> list[str]:
    """:func:`to_json` in pieces (their concatenation), so that a 100 MB document is written
    without being joined in memory first."""
    ranks = getattr(getattr(doc, "stacks", None), "ranks", ())
    if not pretty and len(ranks) >= PARALLEL_RANKS:  # surely over PRETTY_LIMIT: compact
        return _json_parts(doc, ranks)
    return [to_json(doc, pretty)]


def to_json(doc: Any, pretty: bool | None = None) -> str:
    """The JSON text of a document: indented when small (``pretty=None``: up to
    :data:`PRETTY_LIMIT` bytes), compact when large (the indenting encoder is pure Python)."""
    ranks = getattr(getattr(doc, "stacks", None), "ranks", ())
    if not pretty and len(ranks) >= PARALLEL_RANKS:  # surely over PRETTY_LIMIT: compact
        return "".join(_json_parts(doc, ranks))
    data = to_jsonable(doc)
    text = json.dumps(data, separators=(",", ":"))
    if pretty or (pretty is None and len(text) <= PRETTY_LIMIT):
        return json.dumps(data, indent=2)
    return text


def _describe(enum_cls: type, title: str) -> dict[str, Any]:
    return {"title": title, "type": "string",
            "oneOf": [{"const": m.value, "description": m.doc} for m in enum_cls]}  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=1)
def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of every document hangdbg writes (``hangdbg schema``)."""
    from pydantic import TypeAdapter

    union: Any = Union[tuple(DOCUMENTS)]
    schema: dict[str, Any] = TypeAdapter(union).json_schema(mode="serialization", ref_template="#/$defs/{model}")
    defs = schema.setdefault("$defs", {})
    for enum_cls in (Kind, Severity, SourceKind, PlaceKind, ThreadStatus, NodeStatus, WaitKind):
        title = enum_cls.__name__
        if title in defs:
            defs[title] = _describe(enum_cls, title)
    for d in defs.values():
        if "properties" in d:  # every field is always written, and nothing else
            d["required"] = list(d["properties"])
            d["additionalProperties"] = False
    long = next((k for k in defs if k.startswith("SourceSection_Union_")), None)
    if long is not None:  # the sources of `report`: name the union of every reader's facts
        defs["SourceSection_AnyFacts_"] = defs.pop(long)
        schema = json.loads(json.dumps(schema).replace(f'"#/$defs/{long}"', '"#/$defs/SourceSection_AnyFacts_"'))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"hangdbg documents, schema_version {SCHEMA_VERSION} (hangdbg {__version__})",
        "description": ("Every JSON document hangdbg writes (--json, -o DIR): one of these, told apart by `command` "
                        "(and `processes`, OUT/processes.json of dump; `error`, what --json prints when a command "
                        "fails without a document of its own)."),
        **schema,
    }


def schema_text() -> str:
    """:func:`json_schema` as indented JSON text."""
    return json.dumps(json_schema(), indent=2)
