"""The typed facts of every evidence reader: what each kind of evidence says beyond its findings
and per-rank states (``SourceReport.facts``), and the ``facts`` of the JSON documents.

Frozen dataclasses, no I/O, and nothing imported from the project (ground floor), so that the
document types of :mod:`hangdbg.report.document` need no reader to be imported. Each reader
builds its own: the analysis modules named in each section fill them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "NcclComm",
    "NcclProcess",
    "NcclCommunicator",
    "NcclFacts",
    "RankSeq",
    "CppFrames",
    "TorchLogFacts",
    "FrOp",
    "FrLast",
    "FrRow",
    "FrGroup",
    "FrFacts",
    "RasComm",
    "RasFacts",
    "XidCount",
    "EccFacts",
    "GpuState",
    "GpuFacts",
    "CoreFact",
    "CoreFacts",
    "CoreJsonFacts",
    "StacksFacts",
    "StackTextFacts",
    "TraceEntry",
    "NextCall",
    "DivergenceFacts",
    "TracesFacts",
]


# --- NCCL_DEBUG logs (:mod:`hangdbg.analyze.nccl`) --------------------------------------------
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


# --- PyTorch and torchrun logs (:mod:`hangdbg.analyze.torch_log`) -----------------------------
@dataclass(frozen=True, slots=True)
class RankSeq:
    """A rank's last SeqNum in a process group."""

    rank: int
    seq: int


@dataclass(frozen=True, slots=True)
class CppFrames:
    """The C++ ``frame #N:`` lines printed for a rank (``None`` when no rank was printed)."""

    rank: int | None
    frames: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TorchLogFacts:
    """The torch-log reader's facts.

    Attributes:
        timeouts: watchdog timeout lines.
        seqs: process group -> each rank's last SeqNum in it.
        desync_reports: desync-debug reports.
        child_failures: torchrun ``ChildFailedError`` entries.
        error_files: torchelastic ``error.json`` files.
        cpp_frames: the first C++ frames printed per rank.
        ranks_seen: ranks named by a ``[rankN]:`` prefix or tag.
    """

    timeouts: int = 0
    seqs: dict[str, tuple[RankSeq, ...]] = field(default_factory=dict)
    desync_reports: int = 0
    child_failures: int = 0
    error_files: int = 0
    cpp_frames: tuple[CppFrames, ...] = ()
    ranks_seen: tuple[int, ...] = ()


# --- flight-recorder dumps (:mod:`hangdbg.analyze.flight_recorder`) ---------------------------
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


# --- NCCL RAS reports (:mod:`hangdbg.analyze.nccl_ras`) -----------------------------------------
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


# --- kernel logs and nvidia-smi (:mod:`hangdbg.analyze.xid`) ----------------------------------
@dataclass(frozen=True, slots=True)
class XidCount:
    """How many times an Xid code was logged for one GPU."""

    code: int
    count: int


@dataclass(frozen=True, slots=True)
class EccFacts:
    """ECC and remapping state of one GPU (``nvidia-smi -q``; ``None``: not printed or N/A)."""

    volatile_uncorrectable: int | None
    aggregate_uncorrectable: int | None
    remapped_uncorrectable: int | None
    remap_pending: bool
    remap_failed: bool
    retired_pending: bool


@dataclass(frozen=True, slots=True)
class GpuState:
    """One GPU (``host:0000:3b:00``) as the logs describe it."""

    gpu: str
    xids: tuple[XidCount, ...]
    uuid: str
    serial: str
    fallen_off_bus: bool
    ecc: EccFacts | None


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """The GPU reader's facts: every GPU seen, the Xid lines, the hosts named."""

    gpus: tuple[GpuState, ...] = ()
    xid_events: int = 0
    hosts: tuple[str, ...] = ()


# --- core files (:mod:`hangdbg.sources.core`, :mod:`hangdbg.sources.core_json`) ---------------
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


# --- stacks (:mod:`hangdbg.sources.pyspy`, :mod:`hangdbg.sources.stack_text`) -----------------
@dataclass(frozen=True, slots=True)
class StacksFacts:
    """The stacks reader's facts: how many ranks and equivalence classes the joint analysis has,
    and its headline."""

    rank_count: int = 0
    group_count: int = 0
    headline: str = ""


@dataclass(frozen=True, slots=True)
class StackTextFacts:
    """The stack-text reader's facts: how many threads and ranks were read."""

    thread_count: int = 0
    rank_count: int = 0


# --- tracer files (:mod:`hangdbg.sources.traces`) ---------------------------------------------
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
    """Where the ranks' call sequences part (see :class:`hangdbg.parse.traces.Divergence`)."""

    common_calls: int
    last_common_call: str | None
    next_calls: tuple[NextCall, ...]
    diverged: bool


@dataclass(frozen=True, slots=True)
class TracesFacts:
    """The traces reader's facts: one entry per trace file, and the divergence."""

    traces: tuple[TraceEntry, ...] = ()
    divergence: DivergenceFacts | None = None
