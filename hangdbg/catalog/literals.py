"""The literal text of a catalog entry's format: its pieces between placeholders, its head (the text before the
first placeholder) and the patterns that match a message cut inside it (no I/O)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from .entry import CatalogEntry, Syntax
from .pattern import compile_cut

__all__ = ["literal_parts", "longest_run", "head", "head_needed", "shared_words", "cut_pattern", "lead_cut_pattern"]

_RUN = re.compile(r"[A-Za-z0-9_/.,;:'=-]+(?: [A-Za-z0-9_/.,;:'=-]+)*")
_PLACEHOLDER = re.compile(r"%[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcspn%]|\{[^{}]*\}")


def literal_parts(e: CatalogEntry) -> list[str]:
    """The literal pieces of a printf / python / literal format, in order (a placeholder between two)."""
    if e.syntax is Syntax.LITERAL:
        return [e.format]
    return _PLACEHOLDER.split(e.format.replace("{{", "{").replace("}}", "}"))


def longest_run(parts: Iterable[str]) -> str:
    """The longest run of literal text (words and the punctuation logs keep) in ``parts``, lowercase."""
    return max((m.group(0) for p in parts for m in _RUN.finditer(p)), key=len, default="").lower()


@lru_cache(maxsize=4096)
def cut_pattern(e: CatalogEntry) -> re.Pattern[str]:
    """:func:`~hangdbg.catalog.pattern.compile_cut` of ``e``, compiled on first use."""
    return compile_cut(e.format, e.syntax) or re.compile(r"(?!)")
def head_needed(e: CatalogEntry) -> str:
    """The longest run of literal text (lowercase) of the format's head: its literal start, or the literal piece
    after a leading placeholder (what :func:`lead_cut_pattern` requires whole)."""
    parts = literal_parts(e)
    return longest_run(parts[1:2] if len(parts) > 1 and not parts[0].strip() else parts[:1])


@lru_cache(maxsize=None)
def lead_cut_pattern(e: CatalogEntry) -> re.Pattern[str]:
    """:func:`~hangdbg.catalog.pattern.compile_cut` of ``e``, a leading placeholder allowed."""
    return compile_cut(e.format, e.syntax, lead_field=True) or re.compile(r"(?!)")


_HEAD_CUT = re.compile(r"%|\{(?!\{)")


def head(e: CatalogEntry) -> str:
    """The literal text of ``e.format`` before its first placeholder, blanks collapsed."""
    m = _HEAD_CUT.search(e.format) if e.syntax is not Syntax.LITERAL else None
    return " ".join((e.format[:m.start()] if m is not None else e.format).split())


def shared_words(a: str, b: str) -> int:
    """The length of the start ``a`` and ``b`` share, cut back to the end of a word."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    if n == min(len(a), len(b)):
        return n
    while n > 0 and a[n - 1].isalnum() and a[n].isalnum():
        n -= 1
    return n
