"""The typed facts of NCCL RAS reports: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['RasComm', 'RasFacts', 'RasQuery']


@dataclass(frozen=True, slots=True)
class RasComm:
    """A row of a RAS report's ``Communicators`` table.

    Attributes:
        group: the row's group number (``#0-...``).
        comms: communicators in the group.
        nodes: nodes per communicator.
        ranks: ranks per communicator.
        status: ``RUNNING``, ``INIT``, ``FINALIZE``, ``ABORT``, ``NOCOMM``.
        errors: ``OK``, ``MISMATCH``, ``ERROR``, ``INCOMPLETE`` (comma-joined when several).
    """

    group: int
    comms: int
    nodes: int
    ranks: int
    status: str
    errors: str


@dataclass(frozen=True, slots=True)
class RasFacts:
    """The RAS reader's facts (of the last report read).

    Attributes:
        reports: RAS reports read (a file may hold several queries).
        nccl_version: NCCL version of the report, ``""`` when not printed.
        nodes: nodes of the job.
        processes: NCCL processes of the job.
        gpus: GPUs of the job.
        comm_groups: the ``Communicators`` table.
    """

    reports: int = 0
    nccl_version: str = ""
    nodes: int | None = None
    processes: int | None = None
    gpus: int | None = None
    comm_groups: tuple[RasComm, ...] = ()


@dataclass(frozen=True, slots=True)
class RasQuery:
    """What ``dump`` did with NCCL RAS (the document's ``ras``; :mod:`hangdbg.collect.ras`).

    Attributes:
        state: ``answered`` (a report was read), ``foreign`` (its pids are another job's), ``unreadable`` (RAS answered, nothing could be
            read), ``absent`` (nothing listens, or it did not answer), ``not-queried`` (not an
            NCCL job, RAS disabled, or the ranks are on other nodes).
        line: the one line for the console: ``RAS: answered (json, 0.2 s, 2 queries): ...``.
        address: where RAS was asked (``localhost:28028``), ``""`` when not asked.
        format: ``json`` or ``text`` as answered, ``""`` when nothing came.
        via: ``ncclras`` or ``socket``, ``""`` when not asked.
        queries: how many times RAS was asked (a second query when the first shows differing
            operation counts: NCCL's guide asks whether the counts advance).
        files: the raw answers written, relative to the output directory (``ras/ras-1.json``).
        seconds: time spent on RAS.
        garbled_lines: lines of the answers that could not be read.
    """

    state: str
    line: str
    address: str = ""
    format: str = ""
    via: str = ""
    queries: int = 0
    files: tuple[str, ...] = ()
    seconds: float = 0.0
    garbled_lines: int = 0
