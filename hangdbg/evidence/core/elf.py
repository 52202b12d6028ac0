"""Read what a Linux ELF core file says about its process, without a debugger.

The headers and notes are read with pyelftools; the few note layouts it leaves as raw bytes are
decoded here from the kernel's definitions (x86-64 and aarch64, 64-bit little-endian):

* ``NT_PRSTATUS`` (``struct elf_prstatus``, include/uapi/linux/elfcore.h): ``pr_cursig`` at
  offset 12, ``pr_pid`` (the thread id) at offset 32. The kernel writes the thread that took the
  fatal signal first (fs/binfmt_elf.c ``fill_note_info``); gdb's ``gcore`` writes its current
  thread first.
* ``NT_SIGINFO`` (``siginfo_t``, include/uapi/asm-generic/siginfo.h): ``si_signo``, ``si_errno``,
  ``si_code`` ints, then at offset 16 ``si_addr`` (faults, ``si_code > 0``) or ``si_pid``/``si_uid``
  (signals sent by ``kill``/``tgkill``, ``si_code <= 0``).
* ``NT_AUXV``: (type, value) pairs; ``AT_EXECFN`` (31) is the address of the executable's name,
  the last string at the top of the initial stack.
* The environment: the kernel copies ``argv`` strings, then ``envp`` strings, then the executable
  name to the top of the stack (fs/binfmt_elf.c ``create_elf_tables``, fs/exec.c). The strings just
  below ``AT_EXECFN`` are therefore ``KEY=VALUE`` strings, read back from the dumped stack
  segment. Changes the program made later (``os.environ[...] = ...``) are not there; the
  debugger's view of ``environ`` (:mod:`hangdbg.tools.gdb`) covers those.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field

from ...text.lines import open_input

__all__ = ["CoreInfo", "CoreFileError", "is_core", "read_core_info", "ENV_LIMIT", "CORE_SIGNALS"]

ENV_LIMIT = 4 << 20
"""At most this many bytes below the executable name are scanned for environment strings."""

_ELF_MAGIC = b"\x7fELF"
_ET_CORE = 4
_AT_EXECFN = 31
_ENV_RE = re.compile(rb"^[A-Za-z_][A-Za-z0-9_]*=")
CORE_SIGNALS = frozenset({3, 4, 5, 6, 7, 8, 11, 24, 25, 31})
"""Signals whose default action is to dump core (signal(7), "Core"): SIGQUIT SIGILL SIGTRAP SIGABRT
SIGBUS SIGFPE SIGSEGV SIGXCPU SIGXFSZ SIGSYS (x86-64/aarch64 numbers). A core that names another
signal (gcore records the SIGSTOP of its attach) was taken on demand."""


class CoreFileError(Exception):
    """The file is not a readable ELF core file (message says why)."""


def is_core(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts an ELF file of type ``ET_CORE``.

    Source: the ELF header, ``e_ident`` (16 bytes) then ``e_type`` (2 bytes, byte order from
    ``EI_DATA``), System V gABI.
    """
    if len(head) < 18 or head[:4] != _ELF_MAGIC or head[5] not in (1, 2):
        return False
    fmt = "<H" if head[5] == 1 else ">H"
    return struct.unpack_from(fmt, head, 16)[0] == _ET_CORE


@dataclass(frozen=True, slots=True)
class CoreInfo:
    """The facts of one core file.

    Attributes:
        path: the core file.
        pid: the process id (``NT_PRPSINFO``), None when absent.
        fname: the command name (``pr_fname``, 16 bytes at most).
        psargs: the start of the command line (``pr_psargs``, 80 bytes at most).
        executable: the executable's path (``AT_EXECFN`` string, else the ``NT_FILE`` mapping at
            the lowest address), ``""`` when unknown.
        signal: the signal that ended the process (``si_signo``; ``pr_cursig`` of the first thread
            when there is no ``NT_SIGINFO``), None for a core taken on demand (``gcore``).
        si_code: ``si_code``: > 0 the kernel raised it (a fault), <= 0 a process sent it.
        fault_addr: the faulting address for SIGSEGV/SIGBUS/SIGFPE/SIGILL, else None.
        sender_pid: for a signal sent by ``kill``/``tgkill``/``abort``, the sender's pid.
        tids: thread ids in note order (the first one is the crashing thread of a kernel core).
        environ: the process's initial environment read from the dumped stack.
        mapped_files: files mapped into the process (``NT_FILE``), in address order, distinct.
        truncated: the file is shorter than its segments say (``ulimit -c`` or a full disk).
        size: the file's size in bytes; expected_size: what its segments need.
    """

    path: str
    pid: int | None = None
    fname: str = ""
    psargs: str = ""
    executable: str = ""
    signal: int | None = None
    si_code: int | None = None
    fault_addr: int | None = None
    sender_pid: int | None = None
    tids: tuple[int, ...] = ()
    environ: dict[str, str] = field(default_factory=dict)
    mapped_files: tuple[str, ...] = ()
    truncated: bool = False
    size: int = 0
    expected_size: int = 0

    @property
    def on_demand(self) -> bool:
        """True for a core written while the process lived on (``gcore``): no core-dumping signal."""
        return self.signal not in CORE_SIGNALS

    @property
    def crashing_tid(self) -> int | None:
        """The thread that took the fatal signal (None for a core taken on demand)."""
        return self.tids[0] if not self.on_demand and self.tids else None


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def read_core_info(path: str) -> CoreInfo:
    """Read the notes, the executable and the environment of the core file at ``path``.

    Args:
        path: an ELF core file (64-bit little-endian for the signal and thread facts).

    Returns:
        a :class:`CoreInfo`; facts that cannot be read stay at their defaults.

    Raises:
        CoreFileError: the file cannot be opened, is not an ELF core file, or its headers are
            unreadable (a core cut before its program headers).
    """
    from elftools.common.exceptions import ELFError
    from elftools.construct import ConstructError
    from elftools.elf.elffile import ELFFile

    try:
        f = open_input(path)
    except OSError as exc:
        raise CoreFileError(f"cannot open: {exc.strerror or exc}") from None
    with f:
        head = f.read(64)
        if not is_core(head):
            raise CoreFileError("not an ELF core file" + (" (an ELF executable or library)" if head[:4] == _ELF_MAGIC else ""))
        size = os.fstat(f.fileno()).st_size
        f.seek(0)
        try:
            elf = ELFFile(f)
            loads, notes = [], []
            for seg in elf.iter_segments():
                h = seg.header
                if h.p_type == "PT_LOAD":
                    loads.append((h.p_vaddr, h.p_memsz, h.p_offset, h.p_filesz))
                elif h.p_type == "PT_NOTE":
                    notes.append(seg)
            expected = max((o + n for _v, _m, o, n in loads), default=0)
            facts = _notes(notes, elf.little_endian and elf.elfclass == 64)
        except (ELFError, ConstructError, struct.error, ValueError, OSError, KeyError, IndexError, TypeError) as exc:
            raise CoreFileError(f"unreadable ELF core headers ({exc}); the file is probably truncated") from None
        execfn_addr = facts.pop("execfn_addr", None)
        executable = ""
        environ: dict[str, str] = {}
        if execfn_addr:
            executable = _read_cstring(f, loads, size, execfn_addr)
            environ = _environ_below(f, loads, size, execfn_addr)
        files = facts.pop("files", ())
        if not executable and files:
            executable = files[0]
        return CoreInfo(path=path, executable=executable, environ=environ, mapped_files=tuple(dict.fromkeys(files)),
                        truncated=expected > size, size=size, expected_size=expected, **facts)


def _notes(segments, le64: bool) -> dict:
    out: dict = {"tids": []}
    siginfo = None
    for seg in segments:
        for note in seg.iter_notes():
            kind, desc = note["n_type"], note["n_desc"]
            if kind == "NT_PRPSINFO":
                out["pid"] = int(desc["pr_pid"])
                out["fname"] = _cstr(desc["pr_fname"])
                out["psargs"] = _cstr(desc["pr_psargs"]).strip()
            elif kind == "NT_PRSTATUS" and le64 and isinstance(desc, bytes) and len(desc) >= 36:
                cursig = struct.unpack_from("<h", desc, 12)[0]
                out["tids"].append(struct.unpack_from("<i", desc, 32)[0])
                if len(out["tids"]) == 1 and cursig:
                    out["signal"] = cursig
            elif kind == "NT_SIGINFO" and le64 and isinstance(desc, bytes) and len(desc) >= 24:
                siginfo = desc
            elif kind == "NT_AUXV" and le64 and isinstance(desc, bytes):
                for i in range(0, len(desc) - 15, 16):
                    a_type, a_val = struct.unpack_from("<QQ", desc, i)
                    if a_type == _AT_EXECFN:
                        out["execfn_addr"] = a_val
            elif kind == "NT_FILE":
                try:
                    entries = sorted(zip(desc["Elf_Nt_File_Entry"], desc["filename"], strict=False), key=lambda e: e[0]["vm_start"])
                    out["files"] = [n.decode("utf-8", "replace") if isinstance(n, bytes) else str(n) for _e, n in entries]
                except (KeyError, TypeError):
                    pass
    if siginfo is not None:
        signo, _errno, code = struct.unpack_from("<iii", siginfo, 0)
        if signo:
            out["signal"], out["si_code"] = signo, code
            if code > 0 and signo in (4, 7, 8, 11):  # SIGILL SIGBUS SIGFPE SIGSEGV: si_addr
                out["fault_addr"] = struct.unpack_from("<Q", siginfo, 16)[0]
            elif code <= 0:
                out["sender_pid"] = struct.unpack_from("<i", siginfo, 16)[0]
    out["tids"] = tuple(out["tids"])
    return out


def _segment_of(loads, addr: int):
    for vaddr, memsz, offset, filesz in loads:
        if vaddr <= addr < vaddr + memsz:
            return vaddr, offset, filesz
    return None


def _read_mem(f, loads, size: int, start: int, end: int) -> bytes:
    """Bytes of process memory ``[start, end)`` within one dumped segment (shorter when not dumped)."""
    seg = _segment_of(loads, start)
    if seg is None:
        return b""
    vaddr, offset, filesz = seg
    lo = offset + (start - vaddr)
    hi = min(offset + (end - vaddr), offset + filesz, size)
    if hi <= lo:
        return b""
    f.seek(lo)
    return f.read(hi - lo)


def _read_cstring(f, loads, size: int, addr: int) -> str:
    return _cstr(_read_mem(f, loads, size, addr, addr + 4096))


def _environ_below(f, loads, size: int, execfn_addr: int) -> dict[str, str]:
    seg = _segment_of(loads, execfn_addr)
    if seg is None:
        return {}
    start = max(seg[0], execfn_addr - ENV_LIMIT)
    data = _read_mem(f, loads, size, start, execfn_addr)
    if not data:
        return {}
    strings = data.split(b"\0")
    if strings and strings[-1] == b"":
        strings.pop()  # the NUL that ends the last environment string
    env: list[tuple[str, str]] = []
    for i in range(len(strings) - 1, -1, -1):
        s = strings[i]
        if not _ENV_RE.match(s) or (i == 0 and start > seg[0]):
            break  # argv strings (or a string cut by the scan limit) below the environment
        key, _, value = s.decode("utf-8", "replace").partition("=")
        env.append((key, value))
    out: dict[str, str] = {}
    for key, value in reversed(env):  # envp order; the first of duplicates wins, as in getenv(3)
        out.setdefault(key, value)
    return out
