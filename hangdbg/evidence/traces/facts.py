"""The typed facts of tracer files: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['TraceEntry', 'NextCall', 'DivergenceFacts', 'TracesFacts']


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One trace file.

    Attributes:
        rank: from its header, ``None`` when it said ``na``.
        host, pid, file: where it came from.
        events: traced lines and calls.
        ended: the tracer wrote its end line.
        elapsed: seconds traced (``None`` without timing).
        last_call: the last traced call (``module:line qualname``).
        last_line: the last traced line (raw), ``None`` when nothing was traced.
        last_lines: its last lines (raw; as many as ``traces -n`` asks).
        grep_count: lines matching ``--grep``, ``None`` without it.
        garbled_lines: lines that matched no form of the format.
        cut: its last line was cut (a SIGKILL while it was being written) and left out.
    """

    rank: int | None
    host: str
    pid: int | None
    file: str
    events: int
    ended: bool
    elapsed: float | None
    last_call: str | None
    last_line: str | None
    last_lines: tuple[str, ...]
    grep_count: int | None
    garbled_lines: int
    cut: bool


@dataclass(frozen=True, slots=True)
class NextCall:
    """The call a trace made after the last common one (``None``: its trace ends there)."""

    rank: int | None
    host: str
    pid: int | None
    call: str | None


@dataclass(frozen=True, slots=True)
class DivergenceFacts:
    """Where the ranks' call sequences part (see :class:`hangdbg.evidence.traces.grammar.Divergence`)."""

    common_calls: int
    last_common_call: str | None
    next_calls: tuple[NextCall, ...]
    diverged: bool


@dataclass(frozen=True, slots=True)
class TracesFacts:
    """The traces reader's facts: one entry per trace file, and the divergence."""

    traces: tuple[TraceEntry, ...] = ()
    divergence: DivergenceFacts | None = None
