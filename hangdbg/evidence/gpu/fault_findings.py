"""Findings from GPU faults without an Xid number and from PCIe AER errors (:mod:`hangdbg.evidence.gpu.faults`).

Heuristic (ours, from NVIDIA's Xid catalog and the Linux PCIe AER documentation
``Documentation/PCI/pcieaer-howto.rst``): a GPU that nvidia-smi cannot open, or that needs a
reset, is as lost as one that fell off the bus (suspect); uncorrectable ECC errors and failed row
remapping name the GPU (suspect). Corrected AER errors are recovered by the hardware: repeated,
they mark a degrading link under the port that reports them (warning). An uncorrected (fatal or
non-fatal) AER error on an NVIDIA device (driver ``nvidia``, vendor ``10de``, or a bus the driver
names) is the GPU's link failing (suspect); on another device a warning.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Sequence

from ...model import Evidence, Finding, Kind, Severity
from .faults import AerRecord, GpuFault
from .xid_codes import xid_info

__all__ = ["aer_findings", "fault_findings"]

_LOST_ACTION = ("drain the node and reset the GPU (nvidia-smi -r) or reboot the node; look in dmesg for Xid 79 / "
                "'fallen off the bus' on it; RMA the GPU if it happens again")
_WHAT = {
    "unusable": (Kind.GPU_LOST, "is lost or unusable: nvidia-smi cannot open it", _LOST_ACTION),
    "reset-required": (Kind.GPU_LOST, "requires a reset: the driver refuses work on it until then", _LOST_ACTION),
    "ecc": (Kind.ECC, "reports an uncorrectable ECC error", xid_info(48).action),
    "remap-failed": (Kind.ECC, "failed to remap a row with an uncorrectable error", "drain the node; RMA the GPU"),
    "nvlink": (Kind.HARDWARE_ERROR, "has a broken NVLink or NVSwitch fabric state: multi-GPU communication over NVLink "
               "(NCCL's P2P and NVLS, CUDA multicast) fails on it",
               "check the fabric: nvidia-fabricmanager's status and log, nvidia-smi nvlink -s / -e; restart the fabric "
               "manager or reboot the node; drain it if it recurs"),
    "init-failed": (Kind.GPU_LOST, "could not be initialized by the driver (RmInitAdapter failed): no process can use it",
                    "reboot the node (or reset the GPU); check dmesg before it (fallen off the bus, firmware/GSP, PCIe), the "
                    "driver version against the GPU; drain the node and RMA the GPU if it recurs"),
}


def _name(host: str, bus: str) -> str:
    if host and bus:
        return f"{host}:{bus}"
    return bus or host


def fault_findings(faults: list[GpuFault]) -> list[Finding]:
    """One suspect finding per host, GPU and kind of fault."""
    by: dict[tuple[str, str, str], list[GpuFault]] = defaultdict(list)
    for f in faults:
        by[(f.host, f.bus, f.what)].append(f)
    out = []
    for (host, bus, what), fs in by.items():
        kind, words, action = _WHAT[what]
        gpu = _name(host, bus) if bus else ""
        where = f"GPU {gpu}" if gpu else f"a GPU on {host}" if host else "a GPU"
        out.append(Finding(
            kind=kind, summary=f"{where} {words} ({fs[0].detail})" + (f" x{len(fs)}" if len(fs) > 1 else ""),
            hosts=(host,) if host else (), gpus=(gpu,) if gpu else (), severity=Severity.SUSPECT, action=action,
            evidence=tuple(f.evidence for f in fs[:3])))
    return out


def _is_gpu(r: AerRecord, gpu_buses: set[tuple[str, str]]) -> bool:
    return r.driver == "nvidia" or r.vendor == "10de" or (r.host, r.device.split(".")[0]) in gpu_buses


def aer_findings(records: list[AerRecord], gpu_buses: set[tuple[str, str]],
                 lost: Sequence[tuple[str, str, str, Evidence]] = ()) -> list[Finding]:
    """One finding per host, device and corrected/uncorrected.

    Args:
        records: the AER errors of the logs.
        gpu_buses: ``(host, "0000:3b:00")`` of the GPUs the driver's lines name.
        lost: ``(host, driver, device, line)`` of the devices the kernel could not recover after an
            error (``nvidia 0000:03:00.0: AER: can't recover``, drivers/pci/pcie/err.c): an uncorrected
            error a port reports on a host where a GPU was not recovered is that GPU's link failing.
    """
    by: dict[tuple[str, str, bool], list[AerRecord]] = defaultdict(list)
    for r in records:
        by[(r.host, r.device, r.fatal)].append(r)
    out = []
    for (host, dev, fatal), rs in by.items():
        gpu = _is_gpu(rs[0], gpu_buses)
        kinds = ", ".join(f"{t}" + (f" x{c}" if c > 1 else "") for t, c in Counter(r.type for r in rs).most_common())
        bits = sorted({b for r in rs for b in r.errors})
        who = f"{'GPU' if gpu else rs[0].driver} {dev}" + (f" on {host}" if host else "")
        sev = sorted({r.severity for r in rs})
        summary = (f"{len(rs)} PCIe {'/'.join(sev)} error{'s' if len(rs) > 1 else ''} reported by {who} "
                   f"({kinds}{'; ' + ', '.join(bits) if bits else ''})")
        ev: tuple[Evidence, ...] = tuple(e for r in rs[:2] for e in r.evidence[:1])
        names: tuple[str, ...] = (_name(host, dev.split(".")[0]),) if gpu else ()
        below = [(d, e) for h, drv, d, e in lost if h == host and drv == "nvidia" and d != dev] if fatal and not gpu else []
        if below:  # a port's uncorrected error and a GPU below it the kernel could not recover
            gpu, names = True, tuple(_name(host, d.split(".")[0]) for d, _ in below[:4])
            summary += f"; GPU {', '.join(d for d, _ in below[:4])} below it could not be recovered"
            ev += tuple(e for _, e in below[:1])
            dev = below[0][0]
        if fatal:
            out.append(Finding(
                kind=Kind.PCIE_AER, summary=summary + ": the link to the device failed", hosts=(host,) if host else (),
                gpus=names, severity=Severity.SUSPECT if gpu else Severity.WARNING, evidence=ev,
                action=(f"drain the node; reseat the GPU at {dev} or RMA it; check its slot, riser and cables" if gpu else
                        f"check the device at {dev} and the link to it (lspci -vvv -s {dev}); reseat it")))
        else:
            out.append(Finding(
                kind=Kind.PCIE_AER, summary=summary + (": corrected by the hardware, but repeated: the link below that "
                "port is unreliable" if len(rs) > 1 else ": corrected by the hardware"), hosts=(host,) if host else (), gpus=names,
                severity=Severity.WARNING, evidence=ev,
                action=(f"check the PCIe link at {dev} (lspci -vvv -s {dev}: link speed/width, error counters): reseat "
                        "the GPU, riser or cable below that port; watch for Xid 79 or an uncorrected error next")))
    return out
