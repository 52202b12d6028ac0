"""Well-known NVIDIA Xid codes: meaning, the action that clears them, and how much they matter here.

Source: NVIDIA "XID Errors" (docs.nvidia.com/deploy/xid-errors), the Xid catalog for Ampere and
newer ("Resolution Bucket (Immediate Action)": RESTART_APP, RESET_GPU, RESTART_BM, WORKFLOW_*,
CONTACT_SUPPORT) and the open-gpu-kernel-modules source (``ROBUST_CHANNEL_*`` names). Actions are
written in field terms: *restart the app*, *reset the GPU* (``nvidia-smi -r`` or a reboot), *drain
the node* (take it out of the scheduler, reboot, test), *RMA* (hardware replacement through support).

Severity: ``suspect`` for errors that kill or wedge the GPU (the job's hang/crash is explained by
them), ``warning`` for application-level errors and recoverable events (a symptom of a bug in the
program or of another fault), ``info`` for purely informational events.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...model import Severity

__all__ = ["XID_CODES", "XidInfo", "xid_info"]


@dataclass(frozen=True, slots=True)
class XidInfo:
    code: int
    meaning: str
    action: str
    severity: Severity


_RESTART = "restart the app"
_APP = "restart the app; check the application (illegal memory access, a bad kernel) with compute-sanitizer"
_RESET = "reset the GPU (nvidia-smi -r or reboot)"
_DRAIN = "drain the node and reboot it; RMA the GPU if it recurs"
_RMA = "drain the node; RMA / contact NVIDIA support"

XID_CODES: dict[int, XidInfo] = {x.code: x for x in (
    XidInfo(8, "GPU stopped processing (channel idle timeout)", _RESTART, Severity.WARNING),
    XidInfo(13, "Graphics engine exception (often an out-of-range access by the application)", _APP, Severity.WARNING),
    XidInfo(31, "GPU memory page fault (MMU fault), usually an illegal address in the application", _APP, Severity.WARNING),
    XidInfo(32, "Invalid or corrupted push buffer stream (DMA/PCIe)", _RESTART + "; check PCIe if it recurs", Severity.WARNING),
    XidInfo(38, "Driver firmware error", _RESET, Severity.SUSPECT),
    XidInfo(43, "GPU stopped processing (reset channel verification error), the application's channel was killed", _RESTART, Severity.WARNING),
    XidInfo(45, "Preemptive cleanup of channels, due to a previous error or the process ending", "none by itself; look at the Xid before it", Severity.INFO),
    XidInfo(48, "Double-bit (uncorrectable) ECC error", _RESET + "; drain the node if it recurs", Severity.SUSPECT),
    XidInfo(56, "Display engine error", _RESET, Severity.WARNING),
    XidInfo(57, "Error programming video memory interface", _RMA, Severity.SUSPECT),
    XidInfo(58, "Unstable video memory interface detected", _RMA, Severity.SUSPECT),
    XidInfo(61, "Internal micro-controller breakpoint/warning (PMU)", _RESET, Severity.SUSPECT),
    XidInfo(62, "Internal micro-controller halt (PMU)", _RESET + "; RMA if it recurs", Severity.SUSPECT),
    XidInfo(63, "ECC page retirement or row remapping recording event", _RESET + " to apply the remapping", Severity.WARNING),
    XidInfo(64, "ECC page retirement or row remapper recording failure", _RMA, Severity.SUSPECT),
    XidInfo(68, "Video processor (NVDEC) exception", _RESTART, Severity.WARNING),
    XidInfo(69, "Graphics engine class error", _RESTART, Severity.WARNING),
    XidInfo(74, "NVLink error", _RESET + "; check the NVLink / NVSwitch fabric, drain the node if it recurs", Severity.SUSPECT),
    XidInfo(79, "GPU has fallen off the bus", _DRAIN + " (check PCIe, power, thermals)", Severity.SUSPECT),
    XidInfo(92, "High single-bit ECC error rate", "watch the node; reset the GPU at the next maintenance", Severity.WARNING),
    XidInfo(94, "Contained ECC error (the application that touched the memory was killed)", _RESTART + "; reset the GPU to remap the row", Severity.SUSPECT),
    XidInfo(95, "Uncontained ECC error (all applications on the GPU are affected)", _RESET + "; drain the node if it recurs", Severity.SUSPECT),
    XidInfo(109, "Context switch timeout", _RESTART, Severity.WARNING),
    XidInfo(110, "Security fault error", _RESET, Severity.SUSPECT),
    XidInfo(119, "GSP RPC timeout (the GPU System Processor stopped answering)", _RESET + "; drain the node if it recurs", Severity.SUSPECT),
    XidInfo(120, "GSP error", _RESET + "; drain the node if it recurs", Severity.SUSPECT),
    XidInfo(121, "C2C (chip-to-chip) link corrected error", "watch the node", Severity.WARNING),
    XidInfo(122, "SPI PMU RPC read failure", _RESET, Severity.WARNING),
    XidInfo(123, "SPI PMU RPC write failure", _RESET, Severity.WARNING),
    XidInfo(136, "Link training failed", _RESET, Severity.SUSPECT),
    XidInfo(140, "Unrecovered ECC error", _RESET + "; drain the node if it recurs", Severity.SUSPECT),
    XidInfo(143, "GPU initialization failure", _RMA, Severity.SUSPECT),
    XidInfo(144, "NVLink: SAW / MVB error", _RESET, Severity.SUSPECT),
    XidInfo(145, "NVLink: RLW error", _RESET, Severity.SUSPECT),
    XidInfo(146, "NVLink: TLW error", _RESET, Severity.SUSPECT),
    XidInfo(147, "NVLink: TREX error", _RESET, Severity.SUSPECT),
    XidInfo(148, "NVLink: NVLPW control error", _RESET, Severity.SUSPECT),
    XidInfo(149, "NVLink: NETIR link event", _RESET + "; check the NVLink fabric", Severity.SUSPECT),
    XidInfo(150, "NVLink: MSE watchdog / error", _RESET, Severity.SUSPECT),
    XidInfo(154, "GPU recovery action changed (the driver asks for a reset, reboot or drain)", "follow the recovery action in the message", Severity.SUSPECT),
)}


def xid_info(code: int) -> XidInfo:
    """The entry for ``code``; unknown codes get a generic entry (severity ``warning``)."""
    return XID_CODES.get(code) or XidInfo(code, "see NVIDIA's Xid catalog", "look the code up in NVIDIA's Xid catalog", Severity.WARNING)
