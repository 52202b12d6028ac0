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

* GPU faults without an Xid number and PCIe AER errors: :mod:`hangdbg.evidence.gpu.faults`; a shell
  prompt (``user@node3 ~ $ nvidia-smi``) names the host of the lines that follow.
* lines quoted in backticks or Markdown table rows (a README quoting a log) are not records.

GPUs are named ``host:0000:3b:00`` (PCI domain:bus:device, lower case) in findings.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

from ...model import Evidence
from .faults import NEEDLES, PROMPT, AerRecord, GpuFault, aer_line, fault_of, smi_table_fault
from ...text.lines import iter_lines_where, open_input

__all__ = ["EccState", "GpuLogEvents", "GpuLost", "XidEvent", "host_from_path", "norm_bus", "scan", "scan_file", "sniff"]

_SYSLOG = re.compile(
    r"^(?P<ts>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" (?P<host>[^\s`|]+) kernel: (?:\[\s*\d+\.\d+\] )?(?P<msg>.*)$")
_DMESG_T = re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\] (?P<msg>.*)$")
_DMESG_REL = re.compile(r"^\[\s*(?P<ts>\+?\d+\.\d+)\] (?P<msg>.*)$")  # dmesg, dmesg -H/--reltime (+delta)
_ISO_BARE = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) (?P<msg>.*)$")

_XID = re.compile(
    r"(?:NVRM: |^\s*)Xid \(PCI:(?:(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.\d)?(?P<mig>(?: GPU-C?I:\d+)*)"
    r"|(?=[^()]*[.xX*#<])[0-9a-fA-FxX.*#:<>_ -]{1,24})\): "  # redacted in a paste (PCI:..., PCI:0000:xx:00)
    r"(?P<code>\d+), (?:pid=(?P<pid>'?<?\w*>?'?), name=(?P<name>.*?), )?(?P<msg>.*?)"
    r"(?: caused by previous Xid (?P<prev>\d+))?\s*$")
_XID_HINT = re.compile(r"NVRM: Xid|^\s*Xid \(PCI:")
"""An Xid line: the driver's ``NVRM: Xid (PCI:...)`` (NVIDIA's Xid errors guide, docs.nvidia.com/deploy/xid-errors,
"NVRM: Xid (PCI:0000:03:00): 14, Channel 00000001"), or that record alone at the start of a line, as a paste that
dropped the ``NVRM:`` tag leaves it."""
UNNAMED_BUS = "?"
"""The bus of an Xid line whose PCI address was not printed or was redacted (``Xid (PCI:...)``)."""
_GPU_AT = re.compile(r"NVRM: GPU at PCI:(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}): (?P<uuid>GPU-[0-9a-fA-F-]+)")
_SERIAL = re.compile(r"NVRM: GPU Board Serial Number: (?P<serial>\S*)")
_FELL = re.compile(r"(?:NVRM: |^\s*)(?:The NVIDIA )?GPU (?:at )?(?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
                   r"(?:\.\d)?:?(?: \(PCI ID: [^)]*\))?.*?fallen off the bus")
_RECOVERY = re.compile(r"recovery action changed from .*? to 0x[0-9a-fA-F]+ \((?P<to>[^)]*)\)")

# nvidia-smi -q
_NVSMI_GPU = re.compile(r"^GPU (?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.\d\s*$")
_KV = re.compile(r"^(?P<indent> {0,40})(?P<k>[^:\s][^:]{0,79}?) {0,80}: {0,8}(?P<v>.*\S|)\s*$")
_SECTION = re.compile(r"^(?P<indent> {0,40})(?P<k>[A-Za-z][^:]{0,79}?)\s*$")

_HOST_WORD = (r"(?:dmesg|syslog|journal(?:ctl)?|kern|kernel|messages|nvidia-smi(?:-q)?|nvidia-bug-report|nvsmi|smi|nvml"
              r"|topo|ecc|q|xid|log|txt|out|gz)")
"""Words of the tools and options whose output is read (``dmesg``, ``nvidia-smi -q``, ``nvsmi-q``) and of file
types: never a node's name."""
_HOST_WORDS = re.compile(rf"^{_HOST_WORD}(?:[-_.]|$)|(?:^|[-_.]){_HOST_WORD}$", re.IGNORECASE)  # only at either end
_GPU_MODEL = re.compile(r"(?:gb|mi|rtx|[abhklptv])\d{1,4}[a-z]{0,2}", re.IGNORECASE)
"""A GPU's product name in a file or folder name (NVIDIA A100, H100, H200, B200, GB200, V100, P100, K80, L4, L40S, T4,
A10G; AMD MI300X): what the GPU is, not which node holds it."""
_HOST_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*")
_TEMP_DIR = re.compile(r"tmp[a-z0-9_]{8}")
"""A directory Python's tempfile made (``tmp`` and 8 random characters): no node's name."""
_GENERIC_DIRS = {"", ".", "logs", "log", "tmp", "dmesg", "syslog", "var", "out", "collected", "data"}


def norm_bus(bus: str) -> str:
    """``00000000:3B:00.0`` / ``0000:3b:00`` -> ``0000:3b:00`` (4-digit domain, lower case, no function)."""
    parts = bus.lower().split(".")[0].split(":")
    if len(parts) != 3:
        return bus.lower()
    return f"{parts[0][-4:].rjust(4, '0')}:{parts[1]}:{parts[2]}"


def looks_like_host(name: str, folder: bool = False) -> bool:
    """True when ``name`` (what is left of a file name, or a folder's name) can be a node's name:
    letters, digits and ``-``/``.`` starting with a letter (RFC 1123 host names; a file name may
    also use ``_``, a folder's may not: ``test_run_0``, ``run_2026`` are no nodes), with a digit in a
    part that is not a GPU's product name (``node3``, ``dgx01``, ``gpu-node-017``, ``hpc-1``; not
    ``q``, ``vm``, ``h200``, ``gpu-h200``, ``2026-11-27``). Ours: a cluster names its nodes by
    number; a name without one is more often a tool's, an option's or a GPU's word than a node's,
    and ``--host`` or a prompt in the text names such a node."""
    if not _HOST_NAME.fullmatch(name) or (folder and "_" in name):
        return False
    return any(any(c.isdigit() for c in part) and not _GPU_MODEL.fullmatch(part) for part in re.split(r"[-_.]", name))


def host_from_path(path: str) -> str:
    """A node name from a file name such as ``node3.dmesg.txt``, ``dmesg-node3.log``,
    ``dgx01-nvidia-smi-q.txt`` or ``node3/dmesg.txt``; ``""`` when the name carries none
    (``nvsmi-q.txt``, ``nvidia-smi-q.h200.txt``, ``smi.txt``, ``q.txt``). Only words at either end of
    the name (``dmesg``, ``nvidia-smi-q``, ``log``, ``txt``: ``_HOST_WORD``) are dropped:
    ``open-gpu-kernel-modules-1.txt`` keeps its ``kernel``; what is left, else the directory, names
    a node only when it looks like a host name (:func:`looks_like_host`). A weak source: a syslog
    line's host field or a shell prompt in the text wins."""
    base = os.path.basename(path)
    prev = None
    while prev != base:
        prev, base = base, _HOST_WORDS.sub("", base)
    base = base.strip("-_. ")
    if base:
        return base if looks_like_host(base) else ""
    parent = os.path.basename(os.path.normpath(os.path.dirname(path)))  # only a directory named in the path
    if parent.lower() in _GENERIC_DIRS or parent == ".." or _TEMP_DIR.fullmatch(parent):
        return ""
    return parent if looks_like_host(parent, folder=True) else ""


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
    faults: list[GpuFault] = field(default_factory=list)
    aer: list[AerRecord] = field(default_factory=list)
    aer_lost: list[tuple[str, str, str, Evidence]] = field(default_factory=list)  # host, driver, device, line
    lines_read: int = 0
    lines_skipped: int = 0
    nvrm_lines: int = 0
    quoted_lines: int = 0

    @property
    def records(self) -> int:
        """Records recognised: the NVIDIA driver's kernel-log lines (``NVRM``), nvidia-smi GPU blocks,
        GPU faults without an Xid (:mod:`hangdbg.evidence.gpu.faults`) and PCIe AER errors."""
        return self.nvrm_lines + len(self.ecc) + len(self.faults) + len(self.aer)


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
    state = _LostState()

    def skipped(count: int, data: bytes) -> None:
        ev.lines_read += count

    with open_input(path) as f:
        _scan(iter_lines_where(f, (b"NVRM", b"GPU ", b"Xid (") + NEEDLES, skipped,
                               lambda: smi.cur is not None or state.aer_last is not None), source, host, ev, smi, state)
    return ev


def scan(lines, source: str, host: str = "", events: GpuLogEvents | None = None) -> GpuLogEvents:
    """Parse one kernel log or ``nvidia-smi -q`` text (pure; never raises on content).

    Args:
        lines: ``(line_number, text)`` pairs (:func:`hangdbg.text.lines.iter_lines`).
        source: file name for the evidence.
        host: node name used when a line names none (see :func:`host_from_path`).
    """
    ev = events if events is not None else GpuLogEvents()
    return _scan(lines, source, host, ev, _SmiState(), _LostState())


def _scan(lines, source: str, host: str, ev: GpuLogEvents, smi: _SmiState, lost: _LostState) -> GpuLogEvents:
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
        self.prev: tuple[str, str, str, list[Evidence]] | None = None  # (time, host, message, lines) of the last NVRM line
        self.prompt_host = ""  # from a shell prompt line (``user@node3 ~ % nvidia-smi``)
        self.aer_last: AerRecord | None = None  # the AER record whose detail lines may follow
        self.smi_bus = ""  # the bus of the last GPU row of nvidia-smi's table (its second row names none)


MAX_RECORD = 8192
"""Characters of a kernel-log or nvidia-smi line read (a driver message is a few hundred; the rest
of a longer line is garbage, and lazy patterns over it would be quadratic)."""


def _line(ev, smi, lost: _LostState, source, default_host, n, raw) -> None:
    raw = raw[:MAX_RECORD]
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
    if line.count("`") == 1 and line.rstrip().endswith("`"):
        line = line.rstrip().rstrip("`")  # a code fence's closing backtick pasted onto the last line
    if line.lstrip().startswith("|") and (row := smi_table_fault(line, lost.smi_bus)) is not None:
        lost.smi_bus, fault = row  # nvidia-smi's GPU table (its | rows are no Markdown table)
        if fault is not None:
            _add_fault(ev, lost.prompt_host or default_host, "", fault, Evidence(source, n, raw))
        return
    if "`" in line or line.lstrip().startswith("|"):  # quoted in prose or a Markdown table: not a log record
        ev.quoted_lines += 1
        lost.prev = lost.aer_last = None
        return
    m = PROMPT.match(line)
    if m:
        lost.prompt_host = m.group("host")
        return
    default_host = lost.prompt_host or default_host
    if "NVRM" not in line and "Xid (PCI:" not in line and "fallen off the bus" not in line:
        lost.prev = None
        _other_line(ev, lost, source, default_host, n, raw, line)
        return
    lost.aer_last = None
    ev.nvrm_lines += 1
    if line[:1].isspace() and line.lstrip().startswith("NVRM: ") and lost.prev is not None:
        # a message the driver printed over several lines (``nv.c`` "The NVIDIA GPU ... has fallen off the bus")
        ts, host, msg, ls = lost.prev
        msg = f"{msg} {line.strip()[6:]}"
        ls.append(Evidence(source, n, raw))
        lost.prev = (ts, host, msg, ls)
        _fell(ev, lost, ts, host, msg, ls)
        return
    ts, host, msg = _split(line)
    host = host or default_host
    if _continues(lost.prev, ts, host, msg):
        # journalctl/syslog decorate each line of a multi-line driver message with the same time and host
        _, _, pmsg, ls = lost.prev  # type: ignore[misc]
        ls.append(Evidence(source, n, raw))
        lost.prev = (ts, host, f"{pmsg} {msg.strip()[6:]}", ls)
        _fell(ev, lost, ts, host, lost.prev[2], ls)
        return
    lost.prev = (ts, host, msg, [Evidence(source, n, raw)])
    fault = fault_of(msg)
    if fault is not None:
        _add_fault(ev, host, ts, fault, Evidence(source, n, raw))
        return
    m = _XID.search(msg)
    if m:
        bus = norm_bus(m.group("bus")) if m.group("bus") else UNNAMED_BUS
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
    _fell(ev, lost, ts, host, msg, [Evidence(source, n, raw)])


def _continues(prev: tuple[str, str, str, list[Evidence]] | None, ts: str, host: str, msg: str) -> bool:
    """True when a decorated ``NVRM:`` line continues the previous one: the same time stamp and
    host, the previous message not ended by a full stop, and this line not a record of its own
    (``nv.c`` prints "The NVIDIA GPU ... / (PCI ID: ...) installed in this system has / fallen off
    the bus ..." as three lines; journalctl gives each its own ``Jun 10 07:31:44 host kernel:``)."""
    if prev is None or not ts or prev[0] != ts or prev[1] != host or not msg.lstrip().startswith("NVRM: "):
        return False
    if prev[2].rstrip().endswith((".", "!")):
        return False
    return not (_XID_HINT.search(msg) or _GPU_AT.search(msg) or _SERIAL.search(msg) or _FELL.search(msg)
                or fault_of(msg) is not None)


def _fell(ev: GpuLogEvents, lost: _LostState, ts: str, host: str, msg: str, lines: list[Evidence]) -> None:
    m = _FELL.search(msg)
    if m:
        bus = norm_bus(m.group("bus"))
        if (host, bus) not in lost.reported:
            lost.reported.add((host, bus))
            ev.lost.append(GpuLost(host, bus, ts, tuple(lost.lines.get((host, bus), [])[:3]) + tuple(lines[:4])))


def _add_fault(ev: GpuLogEvents, host: str, ts: str, fault: tuple[str, str, str], evidence: Evidence) -> None:
    bus, what, detail = fault
    ev.faults.append(GpuFault(host, norm_bus(bus) if ":" in bus else bus, what, detail, ts, evidence))


def _other_line(ev: GpuLogEvents, lost: _LostState, source: str, default_host: str, n: int, raw: str, line: str) -> None:
    """A line without ``NVRM``: a GPU fault a tool printed, or a PCIe AER report line."""
    ts, host, msg = _split(line)
    host = host or default_host
    fault = fault_of(msg)
    if fault is not None:
        lost.aer_last = None
        _add_fault(ev, host, ts, fault, Evidence(source, n, raw))
        return
    hit = aer_line(msg)
    if hit is None:
        if "PCIe Bus Error" in msg:  # a cut or garbled AER line
            ev.lines_skipped += 1
        lost.aer_last = None
        return
    what, m = hit
    dev = m.group("dev").lower()
    if what == "lost":
        if not any(h == host and d == dev for h, _, d, _ in ev.aer_lost):
            ev.aer_lost.append((host, m.group("drv"), dev, Evidence(source, n, raw)))
        return
    if what == "head" and m.group("sev"):
        head = AerRecord(host, m.group("drv"), dev, m.group("sev").strip(), m.group("type").strip(), ts, [Evidence(source, n, raw)])
        ev.aer.append(head)
        lost.aer_last = head
        return
    rec = lost.aer_last
    if what == "head" or rec is None or rec.device != dev:
        return  # "error received" (the record's lines follow) or detail lines of no record
    if what == "device":
        rec.vendor = m.group("vid").lower()
    elif len(rec.errors) < 8:
        rec.errors.append(m.group("name").replace("(First)", "").strip())


def _smi_line(smi: _SmiState, source: str, n: int, line: str) -> None:
    cur = smi.cur
    assert cur is not None  # only called inside an open GPU block
    line = line[:4096].rstrip()  # nvidia-smi -q pads its lines: trailing blanks would make the match quadratic
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
            if cur.remapped_uncorrectable:
                cur.evidence.append(Evidence(source, n, f"Remapped Rows Uncorrectable Error: {val}"))
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
    """True for kernel logs with NVIDIA driver (``NVRM:``) lines or PCIe AER errors, ``nvidia-smi -q`` texts,
    and texts with a GPU fault of :mod:`hangdbg.evidence.gpu.faults` (nvidia-smi cannot open a GPU, reset
    required, uncorrectable ECC error)."""
    return b"NVRM:" in head or _XID_AT_START.search(head) is not None or b"==============NVSMI LOG==============" in head or (
        b"ECC Errors" in head and b"Attached GPUs" in head) or any(k in head for k in _SNIFF_MORE)


_XID_AT_START = re.compile(rb"(?m)^\s*Xid \(PCI:")
_SNIFF_MORE = (b"Unable to determine the device handle for GPU", b"GPU has fallen off the bus", b"PCIe Bus Error: severity=", b"NV_ERR_RESET_REQUIRED",
               b"uncorrectable ECC error", b"GPU requires reset", b"ERR! |")
