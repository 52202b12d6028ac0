"""Reading PyTorch flight-recorder dumps (one file per rank), JSON or pickle, without torch.

The flight recorder (``torch/csrc/distributed/c10d/FlightRecorder.hpp`` and
``FlightRecorderDetail.hpp``; enabled by ``TORCH_FR_BUFFER_SIZE`` / ``TORCH_NCCL_TRACE_BUFFER_SIZE``)
keeps a ring buffer of the last collectives of every process group. A rank writes it on a watchdog
timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT=1``) to ``TORCH_FR_DUMP_TEMP_FILE`` /
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` + rank (default ``/tmp/nccl_trace_rank_<rank>``), or on request
(``torch._C._distributed_c10d._dump_fr_trace`` -> pickle, ``_dump_fr_trace_json`` -> JSON).

Layout (``dump_dict`` / ``dump_json``, version ``"2.10"`` in torch 2.13, older "2.2" ... "2.9" add
fewer fields; every key is optional here)::

    {"version": "2.10", "comm_lib_version": "...",
     "pg_config": {NAME: {"name": NAME, "desc": DESC, "ranks": "[0, 1, 2, 3]"}},
     "pg_status": {PG_ID: {"last_enqueued_collective": N, "last_started_collective": N,
                           "last_completed_collective": N}},       # strings in the JSON form
     "entries": [{"record_id", "pg_id", "process_group": [NAME, DESC], "collective_seq_id",
                  "p2p_seq_id", "op_id", "profiling_name": "nccl:all_reduce", "time_created_ns",
                  "input_sizes": [[1024]], "input_dtypes": ["Float"], "output_sizes", "output_dtypes",
                  "state": "scheduled|started|completed", "time_discovered_started_ns",
                  "time_discovered_completed_ns", "duration_ms", "retired", "timeout_ms", "is_p2p",
                  "thread_name", "thread_id",
                  "frames": [{"name", "filename", "line"}]}]}      # frames: pickle form only

The pickle form is read by :class:`RestrictedUnpickler`, which builds only dicts, lists, tuples,
str, bytes, numbers, bool and None and refuses every global (a dump that names one is rejected):
files from a cluster are never given to plain ``pickle.load``.

The global rank is not in the dump: it is the number at the end of the file name
(``nccl_trace_rank_3``, ``fr_3.json``), as torch's ``torchfrtrace`` loader takes it.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from dataclasses import dataclass, field
from typing import BinaryIO

from ...frames import Frame
from ...rankset import rank_number
from ...text.jsondoc import TOO_DEEP, load_json
from ...text.lines import open_input

__all__ = [
    "MAX_DUMP_BYTES",
    "FrDump",
    "FrDumpError",
    "FrEntry",
    "RestrictedUnpickler",
    "load_dump",
    "pg_label",
    "rank_from_path",
    "restricted_loads",
    "sniff",
]

MAX_DUMP_BYTES = 256 * 1024 * 1024
"""Largest dump file read (bytes). 2000 entries with stacks are a few MB."""

_RANK_IN_NAME = re.compile(r"(\d+)$")
_EXTENSIONS = (".json", ".pkl", ".pickle", ".bin", ".dump", ".txt")


class FrDumpError(Exception):
    """A dump file that cannot be read; the message says why (shown to the user)."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data only.

    ``find_class`` raises for every global and ``persistent_load`` for every persistent id, so
    no callable is ever looked up or run: a pickle that needs ``os.system`` (or any class) fails
    with :class:`pickle.UnpicklingError` before anything executes. The flight recorder's own
    pickles (torch's jit pickler over ``c10::Dict``/``c10::List`` of strings and numbers) need no
    global.
    """

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refused: the pickle asks for the global {module}.{name} "
                                     "(a flight-recorder dump holds plain data only)")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused: the pickle uses a persistent id")


def restricted_loads(data: bytes):
    """Unpickle ``data`` with :class:`RestrictedUnpickler`.

    Raises:
        pickle.UnpicklingError, EOFError, ValueError, ...: refused or malformed pickle.
    """
    return RestrictedUnpickler(io.BytesIO(data)).load()


def sniff(head: bytes) -> bool:
    """True when the first bytes of a file look like a flight-recorder dump.

    Cheap byte tests only (nothing is parsed or unpickled): a JSON object, or a pickle (protocol
    opcode ``0x80``), whose head names the dump's own keys: ``pg_config``, or ``entries`` together
    with ``profiling_name`` / ``collective_seq_id`` (torch's JSON form sorts keys, so ``entries``
    comes before ``pg_config``).
    """
    if not head:
        return False
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        q = b'"'
    elif head[:1] == b"\x80":
        q = b""
    else:
        return False
    if q + b"pg_config" + q in head and (q + b"version" + q in head or q + b"entries" + q in head):
        return True
    return q + b"entries" + q in head and (q + b"profiling_name" + q in head or q + b"collective_seq_id" + q in head)


@dataclass(frozen=True, slots=True)
class FrEntry:
    """One recorded collective or p2p op of one rank.

    Attributes:
        index: position in the dump's ``entries`` list (0-based).
        record_id: the rank-wide record counter (``record_id``).
        pg_id: the process group's local id (``pg_id``), a key of ``pg_status``.
        pg_name: process group name (``process_group[0]``: ``"0"`` for the default group).
        pg_desc: process group description (``process_group[1]``: ``"default_pg"``).
        collective_seq_id: sequence number among the group's collectives (older dumps: ``seq_id``).
        p2p_seq_id: sequence number among the group's send/recv.
        op_id: logical op counter (one per op inside a coalesced group).
        profiling_name: as dumped, e.g. ``nccl:all_reduce``, ``gloo:broadcast``, ``nccl:send 0->1``.
        backend: the part before ``:`` (``nccl``, ``gloo``), ``""`` when absent.
        op: the collective's name (``all_reduce``), peer suffixes dropped.
        state: ``scheduled``, ``started`` or ``completed`` as dumped (``""`` when absent).
        retired: the work left the process group's work list (``None`` when absent).
        is_p2p: ``is_p2p`` when dumped, else guessed from the op name (send/recv).
        frames: the Python stack that issued the op, innermost first (pickle dumps only).
    """

    index: int
    record_id: int | None
    pg_id: int | None
    pg_name: str
    pg_desc: str
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op_id: int | None
    profiling_name: str
    backend: str
    op: str
    input_sizes: tuple[tuple[int, ...], ...] = ()
    input_dtypes: tuple[str, ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    output_dtypes: tuple[str, ...] = ()
    state: str = ""
    retired: bool | None = None
    is_p2p: bool = False
    time_created_ns: int | None = None
    time_started_ns: int | None = None
    time_completed_ns: int | None = None
    duration_ms: float | None = None
    timeout_ms: int | None = None
    thread_name: str = ""
    frames: tuple[Frame, ...] = ()

    @property
    def group(self) -> str:
        """``name:desc`` of the process group (``0:default_pg``), the name alone without a desc."""
        return pg_label(self.pg_name, self.pg_desc)

    @property
    def seq(self) -> int | None:
        """The sequence number that orders this op in its group (p2p seq for p2p ops)."""
        return self.p2p_seq_id if self.is_p2p else self.collective_seq_id

    def signature(self) -> tuple:
        """What must be equal on every rank for the same collective: op, sizes, dtypes."""
        return (self.op, self.input_sizes, self.output_sizes, self.input_dtypes, self.output_dtypes)

    def describe(self) -> str:
        """``all_reduce in [[1024]] Float out [[1024]] Float``."""
        def sz(sizes: tuple[tuple[int, ...], ...]) -> str:
            return "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in sizes) + "]"
        text = f"{self.profiling_name.split(':', 1)[-1] or self.op} in {sz(self.input_sizes)}"
        if self.input_dtypes:
            text += " " + ",".join(self.input_dtypes)
        if self.output_sizes != self.input_sizes or self.output_dtypes != self.input_dtypes:
            text += f" out {sz(self.output_sizes)}"
            if self.output_dtypes:
                text += " " + ",".join(self.output_dtypes)
        return text

    def render(self) -> str:
        """One line for evidence: group, seq, op, sizes, dtypes, raw state fields, record id."""
        kind = "p2p" if self.is_p2p else "seq"
        parts = [f"pg {self.group}", f"{kind} {self.seq}", self.describe(), f"state={self.state or '?'}"]
        if self.retired is not None:
            parts.append(f"retired={self.retired}")
        parts.append(f"record {self.record_id}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class FrDump:
    """One rank's dump.

    Attributes:
        path: the file, as given.
        rank: global rank (from the file name).
        fmt: ``"json"`` or ``"pickle"``.
        version: the dump's ``version`` (``"2.10"``), ``""`` when absent.
        pg_config: process group name -> (desc, member ranks); a ``pg_config`` key whose entry has
            an empty name (torch 2.13 gloo) is kept under its key.
        pg_status: pg_id -> (last enqueued, last started, last completed) collective seq; ``-1`` /
            ``None`` when unknown.
        entries: the records, oldest first.
        skipped: entries that were not dicts or lacked every usable field.
        comm_lib_version: ``comm_lib_version`` (the NCCL version), ``""`` when absent.
    """

    path: str
    rank: int
    fmt: str
    version: str = ""
    pg_config: dict = field(default_factory=dict)
    pg_status: dict = field(default_factory=dict)
    entries: tuple[FrEntry, ...] = ()
    skipped: int = 0
    comm_lib_version: str = ""


def pg_label(name: str, desc: str | None) -> str:
    """``name:desc`` of a process group (``0:default_pg``), the name alone without a desc."""
    return f"{name}:{desc}" if desc and desc != "undefined" else name


def rank_from_path(path: str) -> int | None:
    """The global rank of a dump: the number at the end of its base name, extensions dropped.

    ``nccl_trace_rank_3`` -> 3, ``fr_trace_12.json`` -> 12, ``dump`` -> None.
    """
    base = os.path.basename(path)
    while True:
        root, ext = os.path.splitext(base)
        if ext.lower() in _EXTENSIONS and root:
            base = root
        else:
            break
    m = _RANK_IN_NAME.search(base)
    return rank_number(m.group(1)) if m else None


def _int(v) -> int | None:
    if type(v) is int:
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, (str, bytes)):
        try:
            return int(v)
        except ValueError:
            return None
    return None


def _str(v) -> str:
    if type(v) is str:
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v if isinstance(v, str) else ("" if v is None else str(v))


def _sizes(v) -> tuple[tuple[int, ...], ...]:
    if not isinstance(v, (list, tuple)):
        return ()
    out = []
    for s in v:
        if isinstance(s, (list, tuple)):
            t = tuple(s)
            if not all(type(d) is int for d in t):
                t = tuple(x for x in (_int(d) for d in s) if x is not None)
            out.append(t)
        elif _int(s) is not None:  # a flat list of ints: one tensor
            out.append((_int(s),))
    return tuple(out)


def _strs(v) -> tuple[str, ...]:
    return tuple(_str(x) for x in v) if isinstance(v, (list, tuple)) else ()


def _frames(v, cache: dict) -> tuple[Frame, ...]:
    """Stack frames; ``cache`` maps id() of the (shared, memoized) list/dict objects of one
    document to what was built from them (torch's pickler shares frame dicts between entries)."""
    if not isinstance(v, (list, tuple)):
        return ()
    hit = cache.get(id(v))
    if hit is not None:
        return hit
    out = []
    for f in v:
        if isinstance(f, dict):
            fr = cache.get(id(f))
            if fr is None:
                fr = cache[id(f)] = Frame(_str(f.get("name")) or "?", _str(f.get("filename")) or "?", _int(f.get("line")))
            out.append(fr)
    res = cache[id(v)] = tuple(out)
    return res


def _ranks(v) -> tuple[int, ...]:
    """``"[0, 1, 2, 3]"`` (how pg_config stores ranks) or a list -> ints; never evaluated."""
    if isinstance(v, (list, tuple)):
        return tuple(r for r in (rank_number(_int(x)) for x in v) if r is not None)
    return tuple(r for r in (rank_number(x) for x in re.findall(r"\d+", _str(v))) if r is not None)


def _entry(i: int, e: dict, cache: dict) -> FrEntry | None:
    pg = e.get("process_group")
    if isinstance(pg, (list, tuple)):
        pg_name = _str(pg[0]) if len(pg) > 0 else ""
        pg_desc = _str(pg[1]) if len(pg) > 1 else ""
    else:
        pg_name, pg_desc = _str(pg), ""
    pg_id = _int(e.get("pg_id"))
    if not pg_name and pg_id is not None:
        pg_name = str(pg_id)
    profiling = _str(e.get("profiling_name"))
    backend, _, name = profiling.rpartition(":") if ":" in profiling else ("", "", profiling)
    op = name.split(" ", 1)[0]
    seq = _int(e.get("collective_seq_id", e.get("seq_id")))
    p2p = _int(e.get("p2p_seq_id"))
    if not op and seq is None and p2p is None:
        return None
    is_p2p = e.get("is_p2p")
    is_p2p = bool(is_p2p) if isinstance(is_p2p, (bool, int)) else op in ("send", "recv")
    started = _int(e.get("time_discovered_started_ns"))
    completed = _int(e.get("time_discovered_completed_ns"))
    duration = e.get("duration_ms")
    retired = e.get("retired")
    return FrEntry(
        index=i, record_id=_int(e.get("record_id")), pg_id=pg_id, pg_name=pg_name, pg_desc=pg_desc,
        collective_seq_id=seq, p2p_seq_id=p2p, op_id=_int(e.get("op_id")), profiling_name=profiling,
        backend=backend, op=op, input_sizes=_sizes(e.get("input_sizes")), input_dtypes=_strs(e.get("input_dtypes")),
        output_sizes=_sizes(e.get("output_sizes")), output_dtypes=_strs(e.get("output_dtypes")),
        state=_str(e.get("state")), retired=retired if isinstance(retired, bool) else None, is_p2p=is_p2p,
        time_created_ns=_int(e.get("time_created_ns")), time_started_ns=started or None,
        time_completed_ns=completed or None,
        duration_ms=float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        timeout_ms=_int(e.get("timeout_ms")), thread_name=_str(e.get("thread_name")), frames=_frames(e.get("frames"), cache),
    )


def _pg_config(v) -> dict[str, tuple[str, tuple[int, ...]]]:
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    if not isinstance(v, dict):
        return out
    for key, info in v.items():
        if isinstance(info, dict):
            name = _str(info.get("name")) or _str(key)
            out[name] = (_str(info.get("desc")), _ranks(info.get("ranks")))
    return out


def _pg_status(v) -> dict[int, tuple[int | None, ...]]:
    out: dict[int, tuple[int | None, ...]] = {}
    if not isinstance(v, dict):
        return out
    for key, st in v.items():
        pg_id = _int(key)
        if pg_id is None or not isinstance(st, dict):
            continue
        out[pg_id] = tuple(_int(st.get(k)) for k in (
            "last_enqueued_collective", "last_started_collective", "last_completed_collective"))
    return out


def _decode(f: BinaryIO) -> tuple[dict, str]:
    """Parse an open dump file: JSON when it starts with ``{``, a pickle when it starts with the
    protocol opcode ``0x80`` (unpickled from the file object: the C unpickler reads a real file
    faster than a BytesIO copy)."""
    first = f.read(1)
    while first in (b" ", b"\t", b"\r", b"\n"):
        first = f.read(1)
    if not first:
        raise FrDumpError("empty file")
    f.seek(0)
    if first == b"{":
        try:
            doc = load_json(f.read())
        except ValueError as exc:
            raise FrDumpError(f"not valid JSON: {exc}" if str(exc).startswith(TOO_DEEP)
                              else f"not valid JSON (truncated or garbled?): {exc}") from None
        fmt = "json"
    elif first == b"\x80":
        try:
            doc = RestrictedUnpickler(f).load()
        except pickle.UnpicklingError as exc:
            raise FrDumpError(str(exc) if str(exc).startswith("refused")
                              else f"not a readable pickle (truncated or garbled?): {exc}") from None
        except RecursionError:
            raise FrDumpError(f"not a readable pickle: {TOO_DEEP}") from None
        except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError,
                MemoryError) as exc:
            raise FrDumpError(f"not a readable pickle (truncated or garbled?): {type(exc).__name__}: {exc}") from None
        fmt = "pickle"
    else:
        raise FrDumpError("neither JSON nor a pickle (no flight-recorder dump)")
    if not isinstance(doc, dict):
        raise FrDumpError(f"the dump is a {type(doc).__name__}, not a dict")
    if "entries" not in doc and "pg_config" not in doc and "version" not in doc:
        raise FrDumpError("no 'entries', 'pg_config' or 'version' key: not a flight-recorder dump")
    return doc, fmt


def load_dump(path: str, rank: int | None = None, max_bytes: int = MAX_DUMP_BYTES) -> FrDump:
    """Read one rank's dump file (JSON or pickle).

    Args:
        path: the file.
        rank: its global rank; default: the number at the end of the file name.
        max_bytes: files larger than this are refused (bytes).

    Raises:
        FrDumpError: unreadable, too large, not a dump, a pickle that asks for a global, or (for a
            dump, checked after its content) no rank in the file name.
    """
    try:
        with open_input(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise FrDumpError(f"{size} bytes is more than the {max_bytes} bytes a dump may have")
            doc, fmt = _decode(f)  # content first: a file that is no dump is told so, whatever its name
    except OSError as exc:
        raise FrDumpError(f"cannot read: {exc.strerror or exc}") from None
    if rank is None:
        rank = rank_from_path(path)
        if rank is None:
            raise FrDumpError("cannot tell the rank: the file name does not end in a number "
                              "(torch names dumps PREFIX<rank>, e.g. nccl_trace_rank_3)")
    raw = doc.get("entries")
    entries, skipped = [], 0
    cache: dict = {}  # ids stay valid: doc keeps every object alive until we return
    for i, e in enumerate(raw if isinstance(raw, (list, tuple)) else ()):
        fe = _entry(i, e, cache) if isinstance(e, dict) else None
        if fe is None:
            skipped += 1
        else:
            entries.append(fe)
    if raw is not None and not isinstance(raw, (list, tuple)):
        skipped += 1
    return FrDump(path=path, rank=rank, fmt=fmt, version=_str(doc.get("version")),
                  pg_config=_pg_config(doc.get("pg_config")), pg_status=_pg_status(doc.get("pg_status")),
                  entries=tuple(entries), skipped=skipped, comm_lib_version=_str(doc.get("comm_lib_version")))
