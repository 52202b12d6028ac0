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
