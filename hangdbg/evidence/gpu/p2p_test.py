"""CUDA's ``p2pBandwidthLatencyTest`` output: GPU peer-to-peer copies that are slower than copies through host memory.

The test (NVIDIA/cuda-samples Samples/5_Domain_Specific/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu) prints one
``Device: %d, %s, pciBusID: %x, pciDeviceID: %x, pciDomainID:%x`` line per GPU, then square matrices, each under its
title and a ``D\\D  0  1 ...`` (or ``GPU  0  1 ...``) header row::

    Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)
    Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
    P2P=Disabled Latency Matrix (us)
    P2P=Enabled Latency (P2P Writes) Matrix (us)

With P2P disabled a copy between two GPUs is staged through host memory; with P2P enabled it goes over NVLink or the
PCIe switch directly and is never slower where P2P works (the test's own note: a pair without P2P falls back to the
staged copy, same speed). A pair whose P2P bandwidth is below half its staged bandwidth, or whose P2P latency is ten
times its staged latency, has P2P traffic that the platform throttles or redirects: the IOMMU (its page faults in the
kernel log) or PCIe ACS sending P2P through the root complex, which NCCL's troubleshooting guide names as the cause of
P2P hangs and slowness (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs).
The thresholds are ours.

Pure: no I/O but :func:`read_p2p_test`'s file read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...model import Evidence, Finding, Kind, Severity
from ...text.lines import open_input, strip_ansi

__all__ = ["P2pTest", "marked", "p2p_findings", "parse_p2p_test", "read_p2p_test"]

SNIFF = (b"P2P (Peer-to-Peer) GPU Bandwidth Latency Test", b"P2P=Enabled", b"P2P=Disabled")
"""Bytes that mark the test's output in a file's head."""
HEAD_BYTES = 64 << 10
"""The head of a file looked at for :data:`SNIFF` (bytes)."""
SLOW_BANDWIDTH = 0.5
"""A pair is slow when its P2P bandwidth is below this fraction of its staged (P2P=Disabled) bandwidth."""
SLOW_LATENCY = 10.0
"""A pair is slow when its P2P latency is this many times its staged latency or more."""
MAX_BYTES = 4 << 20
"""Most bytes of a file read for the test (its output is a few KiB for 8 GPUs)."""

_QUOTE = re.compile(r"^(?:>\s?)+")
"""A Markdown or mail quote before a pasted line."""
_TITLE = re.compile(r"^\s*#?\s*(?P<dir>Unidirectional |Bidirectional )?P2P=(?P<p2p>Enabled|Disabled) "
                    r"(?P<what>Bandwidth|Latency)\b[^\n]*Matrix")
_HEAD = re.compile(r"^\s*#?\s*(?:D\\D|GPU)((?:\s+\d{1,3})+)\s*$")
_ROW = re.compile(r"^\s*#?\s*(?P<i>\d{1,3})((?:\s+\d+(?:\.\d+)?)+)\s*$")
_DEVICE = re.compile(r"Device: (?P<dev>\d{1,3}), [^,\n]{1,80}, pciBusID: (?P<bus>[0-9a-fA-F]{1,2}), "
                     r"pciDeviceID: (?P<devid>[0-9a-fA-F]{1,2}), pciDomainID:\s?(?P<dom>[0-9a-fA-F]{1,4})")


@dataclass
class P2pTest:
    """What one output held: ``matrices[(direction, p2p, what)][(i, j)]`` (GB/s or us) with the line each title was
    on, and the PCI address of each device (``0000:3b:00``)."""

    matrices: dict[tuple[str, str, str], dict[tuple[int, int], float]] = field(default_factory=dict)
    title_line: dict[tuple[str, str, str], tuple[int, str]] = field(default_factory=dict)
    pci: dict[int, str] = field(default_factory=dict)
    lines_skipped: int = 0


def parse_p2p_test(lines: list[str]) -> P2pTest:
    """The matrices and devices of the test's output ``lines``; rows that do not fit their matrix are counted."""
    test = P2pTest()
    key: tuple[str, str, str] | None = None
    cols: list[int] = []
    for no, line in enumerate(lines, 1):
        if (d := _DEVICE.search(line)) is not None:
            test.pci[int(d["dev"])] = f"{int(d['dom'], 16):04x}:{int(d['bus'], 16):02x}:{int(d['devid'], 16):02x}"
            continue
        if (t := _TITLE.match(line)) is not None:
            key = ((t["dir"] or "").strip().lower(), t["p2p"].lower(), t["what"].lower())
            test.matrices[key], test.title_line[key], cols = {}, (no, line), []
            continue
        if key is None:
            continue
        if (h := _HEAD.match(line)) is not None:
            cols = [int(x) for x in h.group(1).split()]
            continue
        if (r := _ROW.match(line)) is not None and cols:
            values = r.group(2).split()
            if len(values) != len(cols):
                test.lines_skipped += 1
                continue
            for j, v in zip(cols, values):
                test.matrices[key][(int(r["i"]), j)] = float(v)
            continue
        if line.strip():
            key, cols = None, []  # the matrix is over (the latency matrices' CPU rows follow a "CPU" header)
    return test


def _slow_pairs(test: P2pTest, direction: str, what: str) -> list[tuple[int, int, float, float]]:
    off = test.matrices.get((direction, "disabled", what), {})
    on = test.matrices.get((direction, "enabled", what), {})
    out = []
    for (i, j), staged in off.items():
        p2p = on.get((i, j))
        if i == j or p2p is None or staged <= 0 or p2p <= 0:
            continue
        if (what == "bandwidth" and p2p < SLOW_BANDWIDTH * staged) or (what == "latency" and p2p >= SLOW_LATENCY * staged):
            out.append((i, j, p2p, staged))
    return out


def p2p_findings(test: P2pTest, source: str) -> list[Finding]:
    """One suspect when a pair of GPUs copies slower with P2P than through the host (bandwidth below
    :data:`SLOW_BANDWIDTH` of the staged one, or latency :data:`SLOW_LATENCY` times it); nothing otherwise."""
    for direction, what, unit in (("unidirectional", "bandwidth", "GB/s"), ("bidirectional", "bandwidth", "GB/s"),
                                  ("", "latency", "us")):
        slow = _slow_pairs(test, direction, what)
        if not slow:
            continue
        i, j, p2p, staged = min(slow, key=lambda s: s[2] / s[3]) if what == "bandwidth" else max(slow, key=lambda s: s[2] / s[3])
        devices = sorted({d for s in slow for d in s[:2]})
        no, line = test.title_line[(direction, "enabled", what)]
        label = f"{direction} {what}".strip()
        return [Finding(
            Kind.HARDWARE_ERROR,
            f"GPU peer-to-peer (P2P) copies are slower than copies through host memory on {len(slow)} GPU pair(s) of "
            f"this machine (p2pBandwidthLatencyTest, {label}: GPU {i} -> GPU {j} {p2p:g} {unit} with P2P, {staged:g} "
            f"{unit} without): P2P traffic is throttled or redirected by the platform, usually the IOMMU (its IO page "
            f"faults are in dmesg) or PCIe ACS sending it through the root complex; NCCL over such P2P hangs or crawls",
            gpus=tuple(test.pci.get(d, f"GPU {d}") for d in devices), severity=Severity.SUSPECT,
            evidence=(Evidence(source, no, line.rstrip()),),
            action="disable the IOMMU (BIOS, or the kernel's amd_iommu=off / intel_iommu=off, or iommu=pt) and PCIe ACS on "
                   "the switches (NCCL troubleshooting guide: lspci -vvv | grep ACSCtl, setpci), then rerun the test; "
                   "until then NCCL_P2P_DISABLE=1 avoids P2P")]
    return []


def marked(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) holds a mark of the test's output (:data:`SNIFF`)."""
    return any(k in head for k in SNIFF)


def read_p2p_test(path: str) -> tuple[P2pTest, int] | None:
    """The test read from file ``path`` and the number of lines read; None when the file's head (:data:`HEAD_BYTES`)
    is not the test's output (no mark of it, or a kernel log's ``NVRM`` lines: the GPU grammar's). The file is
    opened once.

    Raises:
        OSError: the file cannot be read, or is no regular file (a FIFO is refused, never read).
    """
    with open_input(path) as f:
        head = f.read(HEAD_BYTES)
        if not marked(head) or b"NVRM" in head:
            return None
        text = (head + f.read(MAX_BYTES - len(head))).decode("utf-8", "replace")
    lines = [_QUOTE.sub("", ln) for ln in strip_ansi(text).replace("\r", "").split("\n")]
    return parse_p2p_test(lines), len(lines)
