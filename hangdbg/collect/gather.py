"""Node side of ``hangdbg collect``: find the evidence on this node's local disks and send it home.

Evidence often sits where only the node can read it: ``NCCL_DEBUG_FILE=/tmp/nccl.%h.%p`` logs,
core files in the job's working directory, the kernel ring buffer. The agent expands the globs
here (``{host}`` becomes this node's name), turns each kind into something small *on the node*
(NCCL logs split per rank, core files into backtraces: a multi-GB core never crosses the
network), and sends the results as ``file`` messages of at most 1 MiB each, which the
coordinator writes under ``OUT/<host>/``. What cannot be read becomes a ``problem`` message;
the rest is still sent. Only regular files that are not links are taken, through no link below
the pattern's root, and only this user's unless ``--all-users`` (:mod:`hangdbg.collect.safe_open`);
a matched path not taken is a ``problem`` message starting ``skipped:`` with the reason (the node's
reason in the document), which does not fail the node. A copy keeps the source's permission bits
or narrower (``mode`` of the ``file`` messages; the coordinator writes ``mode & 0o600``).
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, NamedTuple

from ..evidence.own_output import GDB_TEXT_SUFFIX
from ..enums import NodeStatus
from ..outdir import OutDir
from .safe_open import Match, Skipped, matches, open_matched
from ..text.lines import open_input
from ..tools.subproc import run

__all__ = ["GatherOptions", "gather", "CHUNK_BYTES", "expand_globs"]

CHUNK_BYTES = 1 << 20
"""Bytes of file data per message."""

Send = Callable[[dict[str, Any]], None]


class CoreRead(NamedTuple):
    """A core file read on its node: the ``hangdbg core`` JSON document (text) and gdb's
    backtrace texts."""

    document: str
    gdb_texts: list[str]


ReadCore = Callable[[str, "str | None"], "CoreRead | str"]
"""``read_core(core, exe)``: the core file read, or why it could not be (one line)."""


@dataclass(frozen=True)
class GatherOptions:
    """What to gather on a node.

    Attributes:
        nccl_logs: globs of NCCL_DEBUG_FILE logs (``{host}`` is replaced by the node name).
        cores: globs of core files; each is read on the node (``hangdbg core``), only the result
            is sent.
        traces: globs of tracer files (``trace-HOST-RANK-PID.txt``).
        logs: globs of other logs to send as they are (torchrun output, flight-recorder dumps).
        dmesg: also send the kernel log (``dmesg``, else ``journalctl -k``, else /var/log/kern.log).
        max_bytes: larger files are cut to their last ``max_bytes`` bytes (default 256 MiB).
        exe: the Python executable for the core files (``None``: found from the core).
        all_users: also take other users' files (``--all-users``); by default a matched file
            that is not this user's is skipped and reported (:mod:`hangdbg.collect.safe_open`).
    """

    nccl_logs: tuple[str, ...] = ()
    cores: tuple[str, ...] = ()
    traces: tuple[str, ...] = ()
    logs: tuple[str, ...] = ()
    dmesg: bool = False
    max_bytes: int = 256 << 20
    exe: str | None = None
    all_users: bool = False

    def __bool__(self) -> bool:
        """Anything asked for at all."""
        return bool(self.nccl_logs or self.cores or self.traces or self.logs or self.dmesg)

    def to_argv(self) -> list[str]:
        """These options as the agent's command-line options (``hangdbg agent --nccl-logs ...``)."""
        out: list[str] = []
        for flag, values in (("--nccl-logs", self.nccl_logs), ("--cores", self.cores), ("--traces", self.traces),
                             ("--logs", self.logs)):
            for v in values:
                out += [flag, v]
        out += ["--dmesg"] if self.dmesg else []
        out += ["--exe", self.exe] if self.exe else []
        out += ["--all-users"] if self.all_users else []
        return out + ["--max-bytes", str(self.max_bytes)]


def expand_globs(patterns: tuple[str, ...] | list[str], host: str) -> list[str]:
    """The paths ``patterns`` match (``{host}`` replaced, ``~`` expanded), sorted, once each: all
    but directories (:func:`hangdbg.collect.safe_open.matches`; which of them are taken is
    :func:`hangdbg.collect.safe_open.open_matched`'s to say)."""
    return [m.path for m in matches(patterns, host)]


class _Sender:
    def __init__(self, host: str, send: Send, max_bytes: int, all_users: bool = False) -> None:
        self.host, self.send, self.max_bytes, self.all_users = host, send, max_bytes, all_users
        self.files: list[str] = []
        self.problems: list[dict[str, str]] = []
        self.skipped: list[dict[str, str]] = []

    def problem(self, what: str, reason: str) -> None:
        p = {"what": what, "reason": reason}
        self.problems.append(p)
        self.send({"type": "problem", "host": self.host, **p})

    def skip(self, what: str, reason: str) -> None:
        """A matched file not taken (a link, another user's...): reported with the node's problems
        (the node's reason in the document says it), but no failure of the node."""
        p = {"what": what, "reason": f"skipped: {reason}"}
        self.skipped.append(p)
        self.send({"type": "problem", "host": self.host, **p})

    def open(self, m: Match) -> tuple[BinaryIO, os.stat_result] | None:
        """``m`` opened as :func:`hangdbg.collect.safe_open.open_matched` does, or None (reported skipped)."""
        try:
            return open_matched(m, self.all_users)
        except Skipped as why:
            self.skip(m.path, str(why))
            return None

    def matched(self, name: str, m: Match) -> None:
        """Send the matched file ``m`` as ``name`` (or report it skipped)."""
        got = self.open(m)
        if got is not None:
            self.file(name, m.path, got[0], got[1].st_mode)

    def file(self, name: str, path: str, f: BinaryIO | None = None, mode: int | None = None) -> None:
        """Send ``path`` (or the open ``f`` read from its start, closed after) as ``name`` in chunks (its tail when
        larger than ``max_bytes``); ``mode``: the source's mode, which the copy keeps or narrows."""
        if f is None:
            try:
                f = open_input(path)  # a FIFO or device matched by a glob would block or never end
            except OSError as exc:
                self.problem(path, f"cannot read: {exc.strerror or exc}")
                return
        with f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - self.max_bytes)
            offset = 0
            while True:
                try:
                    f.seek(start + offset)
                    data = f.read(CHUNK_BYTES)
                except OSError as exc:
                    self.problem(path, f"read failed after {offset} bytes: {exc.strerror or exc}")
                    data, size = b"", start + offset
                last = len(data) < CHUNK_BYTES or start + offset + len(data) >= size
                self._chunk(name, offset, data, last, path, size, start, mode)
                offset += len(data)
                if last:
                    break
        self.files.append(name)

    def text(self, name: str, text: str, source: str, mode: int | None = None) -> None:
        data = text.encode()
        for i in range(0, max(1, len(data)), CHUNK_BYTES):
            self._chunk(name, i, data[i:i + CHUNK_BYTES], i + CHUNK_BYTES >= len(data), source, len(data), 0, mode)
        self.files.append(name)

    def _chunk(self, name: str, offset: int, data: bytes, last: bool, source: str, size: int, skipped: int,
               mode: int | None = None) -> None:
        """One ``file`` message: ``data`` at ``offset`` of ``name`` (the coordinator's FileSink
        writes it; ``mode``: the permission bits of the source, which the copy keeps or narrows)."""
        msg = {"type": "file", "host": self.host, "name": name, "offset": offset,
               "data": base64.b64encode(data).decode("ascii"), "last": last,
               "source": source, "size": size, "skipped_bytes": skipped}
        if mode is not None:
            msg["mode"] = stat.S_IMODE(mode)
        self.send(msg)


def _unique(name: str, used: set[str]) -> str:
    base, n = name, 1
    while name in used:
        n += 1
        name = f"{base}.{n}"
    used.add(name)
    return name


KERNEL_LOG_TAIL = 64 << 20
"""Bytes of /var/log/kern.log or /var/log/messages sent (the end: the lines of the hang are the
newest; a long-lived node's file can be gigabytes)."""


def _tail(path: str, limit: int) -> str:
    """The last ``limit`` bytes of the regular file ``path`` from the first whole line, as text.

    Raises:
        OSError: not readable, or not a regular file (:class:`hangdbg.text.lines.NotRegularFile`).
    """
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
            data = f.read(limit)
            data = data[data.find(b"\n") + 1:]
        else:
            data = f.read(limit)
    return data.decode("utf-8", errors="replace")


def _kernel_log() -> tuple[str | None, str, str]:
    """``(text, source, problem)`` of the kernel log, trying dmesg, journalctl -k, kern.log."""
    tried = []
    for argv in (["dmesg", "-T"], ["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"]):
        if shutil.which(argv[0]) is None:
            tried.append(f"{argv[0]}: not installed")
            continue
        try:
            res = run(argv, timeout=60, text=True, errors="replace")
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{' '.join(argv)}: {exc}")
            continue
        if res.returncode == 0 and res.stdout.strip():
            return res.stdout, " ".join(argv), ""
        tried.append(f"{' '.join(argv)}: {(res.stderr.strip() or 'no output')[:200]}")
    for path in ("/var/log/kern.log", "/var/log/messages"):
        try:
            return _tail(path, KERNEL_LOG_TAIL), path, ""
        except OSError as exc:
            tried.append(f"{path}: {exc.strerror}")
    return None, "", ("cannot read the kernel log (" + "; ".join(tried) +
                      "); with kernel.dmesg_restrict=1 run as root or grant CAP_SYSLOG")


def gather(opts: GatherOptions, host: str, send: Send, read_core: ReadCore | None = None) -> dict[str, Any]:
    """Gather this node's evidence and ``send`` it; returns the final ``done`` message.

    Args:
        opts: what to gather.
        host: this node's name (``{host}`` in globs; labels every message).
        send: called with each message (a JSON-able dict).
        read_core: reads a core file into what is sent (``hangdbg agent`` passes the one of
            ``hangdbg core``); None: core files are reported as not read.
    """
    s = _Sender(host, send, opts.max_bytes, opts.all_users)
    used: set[str] = set()

    nccl = matches(opts.nccl_logs, host)
    if nccl:
        _send_nccl(s, nccl, used)
    for core in matches(opts.cores, host):
        _send_core(s, core, opts.exe, used, read_core)
    for kind, patterns in (("traces", opts.traces), ("logs", opts.logs)):
        for m in matches(patterns, host):
            s.matched(_unique(f"{kind}/{os.path.basename(m.path)}", used), m)
    if opts.dmesg:
        text, source, problem = _kernel_log()
        if text is None:
            s.problem("kernel log", problem)
        else:
            s.text(_unique(f"dmesg/kernel-{host}.log", used), text, source)
    asked = bool(opts)
    status = NodeStatus.OK if s.files else (NodeStatus.NOTHING if not s.problems else NodeStatus.ERROR)
    if not asked:
        status = NodeStatus.NOTHING
    return {"type": "done", "host": host, "status": status.value, "files": s.files, "problems": s.problems,
            "skipped": s.skipped}


def _send_nccl(s: _Sender, matched: list[Match], used: set[str]) -> None:
    """Split the node's NCCL logs per rank here and send the per-rank files (the raw logs when
    they hold no NCCL record or the split fails). Each log is opened once as
    :func:`~hangdbg.collect.safe_open.open_matched` says, and read through that descriptor
    (``/proc/self/fd/N``): a name swapped meanwhile is never read. The per-rank files keep the
    narrowest mode of the logs."""
    from ..evidence.nccl.split import split_logs  # noqa: PLC0415

    opened = [(m, got) for m in matched if (got := s.open(m)) is not None]
    if not opened:
        return
    by_fd = {f"/proc/self/fd/{got[0].fileno()}": m.path for m, got in opened}
    mode = 0o7777
    for _, (_, st) in opened:
        mode &= st.st_mode
    try:
        with tempfile.TemporaryDirectory(prefix="hangdbg-nccl-") as tmp:
            try:
                res = split_logs(list(by_fd), OutDir(tmp))
            except Exception as exc:  # send the raw logs rather than nothing
                s.problem("nccl split", f"splitting failed ({exc!r}); the raw logs are sent")
            else:
                for path, why in res.errors:
                    s.problem(by_fd.get(path, path), f"cannot read: {why}")
                if res.records:
                    for name in sorted(res.written):
                        s.file(_unique(f"nccl/{name}", used), os.path.join(tmp, name), mode=mode)
                    return
                s.problem("nccl split", "no NCCL_DEBUG record in the logs; they are sent as they are")
        for m, (f, st) in opened:
            s.file(_unique(f"nccl/{os.path.basename(m.path)}", used), m.path, f, st.st_mode)
    finally:
        for _, (f, _) in opened:
            f.close()


def _send_core(s: _Sender, m: Match, exe: str | None, used: set[str], read_core: ReadCore | None) -> None:
    """Read a core file here (signal, threads, Python frames, rank from its environment) and send
    only the ``hangdbg core`` JSON document and gdb's backtrace text, never the core itself. The
    core is first checked as :func:`~hangdbg.collect.safe_open.open_matched` says (a link or another
    user's core without ``--all-users`` is skipped), and read only when it is still that file after."""
    core = m.path
    if read_core is None:
        s.problem(core, "this agent does not read core files")
        return
    got_file = s.open(m)
    if got_file is None:
        return
    f, st = got_file
    with f:
        try:
            got = read_core(core, exe)
        except Exception as exc:  # a reader bug must not stop the other files
            s.problem(core, f"cannot read the core file: {exc!r}")
            return
        try:
            now = os.lstat(core)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            s.skip(core, "replaced while being read (collect follows no link)")
            return
    if isinstance(got, str):
        s.problem(core, got)
        return
    name = os.path.basename(core)
    s.text(_unique(f"cores/{name}.json", used), got.document, core, st.st_mode)
    for text in got.gdb_texts:
        s.text(_unique(f"cores/{name}{GDB_TEXT_SUFFIX}", used), text, core, st.st_mode)
