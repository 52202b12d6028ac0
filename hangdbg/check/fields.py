"""Typed reads of the fields of a node's messages (``check-node`` frames: data from another host,
so a field of the wrong type reads as None, never raises)."""

from __future__ import annotations

from typing import Any

__all__ = ["as_bool", "as_float", "as_int", "as_str"]


def as_float(v: Any) -> float | None:
    """``v`` as a float when it is a number (not a bool), else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def as_int(v: Any) -> int | None:
    """``v`` when it is an int (not a bool), else None."""
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def as_bool(v: Any) -> bool | None:
    """``v`` when it is a bool, else None."""
    return v if isinstance(v, bool) else None


def as_str(v: Any) -> str | None:
    """``v`` when it is a non-empty string, else None."""
    return str(v) if isinstance(v, str) and v else None
