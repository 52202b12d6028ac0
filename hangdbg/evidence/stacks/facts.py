"""The typed facts of stacks: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['StacksFacts', 'StackTextFacts']


@dataclass(frozen=True, slots=True)
class StacksFacts:
    """The stacks reader's facts: how many ranks and equivalence classes the joint analysis has,
    and its headline."""

    rank_count: int = 0
    class_count: int = 0
    headline: str = ""


@dataclass(frozen=True, slots=True)
class StackTextFacts:
    """The stack-text reader's facts: how many threads and ranks were read."""

    thread_count: int = 0
    rank_count: int = 0
