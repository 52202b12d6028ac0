"""The typed facts of flight-recorder dumps: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ['FrOp', 'FrLast', 'FrRow', 'FrGroup', 'FrFacts']


@dataclass(frozen=True, slots=True)
class FrOp:
    """A collective or p2p op of one rank's record: its sequence number, op and (for p2p) state."""

    seq: int
    op: str
    state: str | None = None


@dataclass(frozen=True, slots=True)
class FrLast:
    """The last collective a rank recorded in a group.

    Attributes:
        seq: its ``collective_seq_id``.
        op: the op (``all_reduce``).
        desc: op, sizes and dtypes as text.
        state: ``completed``, ``started`` or ``scheduled``, raised by ``pg_status``.
        raw_state: the state as dumped.
        retired: the entry was retired (``None`` when the dump does not say).
    """

    seq: int
    op: str
    desc: str
    state: str
    raw_state: str
    retired: bool | None


@dataclass(frozen=True, slots=True)
class FrRow:
    """One rank in one process group (a row of ``hangdbg fr``'s table)."""

    rank: int
    group: str
    file: str
    last: FrLast | None
    last_started: FrOp | None
    last_completed: FrOp | None
    last_p2p: FrOp | None


@dataclass(frozen=True, slots=True)
class FrGroup:
    """A process group's member ranks, and where they came from (``pg_config`` or the dumps)."""

    members: tuple[int, ...]
    members_from: str


@dataclass(frozen=True, slots=True)
class FrFacts:
    """The flight-recorder reader's facts.

    Attributes:
        dumps: dumps read.
        world: the ranks expected (from ``pg_config``, else the numbering of the files).
        versions: dump format versions seen (``"2.10"``).
        formats: dumps per encoding (``{"pickle": 7, "json": 1}``).
        backends: backends seen in the entries (``nccl``, ``gloo``).
        groups: process group label -> members.
        table: per rank and group, the last recorded, started and completed collectives.
    """

    dumps: int = 0
    world: tuple[int, ...] = ()
    versions: tuple[str, ...] = ()
    formats: dict[str, int] = field(default_factory=dict)
    backends: tuple[str, ...] = ()
    groups: dict[str, FrGroup] = field(default_factory=dict)
    table: tuple[FrRow, ...] = ()
