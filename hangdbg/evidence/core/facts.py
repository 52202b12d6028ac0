"""The typed facts of core files: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['CoreFact', 'CoreFacts', 'CoreJsonFacts']


@dataclass(frozen=True, slots=True)
class CoreFact:
    """What one core file says (an entry of :class:`CoreFacts`).

    Attributes:
        file: the core file.
        rank: the rank (from the core's environment; numbered by order when unknown).
        rank_source: the variable the rank came from, ``"order"`` when none.
        host: the node (``SLURMD_NODENAME``, ``HOSTNAME``, ``HOST``), ``""`` when unknown.
        pid: the process id.
        signal: ``"SIGSEGV"``..., ``None`` for a core taken on demand.
        how: ``"crash"``, ``"self"``, ``"killed"``, ``"on demand"`` (see :class:`CoreReading`).
        crashing_tid: the thread that took the signal.
        executable: the executable used, and executable_source where it came from.
        truncated: the core is shorter than its headers say (``ulimit -c``).
        environ: the launcher variables found.
        diagnoses: what went wrong or is doubtful, each with the fix.
    """

    file: str
    rank: int
    rank_source: str
    host: str
    pid: int | None
    signal: str | None
    how: str
    crashing_tid: int | None
    executable: str
    executable_source: str
    truncated: bool
    environ: dict[str, str]
    diagnoses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CoreFacts:
    """The core reader's facts: one entry per core file."""

    cores: tuple[CoreFact, ...] = ()


@dataclass(frozen=True, slots=True)
class CoreJsonFacts:
    """The core-document reader's facts: the documents read and the cores they describe."""

    documents: tuple[str, ...] = ()
    cores: tuple[CoreFact, ...] = ()
