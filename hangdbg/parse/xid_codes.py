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

__all__ = ["XID_CODES", "XidInfo", "xid_info"]


@dataclass(frozen=True, slots=True)
class XidInfo:
    code: int
    meaning: str
    action: str
    severity: str


_RESTART = "restart the app"
_APP = "restart the app; check the application (illegal memory access, a bad kernel) with compute-sanitizer"
_RESET = "reset the GPU (nvidia-smi -r or reboot)"
_DRAIN = "drain the node and reboot it; RMA the GPU if it recurs"
_RMA = "drain the node; RMA / contact NVIDIA support"

XID_CODES: dict[int, XidInfo] = {x.code: x for x in (
    XidInfo(8, "GPU stopped processing (channel idle timeout)", _RESTART, "warning"),
    XidInfo(13, "Graphics engine exception (often an out-of-range access by the application)", _APP, "warning"),
    XidInfo(31, "GPU memory page fault (MMU fault), usually an illegal address in the application", _APP, "warning"),
    XidInfo(32, "Invalid or corrupted push buffer stream (DMA/PCIe)", _RESTART + "; check PCIe if it recurs", "warning"),
    XidInfo(38, "Driver firmware error", _RESET, "suspect"),
    XidInfo(43, "GPU stopped processing (reset channel verification error), the application's channel was killed", _RESTART, "warning"),
    XidInfo(45, "Preemptive cleanup of channels, due to a previous error or the process ending", "none by itself; look at the Xid before it", "info"),
    XidInfo(48, "Double-bit (uncorrectable) ECC error", _RESET + "; drain the node if it recurs", "suspect"),
    XidInfo(56, "Display engine error", _RESET, "warning"),
    XidInfo(57, "Error programming video memory interface", _RMA, "suspect"),
    XidInfo(58, "Unstable video memory interface detected", _RMA, "suspect"),
    XidInfo(61, "Internal micro-controller breakpoint/warning (PMU)", _RESET, "suspect"),
    XidInfo(62, "Internal micro-controller halt (PMU)", _RESET + "; RMA if it recurs", "suspect"),
    XidInfo(63, "ECC page retirement or row remapping recording event", _RESET + " to apply the remapping", "warning"),
    XidInfo(64, "ECC page retirement or row remapper recording failure", _RMA, "suspect"),
    XidInfo(68, "Video processor (NVDEC) exception", _RESTART, "warning"),
    XidInfo(69, "Graphics engine class error", _RESTART, "warning"),
    XidInfo(74, "NVLink error", _RESET + "; check the NVLink / NVSwitch fabric, drain the node if it recurs", "suspect"),
    XidInfo(79, "GPU has fallen off the bus", _DRAIN + " (check PCIe, power, thermals)", "suspect"),
    XidInfo(92, "High single-bit ECC error rate", "watch the node; reset the GPU at the next maintenance", "warning"),
    XidInfo(94, "Contained ECC error (the application that touched the memory was killed)", _RESTART + "; reset the GPU to remap the row", "suspect"),
    XidInfo(95, "Uncontained ECC error (all applications on the GPU are affected)", _RESET + "; drain the node if it recurs", "suspect"),
    XidInfo(109, "Context switch timeout", _RESTART, "warning"),
    XidInfo(110, "Security fault error", _RESET, "suspect"),
    XidInfo(119, "GSP RPC timeout (the GPU System Processor stopped answering)", _RESET + "; drain the node if it recurs", "suspect"),
    XidInfo(120, "GSP error", _RESET + "; drain the node if it recurs", "suspect"),
    XidInfo(121, "C2C (chip-to-chip) link corrected error", "watch the node", "warning"),
    XidInfo(122, "SPI PMU RPC read failure", _RESET, "warning"),
    XidInfo(123, "SPI PMU RPC write failure", _RESET, "warning"),
    XidInfo(136, "Link training failed", _RESET, "suspect"),
    XidInfo(140, "Unrecovered ECC error", _RESET + "; drain the node if it recurs", "suspect"),
    XidInfo(143, "GPU initialization failure", _RMA, "suspect"),
    XidInfo(144, "NVLink: SAW / MVB error", _RESET, "suspect"),
    XidInfo(145, "NVLink: RLW error", _RESET, "suspect"),
    XidInfo(146, "NVLink: TLW error", _RESET, "suspect"),
    XidInfo(147, "NVLink: TREX error", _RESET, "suspect"),
    XidInfo(148, "NVLink: NVLPW control error", _RESET, "suspect"),
    XidInfo(149, "NVLink: NETIR link event", _RESET + "; check the NVLink fabric", "suspect"),
    XidInfo(150, "NVLink: MSE watchdog / error", _RESET, "suspect"),
    XidInfo(154, "GPU recovery action changed (the driver asks for a reset, reboot or drain)", "follow the recovery action in the message", "suspect"),
)}


def xid_info(code: int) -> XidInfo:
    """The entry for ``code``; unknown codes get a generic entry (severity ``warning``)."""
    return XID_CODES.get(code) or XidInfo(code, "see NVIDIA's Xid catalog", "look the code up in NVIDIA's Xid catalog", "warning")
