"""Every file hangdbg writes under ``-o DIR``, written one way, and output directories owned per run.

**Writing.** The methods of :class:`OutDir` (``save_text``, ``save_bytes``, ``save_chunk``,
``append_text``) are the only writers of an output directory (raw py-spy outputs, the fan-out's node files and
statuses, the JSON documents, HTML, ``nccl split`` files). A file is written to ``NAME.part`` and
renamed (a reader never sees half a file). A file is always created anew, never opened
through a symlink (``O_EXCL | O_NOFOLLOW``; the rename replaces a link at ``NAME`` rather
than following it): a link planted in ``-o`` cannot make hangdbg write outside it. When it
cannot be written (``ENOSPC`` disk full, ``EDQUOT``, ``EROFS``, ``EACCES``, or any other ``OSError``) the partial file is removed, the
file is recorded as *not saved* with the reason (:attr:`OutDir.not_saved`, one list per run) and the caller goes on: the
analysis of what was collected is the point, so it is still printed, and the command's document
gets a ``not-saved`` warning naming the files (the exit status is not changed by it).

**Before any work.** :func:`check_writable` creates ``-o DIR`` and writes a probe file in it: a
directory that cannot be created (a regular file in the way) or written (read-only, no
permission, full) is a :class:`~hangdbg.errors.UsageError` (exit 2) that says to choose another
directory, before a single rank is dumped.

**One run per directory.** ``dump`` and ``collect`` write raw outputs that readers
(``analyze DIR``, ``report DIR``) take all of. Were a second run allowed into the directory of
a first, a node or rank that failed this time would still have its old stacks there, read as
current. So :func:`claim` refuses a directory that holds another run's output (exit 2); with
``--force`` it first removes that run's files, hangdbg's own names only (:data:`OWN_ENTRIES`,
the hosts' directories of a ``collect``, core files, ``.part`` leftovers), never the user's
other files. Refusing is what a user expects of a tool that writes evidence: nothing is mixed
and nothing is deleted unasked. The run then writes its marker :data:`RUN_MARKER` (id, time,
command, host, pid).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

from .errors import UsageError
from .model import Finding, Kind, Severity
from .redact import mask_argv

__all__ = ["NotSaved", "OutDir", "make_dirs", "FILE_MODE", "DIR_MODE", "run_path", "unique_name", "not_saved_finding", "not_saved_note", "RUN_MARKER", "OWN_ENTRIES", "check_writable", "claim", "holds_a_run"]

RUN_MARKER = ".hangdbg-run.json"
"""The marker a ``dump``/``collect`` run writes into its output directory."""

OWN_ENTRIES = ("raw", "nodes", "processes.json", "hangdbg.json", "store.json", "ops.json", "collect.json",
               "report.json", "report.html", "check.json", "trials", RUN_MARKER)
"""Top-level names of a ``dump``/``collect``/``check`` output directory (besides core files and hosts' dirs)."""

FILE_MODE = 0o600
"""The mode of every file hangdbg writes into an output directory: owner-only. Dumps hold stacks,
local variables, command lines and host names; cores hold every byte of a rank's memory.
systemd-coredump(8) likewise keeps the cores it stores out of other users' reach (root-owned, read
access granted to the crashed process's owner only), and dumps often land on shared file systems."""

DIR_MODE = 0o700
"""The mode of every directory hangdbg creates under (and as) an output directory. A directory the
user made before (``-o`` naming an existing one) keeps its own mode: hangdbg never widens or
narrows what it did not create."""

CHOOSE_ANOTHER = "choose another output directory with -o DIR (on a writable file system with free space)"


@dataclass(frozen=True, slots=True)
class NotSaved:
    """A file that could not be written: ``path`` and ``reason`` (``strerror``, e.g. ``No space left on device``)."""

    path: str
    reason: str


def not_saved_finding(lost: Sequence[NotSaved]) -> Finding | None:
    """The ``not-saved`` warning naming the files of ``lost`` (None when every file was saved):
    the analysis is complete, only these files are missing on disk (the exit status is not
    changed by it)."""
    if not lost:
        return None
    reasons = sorted({n.reason for n in lost})
    names = ", ".join(n.path for n in lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
    return Finding(Kind.NOT_SAVED, f"{len(lost)} output file(s) not saved ({'; '.join(reasons)}): {names}",
                   severity=Severity.WARNING,
                   action="free space or choose another output directory with -o DIR; the analysis above is complete")


def not_saved_note(lost: Sequence[NotSaved]) -> str:
    """The headline's note about ``lost`` (``" (3 output file(s) not saved: No space left on device)"``), or ``""``."""
    if not lost:
        return ""
    return f" ({len(lost)} output file(s) not saved: {sorted({n.reason for n in lost})[0]})"


class OutDir:
    """One run's output directory, and the files of it that could not be written.

    Every file hangdbg writes under ``-o DIR`` is written by one of its methods (see the module
    docstring); a file that cannot be written is recorded in :attr:`not_saved` of *this* run,
    never in process-global state (``watch`` runs a ``dump`` per stall in the same process, each
    with its own directory and its own list). Thread-safe: py-spy results and node frames arrive
    from worker threads.

    Args:
        path: the directory (created by the writers as they need it; :func:`claim` it first).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._not_saved: list[NotSaved] = []
        self._failed_chunks: set[str] = set()

    def __truediv__(self, name: str | os.PathLike[str]) -> Path:
        return self.path / name

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"OutDir({str(self.path)!r})"

    @property
    def not_saved(self) -> tuple[NotSaved, ...]:
        """The files that could not be written so far, in the order they failed."""
        with self._lock:
            return tuple(self._not_saved)

    def record_not_saved(self, path: str | os.PathLike[str], reason: str) -> None:
        """Record that ``path`` was not saved (``reason``: the ``strerror``)."""
        with self._lock:
            self._not_saved.append(NotSaved(str(path), reason))

    def save_bytes(self, path: str | os.PathLike[str], data: bytes) -> bool:
        """Write ``data`` to ``path`` (absolute, or relative to this directory) atomically:
        ``path.part``, then renamed; parents created.

        Returns:
            True when saved; False when it could not be (``OSError``: disk full, quota, read-only,
            permission...): the partial file is removed and the file recorded (:attr:`not_saved`).
            Never raises for a write failure.
        """
        path = self.path / path
        tmp = path.with_name(path.name + ".part")
        try:
            make_dirs(path.parent)
            with _fresh(tmp) as f:
                f.write(data)
            tmp.replace(path)  # rename: a symlink at ``path`` is replaced, not followed
            return True
        except OSError as exc:
            _unlink(tmp)
            self.record_not_saved(path, _reason(exc))
            return False

    def save_text(self, path: str | os.PathLike[str], text: str) -> bool:
        """:meth:`save_bytes` of ``text`` in UTF-8 (unencodable characters replaced)."""
        return self.save_bytes(path, text.encode("utf-8", "replace"))

    def save_chunk(self, path: str | os.PathLike[str], offset: int, data: bytes, last: bool,
                   mode: int | None = None) -> bool:
        """Write one chunk (``offset``: bytes into the file) of a file that arrives in pieces: into
        ``path.part``; renamed to ``path`` when ``last``. A file one of whose chunks failed is
        removed and recorded once (:attr:`not_saved`); its later chunks are dropped. ``mode``
        (with ``last``): the permission bits of the file's source, which the copy keeps or narrows
        (``mode & FILE_MODE``, ``fchmod`` of the descriptor hangdbg made; never wider than 0600).

        Returns:
            True when the chunk was written.
        """
        path = self.path / path
        part = path.with_name(path.name + ".part")
        key = str(path)
        with self._lock:
            if key in self._failed_chunks:
                return False
        try:
            make_dirs(path.parent)
            with (_fresh(part) if offset == 0 else _existing(part, 0)) as f:
                f.seek(offset)
                f.write(data)
                if last and mode is not None:
                    os.fchmod(f.fileno(), FILE_MODE & mode)
            if last:
                part.replace(path)
            return True
        except OSError as exc:
            _unlink(part)
            with self._lock:
                self._failed_chunks.add(key)
            self.record_not_saved(path, _reason(exc))
            return False

    def append_text(self, path: str | os.PathLike[str], text: str, first: bool) -> bool:
        """Append ``text`` to ``path`` (created, or truncated when ``first``), for files written in
        many pieces (``nccl split``, check's messages). On failure the file is removed and
        recorded (:attr:`not_saved`).

        Returns:
            True when written.
        """
        path = self.path / path
        try:
            make_dirs(path.parent)
            with (_fresh(path) if first else _existing(path, os.O_APPEND)) as f:
                f.write(text.encode("utf-8", "replace"))
            return True
        except OSError as exc:
            _unlink(path)
            self.record_not_saved(path, _reason(exc))
            return False


def _reason(exc: OSError) -> str:
    if exc.errno is not None:
        return os.strerror(exc.errno)
    return str(exc)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _fresh(path: Path) -> IO[bytes]:
    """A new file at ``path`` open for binary writing; whatever was there (a stale ``.part``, a
    symlink planted in the output directory pointing out of it) is removed first, and the open
    neither follows a link nor reuses a file (``O_EXCL | O_NOFOLLOW``): hangdbg never writes
    through a link in ``-o``.

    Raises:
        OSError: as :func:`os.open` (no space, read-only, permission, a link re-planted meanwhile).
    """
    _unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    return os.fdopen(fd, "wb")


def make_dirs(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and its missing parents with :data:`DIR_MODE` (0700, whatever the umask:
    :func:`os.makedirs`' mode is narrowed by the umask and skips parents, so each directory made
    here is chmod'ed right after its ``mkdir``); directories that already exist are left as they are.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: as :func:`os.mkdir` (a file in the way: ``FileExistsError``; no permission...).
    """
    path = Path(path)
    missing = []
    for d in (path, *path.parents):
        if d.is_dir():
            break
        missing.append(d)
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            if not d.is_dir():
                raise
            continue  # made meanwhile by another writer (threads): theirs to chmod
        os.chmod(d, DIR_MODE)
    return path


def _existing(path: Path, flags: int) -> IO[bytes]:
    """``path`` open for binary writing with ``flags`` (``O_APPEND``...), not following a link
    (``O_NOFOLLOW``: ELOOP when ``path`` is one).

    Raises:
        OSError: as :func:`os.open`.
    """
    fd = os.open(path, os.O_WRONLY | flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    return os.fdopen(fd, "ab" if flags & os.O_APPEND else "r+b")


SUFFIX_BYTES = 3
"""Random bytes (``secrets.token_hex``: 6 hex digits) after the date of a default output name."""


def unique_name(prefix: str) -> str:
    """``PREFIX-YYYYmmdd-HHMMSS-XXXXXX`` (local time, ``XXXXXX``: 6 random hex digits): a default
    output name that runs started in the same second never share (a name of the date alone has
    1-second resolution: six watchers started together chose the same directory and five refused
    to run)."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(SUFFIX_BYTES)}"


def run_path(out: str | os.PathLike[str] | None, prefix: str) -> Path:
    """``out``, or ``./PREFIX-YYYYmmdd-HHMMSS-XXXXXX`` (:func:`unique_name`) when the user named none."""
    return Path(out) if out is not None else Path(unique_name(prefix))


def check_writable(out: str | os.PathLike[str]) -> Path:
    """Check that ``out`` can be created (with its parents) and a file written in it, leaving no
    trace: the directories it had to create are removed again (the command's writers create them
    when they write, so a usage error found later leaves no empty directory behind).

    Raises:
        UsageError: it cannot be created (a regular file in the way, no permission) or written
            (read-only file system, no permission, disk full); the help says to choose another.
    """
    out = Path(out)
    created = [d for d in (out, *out.parents) if _missing(d)]  # innermost first
    try:
        _probe(out)
    finally:
        for d in created:
            try:
                d.rmdir()
            except OSError:
                break
    return out


def _missing(path: Path) -> bool:
    """Whether ``path`` surely does not exist; one that cannot be looked at (a parent directory
    the user may not enter: ``EACCES``) is taken as existing, never as ours to remove."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def _probe(out: Path) -> None:
    try:
        make_dirs(out)
    except FileExistsError:
        raise UsageError(f"cannot create the output directory {out}: a file of that name is in the way",
                         help=CHOOSE_ANOTHER) from None
    except OSError as exc:
        raise UsageError(f"cannot create the output directory {out}: {_reason(exc)}", help=CHOOSE_ANOTHER) from None
    probe = out / f".hangdbg-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        with _fresh(probe) as f:
            f.write(b"hangdbg\n")
    except OSError as exc:
        raise UsageError(f"cannot write into the output directory {out}: {_reason(exc)}", help=CHOOSE_ANOTHER) from None
    finally:
        _unlink(probe)


def _core_or_part(name: str) -> bool:
    return name.startswith("core.rank") or name.endswith(".part")


def _host_dirs(out: Path) -> list[str]:
    """The hosts' directories of a ``collect`` (named by its ``nodes/HOST.json``)."""
    try:
        return [p.name[:-5] for p in (out / "nodes").iterdir() if p.name.endswith(".json")]
    except OSError:
        return []


def holds_a_run(out: Path) -> list[str]:
    """The top-level entries of ``out`` that another ``dump``/``collect`` run wrote (empty: none)."""
    try:
        names = set(os.listdir(out))
    except OSError:
        return []
    own = {n for n in names if n in OWN_ENTRIES or _core_or_part(n)}
    if own & {"raw", "nodes", "processes.json", "hangdbg.json", "collect.json", RUN_MARKER}:
        own |= names & set(_host_dirs(out))
        return sorted(own)
    return []


def _previous(out: Path) -> str:
    try:
        m = json.loads((out / RUN_MARKER).read_text(encoding="utf-8", errors="replace"))
        return f" (`hangdbg {m.get('command')}` at {m.get('time')})" if isinstance(m, dict) else ""
    except (OSError, ValueError):
        return ""


def claim(out: str | os.PathLike[str], command: str, argv: Sequence[str] = (), force: bool = False) -> OutDir:
    """Make ``out`` this run's output directory (see the module docstring): checked writable,
    refused when it holds another run's output unless ``force`` (then that output is removed
    first), and marked with :data:`RUN_MARKER` ``{"id", "time", "command", "argv", "host", "pid"}``
    (``argv``: the command line's words, secrets masked by :func:`hangdbg.redact.mask_argv`).

    Raises:
        UsageError: ``out`` cannot be created or written, or holds another run's output and not
            ``force`` (the help names ``--force`` and ``-o``).
    """
    out = check_writable(out)
    old = holds_a_run(out)
    if old and not force:
        raise UsageError(
            f"{out} already holds the output of another hangdbg run{_previous(out)}: {', '.join(old[:6])}"
            + (" ..." if len(old) > 6 else ""),
            help="choose a new directory with -o DIR, or pass --force to remove that run's files first "
                 "(hangdbg's own files only)")
    for name in old:
        p = out / name
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        except OSError as exc:
            raise UsageError(f"cannot remove {p} of the earlier run: {_reason(exc)}", help=CHOOSE_ANOTHER) from None
    marker = {"id": uuid.uuid4().hex, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": command,
              "argv": mask_argv(argv), "host": socket.gethostname(), "pid": os.getpid()}
    run = OutDir(out)
    if not run.save_text(RUN_MARKER, json.dumps(marker, indent=1) + "\n"):
        raise UsageError(f"cannot write into the output directory {out}: {run.not_saved[-1].reason}", help=CHOOSE_ANOTHER)
    return run

