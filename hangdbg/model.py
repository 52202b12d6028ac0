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

from .enums import DumpState, ObjectPhase, PlaceKind, ThreadStatus
from .kinds import (KIND_LEVELS as KIND_LEVELS, SEVERITY_ORDER as SEVERITY_ORDER, Kind as Kind,  # the finding model
                    Severity as Severity, SourceKind as SourceKind)
from .frames import Frame
from .waits import ProcFacts, RankWait, WaitEdge

SCHEMA_VERSION = 4
"""Version of the JSON documents written by ``--json`` and ``-o/--out`` (bumped on incompatible
changes; ``hangdbg schema`` prints their JSON Schema). 4: the equivalence classes are
``stacks.classes`` (``groups`` in 2 and 3; ``groups`` now only ever means process groups)."""




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
        proc: what ``/proc`` said of a blocked rank at dump time (:class:`~hangdbg.waits.ProcFacts`), else None.
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
    proc: ProcFacts | None = None
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

    ``frame`` is ``None`` at the root; ``ranks`` are the ranks whose stack passes through this node; children are
    ordered by their lowest rank."""

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
        phase: :class:`ObjectPhase` inside an object collective (``all_gather_object``...), else ``None``.
    """

    kind: PlaceKind
    collective: str | None = None
    call_site: Frame | None = None
    thread: str | None = None
    phase: ObjectPhase | None = None

    def describe(self) -> str:
        site = f" at {self.call_site.short_file}:{self.call_site.line}" if self.call_site else ""
        if self.kind in (PlaceKind.COLLECTIVE, PlaceKind.INIT):
            unpickling = " (unpickling what it received)" if self.phase == ObjectPhase.UNPICKLE else ""
            return f"in {self.collective or 'rendezvous'}{unpickling}{site}"
        if self.kind == PlaceKind.OUTSIDE and self.call_site is not None:
            return (f"pickling its object for {self.collective} " if self.phase == ObjectPhase.PICKLE else "") + f"in {self.call_site}"
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
