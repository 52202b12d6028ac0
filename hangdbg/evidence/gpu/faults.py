"""GPU and PCIe faults in kernel logs and tool output that carry no Xid number.

Grammars (one line each; :mod:`hangdbg.evidence.gpu.grammar` feeds them the lines of a kernel log or of a
saved terminal session):

* ``nvidia-smi`` when NVML cannot open a GPU (NVML ``nvmlDeviceGetHandleByIndex`` errors,
  ``nvmlErrorString``: ``NVML_ERROR_GPU_IS_LOST`` "GPU is lost", ``NVML_ERROR_RESET_REQUIRED``
  "GPU requires reset", ``NVML_ERROR_UNKNOWN`` "Unknown Error")::

    Unable to determine the device handle for GPU0000:03:00.0: Unknown Error
    Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU

* the resource manager's reset-required status (open-gpu-kernel-modules ``nvAssertOkFailedNoLog``
  / ``nvCheckOkFailedNoLog`` with ``NV_ERR_RESET_REQUIRED``)::

    NVRM: GPU0 nvCheckOkFailedNoLog: Check failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from ...

* ECC failures as CUDA and the driver word them (CUDA ``cudaErrorECCUncorrectable`` "uncorrectable
  ECC error encountered"; Xid 63/64 "Row remapping failure")::

    RuntimeError: CUDA error: uncorrectable ECC error encountered
    NVRM: Xid ... (handled by the Xid grammar) / "... Row remapping failure ..."

* the driver could not initialize a GPU (open-gpu-kernel-modules src/nvidia/arch/nvalloc/unix/src/osinit.c
  ``NV_DEV_PRINTF(NV_DBG_ERRORS, nv, "RmInitAdapter failed! (0x%x:0x%x:%d)\n", ...)``: initStatus, rmStatus, line)::

    NVRM: GPU 0000:00:04.0: RmInitAdapter failed! (0x26:0xffff:1456)
    NVRM: RmInitAdapter failed! (0x30:0xffffffff:720)

* the resource manager's failed checks with a status that says the GPU, its memory, its firmware or its NVLink fabric
  is broken (``nvCheckOkFailedNoLog: Check failed: %s [%s] (0x%08x) returned from ...``; the status names and texts
  of open-gpu-kernel-modules src/common/sdk/nvidia/inc/nvstatuscodes.h: :data:`NV_STATUS_FAULTS`)::

    NVRM: nvCheckOkFailedNoLog: Check failed: NVLink fabric state cached by the driver is out of sync [NV_ERR_FABRIC_STATE_OUT_OF_SYNC] (0x00000087) returned from ...

* ``nvidia-smi``'s GPU table (its default view) when NVML could not read a field of a GPU: ``ERR!`` in the field
  (the volatile uncorrectable ECC count, the power draw...; nvidia-smi documentation: a field that reports an
  error), the GPU named by the bus id of its first row::

    |   3  NVIDIA A100-SXM4-80GB          On  | 00000000:4B:00.0 Off |                  ERR! |
    | N/A   34C    P0    ERR! /  400W |      0MiB / 81920MiB |      0%      Default |

* PCIe Advanced Error Reporting, Linux ``drivers/pci/pcie/aer.c`` (``aer_print_error``,
  ``aer_isr_one_error``)::

    pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0
    pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)
    pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00001000/00002000
    pcieport 0000:00:03.0:    [12] Timeout
    nvidia 0000:3b:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)

  Older kernels print ``AER: Corrected error received: id=00e8``; some omit the ``AER:`` before
  ``PCIe Bus Error``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...model import Evidence

__all__ = ["NEEDLES", "NV_STATUS_FAULTS", "PROMPT", "AerRecord", "GpuFault", "aer_line", "fault_of", "smi_table_fault"]

_BDF = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"

_HANDLE = re.compile(r"Unable to determine the device handle for GPU ?(?P<bus>" + _BDF + r"): (?P<why>[^\r\n]{1,200}?)\s*$")
_RESET = re.compile(r"\[NV_ERR_RESET_REQUIRED\]|GPU requires reset")
_BUS_IN = re.compile(r"(?:PCI:|GPU ?)(" + _BDF + r")")
_GPU_IDX = re.compile(r"NVRM: GPU(?P<idx>\d{1,3}) ")
NV_STATUS_FAULTS: dict[str, str] = {
    # the GPU is gone or unusable
    "NV_ERR_GPU_IS_LOST": "unusable", "NV_ERR_CARD_NOT_PRESENT": "unusable", "NV_ERR_GPU_IN_FULLCHIP_RESET": "unusable",
    "NV_ERR_FATAL_ERROR": "unusable", "NV_ERR_BROKEN_FB": "unusable", "NV_ERR_REJECTED_VBIOS": "unusable",
    "NV_ERR_FLCN_ERROR": "unusable", "NV_ERR_RISCV_ERROR": "unusable", "NV_ERR_SECURE_BOOT_FAILED": "unusable",
    # its memory
    "NV_ERR_ECC_ERROR": "ecc", "NV_ERR_MEMORY_ERROR": "ecc", "NV_ERR_MEMORY_TRAINING_FAILED": "ecc",
    "NV_ERR_GPU_MEMORY_ONLINING_FAILURE": "ecc", "NV_ERR_RESOURCE_RETIREMENT_ERROR": "remap-failed",
    # its NVLink links and the NVSwitch fabric (Fabric Manager's state)
    "NV_ERR_NVLINK_INIT_ERROR": "nvlink", "NV_ERR_NVLINK_MINION_ERROR": "nvlink", "NV_ERR_NVLINK_CLOCK_ERROR": "nvlink",
    "NV_ERR_NVLINK_TRAINING_ERROR": "nvlink", "NV_ERR_NVLINK_CONFIGURATION_ERROR": "nvlink",
    "NV_ERR_NVLINK_FABRIC_FAILURE": "nvlink", "NV_ERR_FABRIC_MANAGER_NOT_PRESENT": "nvlink",
    "NV_ERR_FABRIC_STATE_OUT_OF_SYNC": "nvlink",
}
"""The driver statuses (NV_STATUS names of nvstatuscodes.h) that mean the GPU itself cannot be used as it is, by the
kind of fault; every other status of a failed check (invalid argument, no memory...) is a caller's, read as no fault."""
_NV_STATUS = re.compile(r"Check failed: (?P<text>[^\[\n]{1,120}?) \[(?P<name>NV_ERR_[A-Z0-9_]{1,60})\]")
_INIT_FAILED = re.compile(r"RmInitAdapter failed! \(0x[0-9a-fA-F]{1,8}:0x[0-9a-fA-F]{1,8}:\d{1,6}\)")
_ECC = re.compile(r"(?P<what>uncorrectable ECC error(?: encountered)?|[Rr]ow remapping failure)")
_AER_HEAD = re.compile(
    r"^(?P<drv>[A-Za-z][\w-]{0,40}) (?P<dev>" + _BDF + r"): (?:AER: )?(?:PCIe Bus Error: severity=(?P<sev>[A-Za-z() -]{1,40}?), "
    r"type=(?P<type>[A-Za-z ]{1,40}?), \((?P<agent>[A-Za-z ]{1,30})\)"
    r"|(?P<rsev>(?:Multiple )?(?:Corrected|Uncorrected \((?:Non-)?Fatal\))) error received: (?:id=)?(?P<src>[0-9a-fA-F:.]{1,16}))\s*$")
_AER_DEVICE = re.compile(r"^(?P<drv>[A-Za-z][\w-]{0,40}) (?P<dev>" + _BDF + r"):\s+device \[(?P<vid>[0-9a-fA-F]{4}):(?P<did>[0-9a-fA-F]{4})\]")
_AER_BIT = re.compile(r"^(?P<drv>[A-Za-z][\w-]{0,40}) (?P<dev>" + _BDF + r"):\s+\[\s?(?P<bit>\d{1,2})\] (?P<name>[A-Za-z][\w ()/-]{0,60}?)\s*$")
# drivers/pci/pcie/err.c: "AER: can't recover (no error_detected callback)" / "AER: device recovery failed": the
# device (or the port above it) stayed broken after the error
_AER_LOST = re.compile(r"^(?P<drv>[A-Za-z][\w-]{0,40}) (?P<dev>" + _BDF + r"): (?:AER: )?(?:can't recover|device recovery failed)")

_SMI_ROW = re.compile(r"^\s*\|\s+(?P<idx>\d{1,3})\s+[^|]{1,80}?\s+(?:On|Off)\s+\|\s+(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}"
                      r":[0-9a-fA-F]{2}\.[0-7])\s+(?:On|Off)\s+\|")
_SMI_SECOND = re.compile(r"^\s*\|\s+(?:N/A|ERR!|\d{1,3}%)\s+(?:\d{1,3}C|ERR!|N/A)\s+")


def smi_table_fault(line: str, last_bus: str) -> tuple[str, tuple[str, str, str] | None] | None:
    """A row of nvidia-smi's GPU table: ``(bus, fault)`` - the bus the row belongs to (its own for a GPU's first row,
    ``last_bus`` for the second) and ``(bus, "unusable", detail)`` when the row shows ``ERR!``; None for a line that
    is no such row (a Markdown table)."""
    m = _SMI_ROW.match(line)
    if m is None and not (last_bus and _SMI_SECOND.match(line)):
        return None
    bus = m.group("bus") if m is not None else last_bus
    if "ERR!" not in line:
        return bus, None
    return bus, (bus, "unusable", "nvidia-smi shows ERR! for this GPU: NVML could not read its fields (a GPU in error: "
                                  "fallen off the bus, uncorrectable ECC errors or a fault that needs a reset)")


PROMPT = re.compile(r"^\[?[A-Za-z_][\w.-]{0,31}@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,62})[\]: ][^\n]{0,200}?[$#%>] {1,4}"
                    r"(?:sudo {1,4})?(?:nvidia-smi|dmesg|journalctl|cat|grep|tail|less)\b")
"""A shell prompt that runs a log or GPU tool (``zeyer@cn-234 ~ % nvidia-smi``, ``[root@node3 ~]# dmesg``):
the host of the lines that follow."""

NEEDLES = (b"AER", b"PCIe Bus Error", b"RmInitAdapter failed", b"NV_ERR_", b"handle for GPU", b"RESET_REQUIRED", b"requires reset", b"ECC error",
           b"emapping failure", b"nvidia-smi", b"dmesg", b"journalctl", b"ERR!", b"00000000:")
"""Byte strings one of which every line of these grammars holds (a prompt, a head line), for the
fast line filter; an AER record's continuation lines are read while it is open."""


@dataclass(frozen=True, slots=True)
class GpuFault:
    """A GPU that is lost, needs a reset or has uncorrectable memory errors, without an Xid number.

    Attributes:
        bus: ``0000:03:00`` when the line names the PCI bus, ``GPU0`` for the driver's GPU index, else ``""``.
        what: ``"unusable"`` (nvidia-smi cannot open it), ``"reset-required"``, ``"ecc"``, ``"remap-failed"``,
            ``"init-failed"`` (the driver could not initialize it) or ``"nvlink"`` (its NVLink or NVSwitch fabric).
        detail: the tool's own words (``Unknown Error``, ``GPU is lost...``).
    """

    host: str
    bus: str
    what: str
    detail: str
    time: str
    evidence: Evidence


@dataclass
class AerRecord:
    """One PCIe AER error a device or root port reported (the ``PCIe Bus Error`` line and its
    ``device [vvvv:dddd]`` / ``[bit] name`` lines).

    Attributes:
        driver: the kernel driver that printed it (``pcieport`` for a root or switch port, ``nvidia``).
        device: the printing device, ``0000:00:03.0``.
        severity: ``Corrected``, ``Uncorrected (Non-Fatal)`` or ``Uncorrected (Fatal)``.
        type: ``Data Link Layer``, ``Physical Layer``, ``Transaction Layer``.
        vendor: the PCI vendor id of the ``device [...]`` line (``10de`` = NVIDIA), ``""`` when absent.
        errors: the status bits' names (``Timeout``, ``BadTLP``, ``RxErr``).
    """

    host: str
    driver: str
    device: str
    severity: str
    type: str
    time: str
    evidence: list[Evidence]
    vendor: str = ""
    errors: list[str] = field(default_factory=list)

    @property
    def fatal(self) -> bool:
        return self.severity.startswith("Uncorrected")


def _gpu_named(msg: str) -> str:
    """The GPU a driver line names: its PCI address, else the driver's index (``NVRM: GPU3 ...`` as ``GPU3``), else ""."""
    bus = _BUS_IN.search(msg)
    idx = _GPU_IDX.search(msg)
    return bus.group(1) if bus else f"GPU{idx.group('idx')}" if idx else ""


def fault_of(msg: str) -> tuple[str, str, str] | None:
    """``(bus, what, detail)`` of a line that reports a GPU fault (see :class:`GpuFault`), else None."""
    m = _HANDLE.search(msg)
    if m:
        why = m.group("why").strip()
        return m.group("bus"), "unusable", why
    if "RESET_REQUIRED" in msg or "requires reset" in msg:
        m2 = _RESET.search(msg)
        if m2:
            return _gpu_named(msg), "reset-required", m2.group(0).strip("[]")
    if "Check failed: " in msg and (m5 := _NV_STATUS.search(msg)) is not None and m5.group("name") in NV_STATUS_FAULTS:
        return _gpu_named(msg), NV_STATUS_FAULTS[m5.group("name")], f"{m5.group('text')} [{m5.group('name')}]"
    if "RmInitAdapter failed!" in msg and (m4 := _INIT_FAILED.search(msg)) is not None:
        bus = _BUS_IN.search(msg)
        return (bus.group(1) if bus else ""), "init-failed", m4.group(0)
    if "ECC error" in msg or "emapping failure" in msg:
        m3 = _ECC.search(msg)
        if m3:
            what = "ecc" if "ECC" in m3.group("what") else "remap-failed"
            bus = _BUS_IN.search(msg)
            return (bus.group(1) if bus else ""), what, m3.group("what")
    return None


def aer_line(msg: str) -> tuple[str, re.Match[str]] | None:
    """``("head" | "device" | "bit" | "lost", match)`` for a line of a PCIe AER report, else None
    (``lost``: the kernel could not recover the device after the error)."""
    if len(msg) > 400:
        return None
    for name, rx in (("head", _AER_HEAD), ("device", _AER_DEVICE), ("bit", _AER_BIT), ("lost", _AER_LOST)):
        m = rx.match(msg)
        if m:
            return name, m
    return None
