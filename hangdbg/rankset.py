"""Rank sets as text: ``[0, 1, 2, 3, 5, 8, 9]`` <-> ``"0-3,5,8-9"`` (the form STAT and SLURM print).

Display only: every JSON document carries ranks as lists of ints (ground floor: imports nothing).
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["MAX_RANKS", "compress", "expand", "rank_class", "rank_number", "rank_set", "ranks_text"]

MAX_RANKS = 1 << 22
"""More ranks than any job has (4M): a rank, rank count or world size read from text at or above
this is garbage (a garbled ``nranks 4294967296`` would otherwise become a set of 4 billion ints)."""


def rank_number(value: object, low: int = 0) -> int | None:
    """A rank, rank count or world size read from text or JSON, validated: the int when
    ``low <= n < MAX_RANKS`` (``value`` an int or a decimal string, surrounding blanks allowed),
    else None. Every reader passes the numbers it reads through this before building sets or
    ranges from them.

    Args:
        value: the number as read (``str``, ``bytes`` or ``int``; a ``bool`` is not a number).
        low: the smallest valid value (0 for a rank, 1 for a count or size).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (str, bytes)):
        v = value.strip()
        if not v or len(v) > 12 or not v.isdigit():
            return None
        n = int(v)
    elif isinstance(value, int):
        n = value
    else:
        return None
    return n if low <= n < MAX_RANKS else None


def compress(ranks: Iterable[int]) -> str:
    """Format ranks as sorted, comma-separated ranges: ``compress([0,1,2,4]) == "0-2,4"``."""
    return ",".join(_parts(sorted(set(ranks))))


def _parts(items: list[int]) -> list[str]:
    """Sorted distinct ranks as range parts: ``[0, 1, 2, 5] -> ["0-2", "5"]``."""
    parts: list[str] = []
    if not items:
        return parts
    start = prev = items[0]
    for r in items[1:]:
        if r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return parts


def _gap_parts(items: list[int], lo: int, hi: int) -> list[str]:
    """The ranks of ``lo..hi`` not in the sorted distinct ``items``, as range parts, one per gap
    (never the ranks one by one: a set ``{0, 4000000}`` has one gap of 3,999,999 ranks)."""
    out: list[str] = []
    prev = lo - 1
    for r in (*items, hi + 1):
        if r > prev + 1:
            out.append(str(prev + 1) if r == prev + 2 else f"{prev + 1}-{r - 1}")
        prev = max(prev, r)
    return out


def _joined(parts: list[str], limit: int | None) -> str:
    if limit is not None and len(parts) > limit:
        return ", ".join(parts[:limit]) + f", ... {len(parts) - limit} more"
    return ", ".join(parts)


def rank_set(ranks: Iterable[int], limit: int | None = None) -> str:
    """A rank set for people, never mistaken for a number: ``{3, 517, 900}``, ``{0-2, 5}``, ``{}``.

    Args:
        ranks: the ranks (duplicates and order ignored).
        limit: at most this many parts (a rank or a range) are written, then ``... N more``
            (``None``: all of them).
    """
    return "{" + _joined(_parts(sorted(set(ranks))), limit) + "}"


def rank_class(ranks: Iterable[int], world_size: int | None = None, limit: int | None = 12) -> str:
    """An equivalence class for people: its size and its ranks, as the shorter of the plain set
    and the complement within its span: ``3 ranks {3, 517, 900}``, ``4093 ranks {0-4095 except
    17, 900, 3001}``, ``rank {7}`` (the complement form is the one STAT users read for "all but a
    few").

    Args:
        ranks: the ranks of the class.
        world_size: the job's size when known: the span is then ``0..world_size-1`` when the
            class is most of the job, else from its lowest to its highest rank.
        limit: at most this many parts are written (see :func:`rank_set`).
    """
    items = sorted(set(ranks))
    if not items:
        return "0 ranks {}"
    n = len(items)
    head = "rank" if n == 1 else f"{n} ranks"
    plain = _parts(items)
    lo, hi = items[0], items[-1]
    if world_size is not None and items[-1] < world_size and n * 2 > world_size:
        lo, hi = 0, world_size - 1
    missing = hi - lo + 1 - n
    if 0 < missing and len(plain) > 1:
        outside = _gap_parts(items, lo, hi)
        span = str(lo) if lo == hi else f"{lo}-{hi}"
        if len(outside) <= len(plain) and len(span) + 8 + len(", ".join(outside)) < len(", ".join(plain)):
            return f"{head} {{{span} except {_joined(outside, limit)}}}"
    return f"{head} {{{_joined(plain, limit)}}}"


def ranks_text(ranks: Iterable[int]) -> str:
    """``"rank 3"``, ``"ranks {0-2, 5}"`` (duplicates ignored; braces and spaces, so that "ranks
    3,517,900" is never read as a number), ``"unnamed ranks"`` for none (e.g. failures whose rank
    was not printed)."""
    items = sorted(set(ranks))
    if not items:
        return "unnamed ranks"
    return f"rank {items[0]}" if len(items) == 1 else f"ranks {rank_set(items)}"


def expand(text: str) -> list[int]:
    """Parse ``"0-3,5"`` into ``[0, 1, 2, 3, 5]``.

    Raises:
        ValueError: a part is not ``N`` or ``N-M`` with ``N <= M``.
    """
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"bad rank range {part!r}")
        out.extend(range(a, b + 1))
    return sorted(set(out))
