"""A node's GPU memory health through NVML (``nvidia-ml-py``, the bindings NVIDIA publishes), read
once by the node launcher of ``hangdbg check``, and the faults it shows.

Counters read per GPU (NVML API reference, ``nvml.h`` of the driver; the same counters
``nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT`` prints):

* ECC mode (``nvmlDeviceGetEccMode``, current and pending);
* uncorrected and corrected ECC errors, volatile (since the last driver load or reset) and
  aggregate (lifetime) (``nvmlDeviceGetTotalEccErrors``);
* row remapping (``nvmlDeviceGetRemappedRows``: rows remapped for correctable and uncorrectable
  errors, a remapping pending, a remapping failure; Ampere and later);
* page retirement pending (``nvmlDeviceGetRetiredPagesPendingStatus``; before Ampere).

A counter the GPU does not support is None. What counts as a fault (:func:`faults`) follows
NVIDIA's "GPU Memory Error Management" guide (r580): a pending row remapping or page retirement
needs a GPU reset, a failed remapping means the GPU should be replaced (RMA), volatile
uncorrectable errors mean the running work saw corrupted memory (DCGM's diag fails on each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .fields import as_bool, as_int

__all__ = ["GpuCounters", "read_gpus", "faults"]


@dataclass(frozen=True, slots=True)
class GpuCounters:
    """One GPU's memory health counters as :func:`read_gpus` read them (None: not supported or not
    read). ``index``: NVML's (= ``nvidia-smi``'s) index; ``faults``: :func:`faults`."""

    index: int
    name: str | None = None
    uuid: str | None = None
    bus: str | None = None
    ecc_mode: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    ecc_corrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    remapped_correctable: int | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    retired_pages_pending: bool | None = None
    faults: tuple[str, ...] = ()

    @classmethod
    def read(cls, d: Any) -> "GpuCounters | None":
        """The counters of one dict of a node's message (None when it is not one); a field of the
        wrong type is None (a message is data from a node)."""
        if not isinstance(d, dict) or not isinstance(d.get("index"), int):
            return None

        def text(k: str) -> str | None:
            v = d.get(k)
            return v[:200] if isinstance(v, str) else None

        def num(k: str) -> int | None:
            return as_int(d.get(k))

        def flag(k: str) -> bool | None:
            return as_bool(d.get(k))

        found = d.get("faults")
        return cls(d["index"], text("name"), text("uuid"), text("bus"), flag("ecc_mode"), num("ecc_uncorrected_volatile"),
                   num("ecc_uncorrected_aggregate"), num("ecc_corrected_volatile"), num("ecc_corrected_aggregate"),
                   num("remapped_correctable"), num("remapped_uncorrectable"), flag("remap_pending"), flag("remap_failed"),
                   flag("retired_pages_pending"),
                   tuple(str(x)[:300] for x in found if isinstance(x, str)) if isinstance(found, list) else ())


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or None when NVML says the GPU does not support it (or any NVML error)."""
    try:
        return fn(*args)
    except Exception:  # pynvml.NVMLError and its NotSupported subclasses
        return None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value) if value is not None else None


def read_gpus(nvml: Any = None) -> list[dict[str, Any]] | str:
    """Each GPU's health counters (a dict per GPU, NVML index order), or a line saying why NVML
    could not be read (no ``pynvml`` module, no driver library, ``nvmlInit`` failed).

    Args:
        nvml: the ``pynvml`` module (None: imported here); a test passes a stand-in.

    Keys of each dict: ``index``, ``name``, ``uuid``, ``bus`` (PCI bus id), ``ecc_mode``
    (True/False/None), ``ecc_pending_mode``, ``ecc_uncorrected_volatile``,
    ``ecc_uncorrected_aggregate``, ``ecc_corrected_volatile``, ``ecc_corrected_aggregate``,
    ``remapped_correctable``, ``remapped_uncorrectable``, ``remap_pending``, ``remap_failed``,
    ``retired_pages_pending`` (ints/bools, None where not supported), ``faults`` (:func:`faults`).
    """
    if nvml is None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return "NVML not read: the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return f"NVML not read: {type(exc).__name__}: {exc}"
    try:
        out = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            rec: dict[str, Any] = {"index": i, "name": _text(_call(nvml.nvmlDeviceGetName, h)),
                                   "uuid": _text(_call(nvml.nvmlDeviceGetUUID, h))}
            pci = _call(nvml.nvmlDeviceGetPciInfo, h)
            rec["bus"] = _text(getattr(pci, "busId", None)) if pci is not None else None
            mode = _call(nvml.nvmlDeviceGetEccMode, h)
            rec["ecc_mode"] = bool(mode[0]) if isinstance(mode, (list, tuple)) else None
            rec["ecc_pending_mode"] = bool(mode[1]) if isinstance(mode, (list, tuple)) and len(mode) > 1 else None
            for kind, kname in ((nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected"),
                                (nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected")):
                for counter, cname in ((nvml.NVML_VOLATILE_ECC, "volatile"), (nvml.NVML_AGGREGATE_ECC, "aggregate")):
                    v = _call(nvml.nvmlDeviceGetTotalEccErrors, h, kind, counter) if rec["ecc_mode"] else None
                    rec[f"ecc_{kname}_{cname}"] = int(v) if isinstance(v, int) else None
            rows = _call(nvml.nvmlDeviceGetRemappedRows, h)
            ok_rows = isinstance(rows, (list, tuple)) and len(rows) >= 4
            rec["remapped_correctable"] = int(rows[0]) if ok_rows else None
            rec["remapped_uncorrectable"] = int(rows[1]) if ok_rows else None
            rec["remap_pending"] = bool(rows[2]) if ok_rows else None
            rec["remap_failed"] = bool(rows[3]) if ok_rows else None
            pend = _call(nvml.nvmlDeviceGetRetiredPagesPendingStatus, h)
            rec["retired_pages_pending"] = bool(pend) if pend is not None else None
            rec["faults"] = faults(rec)
            out.append(rec)
        return out
    except Exception as exc:
        return f"NVML not read: {type(exc).__name__}: {exc}"
    finally:
        _call(nvml.nvmlShutdown)


def faults(rec: dict[str, Any]) -> list[str]:
    """The faults one GPU's counters (:func:`read_gpus`) show, one line each with the action
    (NVIDIA "GPU Memory Error Management", r580: row remapping and page retirement), empty
    when healthy. Lifetime (aggregate) counts alone are history, not a fault."""
    out = []
    if rec.get("remap_failed"):
        out.append("row remapping failed: the GPU has no spare rows left (replace it: RMA)")
    if rec.get("remap_pending"):
        out.append("row remapping pending: reset the GPU (or reboot the node) to apply it")
    if rec.get("retired_pages_pending"):
        out.append("page retirement pending: reset the GPU (or reboot the node) to retire the pages")
    unc = rec.get("ecc_uncorrected_volatile")
    if isinstance(unc, int) and unc > 0:
        out.append(f"{unc} uncorrectable ECC error(s) since the last reset: work on it saw corrupted memory "
                   "(reset the GPU; drain the node if they come back)")
    return out
