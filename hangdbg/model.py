"""The data of hangdbg: frozen dataclasses and enums, no I/O (ground floor: imports only the ground
floor: :class:`Frame` from ``frames``, the wait-for graph's nodes and edges from ``waits``).

Everything above this module (parsers, the analyzer, the readers, reporters, collectors) speaks in
these types. A py-spy dump becomes :class:`Thread` objects made of :class:`Frame` objects; one
process of a job becomes a :class:`RankDump`; the analyzer turns a list of ``RankDump`` into an
:class:`Analysis` (equivalence classes, the merged call tree and the findings). What a dead job
left is read by one reader per kind of evidence (:class:`SourceKind`) into a :class:`SourceReport`;
``hangdbg report`` merges those into a :class:`Verdict`.

Blame has one shape everywhere: a :class:`Finding`, whose ``kind`` is a :class:`Kind` and whose
``severity`` is a :class:`Severity` (both documented here, in one place). A finding that names the
cause of a hang or failure has severity ``suspect``; ranks that only wait for others carry
``waiting`` and say for whom (``waits_for``).

Frame order follows py-spy: ``Thread.frames[0]`` is the innermost frame (where the thread is),
``Thread.frames[-1]`` the outermost (``<module>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Sequence, TypeVar

from .enums import DocumentedEnum, DumpState, Level, PlaceKind, ThreadStatus
from .frames import Frame
from .waits import RankWait, WaitEdge

SCHEMA_VERSION = 4
"""Version of the JSON documents written by ``--json`` and ``-o/--out`` (bumped on incompatible
changes; ``hangdbg schema`` prints their JSON Schema). 4: the equivalence classes are
``stacks.classes`` (``groups`` in 2 and 3; ``groups`` now only ever means process groups)."""


class Severity(DocumentedEnum):
    """How a :class:`Finding` bears on the verdict. The order of the members is the order of
    importance (:data:`SEVERITY_ORDER`)."""

    SUSPECT = ("suspect", "names the cause of the hang or failure; the command exits 3")
    WARNING = ("warning", "abnormal and maybe related: a symptom, a timeout every rank printed, a node not read")
    WAITING = ("waiting", "ranks that only wait for others (waits_for says for whom): never the cause")
    INFO = ("info", "notable, not abnormal")


SEVERITY_ORDER: dict[Severity, int] = {s: i for i, s in enumerate(Severity)}
"""Sort key of :attr:`Finding.severity`, most important first."""


class SourceKind(DocumentedEnum):
    """The kinds of evidence, one reader each (``hangdbg.evidence``)."""

    STACKS = ("stacks", "py-spy dump texts and `hangdbg dump -o` directories (and the joint analysis of all stacks)")
    CORE = ("core", "ELF core files, read with gdb and pystack")
    CORE_JSON = ("core-json", "the JSON document of `hangdbg core` (what `hangdbg collect` brings back per core)")
    STACK_TEXT = ("stack-text", "gdb / pstack / eu-stack / lldb / py-bt / faulthandler / PyTorch `frame #N:` texts")
    NCCL = ("nccl", "NCCL_DEBUG logs")
    TORCH_LOG = ("torch-log", "PyTorch watchdog / desync / torchrun logs and torchelastic error.json files")
    FLIGHT_RECORDER = ("flight-recorder", "PyTorch flight-recorder dumps (JSON or pickle) and fr_trace text output")
    NCCL_RAS = ("nccl-ras", "NCCL RAS reports (`ncclras` client output, NCCL >= 2.24)")
    GPU = ("gpu", "kernel logs with NVIDIA Xid lines and nvidia-smi -q outputs")
    TRACES = ("traces", "per-rank files of the `tracer` package (trace-HOST-RANK-PID.txt)")
    ERROR_LINES = ("error-lines", "every error-looking line of any text log, read with the error catalog (hangdbg/catalog)")
    NODES = ("nodes", "the fan-out itself: nodes of `dump --jobid/--hosts` or `collect` that could not be read")
    CHECK = ("check", "the diagnostics job of `hangdbg check` (collectives, bandwidth, bisection)")


class Kind(DocumentedEnum):
    """What a :class:`Finding` says. ``hangdbg schema --kinds`` lists these with their level
    (``level``: what a finding of the kind is about, :data:`KIND_LEVELS`) and description."""

    level: Level

    # the stack analysis (dump, analyze, demo, core, report)
    MISSING = ("missing", "ranks expected on the examined nodes that have no process (never started, or exited)")
    DEADLOCK = ("deadlock", "a rank whose thread waits for a lock that another of its threads waits on too")
    OUTSIDE_COLLECTIVE = ("outside-collective", "ranks in no collective while other ranks wait in one")
    DIFFERENT_COLLECTIVE = ("different-collective",
                            "ranks in another collective, or the same one from another call site, than the majority")
    BEHIND = ("behind", "ranks in the same place as others but at a lower loop counter (--locals)")
    AHEAD = ("ahead", "a few ranks at a higher loop counter than the majority in the same place (--locals)")
    P2P_MISMATCH = ("p2p-mismatch", "a point-to-point op nobody matches: a rank that never sent (or received) what its "
                    "peer waits for, or that receives from the wrong peer")
    STORE_KEY_MISSING = ("store-key-missing", "a rank that never set the store key another rank waits for")
    WAIT_CYCLE = ("wait-cycle", "ranks that wait for each other in a cycle nothing else explains (send/send, lock order)")
    UNDECIDED = ("undecided", "the stacks cannot decide between a hang and a slow step, or hide a C++ wait: what to collect")
    WAITING = ("waiting", "ranks that wait (in a collective, a p2p op, a store, a rendezvous) for the ranks in waits_for")
    UNREADABLE = ("unreadable", "ranks whose stack could not be taken (the error says why and how to fix it)")
    NODE_FAILED = ("node-failed", "a node of the fan-out that could not be read (unreachable, error, timeout)")
    NOT_SAVED = ("not-saved", "files of the output directory that could not be written (disk full, read-only, quota, "
                 "permission): the analysis is complete, only these files are missing on disk")
    STALL = ("stall", "hangdbg watch: the job stopped making progress (a log that stopped growing, stale heartbeats, or "
             "stacks unchanged while ranks wait); names the suspects of the dump taken then. In a post-mortem: a log "
             "without an error line that stops at a step that can wait forever (what that step waits for)")
    MIXED_JOBS = ("mixed-jobs", "the files given look like several unrelated jobs (world sizes, NCCL versions, dates differ)")
    # stack texts and core files
    CRASH = ("crash", "a backtrace text (gdb, lldb) shows a process stopped by a fatal signal")
    FATAL_ERROR = ("fatal-error", "faulthandler printed `Fatal Python error` for a rank")
    CPP_EXCEPTION = ("cpp-exception", "a PyTorch C++ exception trace (`frame #N:` lines)")
    ABORT_HANG = ("abort-hang", "a process that hangs in an NCCL communicator abort/destroy (ProcessGroupNCCL::abort)")
    CUDA_ERROR = ("cuda-error", "a failed CUDA check in a native stack (c10_cuda_check_implementation): broken CUDA context")
    COMM_INIT_FAILED = ("comm-init-failed", "a C++ trace of a failed NCCL communicator creation (broadcastUniqueNCCLID)")
    CUDA_STUCK = ("cuda-stuck", "a thread spinning in the CUDA driver under a CUDA runtime call (GPU not progressing)")
    CORE_CRASH = ("core-crash", "a core file of a process that crashed or aborted (SIGSEGV, SIGABRT, ...)")
    CORE_KILLED = ("core-killed", "a core file of a process that another process killed with a core-dumping signal")
    CORE_ON_DEMAND = ("core-on-demand", "a core file taken on demand (gcore): the process did not crash")
    CORE_UNREADABLE = ("core-unreadable", "a core file that could not be read (truncated, wrong executable, ...)")
    # NCCL_DEBUG logs
    NCCL_INIT_INCOMPLETE = ("nccl-init-incomplete", "ranks whose communicator init started but never completed")
    NCCL_CONNECT_FAILED = ("nccl-connect-failed", "a peer NCCL could not connect to, named by host")
    NCCL_SETUP_DIFFERS = ("nccl-setup-differs", "hosts whose NCCL set-up (version, plugin, interfaces) differs")
    NCCL_LAGGING = ("nccl-lagging", "ranks whose last opCount in a communicator lags (or leads) the others")
    NCCL_SLICE_DIFFERS = ("nccl-slice-differs", "the --split-on slice where a rank's collective counts first differ")
    NCCL_WARN = ("nccl-warn", "NCCL WARN lines")
    NCCL_ABORTED = ("nccl-aborted", "ranks that aborted a communicator")
    NCCL_INIT_FAILED = ("nccl-init-failed", "ranks whose communicator init returned an error (a `-> N` chain through init.cc)")
    NCCL_BOOTSTRAP = ("nccl-bootstrap", "a bootstrap problem: a rank checked in twice, a bootstrap on a virtual interface")
    NCCL_P2P_BLOCKED = ("nccl-p2p-blocked", "a single-node job that stops after GPU set-up: PCIe ACS / IOMMU blocking P2P")
    NCCL_OP_MISMATCH = ("nccl-op-mismatch", "ranks of a communicator that issued another collective (type, count, "
                        "datatype, reduction or root) at the same opCount")
    # PyTorch and torchrun logs
    CHILD_FAILED = ("child-failed", "torchrun's first failed rank (ChildFailedError), with its exit code or signal")
    CHILD_ERROR = ("child-error", "the earliest torchelastic error.json that no torchrun summary names")
    DESYNC_REPORT = ("desync-report", "ranks named by PyTorch's desync debug report")
    SEQ_LAGGING = ("seq-lagging", "ranks whose last SeqNum in a process group lags (or leads) the others")
    NO_TIMEOUT = ("no-timeout", "ranks that printed no watchdog timeout while the others did")
    DUMP_SIGNAL = ("dump-signal", "the rank that detected a timeout first and signalled the others to dump")
    WATCHDOG_TIMEOUT = ("watchdog-timeout", "ranks whose collective watchdog timed out (usually a symptom)")
    COLLECTIVE_MISMATCH = ("collective-mismatch", "a rank running another collective (op, sizes, sequence number) than "
                           "the others, per TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint check")
    MODEL_MISMATCH = ("model-mismatch", "a rank whose DDP model (parameter count) differs from the other ranks'")
    COLLECTIVE_DATA = ("collective-data", "a collective delivered wrong data (gathered values contradict a rank's own): "
                       "the transport, not a rank")
    WATCHDOG_HUNG = ("watchdog-hung", "the NCCL watchdog or a process group's abort itself hung (heartbeat monitor)")
    BARRIER_MISSING = ("barrier-missing", "ranks that did not reach a monitored_barrier in time (rank 0 names them)")
    RANK_ERROR = ("rank-error", "a rank's own error: a NCCL error raised to Python, an application line naming the rank")
    OP_MISMATCH = ("op-mismatch", "ranks that run another collective (type or size) at the same SeqNum of a process group")
    FIRST_COLLECTIVE = ("first-collective", "the first collective of a process group never completed (init/connectivity)")
    LOG_INCOMPLETE = ("log-incomplete", "ranks whose only trace in the logs is a cut-off line: what they did is unknown")
    # flight recorder
    FR_MISMATCH = ("fr-mismatch", "the first collective or p2p exchange whose type, sizes or dtypes differ across ranks")
    FR_MISSING_RANK = ("fr-missing-rank", "ranks with no dump, whose record stops early, or that never posted a p2p op")
    FR_STUCK = ("fr-stuck", "collectives recorded but not completed")
    FR_CONTRADICTS = ("fr-contradicts", "the flight recorder and the stacks disagree about a rank")
    FR_AGREES = ("fr-agrees", "the flight recorder and the stacks agree")
    # NCCL RAS reports
    RAS_MISMATCH = ("ras-mismatch", "ranks of a communicator whose operation counts or status differ (NCCL RAS)")
    RAS_ERROR = ("ras-error", "ranks that reported an NCCL initialization or asynchronous error (NCCL RAS)")
    RAS_UNREACHABLE = ("ras-unreachable", "ranks or processes RAS got no data from (INCOMPLETE) or considers dead")
    RAS_OK = ("ras-ok", "NCCL RAS saw every communicator running with no error: NCCL's view only, not the job's")
    # kernel logs
    GPU_LOST = ("gpu-lost", "a GPU fell off the bus or is unusable until reset (Xid 79, the driver's report without a "
                "number, nvidia-smi cannot open it, NV_ERR_RESET_REQUIRED)")
    XID = ("xid", "an NVIDIA Xid error, with its meaning and the action that clears it")
    ECC = ("ecc", "uncorrectable ECC errors, failed or pending row remapping (nvidia-smi -q)")
    PCIE_AER = ("pcie-aer", "PCIe errors a device or port reported (kernel AER): a GPU's link or a root port")
    # hangdbg check
    CHECK_FAILED = ("check-failed", "hangdbg check: a node or GPU that fails the diagnostics job (by itself, or makes the "
                    "others fail), isolated by bisection; the action holds the sbatch --exclude value")
    CHECK_INTERFACE = ("check-interface", "hangdbg check: the job passes on another network interface than the one configured")
    CHECK_SLOW = ("check-slow", "hangdbg check: ranks, GPUs or nodes far below the median of a figure (bandwidth, "
                  "matmul TFLOP/s, memory copy)")
    CHECK_SETUP = ("check-setup", "hangdbg check: the launch does not fit the nodes (more ranks than visible GPUs with "
                   "nccl, two backends in one run) or a node's set-up differs from the others'")
    # tracer files
    TRACE_STOPPED = ("trace-stopped", "trace files without the tracer's end line: stopped, killed or still running")
    TRACE_DIVERGED = ("trace-diverged", "the first traced call that not all ranks made, or ranks whose trace stops elsewhere")
    # the error catalog (any text log)
    LAUNCH_ERROR = ("launch-error", "a launch configuration mistake a known message names (two ranks on one GPU, an "
                    "invalid device ordinal, a port in use): blames the launch, no rank or node")
    HARDWARE_ERROR = ("hardware-error", "a GPU, NIC or link fault a known message names, with its host and GPU")
    RESOURCE_ERROR = ("resource-error", "an exhausted or missing resource of a host a known message names (/dev/shm, "
                      "memory, disk, limits, a library)")
    KNOWN_ERROR = ("known-error", "a rank's own failure a known message names (a CUDA error, out of memory, an exception)")
    PEER_ERROR = ("peer-error", "a known message that says a peer failed or went away: the rank that printed it is a victim")
    ECHO = ("echo", "a known consequence of an earlier failure (a timeout, SIGTERM from the agent, an abort)")
    UNRECOGNISED_ERROR = ("unrecognised-error", "an error-looking line that no catalog entry matches, quoted")
    GPU_BLOCKED = ("gpu-blocked", "a rank whose GPU never started a collective (flight recorder: scheduled, not "
                   "started) while earlier work on its own stream runs: no peer is involved")


KIND_LEVELS: dict[Level, str] = {
    Level.RANK: "missing deadlock outside-collective different-collective behind ahead store-key-missing waiting unreadable "
                "crash fatal-error cpp-exception abort-hang comm-init-failed core-crash core-killed core-on-demand "
                "core-unreadable nccl-init-incomplete nccl-lagging nccl-slice-differs nccl-warn nccl-aborted nccl-init-failed "
                "child-failed child-error desync-report seq-lagging no-timeout dump-signal watchdog-timeout watchdog-hung "
                "barrier-missing rank-error log-incomplete fr-missing-rank fr-contradicts fr-agrees ras-error ras-unreachable "
                "trace-stopped known-error peer-error echo unrecognised-error",
    Level.NODE: "node-failed nccl-connect-failed nccl-p2p-blocked check-failed check-slow resource-error",
    Level.GPU: "cuda-error cuda-stuck gpu-lost xid ecc pcie-aer hardware-error gpu-blocked",
    Level.JOB: "p2p-mismatch wait-cycle undecided stall mixed-jobs nccl-setup-differs nccl-bootstrap nccl-op-mismatch "
               "collective-mismatch model-mismatch collective-data op-mismatch first-collective fr-mismatch fr-stuck "
               "ras-mismatch ras-ok check-interface check-setup trace-diverged launch-error",
    Level.TOOL: "not-saved",
}
"""The kinds of each :class:`Level` (values, space-separated): every :class:`Kind` is in exactly one."""
for _level, _values in KIND_LEVELS.items():
    for _value in _values.split():
        Kind(_value).level = _level
del _level, _values, _value


@dataclass(frozen=True, slots=True)
class Thread:
    """One thread of a process as seen by one py-spy dump.

    Attributes:
        thread_id: the thread id py-spy printed (OS tid in py-spy >= 0.3.10, a pthread id in hex
            before).
        name: the Python thread name (``"MainThread"``), or ``None`` when py-spy printed none.
        status: :class:`ThreadStatus` (``idle``, ``active``, ``active+gil``, ``unknown``).
        frames: innermost first.
    """

    thread_id: int
    name: str | None
    status: ThreadStatus
    frames: tuple[Frame, ...]

    @property
    def idle(self) -> bool:
        return self.status == ThreadStatus.IDLE

    @property
    def python_frames(self) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if not f.native)

    @property
    def stack_key(self) -> tuple[tuple[str, str, int | None], ...]:
        """The Python frames' identities, innermost first: what equivalence classes compare."""
        return tuple(f.key for f in self.frames if not f.native)


@dataclass(frozen=True, slots=True)
class RankDump:
    """Everything collected about one rank (one process of the job).

    Attributes:
        rank: global rank (``RANK``, ``SLURM_PROCID``, ...); when no rank variable exists the
            position among its siblings (see ``rank_source``).
        pid: the process id on ``host`` (``None`` for a dump read back without one).
        host: the node name.
        local_rank: ``LOCAL_RANK`` or equivalent, ``None`` when unknown.
        world_size: ``WORLD_SIZE`` or equivalent, ``None`` when unknown.
        local_world_size: ranks per node (``LOCAL_WORLD_SIZE``), ``None`` when unknown.
        threads: the threads of the last sample.
        samples: every sample's threads, oldest first (the last one is ``threads``); a single
            dump has one sample.
        error: why the stack could not be taken, with the remedy; ``None`` on success.
        state: :class:`DumpState`, decided where the dump is made: ``ok`` (``error`` is None),
            ``gone`` (the process exited while hangdbg looked; earlier samples may be kept) or
            ``unreadable`` (the default for a dump made with an ``error``).
        rank_source: the variable the rank came from (``"RANK"``, ``"order"``, ``"file name"``...).
        cmdline: the process command line.
        python: the interpreter version py-spy reported, if any.
        steps: what ``dump``'s adaptive collection added: ``native``/``locals`` (a ``--native``/``--locals`` pass),
            ``resampled`` (extra samples), ``retried`` (py-spy failed once), ``pystack`` (``pystack remote``).
        sample_times, started: Unix seconds each sample was taken (empty: unknown), the process started (or None).
    """

    rank: int
    pid: int | None = None
    host: str = ""
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    threads: tuple[Thread, ...] = ()
    samples: tuple[tuple[Thread, ...], ...] = ()
    error: str | None = None
    rank_source: str = ""
    cmdline: str = ""
    python: str | None = None
    steps: tuple[str, ...] = ()
    state: DumpState = DumpState.OK
    sample_times: tuple[float, ...] = ()
    started: float | None = None

    def __post_init__(self) -> None:
        """Raises ValueError for a ``gone`` or ``unreadable`` dump without an ``error``."""
        if self.error is not None and self.state == DumpState.OK:
            object.__setattr__(self, "state", DumpState.UNREADABLE)
        elif self.error is None and self.state != DumpState.OK:
            raise ValueError(f"rank {self.rank}: a dump in state {self.state} needs the error that says why")


@dataclass(frozen=True, slots=True)
class RankProcess:
    """A process found to be a rank, with what its environment says (what ``dump`` takes for its
    ranks; also ``OUT/processes.json``).

    ``rank_source`` names the variable the rank came from, or ``"order"`` when the rank is the
    process's position among its launcher's children (no rank variable was visible).
    """

    pid: int
    rank: int
    host: str
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    rank_source: str
    cmdline: str
    job: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TreeNode:
    """A node of the merged call-prefix tree (as LLNL STAT draws it).

    ``frame`` is ``None`` at the root; ``ranks`` are the ranks whose stack passes through this
    node; children are ordered by their lowest rank.
    """

    frame: Frame | None
    ranks: frozenset[int]
    children: tuple["TreeNode", ...] = ()


@dataclass(frozen=True, slots=True)
class Place:
    """Where one rank's chosen thread is, in field terms.

    Attributes:
        kind: :class:`PlaceKind`: ``collective`` (inside a torch.distributed / c10d collective),
            ``init`` (in ``init_process_group``, a rendezvous or a store barrier), ``outside``
            (anywhere else) or ``unknown`` (no stack).
        collective: the collective's name (``"all_reduce"``), for kind ``collective`` (the
            init function's for ``init``).
        call_site: the user frame that called into torch.distributed (or the top frame for
            ``outside``).
        thread: the name of the thread this describes.
    """

    kind: PlaceKind
    collective: str | None = None
    call_site: Frame | None = None
    thread: str | None = None

    def describe(self) -> str:
        site = f" at {self.call_site.short_file}:{self.call_site.line}" if self.call_site else ""
        if self.kind == PlaceKind.COLLECTIVE:
            return f"in {self.collective}{site}"
        if self.kind == PlaceKind.INIT:
            return f"in {self.collective or 'rendezvous'}{site}"
        if self.kind == PlaceKind.OUTSIDE and self.call_site is not None:
            return f"in {self.call_site}"
        return "stack unknown"


@dataclass(frozen=True, slots=True)
class EquivalenceClass:
    """An equivalence class: ranks whose chosen thread has the same Python stack."""

    ranks: tuple[int, ...]
    frames: tuple[Frame, ...]
    place: Place
    thread: str | None = None


# --- Blame ------------------------------------------------------------------------------------
MAX_EVIDENCE_TEXT = 500
"""Raw evidence lines are cut to this many characters."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """The raw text behind a finding.

    Attributes:
        source: the file it came from, as given to the reader (``"stacks"`` for the joint stack
            analysis of several files).
        line: 1-based line number in that file, ``None`` for a fact about the whole file.
        text: the raw line, cut to :data:`MAX_EVIDENCE_TEXT` characters here (decoding errors
            replaced by the reader).
    """

    source: str
    line: int | None
    text: str

    def __post_init__(self) -> None:
        if len(self.text) > MAX_EVIDENCE_TEXT:
            object.__setattr__(self, "text", self.text[:MAX_EVIDENCE_TEXT])


@dataclass(frozen=True, slots=True)
class Finding:
    """One conclusion: who is to blame (or what is notable, or who waits for whom) and why.

    The one blame object of hangdbg: the live stack analysis, every post-mortem reader and the
    fan-out all produce these.

    Attributes:
        kind: what it says (:class:`Kind`).
        summary: one line for a human, naming ranks/hosts and the direction of a difference.
        ranks: the global ranks concerned (sorted), empty when only hosts/GPUs are known.
        hosts: the nodes concerned (sorted, distinct).
        gpus: GPUs concerned as ``host:PCI-bus-id`` or ``host:index``.
        severity: :class:`Severity`; ``suspect`` only for the cause of a hang or failure.
        evidence: the raw lines it rests on (a few, not all).
        action: what to do about it (``"drain the node"``, ``"reset the GPU"``), or ``""``.
        source: the kind of evidence it came from (set by the reader), ``None`` when not known.
        waits_for: for ranks that wait (severity ``waiting``): the ranks they wait for.
    """

    kind: Kind
    summary: str
    ranks: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    severity: Severity = Severity.SUSPECT
    evidence: tuple[Evidence, ...] = ()
    action: str = ""
    source: SourceKind | None = None
    waits_for: tuple[int, ...] = ()

    @property
    def is_suspect(self) -> bool:
        return self.severity is Severity.SUSPECT


def suspects_of(findings: "Sequence[Finding]") -> tuple[Finding, ...]:
    """The findings of severity ``suspect``, in their order."""
    return tuple(f for f in findings if f.severity is Severity.SUSPECT)


def by_severity(findings: "Sequence[Finding]") -> list[Finding]:
    """``findings`` sorted by severity, most important first (stable within a severity)."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


class _HasFindings:
    """What every result with ``findings`` answers: its suspects, and whether one was named."""

    __slots__ = ()
    findings: tuple[Finding, ...]

    @property
    def suspects(self) -> tuple[Finding, ...]:
        """The findings of severity ``suspect``, in their order."""
        return suspects_of(self.findings)

    @property
    def found(self) -> bool:
        """True when a suspect was named (the CLI exits 3)."""
        return any(f.is_suspect for f in self.findings)


@dataclass(frozen=True, slots=True)
class Analysis(_HasFindings):
    """The result of analyzing the stacks of one job.

    Attributes:
        ranks: the dumps analyzed, sorted by rank.
        classes: the equivalence classes, largest first.
        tree: the merged call-prefix tree of the chosen threads.
        findings: the suspects, most important first, then the ranks that wait for them and the
            ranks that could not be read; no suspect when no rank stands out.
        missing_ranks: ranks expected on the examined nodes that have no process.
        headline: one sentence for a human (``hangdbg.headline``).
        places: where each rank is (rank -> Place).
        progressing: ranks whose stacks changed between samples.
        unreadable: ranks whose stack could not be taken.
        waits: what each rank waits on (the nodes of the wait-for graph), by rank.
        edges: who waits for whom (``hangdbg.stacks.waitfor``).
    """

    ranks: tuple[RankDump, ...]
    classes: tuple[EquivalenceClass, ...]
    tree: TreeNode
    findings: tuple[Finding, ...]
    missing_ranks: tuple[int, ...]
    headline: str
    places: dict[int, Place] = field(default_factory=dict)
    progressing: tuple[int, ...] = ()
    unreadable: tuple[int, ...] = ()
    waits: dict[int, RankWait] = field(default_factory=dict)
    edges: tuple[WaitEdge, ...] = ()

    @property
    def readable(self) -> bool:
        """False when ranks were given but not one stack could be read (the CLI exits 1)."""
        return bool(self.classes) or not self.ranks


# --- Post-mortem evidence -------------------------------------------------------------------
# What a dead job left behind (core files, NCCL_DEBUG logs, PyTorch watchdog / torchrun logs,
# flight-recorder dumps, kernel Xid lines, tracer files) is read by one reader per kind of
# evidence. Every reader returns a SourceReport: per-rank facts (RankState), conclusions (Finding)
# and typed facts of its own. ``hangdbg report`` merges the SourceReports of all files with the
# stack analysis into one Verdict.


@dataclass(frozen=True, slots=True)
class RankState:
    """What one source says about one rank at the end (a row of the report's per-rank table).

    Attributes:
        rank: global rank.
        host: node name, ``""`` when unknown.
        pid: process id on ``host``, ``None`` when unknown.
        last_collective: the last collective seen, e.g. ``"AllReduce"`` or ``"ALLREDUCE"``.
        seq: its sequence number (NCCL opCount / c10d SeqNum / flight-recorder seq id).
        group: the communicator or process group the ``seq`` belongs to, ``""`` for the default.
        state: short text: ``"init incomplete"``, ``"timed out"``, ``"exit 1"``, ``"SIGSEGV"``...
        source: the kind of evidence this came from.
    """

    rank: int
    host: str = ""
    pid: int | None = None
    last_collective: str | None = None
    seq: int | None = None
    group: str = ""
    state: str = ""
    source: SourceKind = SourceKind.STACKS


@dataclass(frozen=True, slots=True)
class FileError:
    """A file that could not be read, or that no reader took, with the reason."""

    file: str
    reason: str


F = TypeVar("F")
"""The type of a reader's own facts (``NcclFacts``, ``GpuFacts``...)."""


@dataclass(frozen=True, slots=True)
class SourceReport(_HasFindings, Generic[F]):
    """What one reader made of its files.

    Attributes:
        kind: the reader.
        files: the files read.
        findings: conclusions, most important first.
        ranks: per-rank facts.
        records: records of this kind found (NCCL records, log events, dumps, cores, stacks,
            trace files...): 0 means no file was recognised as this kind.
        lines_read: lines (or entries) looked at.
        lines_skipped: lines that looked like this kind but could not be parsed (counted, never
            raised).
        errors: files that could not be read at all, with the reason.
        facts: the reader's own typed facts (a frozen dataclass), ``None`` when nothing was read.
    """

    kind: SourceKind
    files: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    ranks: tuple[RankState, ...] = ()
    records: int = 0
    lines_read: int = 0
    lines_skipped: int = 0
    errors: tuple[FileError, ...] = ()
    facts: F | None = None


@dataclass(frozen=True, slots=True)
class ClassifiedFile:
    """One file looked at by ``hangdbg report`` and the readers that took it.

    Attributes:
        file: the path.
        kinds: the readers that recognised its content (empty when none did).
        reason: why no reader took it (or why it was skipped), ``""`` otherwise.
    """

    file: str
    kinds: tuple[SourceKind, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Verdict(_HasFindings):
    """``hangdbg report``: all evidence of one job merged into one verdict.

    Attributes:
        headline: one or two sentences for a human: who is to blame and why.
        findings: every finding of every source, the suspects first (most likely cause first: a
            rank named by several kinds of evidence ranks higher), then the others by severity.
        sources: every reader's report, in the order read.
        analysis: the stack analysis when stacks (py-spy dumps, cores) were among the inputs.
        rank_states: what each source says about each rank, sorted by rank.
        unparsed: files that no reader took or that could not be read.
        files: every file looked at, with the readers that took it.
    """

    headline: str
    findings: tuple[Finding, ...] = ()
    sources: tuple[SourceReport[Any], ...] = ()
    analysis: Analysis | None = None
    rank_states: tuple[RankState, ...] = ()
    unparsed: tuple[FileError, ...] = ()
    files: tuple[ClassifiedFile, ...] = ()

    @property
    def recognised(self) -> bool:
        """True when at least one file was recognised by a reader and read."""
        return any(s.records for s in self.sources)
