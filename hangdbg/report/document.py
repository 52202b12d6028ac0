"""The JSON contract of hangdbg (``schema_version`` 4): one document type per command.

Every document starts with the same fields (:class:`Document`): ``schema_version``, ``tool``,
``version``, ``created``, ``command``, ``found`` (a suspect was named: the command exits 3),
``headline`` (the one sentence) and ``findings`` (every :class:`~hangdbg.model.Finding`, the
suspects first). Each command adds its own typed sections. These frozen dataclasses are the
only definition of the documents: :mod:`hangdbg.report.schema` serialises them (field by field,
in order) and derives the JSON Schema (draft 2020-12) that ``hangdbg schema`` prints from the
very same types; the tests validate every command's real output against that schema. Ranks are
always lists of ints; nothing nests deeper than a few levels (the call tree is a flat list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, Union

from ..check.blame import Bandwidth, CheckNode, RankResult
from ..evidence.core.facts import CoreFact, CoreFacts, CoreJsonFacts
from ..evidence.flight_recorder.facts import FrFacts
from ..evidence.gpu.facts import GpuFacts
from ..evidence.nccl.facts import NcclFacts
from ..evidence.nccl_ras.facts import RasFacts, RasQuery
from ..evidence.stacks.facts import StacksFacts, StackTextFacts
from ..evidence.torch_log.facts import TorchLogFacts
from ..evidence.traces.facts import TracesFacts
from ..evidence.error_lines.facts import ErrorLinesFacts
from ..evidence.last_stacks.facts import LastStacksFacts
from ..model import ClassifiedFile, FileError, Finding, RankProcess, RankState, SourceKind, Thread
from ..frames import Frame
from ..enums import NodeStatus, ObjectPhase, PlaceKind, ThreadStatus
from ..watch.records import StallRecord, StragglerReport
from ..waits import ProcFacts, RankWait, WaitEdge
from ..sources import RankSource

__all__ = [
    "Document", "StacksDocument", "ReportDocument", "NcclDocument", "LogsDocument", "FrDocument", "GpuDocument",
    "TracesDocument", "CoreDocument", "CollectDocument", "SplitDocument", "ProcessList", "DOCUMENTS",
    "StacksSection", "RankEntry", "ClassEntry", "PlaceEntry", "TreeEntry", "SourceSection", "NodeEntry",
    "CoreEntry", "CoreWritten", "SplitRow", "AnyFacts", "NodeDocument", "WatchDocument",
    "CheckDocument", "TrialEntry", "ErrorDocument",
]

F = TypeVar("F")

AnyFacts = Union[NcclFacts, TorchLogFacts, FrFacts, GpuFacts, CoreFacts, CoreJsonFacts, StackTextFacts, StacksFacts,
                 TracesFacts, RasFacts, ErrorLinesFacts, LastStacksFacts]
"""The facts of any reader (the ``sources`` of ``hangdbg report``)."""


# --- the stack analysis ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PlaceEntry:
    """Where a rank's chosen thread is (:class:`hangdbg.model.Place`), with ``text`` for people."""

    kind: PlaceKind
    collective: str | None
    call_site: Frame | None
    thread: str | None
    text: str
    phase: ObjectPhase | None = None
    """Inside an object collective: where in it (:class:`hangdbg.enums.ObjectPhase`)."""


@dataclass(frozen=True, slots=True)
class ClassEntry:
    """An equivalence class: ranks whose chosen thread has the same Python stack (innermost first)."""

    ranks: tuple[int, ...]
    count: int
    thread: str | None
    place: PlaceEntry
    frames: tuple[Frame, ...]


@dataclass(frozen=True, slots=True)
class ThreadEntry:
    """One thread of a rank's last sample. Its stack is ``stacks.stack_table[stack]`` (innermost
    first): each distinct stack is written once however many ranks have it, which keeps the
    document of a 100,000-rank job to tens of MB (schema_version 3; in 2 every thread carried its
    ``frames``)."""

    thread_id: int
    name: str | None
    status: ThreadStatus
    stack: int


@dataclass(frozen=True, slots=True)
class RankEntry:
    """One rank: where it ran, where it is, what it waits on (``wait``) and by which edges of the
    wait-for graph it waits (``edges``: indexes into ``stacks.edges``, whose ``targets`` are the
    ranks it waits for), what the adaptive collection added (``steps``: native, locals,
    resampled, retried, pystack), and every thread of its last sample (``threads``, each
    naming its stack in ``stacks.stack_table``); for a rank blocked outside torch.distributed on a live
    dump, what ``/proc`` said of it (``proc``: :class:`hangdbg.waits.ProcFacts`); ``sample_times``: when
    each sample was taken, Unix seconds (empty when unknown: what the progress-before-blame window measured)."""

    rank: int
    host: str
    pid: int | None
    local_rank: int | None
    world_size: int | None
    rank_source: str
    error: str | None
    place: PlaceEntry | None
    progressing: bool
    samples: int
    steps: tuple[str, ...]
    wait: RankWait | None
    edges: tuple[int, ...]
    threads: tuple[ThreadEntry, ...]
    proc: ProcFacts | None = None
    sample_times: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """A node of the merged call-prefix tree (as LLNL STAT draws it): the ranks whose stack passes
    through ``frame`` (``None`` at the root, ``id`` 0). The tree is a flat list in depth-first
    order: a node's ``parent`` is the ``id`` of the node it hangs from (``None`` for the root), and
    siblings come in the order of their lowest rank. Flat, so that no JSON reader meets a nesting
    as deep as the deepest stack."""

    id: int
    parent: int | None
    depth: int
    ranks: tuple[int, ...]
    count: int
    frame: Frame | None


@dataclass(frozen=True, slots=True)
class StacksSection:
    """The stack analysis: its headline, the ranks missing, progressing and unreadable, the
    equivalence classes (``classes``, largest first; ``groups`` before schema_version 4), every rank, the merged tree (nodes, root first), the
    edges of the wait-for graph (``waiter`` waits for ``target``), and the distinct stacks of
    the ranks' threads (``stack_table``, innermost first; ``ranks[].threads[].stack`` indexes
    it)."""

    headline: str
    missing_ranks: tuple[int, ...]
    progressing_ranks: tuple[int, ...]
    unreadable_ranks: tuple[int, ...]
    classes: tuple[ClassEntry, ...]
    ranks: tuple[RankEntry, ...]
    tree: tuple[TreeEntry, ...]
    edges: tuple[WaitEdge, ...]
    stack_table: tuple[tuple[Frame, ...], ...]


# --- post-mortem sources -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SourceSection(Generic[F]):
    """What one reader read (its findings are in the document's ``findings``, each with its
    ``source``): files, records of its kind found, lines read and skipped, unreadable files,
    per-rank states and its own typed facts."""

    kind: SourceKind
    files: tuple[str, ...]
    records: int
    lines_read: int
    lines_skipped: int
    errors: tuple[FileError, ...]
    ranks: tuple[RankState, ...]
    facts: F | None


# --- fan-out and collection --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NodeEntry:
    """What became of one node of ``dump --jobid/--hosts`` or ``collect``.

    ``status`` (:class:`~hangdbg.enums.NodeStatus`): ``ok``, ``no-ranks`` (the agent found none),
    ``nothing`` (``collect``: no file asked for is there), ``error``, ``unreachable``, ``no-hangdbg``,
    ``timeout``, ``no-answer`` (``failed``: a node of ``check`` whose rank failed, never here);
    ``reason`` says why; ``ranks`` the ranks dumped, ``files`` the files sent (``collect``);
    ``seconds`` how long it took; ``raw_dir`` where the node kept its raw py-spy outputs on its
    own disk (``dump`` without ``--fetch-raw``; None when it kept none).
    """

    host: str
    status: NodeStatus
    reason: str | None
    ranks: tuple[int, ...]
    files: tuple[str, ...]
    seconds: float | None
    raw_dir: str | None = None


@dataclass(frozen=True, slots=True)
class CoreWritten:
    """A core file ``dump --core`` wrote with gcore (``path`` is ``None`` and ``error`` says why
    when it could not); ``size`` in bytes, ``seconds`` taken."""

    rank: int
    pid: int
    path: str | None
    size: int
    seconds: float
    error: str | None


@dataclass(frozen=True, slots=True)
class CoreEntry(CoreFact):
    """One core file read by ``hangdbg core``: its facts, the rank's details and every thread
    (native and Python frames merged, innermost first)."""

    local_rank: int | None
    world_size: int | None
    python: str | None
    cmdline: str
    error: str | None
    threads: tuple[Thread, ...]


@dataclass(frozen=True, slots=True)
class SplitRow:
    """One process ``nccl split`` wrote: its rank (``None`` when unknown), host and pid, the files
    (``rankN.log``, ``HOST.PID.log``; per slice with ``--split-on``) and the lines written."""

    rank: int | None
    host: str
    pid: int
    files: tuple[str, ...]
    lines: int


# --- documents -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Document:
    """The fields every command's document starts with.

    Attributes:
        schema_version: 4 (:data:`hangdbg.model.SCHEMA_VERSION`; 4 named the equivalence classes
            ``stacks.classes``, ``groups`` in 2 and 3).
        tool: ``"hangdbg"``.
        version: hangdbg's version.
        created: when (ISO 8601, UTC).
        command: the command (``"dump"``, ``"nccl summary"``...).
        found: a suspect was named (the command exits 3).
        headline: the one sentence.
        findings: every finding, the suspects first (most likely cause first).
    """

    schema_version: Literal[4]
    tool: Literal["hangdbg"]
    version: str
    created: str
    command: str
    found: bool
    headline: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class StacksDocument(Document):
    """``dump``, ``analyze``, ``demo``: the stack analysis of a job.

    ``out_dir``: where the raw outputs are (``dump``, ``demo``); ``inputs``: the paths read
    (``analyze``); ``garbled_lines``: lines of the inputs (or of the agents' output) skipped;
    ``nodes``: every node asked (``--jobid/--hosts/--hostfile``); ``cores``: ``dump --core``;
    ``ras``: what ``dump`` did with NCCL RAS (absent from older documents, null when not asked).
    """

    command: Literal["dump", "analyze", "demo"]
    collector_host: str
    out_dir: str | None
    inputs: tuple[str, ...]
    garbled_lines: int
    stacks: StacksSection
    nodes: tuple[NodeEntry, ...]
    cores: tuple[CoreWritten, ...]
    ras: RasQuery | None = None
    sources: tuple[RankSource, ...] = ()
    """``dump``: per rank and source (py-spy, the torch debug server, the flight recorder's pipe)
    what it gave or why not (:class:`hangdbg.sources.RankSource`)."""


@dataclass(frozen=True, slots=True)
class ReportDocument(Document):
    """``report``: one verdict from every kind of evidence.

    ``sources``: what each reader read; ``ranks``: what each source says about each rank;
    ``files``: every file looked at and the readers that took it; ``unparsed``: files no reader
    took or that could not be read; ``stacks``: the joint stack analysis, when stacks were read.
    """

    command: Literal["report"]
    inputs: tuple[str, ...]
    out_dir: str | None
    sources: tuple[SourceSection[AnyFacts], ...]
    ranks: tuple[RankState, ...]
    files: tuple[ClassifiedFile, ...]
    unparsed: tuple[FileError, ...]
    stacks: StacksSection | None


@dataclass(frozen=True, slots=True)
class NcclDocument(Document):
    """``nccl summary``: NCCL_DEBUG logs."""

    command: Literal["nccl summary"]
    inputs: tuple[str, ...]
    source: SourceSection[NcclFacts]


@dataclass(frozen=True, slots=True)
class LogsDocument(Document):
    """``logs``: PyTorch watchdog / desync / torchrun logs and ``error.json`` files."""

    command: Literal["logs"]
    inputs: tuple[str, ...]
    source: SourceSection[TorchLogFacts]


@dataclass(frozen=True, slots=True)
class FrDocument(Document):
    """``fr``: flight-recorder dumps."""

    command: Literal["fr"]
    inputs: tuple[str, ...]
    source: SourceSection[FrFacts]


@dataclass(frozen=True, slots=True)
class GpuDocument(Document):
    """``gpu``: kernel logs (Xid) and ``nvidia-smi -q`` outputs."""

    command: Literal["gpu"]
    inputs: tuple[str, ...]
    source: SourceSection[GpuFacts]


@dataclass(frozen=True, slots=True)
class TracesDocument(Document):
    """``traces``: the files of the ``tracer`` package."""

    command: Literal["traces"]
    inputs: tuple[str, ...]
    source: SourceSection[TracesFacts]


@dataclass(frozen=True, slots=True)
class CoreDocument(Document):
    """``core``: core files, each with every thread, and their joint stack analysis (also what
    ``collect`` brings back per core file, read again by ``report``)."""

    command: Literal["core"]
    inputs: tuple[str, ...]
    source: SourceSection[CoreFacts]
    cores: tuple[CoreEntry, ...]
    stacks: StacksSection


@dataclass(frozen=True, slots=True)
class CollectDocument(Document):
    """``collect``: what every node sent, under ``out_dir/<host>/``."""

    command: Literal["collect"]
    out_dir: str
    nodes: tuple[NodeEntry, ...]
    garbled_lines: int


@dataclass(frozen=True, slots=True)
class SplitDocument(Document):
    """``nccl split``: the per-rank files written to ``out_dir``."""

    command: Literal["nccl split"]
    inputs: tuple[str, ...]
    out_dir: str
    files: tuple[SplitRow, ...]
    unattributed_lines: int


@dataclass(frozen=True, slots=True)
class ProcessList(Document):
    """``OUT/processes.json`` of ``dump``: the processes taken for ranks, written before their
    stacks are taken (no finding yet)."""

    command: Literal["dump", "demo"]
    collector_host: str
    processes: tuple[RankProcess, ...]


@dataclass(frozen=True, slots=True)
class NodeDocument(Document):
    """``OUT/nodes/HOST.json`` of ``dump --jobid/--hosts`` and ``collect``: one node's status,
    written as soon as it is known (a ``node-failed`` finding when it could not be read)."""

    command: Literal["dump", "collect"]
    node: NodeEntry


@dataclass(frozen=True, slots=True)
class WatchDocument(Document):
    """``watch``: the stalls seen while watching a job (``OUT/watch.json``, rewritten after every
    stall and at the end); ``found`` when a stall was declared.

    Attributes:
        targets: what was watched (``--pid 123``, ``--jobid 42``, ``--hosts node[1-2]``).
        out_dir: where the stall dumps go.
        signals: the signals watched (``log``, ``heartbeat``, ``stacks``).
        stall_seconds: ``--stall``.
        interval_seconds: ``--interval``.
        observations: how many times the signals were read.
        ended: why the watch ended: ``job-ended``, ``once`` (``--once`` after a stall),
            ``max-stalls`` (after ``--max-stalls`` stalls), ``interrupted`` (Ctrl-C or a signal),
            ``running`` (a document written during the watch).
        stalls: the stalls, oldest first.
        stragglers: the latest straggler report of ``--straggler-every N`` (None: not asked, or not
            enough steps compared yet); its ``straggler`` findings are among ``findings``.
        warnings: what made the watch less sure, oldest first (a ``--log`` missing, deleted,
            replaced or truncated, so that the stacks were watched instead; the stall cap reached).
    """

    command: Literal["watch"]
    targets: str
    out_dir: str
    signals: tuple[str, ...]
    stall_seconds: float
    interval_seconds: float
    observations: int
    ended: Literal["job-ended", "once", "max-stalls", "interrupted", "running"]
    stalls: tuple[StallRecord, ...]
    stragglers: StragglerReport | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TrialEntry:
    """One run of ``hangdbg check``'s diagnostics job.

    Attributes:
        number: 1 is the run on every node; later ones are the interface retry and bisection.
        purpose: ``all``, ``interface`` (another network interface), ``bisect nodes``,
            ``bisect HOST`` (the GPUs of a node).
        layout: ``host:slots`` of every node it ran on, in rank order.
        ifname: the interface hangdbg set (``auto``: the route to the rendezvous), None: the nodes' own.
        master: the rendezvous ``address:port``.
        passed: every rank passed every step.
        failed_step: the first step a rank did not pass.
        blamed: what it blamed, one line per cause (:func:`hangdbg.check.blame.blame`).
        seconds: its wall time.
        log: its messages as they arrived (``OUT/trials/NN-PURPOSE/messages.jsonl``).
    """

    number: int
    purpose: str
    layout: tuple[str, ...]
    ifname: str | None
    master: str
    passed: bool
    failed_step: str | None
    blamed: tuple[str, ...]
    seconds: float
    log: str


@dataclass(frozen=True, slots=True)
class CheckDocument(Document):
    """``check``: the diagnostics job, its figures and the bisection of a failure; ``found``
    when a node or GPU fails.

    Attributes:
        targets: what was checked (``--nproc-per-node 4``, ``--jobid 42``, ``--hosts node[1-8]``).
        backend: ``gloo`` or ``nccl``.
        out_dir: the raw messages of every trial.
        world_size: ranks of the first trial (every node).
        bad_nodes: nodes to leave out; bad_gpus: ``host:slot`` of GPUs to leave out.
        exclude: ``bad_nodes`` as the value of ``sbatch --exclude=``.
        bandwidth: the bandwidth test of the largest trial that passed (None: none passed).
        nodes, ranks: the first trial's nodes and ranks, with their facts and step results.
        trials: every trial, in order.
    """

    command: Literal["check"]
    targets: str
    backend: str
    out_dir: str | None
    world_size: int
    bad_nodes: tuple[str, ...]
    bad_gpus: tuple[str, ...]
    exclude: str | None
    bandwidth: Bandwidth | None
    nodes: tuple[CheckNode, ...]
    ranks: tuple[RankResult, ...]
    trials: tuple[TrialEntry, ...]


@dataclass(frozen=True, slots=True)
class ErrorDocument:
    """What ``--json`` prints on stdout when a command fails without a document of its own (a usage
    error, a tool error, an interrupt); the same text goes to stderr.

    Attributes:
        schema_version: 4 (:data:`hangdbg.model.SCHEMA_VERSION`).
        tool: ``"hangdbg"``.
        version: hangdbg's version.
        command: the subcommand, when the command line named one (null for a usage error before it).
        error: the error message (as ``hangdbg: error:`` prints it on stderr).
        help: what to do about it, when hangdbg knows (null otherwise).
        exit: the exit status: 2 usage, 1 tool error or interrupt.
    """

    schema_version: Literal[4]
    tool: Literal["hangdbg"]
    version: str
    command: str | None
    error: str
    help: str | None
    exit: int


DOCUMENTS: tuple[type, ...] = (StacksDocument, ReportDocument, NcclDocument, LogsDocument, FrDocument, GpuDocument,
                               TracesDocument, CoreDocument, CollectDocument, SplitDocument, ProcessList, NodeDocument,
                               WatchDocument, CheckDocument, ErrorDocument)
"""Every document hangdbg writes; ``hangdbg schema`` describes their union."""
