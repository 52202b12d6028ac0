"""Frozen dataclasses to plain JSON data and back, field by field, driven by their type hints.

What the node agents send (:mod:`hangdbg.transport.classes`) is made of the model's dataclasses
(:class:`~hangdbg.model.RankDump`, :class:`~hangdbg.model.Thread`, :class:`~hangdbg.frames.Frame`).
They are written generically, the way :func:`hangdbg.report.schema.to_jsonable` writes the
documents (dataclasses become objects of their fields, enums their value, tuples lists), except
that a field equal to its default is left out; they are read back by the type hints of the
fields (``typing.get_type_hints``). So a field added to one of them (optional, with a default,
as every new field of the model must be) travels without more code, and a field an agent of a
newer hangdbg sends that this one does not know is ignored.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, Callable

__all__ = ["WireError", "to_wire", "from_wire", "decoder", "field_defaults", "NO_DEFAULT"]

Decode = Callable[[Any], Any]


class WireError(ValueError):
    """Data that does not fit the type it is read as (a garbled or foreign message)."""


_PLAIN = (str, int, float, bool, type(None))


def to_wire(obj: Any) -> Any:
    """``obj`` as JSON data: a dataclass as an object of its fields that differ from their
    defaults, an enum as its value, a tuple or list as a list, a dict as an object.

    Raises:
        TypeError: a value that is none of those (nor a str, int, float, bool or None).
    """
    t = type(obj)
    if t in _PLAIN:
        return obj
    if t is tuple or t is list:
        return [to_wire(v) for v in obj]
    if isinstance(obj, enum.Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for name, default in field_defaults(t).items():  # type: ignore[arg-type]
            value = getattr(obj, name)
            if default is _MISSING or value != default:
                out[name] = to_wire(value)
        return out
    if t is dict:
        return {(k.value if isinstance(k, enum.Enum) else str(k)): to_wire(v) for k, v in obj.items()}
    if isinstance(obj, (str, int, float)):
        return obj
    raise TypeError(f"not JSON data: {t.__name__}")


_MISSING: Any = object()
NO_DEFAULT: Any = _MISSING
"""The "default" :func:`field_defaults` gives a field that has none."""


@functools.cache
def field_defaults(cls: type) -> dict[str, Any]:
    """The fields of dataclass ``cls`` in declaration order -> their default (a private marker
    for a field without one; a ``default_factory``'s value)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = _MISSING
    return out


def from_wire(tp: Any, data: Any) -> Any:
    """``data`` (what :func:`to_wire` made) read back as type ``tp``.

    Raises:
        WireError: ``data`` does not fit ``tp``.
    """
    return decoder(tp)(data)


@functools.cache
def decoder(tp: Any) -> Decode:
    """A function that reads JSON data as type ``tp`` (a dataclass, an enum, ``X | None``,
    ``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]``, ``dict[str, X]``, str, int, float, bool,
    ``Any``); it raises :class:`WireError` on data that does not fit."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return lambda v: v
    if origin in (typing.Union, types.UnionType):
        return _union([decoder(a) for a in args], type(None) in args)
    if origin is tuple or origin is list:
        return _sequence(tp, origin, args)
    if origin is dict:
        key, value = decoder(args[0]), decoder(args[1])
        return lambda v: {key(k): value(x) for k, x in _is(v, dict, tp).items()}
    if origin is typing.Literal:
        return lambda v: v if v in args else _fail(tp, v)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda v: _enum(tp, v)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    if tp is type(None):
        return lambda v: None if v is None else _fail(tp, v)
    if tp is float:
        return lambda v: float(v) if type(v) in (int, float) else _fail(tp, v)
    if tp in (str, int, bool):
        return lambda v: v if type(v) is tp else _fail(tp, v)
    raise TypeError(f"no wire decoder for {tp!r}")


def _union(options: list[Decode], optional: bool) -> Decode:
    def read(v: Any) -> Any:
        if v is None and optional:
            return None
        for opt in options:
            try:
                return opt(v)
            except WireError:
                continue
        raise WireError(f"{_show(v)} fits none of the types of a union")
    return read


def _sequence(tp: Any, origin: Any, args: tuple) -> Decode:
    if origin is list or (len(args) == 2 and args[1] is Ellipsis) or not args:
        item = decoder(args[0]) if args else decoder(Any)
        make = list if origin is list else tuple
        return lambda v: make(item(x) for x in _is(v, list, tp))
    items = [decoder(a) for a in args]

    def fixed(v: Any) -> tuple:
        if type(v) is not list or len(v) != len(items):
            _fail(tp, v)
        return tuple(f(x) for f, x in zip(items, v))
    return fixed


def _dataclass(cls: type) -> Decode:
    hints = typing.get_type_hints(cls)
    defaults = field_defaults(cls)

    def read(v: Any) -> Any:
        fields = _is(v, dict, cls)
        kwargs = {}
        for name, default in defaults.items():
            if name in fields:
                kwargs[name] = decoder(hints[name])(fields[name])
            elif default is _MISSING:
                raise WireError(f"{cls.__name__} without its field {name!r}")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise WireError(f"{cls.__name__}: {exc}") from None
    return read


def _enum(cls: type[enum.Enum], v: Any) -> enum.Enum:
    try:
        return cls(v)
    except ValueError:
        raise WireError(f"{_show(v)} is no {cls.__name__}") from None


def _is(v: Any, t: type, tp: Any) -> Any:
    return v if type(v) is t else _fail(tp, v)


def _fail(tp: Any, v: Any) -> Any:
    raise WireError(f"{_show(v)} is not a {getattr(tp, '__name__', tp)}")


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."
