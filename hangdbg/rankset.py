"""Rank sets as text: ``[0, 1, 2, 3, 5, 8, 9]`` <-> ``"0-3,5,8-9"`` (the form STAT and SLURM print).

Display only: every JSON document carries ranks as lists of ints (ground floor: imports nothing).
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["compress", "expand", "ranks_text"]


def compress(ranks: Iterable[int]) -> str:
    """Format ranks as sorted, comma-separated ranges: ``compress([0,1,2,4]) == "0-2,4"``."""
    items = sorted(set(ranks))
    if not items:
        return ""
    parts = []
    start = prev = items[0]
    for r in items[1:]:
        if r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def ranks_text(ranks: Iterable[int]) -> str:
    """``"rank 3"``, ``"ranks 0-2,5"`` (duplicates ignored), ``"unnamed ranks"`` for none (e.g.
    failures whose rank was not printed)."""
    items = sorted(set(ranks))
    if not items:
        return "unnamed ranks"
    return f"rank {items[0]}" if len(items) == 1 else f"ranks {compress(items)}"


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
