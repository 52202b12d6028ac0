"""The core-file reader: ELF core files into rank dumps (signal, crashing thread, native and Python
frames per thread, rank and host from the core's own environment) and findings.

For each core: :func:`hangdbg.evidence.core.elf.read_core_info` (notes, executable, the environment
block from the dumped stack), gdb ``thread apply all bt`` (:mod:`hangdbg.tools.gdb`) for the
native frames and ``environ``, pystack (:mod:`hangdbg.tools.pystack`) for the Python frames;
the two are merged per thread id (gdb's ``LWP``, pystack's ``tid``). The rank comes from the
launcher variables of :mod:`hangdbg.launch_env` (``RANK``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``,
``PMIX_RANK``, ``SLURM_PROCID``), the host from ``SLURMD_NODENAME``, ``HOSTNAME`` or ``HOST``.
"""

from __future__ import annotations

import os
import shutil
import signal as _signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from ...launch_env import (LOCAL_RANK_VARS, LOCAL_WORLD_SIZE_VARS, RANK_VARS, WORLD_SIZE_VARS, first_int,
    rank_from_environ)
from .facts import CoreFact, CoreFacts
from ...frames import Frame
from ...model import (SEVERITY_ORDER, Evidence, FileError, Finding, Kind, RankDump, RankState, Severity, 
    SourceKind, SourceReport, Thread)
from ...enums import ThreadStatus
from .elf import CoreFileError, CoreInfo, is_core, read_core_info
from ...stacks.native_text import crash_site, merge_native_python, parse_stacks, thread_status
from ...stacks.pyspy_text import parse_pyspy_dump
from ...tools.gdb import GdbResult, run_gdb_core
from ...tools.pyspy import find_pyspy
from ...tools.pystack import PystackResult, run_pystack_core
from ...tools.subproc import Popen, communicate_or_kill
from ..base import ReaderBase, with_source

__all__ = ["CoreReading", "CoreOptions", "CoreReader", "READER", "read_core", "read_cores",
           "core_fact", "load", "signal_name", "HOST_VARS", "CRASH_SIGNALS"]

KIND = SourceKind.CORE
HOST_VARS = ("SLURMD_NODENAME", "HOSTNAME", "HOST")
"""Variables that name the node, most specific first (SLURM's node name, then the shell's)."""
CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "SIGTRAP", "SIGSYS"})
_RANK_KEYS = RANK_VARS + LOCAL_RANK_VARS + WORLD_SIZE_VARS + LOCAL_WORLD_SIZE_VARS + HOST_VARS + (
    "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")
_CPYTHON_INTERNAL = ("_Py", "PyEval_", "PyObject_Call", "PyObject_Vectorcall", "PyVectorcall", "cfunction_", "do_call_core",
                     "slot_tp_call")
"""Prefixes of the interpreter's own C functions (any name containing ``vectorcall`` is one too)."""


def signal_name(signo: int | None) -> str | None:
    """``11`` -> ``"SIGSEGV"``; None for None/0; ``"signal N"`` for numbers Python does not name."""
    if not signo:
        return None
    try:
        return _signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


@dataclass(frozen=True, slots=True)
class CoreOptions:
    """How to read cores.

    Attributes:
        exe: the executable for every core (``--exe``), None to find it in each core.
        timeout: seconds for each gdb / pystack run.
        gdb: the gdb program, None for ``gdb`` on PATH.
        jobs: cores read at once.
        python: read Python frames (pystack, else py-spy).
    """

    exe: str | None = None
    timeout: float = 120.0
    gdb: str | None = None
    jobs: int = 2
    python: bool = True


@dataclass(frozen=True, slots=True)
class CoreReading:
    """Everything read from one core file.

    Attributes:
        path: the core file.
        info: the ELF facts (None when the file is not a readable core).
        dump: the rank's stacks (``error`` set when nothing could be read).
        executable: the executable used, and exe_source where it came from (``--exe``,
            ``core``, ``core file mappings``).
        signal: ``"SIGSEGV"``..., None for a core taken on demand (``gcore``).
        crashing_tid: the thread that took the signal, None for ``gcore``.
        how: ``"crash"`` (the kernel raised it: a fault), ``"self"`` (the process sent it to
            itself: ``abort()``), ``"killed"`` (another process sent it), ``"on demand"`` (gcore).
        environ: the launcher variables found (rank, local rank, world size, host, job).
        diagnoses: what went wrong or is doubtful, each with the fix.
        gdb_text: gdb's backtrace output (kept under ``--out``).
    """

    path: str
    info: CoreInfo | None
    dump: RankDump
    executable: str = ""
    exe_source: str = ""
    signal: str | None = None
    crashing_tid: int | None = None
    how: str = ""
    environ: dict[str, str] = field(default_factory=dict)
    diagnoses: tuple[str, ...] = ()
    gdb_text: str = ""

    @property
    def crash_thread(self) -> Thread | None:
        if self.crashing_tid is None:
            return None
        return next((t for t in self.dump.threads if t.thread_id == self.crashing_tid), None)


def _pick_exe(info: CoreInfo, exe: str | None) -> tuple[str, str, list[str]]:
    if exe:
        return exe, "--exe", []
    notes: list[str] = []
    cand = info.executable
    if cand and os.path.isabs(cand) and os.path.isfile(cand):
        return cand, "core", notes
    if cand:
        notes.append(f"the executable named in the core ({cand}) is not on this machine")
    first = info.mapped_files[0] if info.mapped_files else ""
    if first and os.path.isfile(first):
        return first, "core file mappings", notes
    found = shutil.which(info.fname) if info.fname else None
    if found:
        notes.append(f"using {found} found by the command name {info.fname!r}: pass --exe if it is not the one the job ran")
        return found, "command name", notes
    return "", "", notes + ["no executable found for this core: pass the Python interpreter the job ran with, --exe PATH"]


def _drop_internal(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """Leave out the interpreter's own C frames (as py-spy ``--native`` and pystack do)."""
    return tuple(f for f in frames if not (f.native and (f.function.startswith(_CPYTHON_INTERNAL) or "vectorcall" in f.function)))


def _python_groups(frames: list[dict[str, Any]]) -> list[tuple[Frame, ...]]:
    """pystack frames (outermost first, ``entry`` flags) -> groups per interpreter call, innermost first."""
    groups: list[list[Frame]] = []
    for fr in frames:
        f = Frame(fr.get("function") or "?", fr.get("file") or "?", fr.get("line"))
        if fr.get("entry") or not groups:
            groups.append([])
        groups[-1].append(f)
    return [tuple(reversed(g)) for g in reversed(groups)]


def _merge(gdb: GdbResult, py: PystackResult, pid: int | None, crashing: int | None) -> tuple[Thread, ...]:
    native: dict[int, tuple[Frame, ...]] = {}
    names: dict[int, str | None] = {}
    if gdb.text:
        blocks, _bad, _facts = parse_stacks(enumerate(gdb.text.splitlines(), 1))
        for b in blocks:
            if b.format == "gdb" and b.thread_id:
                native[b.thread_id] = b.frames
                names[b.thread_id] = b.name
    pyth = {t["tid"]: t for t in py.threads if isinstance(t, dict) and "tid" in t}
    threads = []
    for tid in list(dict.fromkeys([*native, *pyth])):
        nat = native.get(tid, ())
        pt = pyth.get(tid)
        groups = _python_groups(pt["frames"]) if pt else []
        frames = _drop_internal(merge_native_python(nat, groups)) if nat else tuple(f for g in groups for f in g)
        name = names.get(tid) or ("MainThread" if tid == pid else None)
        status = thread_status(frames, current=tid == crashing, gil=bool(pt and pt.get("gil")))
        threads.append(Thread(tid, name, status, frames))
    order = {tid: i for i, tid in enumerate(sorted(native) or sorted(pyth))}
    threads.sort(key=lambda t: (t.thread_id != crashing, t.thread_id != pid, order.get(t.thread_id, 0)))
    return tuple(threads)


def _pyspy_fallback(core: str, exe: str, timeout: float) -> PystackResult:
    prog = find_pyspy()
    if prog is None:
        return PystackResult(error="neither pystack nor py-spy is installed: pip install pystack")
    try:
        proc = Popen([prog, "dump", "--core", os.path.abspath(core)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return PystackResult(error=f"py-spy dump --core failed: {exc}")
    got = communicate_or_kill(proc, timeout)
    if got is None:
        return PystackResult(error=f"py-spy dump --core took longer than {timeout:g} s and was stopped; "
                                   "retry with a larger --timeout")
    out, err = got
    procs, _ = parse_pyspy_dump(out.decode("utf-8", "replace"))
    if not procs or procs[0].error or not procs[0].threads:
        return PystackResult(error="py-spy dump --core found no Python stack: "
                                   + (err.decode("utf-8", "replace").strip()[:200] or "no output"))
    threads = tuple({"tid": t.thread_id, "gil": t.status == ThreadStatus.ACTIVE_GIL,
                     "frames": [{"file": f.file, "function": f.function, "line": f.line, "entry": True}
                                for f in reversed(t.python_frames)]} for t in procs[0].threads)
    return PystackResult(threads, procs[0].python)


def read_core(path: str, opts: CoreOptions = CoreOptions()) -> CoreReading:
    """Read one core file.

    Args:
        path: the core file.
        opts: see :class:`CoreOptions`.

    Returns:
        a :class:`CoreReading`; never raises for a bad file (``dump.error`` and ``diagnoses`` say
        what went wrong and how to fix it).
    """
    try:
        info = read_core_info(path)
    except CoreFileError as exc:
        return CoreReading(path, None, RankDump(rank=-1, error=f"{path}: {exc}"),
                           diagnoses=(str(exc),))
    diagnoses: list[str] = []
    if info.truncated:
        diagnoses.append(f"the core is truncated ({info.size:,} of {info.expected_size:,} bytes): raise `ulimit -c` "
                         "(unlimited) and check free space where cores are written")
    exe, exe_source, notes = _pick_exe(info, opts.exe)
    diagnoses += notes
    with ThreadPoolExecutor(max_workers=1) as side:  # gdb and pystack are separate processes: run both at once
        pending = side.submit(run_gdb_core, path, exe or None, opts.timeout, opts.gdb)
        py = PystackResult()
        if opts.python and exe:
            py = run_pystack_core(path, exe, opts.timeout)
            if py.missing:
                py = _pyspy_fallback(path, exe, opts.timeout)
        gdb = pending.result()
    if gdb.error:
        diagnoses.append(gdb.error)
    diagnoses += [w for w in gdb.warnings if not (info.truncated and "truncated" in w)]
    if py.error:
        diagnoses.append(py.error)
    env = {**gdb.environ, **info.environ}  # the initial environment wins: launchers set the rank before exec
    r, var = rank_from_environ(env)
    local_rank, _ = first_int(env, LOCAL_RANK_VARS)
    world, _ = first_int(env, WORLD_SIZE_VARS)
    local_world, _ = first_int(env, LOCAL_WORLD_SIZE_VARS)
    host = next((env[k] for k in HOST_VARS if env.get(k)), "")
    sig = None if info.on_demand else signal_name(info.signal)
    if info.on_demand:
        how = "on demand"
    elif info.si_code is not None and info.si_code > 0:
        how = "crash"
    else:
        how = "self" if info.sender_pid in (None, 0, info.pid) else "killed"
    crashing = info.crashing_tid
    threads = _merge(gdb, py, info.pid, crashing)
    if not threads and not gdb.error and not py.error:
        diagnoses.append("no thread could be read from the core")
    dump = RankDump(
        rank=r if r is not None else -1,
        pid=info.pid, host=host, local_rank=local_rank, world_size=world, local_world_size=local_world,
        threads=threads, samples=(threads,) if threads else (),
        error=None if threads else ("; ".join(diagnoses) or "no stack in the core"),
        rank_source=var or "", cmdline=info.psargs, python=py.python,
    )
    kept = {k: v for k, v in env.items() if k in _RANK_KEYS}
    return CoreReading(path, info, dump, exe, exe_source, sig, crashing, how, kept, tuple(diagnoses), gdb.text)


def read_cores(paths: list[str], opts: CoreOptions = CoreOptions()) -> list[CoreReading]:
    """Read several cores (``opts.jobs`` at once); cores whose environment names no rank are
    numbered after the highest rank found (``rank_source="order"``), in the order given."""
    paths = [str(p) for p in paths]
    with ThreadPoolExecutor(max_workers=max(1, min(opts.jobs, len(paths) or 1))) as pool:
        readings = list(pool.map(lambda p: read_core(p, opts), paths))
    known = [c.dump.rank for c in readings if c.dump.rank_source and c.dump.rank >= 0]
    nxt = max(known, default=-1) + 1
    out = []
    for c in readings:
        if not c.dump.rank_source or c.dump.rank < 0:
            c = replace(c, dump=replace(c.dump, rank=nxt, rank_source="order"))
            nxt += 1
        out.append(c)
    return out


def _who(c: CoreReading) -> str:
    d = c.dump
    who = f"rank {d.rank}" if d.rank_source != "order" else f"{Path(c.path).name} (rank unknown, numbered {d.rank})"
    return who + (f" on {d.host}" if d.host else "")


def finding_of(c: CoreReading) -> Finding:
    """The finding of one core: ``core-crash`` (suspect for a crash or an abort), ``core-killed``
    (warning: killed by another process), ``core-on-demand`` (info: gcore), ``core-unreadable``."""
    d = c.dump
    ev = (Evidence(c.path, None, f"{c.signal or 'no signal'}; pid {d.pid}; {d.cmdline}"),)
    t = c.crash_thread
    where = crash_site(t.frames) if t is not None else ""
    if t is not None and not where and t.frames:
        where = f" in {t.frames[0]}"
    ranks = (d.rank,) if d.rank_source != "order" else ()
    hosts = (d.host,) if d.host else ()
    if c.info is None:
        return Finding(Kind.CORE_UNREADABLE, f"{c.path}: unreadable core file ({'; '.join(c.diagnoses)})",
                       severity=Severity.WARNING, evidence=ev)
    if c.how == "on demand":
        return Finding(Kind.CORE_ON_DEMAND, f"{_who(c)}: core taken on demand (gcore), the process did not crash", ranks, hosts,
                       severity=Severity.INFO, evidence=ev)
    if c.how == "killed":
        sender = f" sent by pid {c.info.sender_pid}" if c.info.sender_pid else ""
        return Finding(Kind.CORE_KILLED, f"{_who(c)} was killed with {c.signal}{sender}{where}", ranks, hosts,
                       severity=Severity.WARNING, evidence=ev, action="find who sent the signal (a watchdog, the launcher, a user)")
    verb = "aborted" if c.signal == "SIGABRT" else "crashed"
    return Finding(Kind.CORE_CRASH, f"{_who(c)} {verb} with {c.signal}{where}", ranks, hosts,
                   severity=Severity.SUSPECT if c.signal in CRASH_SIGNALS else Severity.WARNING, evidence=ev,
                   action="read the crashing thread's native frames; a C/C++ extension or a library it called failed")


def core_fact(c: CoreReading) -> CoreFact:
    """The facts of one core (an entry of the reader's facts; the JSON document adds the threads)."""
    d = c.dump
    return CoreFact(file=c.path, rank=d.rank, rank_source=d.rank_source, host=d.host, pid=d.pid, signal=c.signal,
                    how=c.how, crashing_tid=c.crashing_tid, executable=c.executable, executable_source=c.exe_source,
                    truncated=bool(c.info and c.info.truncated), environ=dict(c.environ), diagnoses=tuple(c.diagnoses))


def load(paths: Sequence[str], opts: CoreOptions = CoreOptions()
         ) -> tuple[SourceReport[CoreFacts], list[RankDump], list[CoreReading]]:
    """Read core files into a report (kind ``core``; ``records`` counts the cores read), the rank
    dumps for the analyzer (sorted by rank) and the per-core readings. Never raises for a bad file."""
    readings = read_cores([str(p) for p in paths], opts)
    findings, states, errors = [], [], []
    for c in readings:
        if c.info is None:
            errors.append(FileError(c.path, "; ".join(c.diagnoses)))
            continue
        findings.append(finding_of(c))
        d = c.dump
        states.append(RankState(d.rank, d.host, d.pid, state=c.signal or "core on demand", source=KIND))
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    facts = CoreFacts(tuple(core_fact(c) for c in readings))
    report = SourceReport(KIND, tuple(c.path for c in readings), tuple(findings), tuple(states),
                          records=sum(1 for c in readings if c.info is not None), errors=tuple(errors), facts=facts)
    dumps = sorted((c.dump for c in readings if c.info is not None), key=lambda d: d.rank)
    return with_source(report), dumps, readings


class CoreReader(ReaderBase[CoreFacts]):
    """ELF core files (gdb, pystack; options of :class:`CoreOptions`)."""

    kind = KIND

    def __init__(self, opts: CoreOptions = CoreOptions()) -> None:
        self.opts = opts

    def sniff(self, head: bytes) -> bool:
        """True for an ELF core file (``e_type == ET_CORE``)."""
        return is_core(head)

    def _read(self, paths: list[str]) -> SourceReport[CoreFacts]:
        return load(paths, self.opts)[0]

    def read_dumps(self, paths: Sequence[str]) -> tuple[SourceReport[CoreFacts], list[RankDump]]:
        report, dumps, _ = load(paths, self.opts)
        return report, dumps


READER = CoreReader()
