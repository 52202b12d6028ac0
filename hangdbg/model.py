"""The data of hangdbg: frozen dataclasses, no I/O.

Everything above this module (collectors, parsers, the analyzer, reporters) speaks in these types.
A py-spy dump becomes :class:`Thread` objects made of :class:`Frame` objects; one process of a
job becomes a :class:`RankDump`; the analyzer turns a list of ``RankDump`` into an
:class:`Analysis` (equivalence classes, the merged call tree and the suspects).

Frame order follows py-spy: ``Thread.frames[0]`` is the innermost frame (where the thread is),
``Thread.frames[-1]`` the outermost (``<module>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA_VERSION = 1
"""Version of the JSON documents written by ``--json`` and ``-o/--out`` (bumped on incompatible changes)."""

_PY_SUFFIXES = (".py", ".pyx", ".pyw", ".pyi")


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame.

    Attributes:
        function: the function name as py-spy prints it (``step``, ``<module>``,
            ``_exception_logger.<locals>.wrapper``, ``c10d::Work::wait``).
        file: the source file (Python frames) or the shared library (native frames,
            e.g. ``libc.so.6``), as printed by py-spy (short or full path).
        line: the line number, or ``None`` for native frames without debug information.
        native: True for frames of C/C++ code (py-spy ``--native``).
        locals: ``(name, repr)`` pairs from py-spy ``--locals`` (arguments first), else ``()``.
    """

    function: str
    file: str
    line: int | None = None
    native: bool = False
    locals: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple[str, str, int | None]:
        """The identity of a frame for merging stacks: (function, file, line), locals ignored."""
        return (self.function, self.file, self.line)

    @property
    def location(self) -> str:
        """``file:line`` (or just the library for native frames without a line)."""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    @property
    def short_file(self) -> str:
        """The file with site-packages / standard-library prefixes stripped (display only)."""
        return shorten_path(self.file)

    def __str__(self) -> str:
        loc = f"{self.short_file}:{self.line}" if self.line is not None else self.short_file
        return f"{self.function} ({loc})"


def shorten_path(path: str) -> str:
    """Strip the parts of a path that do not help a reader.

    ``/venv/lib/python3.11/site-packages/torch/distributed/x.py`` -> ``torch/distributed/x.py``;
    ``/usr/lib/python3.11/threading.py`` -> ``threading.py``; other absolute paths keep their
    last two components. Short names as py-spy prints them by default are returned unchanged.
    """
    if not path.startswith("/"):
        return path
    for marker in ("/site-packages/", "/dist-packages/"):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker):]
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].startswith("python3") and parts[i - 1] in ("lib", "lib64"):
            return "/".join(parts[i + 1:])
    return "/".join(parts[-2:])


def is_python_file(file: str) -> bool:
    """True when ``file`` names Python source (``.py``) or a pseudo-file like ``<string>``."""
    return file.endswith(_PY_SUFFIXES) or file.startswith("<")


@dataclass(frozen=True, slots=True)
class Thread:
    """One thread of a process as seen by one py-spy dump.

    Attributes:
        thread_id: the thread id py-spy printed (OS tid in py-spy >= 0.3.10, a pthread id in hex
            before).
        name: the Python thread name (``"MainThread"``), or ``None`` when py-spy printed none.
        status: ``"idle"``, ``"active"`` or ``"active+gil"``.
        frames: innermost first.
    """

    thread_id: int
    name: str | None
    status: str
    frames: tuple[Frame, ...]

    @property
    def idle(self) -> bool:
        return self.status == "idle"

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
        rank_source: the variable the rank came from (``"RANK"``, ``"order"``, ``"file name"``...).
        cmdline: the process command line.
        python: the interpreter version py-spy reported, if any.
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
        kind: ``"collective"`` (inside a torch.distributed / c10d collective), ``"init"`` (in
            ``init_process_group``, a rendezvous or a store barrier), ``"outside"`` (anywhere else)
            or ``"unknown"`` (no stack).
        collective: the collective's name (``"all_reduce"``), for kind ``"collective"``.
        call_site: the user frame that called into torch.distributed (or the top frame for
            ``"outside"``).
        thread: the name of the thread this describes.
    """

    kind: str
    collective: str | None = None
    call_site: Frame | None = None
    thread: str | None = None

    def describe(self) -> str:
        site = f" at {self.call_site.short_file}:{self.call_site.line}" if self.call_site else ""
        if self.kind == "collective":
            return f"in {self.collective}{site}"
        if self.kind == "init":
            return f"in {self.collective or 'rendezvous'}{site}"
        if self.kind == "outside" and self.call_site is not None:
            return f"in {self.call_site}"
        return "stack unknown"


@dataclass(frozen=True, slots=True)
class Group:
    """An equivalence class: ranks whose chosen thread has the same Python stack."""

    ranks: tuple[int, ...]
    frames: tuple[Frame, ...]
    place: Place
    thread: str | None = None


@dataclass(frozen=True, slots=True)
class Suspect:
    """Ranks the analyzer blames, with a one-line reason and a machine-readable kind.

    Kinds: ``missing``, ``different-collective``, ``outside-collective``, ``deadlock``,
    ``behind``, ``diverged``.
    """

    ranks: tuple[int, ...]
    reason: str
    kind: str
    hosts: tuple[str, ...] = ()
    """The nodes of those ranks (sorted, distinct), when known."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """The result of analyzing one job.

    Attributes:
        ranks: the dumps analyzed, sorted by rank.
        groups: equivalence classes, largest first.
        tree: the merged call-prefix tree of the chosen threads.
        suspects: the ranks blamed, most important first; empty when no rank stands out.
        missing_ranks: ranks expected on the examined nodes that have no process.
        verdict: one sentence for a human.
        places: where each rank is (rank -> Place).
        progressing: ranks whose stacks changed between samples.
        unreadable: ranks whose stack could not be taken.
    """

    ranks: tuple[RankDump, ...]
    groups: tuple[Group, ...]
    tree: TreeNode
    suspects: tuple[Suspect, ...]
    missing_ranks: tuple[int, ...]
    verdict: str
    places: dict[int, Place] = field(default_factory=dict)
    progressing: tuple[int, ...] = ()
    unreadable: tuple[int, ...] = ()

    @property
    def found_hang(self) -> bool:
        """True when suspects were named (the CLI exits 3)."""
        return bool(self.suspects)


# --- Post-mortem evidence -------------------------------------------------------------------
# What a dead job left behind (core files, NCCL_DEBUG logs, PyTorch watchdog / torchrun logs,
# flight-recorder dumps, kernel Xid lines) is read by one reader per kind of file. Every reader
# returns a SourceReport: per-rank facts (RankState) and conclusions (Finding), each finding
# carrying the raw lines behind it (Evidence). ``hangdbg report`` merges the SourceReports of all
# files with the stack analysis into one verdict.

MAX_EVIDENCE_TEXT = 500
"""Raw evidence lines are cut to this many characters."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """The raw text behind a finding.

    Attributes:
        source: the file it came from, as given to the reader.
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
    """One conclusion of a reader: who is to blame (or what is notable) and why.

    Attributes:
        kind: machine-readable, e.g. ``nccl-init-incomplete``, ``nccl-lagging``,
            ``nccl-connect-failed``, ``nccl-setup-differs``, ``watchdog-timeout``, ``seq-lagging``,
            ``child-failed``, ``fr-missing-rank``, ``fr-mismatch``, ``xid``, ``gpu-lost``,
            ``core-crash``, or a stack :class:`Suspect` kind.
        summary: one line for a human, naming ranks/hosts and the direction of a difference.
        ranks: the global ranks blamed (sorted), empty when only hosts/GPUs are known.
        hosts: the nodes blamed (sorted, distinct).
        gpus: GPUs blamed as ``host:PCI-bus-id`` or ``host:index``.
        severity: ``"suspect"`` (explains the failure), ``"warning"`` (abnormal, maybe related) or
            ``"info"``.
        evidence: the raw lines it rests on (a few, not all).
        action: what to do about it (``"drain the node"``, ``"reset the GPU"``), or ``""``.
    """

    kind: str
    summary: str
    ranks: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    severity: str = "suspect"
    evidence: tuple[Evidence, ...] = ()
    action: str = ""


SEVERITY_ORDER = {"suspect": 0, "warning": 1, "info": 2}
"""Sort key of :attr:`Finding.severity`, most important first (an unknown severity sorts last: ``.get(s, 3)``)."""


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
        source: the kind of file this came from (``"nccl"``, ``"torch-log"``...).
    """

    rank: int
    host: str = ""
    pid: int | None = None
    last_collective: str | None = None
    seq: int | None = None
    group: str = ""
    state: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class SourceReport:
    """What one reader made of its files.

    Attributes:
        kind: the reader (``"nccl"``, ``"torch-log"``, ``"flight-recorder"``, ``"xid"``,
            ``"core"``, ``"stacks"``).
        files: the files read.
        findings: conclusions, most important first.
        ranks: per-rank facts.
        lines_read: lines looked at.
        lines_skipped: lines that looked like this kind but could not be parsed (counted, never
            raised).
        errors: ``(file, reason)`` for files that could not be read at all.
        facts: small extra data for the JSON twin (counts, versions), JSON-serialisable.
    """

    kind: str
    files: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    ranks: tuple[RankState, ...] = ()
    lines_read: int = 0
    lines_skipped: int = 0
    errors: tuple[tuple[str, str], ...] = ()
    facts: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """``hangdbg report``: all evidence of one job merged into one verdict.

    Attributes:
        text: one or two sentences for a human: who is to blame and why.
        suspects: the findings of severity ``"suspect"``, most important first (a rank named
            by several kinds of evidence ranks higher).
        warnings: findings of severity ``"warning"``.
        sources: every reader's report, in the order read.
        analysis: the stack analysis when stacks (py-spy dumps, cores) were among the inputs.
        rank_states: per rank, what each source says (rank -> states, one per source).
        unparsed: ``(file, reason)`` for files that no reader took or that could not be read.
        files: ``(file, kinds)`` for every file looked at.
    """

    text: str
    suspects: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    sources: tuple[SourceReport, ...] = ()
    analysis: Analysis | None = None
    rank_states: dict[int, tuple[RankState, ...]] = field(default_factory=dict)
    unparsed: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def found_failure(self) -> bool:
        """True when suspects were named (the CLI exits 3)."""
        return bool(self.suspects)
