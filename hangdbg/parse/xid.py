"""Read GPU errors from kernel logs and ``nvidia-smi -q``: NVIDIA Xid events, lost GPUs, ECC counts.

Formats:

* Xid lines, as the driver prints them (open-gpu-kernel-modules, ``krcReportXid``)::

    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 13, pid=77, name=python, Graphics Exception ...
    NVRM: Xid (PCI:0000:3b:00): 45, pid=1234, name=python, Ch 00000010 caused by previous Xid 79
    NVRM: Xid (PCI:0000:3b:00): 119, Timeout after 6s of waiting for RPC response ...   (no process)

* the "fallen off the bus" report that carries no Xid number (``nv.c``/``osHandleGpuLost``)::

    NVRM: GPU at PCI:0000:3b:00: GPU-2a3c6f1e-...
    NVRM: GPU Board Serial Number: 1324220012345
    NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.

* line decorations: syslog / journalctl ``Jan  5 10:00:00 host kernel: [12345.678] ...``, ISO
  journal ``2026-01-05T10:00:00+0000 host kernel: ...``, ``dmesg`` ``[12345.678901] ...`` and
  ``dmesg -T`` ``[Mon Jan  5 10:00:00 2026] ...``. The host comes from the syslog line when
  present, else from the ``host`` argument, else from the file name (``node3.dmesg.txt``,
  ``dmesg-node3.log``, ``node3/dmesg.txt``).
* ``nvidia-smi -q``: ``GPU 00000000:3B:00.0`` blocks with ``ECC Errors`` / ``Volatile`` /
  ``Aggregate`` counts (``DRAM Uncorrectable``, ``SRAM Uncorrectable ...``; older drivers
  ``Double Bit`` / ``Total``), ``Retired Pages`` (``Pending Page Blacklist``) and ``Remapped Rows``
  (``Uncorrectable Error``, ``Pending: Yes``, ``Remapping Failure Occurred: Yes``).

GPUs are named ``host:0000:3b:00`` (PCI domain:bus:device, lower case) in findings.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

from ..model import Evidence
from .textlines import iter_lines_where

__all__ = ["EccState", "GpuLogEvents", "GpuLost", "XidEvent", "host_from_path", "norm_bus", "scan", "scan_file", "sniff"]

_SYSLOG = re.compile(
    r"^(?P<ts>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" (?P<host>\S+) kernel: (?:\[\s*\d+\.\d+\] )?(?P<msg>.*)$")
_DMESG_T = re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] (?P<msg>.*)$")
_DMESG_REL = re.compile(r"^\[\s*(?P<ts>\d+\.\d+)\] (?P<msg>.*)$")
_ISO_BARE = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) (?P<msg>.*)$")

_XID = re.compile(
    r"NVRM: Xid \(PCI:(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?(?P<mig>(?: GPU-C?I:\d+)*)\): "
    r"(?P<code>\d+), (?:pid=(?P<pid>'?<?\w*>?'?), name=(?P<name>.*?), )?(?P<msg>.*?)"
    r"(?: caused by previous Xid (?P<prev>\d+))?\s*$")
_XID_HINT = re.compile(r"NVRM: Xid")
_GPU_AT = re.compile(r"NVRM: GPU at PCI:(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}): (?P<uuid>GPU-[0-9a-fA-F-]+)")
_SERIAL = re.compile(r"NVRM: GPU Board Serial Number: (?P<serial>\S*)")
_FELL = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
                   r"(?:\.\d)?:?(?: \(PCI ID: [^)]*\))?.*?fallen off the bus")
_RECOVERY = re.compile(r"recovery action changed from .*? to 0x[0-9a-fA-F]+ \((?P<to>[^)]*)\)")

# nvidia-smi -q
_NVSMI_GPU = re.compile(r"^GPU (?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.\d\s*$")
_KV = re.compile(r"^(?P<indent>\s*)(?P<k>[^:]+?)\s*:\s*(?P<v>.*?)\s*$")
_SECTION = re.compile(r"^(?P<indent>\s*)(?P<k>[A-Za-z][^:]*?)\s*$")

_HOST_WORDS = re.compile(r"(?:^|(?<=[-_.]))(?:dmesg|syslog|journal(?:ctl)?|kern|kernel|messages|nvidia-smi(?:-q)?|nvsmi|smi|"
                         r"xid|log|txt|out|gz)(?=$|[-_.])", re.IGNORECASE)
_GENERIC_DIRS = {"", ".", "logs", "log", "tmp", "dmesg", "syslog", "var", "out", "collected", "data"}


def norm_bus(bus: str) -> str:
    """``00000000:3B:00.0`` / ``0000:3b:00`` -> ``0000:3b:00`` (4-digit domain, lower case, no function)."""
    parts = bus.lower().split(".")[0].split(":")
    if len(parts) != 3:
        return bus.lower()
    return f"{parts[0][-4:].rjust(4, '0')}:{parts[1]}:{parts[2]}"


def host_from_path(path: str) -> str:
    """A node name from a file name such as ``node3.dmesg.txt``, ``dmesg-node3.log`` or
    ``node3/dmesg.txt``; ``""`` when the name carries none."""
    base = os.path.basename(path)
    prev = None
    while prev != base:
        prev, base = base, _HOST_WORDS.sub("", base)
    base = base.strip("-_. ")
    if base:
        return base
    parent = os.path.basename(os.path.normpath(os.path.dirname(path)))  # only a directory named in the path
    return "" if parent.lower() in _GENERIC_DIRS or parent == ".." else parent


@dataclass(frozen=True, slots=True)
class XidEvent:
    host: str
    bus: str
    code: int
    pid: str
    process: str
    message: str
    previous: int | None
    time: str
    evidence: Evidence

    @property
    def secondary(self) -> bool:
        """True for ``... caused by previous Xid N`` lines (fallout of another Xid)."""
        return self.previous is not None


@dataclass(frozen=True, slots=True)
class GpuLost:
    host: str
    bus: str
    time: str
    evidence: tuple[Evidence, ...]


@dataclass
class EccState:
    """ECC and remapping counters of one GPU from ``nvidia-smi -q`` (``None``: not printed / N/A)."""

    host: str
    bus: str
    volatile_uncorrectable: int | None = None
    aggregate_uncorrectable: int | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool = False
    remap_failed: bool = False
    retired_pending: bool = False
    uuid: str = ""
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class GpuLogEvents:
    xids: list[XidEvent] = field(default_factory=list)
    lost: list[GpuLost] = field(default_factory=list)
    ecc: list[EccState] = field(default_factory=list)
    uuids: dict[tuple[str, str], str] = field(default_factory=dict)
    serials: dict[tuple[str, str], str] = field(default_factory=dict)
    lines_read: int = 0
    lines_skipped: int = 0
    nvrm_lines: int = 0

    @property
    def records(self) -> int:
        """Records recognised: the NVIDIA driver's kernel-log lines (``NVRM``) and nvidia-smi GPU blocks."""
        return self.nvrm_lines + len(self.ecc)


def _split(line: str) -> tuple[str, str, str]:
    """(time, host, message) of a kernel-log line; host ``""`` when the line names none."""
    m = _SYSLOG.match(line)
    if m:
        return m.group("ts"), m.group("host"), m.group("msg")
    for rx in (_DMESG_T, _DMESG_REL, _ISO_BARE):
        m = rx.match(line)
        if m:
            msg = m.group("msg")
            m2 = _DMESG_REL.match(msg)  # "2026-..T.. [123.4] NVRM" or "[Mon ..] [123.4]"
            return m.group("ts"), "", m2.group("msg") if m2 else msg
    return "", "", line


def _int_or_none(v: str) -> int | None:
    v = v.strip()
    return int(v) if v.isdigit() else None


class _SmiState:
    """The open GPU block of an ``nvidia-smi -q`` text, with its section stack."""

    def __init__(self) -> None:
        self.cur: EccState | None = None
        self.stack: list[tuple[int, str]] = []


def scan_file(path: str, source: str, host: str = "", events: GpuLogEvents | None = None) -> GpuLogEvents:
    """:func:`scan` on a file; 1 MiB runs without ``NVRM`` or a ``GPU`` header are skipped at C speed.

    Raises:
        OSError: the file cannot be opened.
    """
    ev = events if events is not None else GpuLogEvents()
    smi = _SmiState()

    def skipped(count: int, data: bytes) -> None:
        ev.lines_read += count

    with open(path, "rb") as f:
        _scan(iter_lines_where(f, (b"NVRM", b"GPU "), skipped, lambda: smi.cur is not None), source, host, ev, smi)
    return ev


def scan(lines, source: str, host: str = "", events: GpuLogEvents | None = None) -> GpuLogEvents:
    """Parse one kernel log or ``nvidia-smi -q`` text (pure; never raises on content).

    Args:
        lines: ``(line_number, text)`` pairs (:func:`hangdbg.parse.textlines.iter_lines`).
        source: file name for the evidence.
        host: node name used when a line names none (see :func:`host_from_path`).
    """
    ev = events if events is not None else GpuLogEvents()
    return _scan(lines, source, host, ev, _SmiState())


def _scan(lines, source: str, host: str, ev: GpuLogEvents, smi: _SmiState) -> GpuLogEvents:
    lost = _LostState()
    for n, raw in lines:
        ev.lines_read += 1
        try:
            _line(ev, smi, lost, source, host, n, raw)
        except (ValueError, IndexError):
            ev.lines_skipped += 1
    if smi.cur is not None:
        ev.ecc.append(smi.cur)
    return ev


class _LostState:
    """The lines of a "fallen off the bus" report seen so far, per GPU ``(host, bus)``; the GPU a
    node's ``GPU at`` line named last (its serial number line follows it; nodes' lines interleave in a
    merged syslog)."""

    def __init__(self) -> None:
        self.lines: dict[tuple[str, str], list[Evidence]] = defaultdict(list)
        self.last_bus: dict[str, str] = {}
        self.reported: set[tuple[str, str]] = set()


def _line(ev, smi, lost: _LostState, source, default_host, n, raw) -> None:
    line = raw.replace("\x00", "")
    m = _NVSMI_GPU.match(line)
    if m:
        if smi.cur is not None:
            ev.ecc.append(smi.cur)
        smi.cur, smi.stack = EccState(default_host, norm_bus(m.group("bus"))), []
        return
    if smi.cur is not None and line.startswith((" ", "\t")):
        _smi_line(smi, source, n, line)
        return
    if smi.cur is not None and line.strip():
        ev.ecc.append(smi.cur)
        smi.cur = None
    if "NVRM" not in line:
        return
    ev.nvrm_lines += 1
    ts, host, msg = _split(line)
    host = host or default_host
    m = _XID.search(msg)
    if m:
        bus = norm_bus(m.group("bus"))
        pid = (m.group("pid") or "").strip("'")
        ev.xids.append(XidEvent(host, bus, int(m.group("code")), pid, m.group("name") or "", m.group("msg").strip(),
                                int(m.group("prev")) if m.group("prev") else None, ts, Evidence(source, n, raw)))
        if int(m.group("code")) == 79:
            lost.lines[(host, bus)].append(Evidence(source, n, raw))
        return
    if _XID_HINT.search(msg):
        ev.lines_skipped += 1
        return
    m = _GPU_AT.search(msg)
    if m:
        bus = norm_bus(m.group("bus"))
        ev.uuids[(host, bus)] = m.group("uuid")
        lost.lines[(host, bus)] = [Evidence(source, n, raw)]
        lost.last_bus[host] = bus
        return
    m = _SERIAL.search(msg)
    if m:
        last_bus = lost.last_bus.get(host)
        if last_bus is not None:
            ev.serials[(host, last_bus)] = m.group("serial")
            lost.lines[(host, last_bus)].append(Evidence(source, n, raw))
        return
    m = _FELL.search(msg)
    if m:
        bus = norm_bus(m.group("bus"))
        if (host, bus) not in lost.reported:
            lost.reported.add((host, bus))
            ev.lost.append(GpuLost(host, bus, ts, tuple(lost.lines.get((host, bus), [])[:3]) + (Evidence(source, n, raw),)))


def _smi_line(smi: _SmiState, source: str, n: int, line: str) -> None:
    cur = smi.cur
    assert cur is not None  # only called inside an open GPU block
    m = _KV.match(line)
    if m is None:
        m = _SECTION.match(line)
        if m is None:
            return
        indent, key = len(m.group("indent").expandtabs()), m.group("k").strip()
        while smi.stack and smi.stack[-1][0] >= indent:
            smi.stack.pop()
        smi.stack.append((indent, key))
        return
    indent, key, val = len(m.group("indent").expandtabs()), m.group("k").strip(), m.group("v")
    while smi.stack and smi.stack[-1][0] >= indent:
        smi.stack.pop()
    path = [k for _, k in smi.stack]
    if key == "GPU UUID":
        cur.uuid = val
        return
    if "ECC Errors" in path:
        scope = "Volatile" if "Volatile" in path else "Aggregate" if "Aggregate" in path else None
        counts = ("Uncorrectable" in key or "Double Bit" in path and key == "Total"
                  or key == "Double Bit ECC" or key.startswith("Double Bit"))
        if scope and counts:
            v = _int_or_none(val)
            if v is not None:
                attr = "volatile_uncorrectable" if scope == "Volatile" else "aggregate_uncorrectable"
                setattr(cur, attr, (getattr(cur, attr) or 0) + v)
                if v:
                    cur.evidence.append(Evidence(source, n, f"{scope} {key}: {val}"))
        return
    if "Remapped Rows" in path:
        if key == "Uncorrectable Error":
            cur.remapped_uncorrectable = _int_or_none(val)
        elif key == "Pending" and val.lower() == "yes":
            cur.remap_pending = True
            cur.evidence.append(Evidence(source, n, "Remapped Rows Pending: Yes"))
        elif key.startswith("Remapping Failure") and val.lower() == "yes":
            cur.remap_failed = True
            cur.evidence.append(Evidence(source, n, "Remapping Failure Occurred: Yes"))
        return
    if "Retired Pages" in path and key.startswith("Pending") and val.lower() == "yes":
        cur.retired_pending = True
        cur.evidence.append(Evidence(source, n, "Retired Pages Pending: Yes"))


def sniff(head: bytes) -> bool:
    """True for kernel logs with NVIDIA driver (``NVRM:``) lines and ``nvidia-smi -q`` texts."""
    return b"NVRM:" in head or b"==============NVSMI LOG==============" in head or (
        b"ECC Errors" in head and b"Attached GPUs" in head)
