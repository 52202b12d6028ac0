"""Hypothesis strategies shared by the parsers' fuzz tests: real lines, cut, with text inserted,
with their numbers replaced, or random text."""

from __future__ import annotations

import re

from hypothesis import strategies as st


def mutated_lines(samples: list[str], max_int: int = 10**12, min_int: int = 0) -> st.SearchStrategy[str]:
    """Lines drawn from ``samples`` and mutated: kept, cut, text inserted, every number replaced
    (by integers in ``[min_int, max_int]``), or replaced by random text."""

    @st.composite
    def mutated_line(draw) -> str:
        line = draw(st.sampled_from(samples))
        op = draw(st.sampled_from(["keep", "cut", "insert", "digits", "random"]))
        if op == "cut":
            return line[: draw(st.integers(0, len(line)))]
        if op == "insert":
            i = draw(st.integers(0, len(line)))
            return line[:i] + draw(st.text(max_size=8)) + line[i:]
        if op == "digits":
            return re.sub(r"\d+", lambda m: str(draw(st.integers(min_int, max_int))), line)
        if op == "random":
            return draw(st.text(max_size=200))
        return line

    return mutated_line()
