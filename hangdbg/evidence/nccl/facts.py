"""The typed facts of NCCL_DEBUG logs: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ['NcclComm', 'NcclProcess', 'NcclCommunicator', 'NcclFacts']


@dataclass(frozen=True, slots=True)
class NcclComm:
    """One communicator as one process saw it.

    Attributes:
        comm: the communicator pointer (``0x55d0...``).
        key: the communicator's identity across processes (``commId``, else size and pointer).
        rank: this process's rank in it.
        nranks: its size.
        state: ``"start"``, ``"complete"``, ``"abort"``, ... of its init, ``None`` when not logged.
        parent: the parent communicator of a split, if logged.
        collectives: collective counts by type (``{"AllReduce": 12}``).
        last_op: the last opCount (decimal), ``None`` without collective lines.
        last_op_hex: the same as NCCL prints it.
        last_collective: the type of that last collective.
    """

    comm: str
    key: str
    rank: int | None
    nranks: int | None
    state: str | None
    parent: str | None
    collectives: dict[str, int]
    last_op: int | None
    last_op_hex: str | None
    last_collective: str | None


@dataclass(frozen=True, slots=True)
class NcclProcess:
    """One process of the job as its NCCL lines describe it (a row of ``nccl summary``).

    Attributes:
        rank: its global rank (from its init lines or a launcher prefix), ``None`` when unknown.
        host, pid: where it ran.
        label: a unique display name (``rank 3``, ``rank 3 (node1.4242)``, ``node1 pid 4242``).
        devices: CUDA devices it used.
        version: NCCL version.
        plugin: net plugin loaded (or ``"none"``), ``None`` when not logged.
        networks, interfaces, ips, transports: its network set-up.
        state: ``"ok"``, ``"init incomplete"``, ``"aborted"``, ...
        records: NCCL records of this process; warns: its WARN lines.
        collectives: collective counts by type over all communicators.
        comms: its communicators.
    """

    rank: int | None
    host: str
    pid: int
    label: str
    devices: tuple[int, ...]
    version: str | None
    plugin: str | None
    networks: tuple[str, ...]
    interfaces: tuple[str, ...]
    ips: tuple[str, ...]
    transports: tuple[str, ...]
    state: str
    records: int
    warns: int
    collectives: dict[str, int]
    comms: tuple[NcclComm, ...]


@dataclass(frozen=True, slots=True)
class NcclCommunicator:
    """A communicator across processes: how many processes logged it, and its size."""

    members: int
    nranks: int | None


@dataclass(frozen=True, slots=True)
class NcclFacts:
    """The NCCL reader's facts.

    Attributes:
        processes: one per process, in rank order.
        hosts: per host, its set-up (``version``, ``plugin``, ``network``, ``interfaces``,
            ``transports`` -> the values seen).
        ip_hosts: IP address -> host, from the logs' own interface lines.
        collectives: collective counts by type over all processes.
        communicators: communicator key -> members and size.
        slices: with ``--split-on``: process label -> collective counts per slice.
        slice_majority: with ``--split-on``: the counts most processes have in each slice.
        split_on: the ``--split-on`` pattern, ``None`` without it.
    """

    processes: tuple[NcclProcess, ...] = ()
    hosts: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    ip_hosts: dict[str, str] = field(default_factory=dict)
    collectives: dict[str, int] = field(default_factory=dict)
    communicators: dict[str, NcclCommunicator] = field(default_factory=dict)
    slices: dict[str, tuple[dict[str, int], ...]] | None = None
    slice_majority: tuple[dict[str, int], ...] | None = None
    split_on: str | None = None
