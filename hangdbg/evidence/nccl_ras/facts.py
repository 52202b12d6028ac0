"""The typed facts of NCCL RAS reports: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['RasComm', 'RasFacts']


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
