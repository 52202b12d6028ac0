"""Case 5: the GPU's health figures, recorded into the results folder: ``nvidia-smi -q`` (the whole text), and
the ECC and row-remapping counters read through NVML directly (``pynvml``, the nvidia-ml-py package: NVIDIA's
NVML bindings; the functions are those of the NVML API reference: nvmlDeviceGetTotalEccErrors,
nvmlDeviceGetRemappedRows, nvmlDeviceGetEccMode...). ``hangdbg gpu`` then reads the nvidia-smi text, and its
verdict must agree with NVML's counters: a suspect ECC finding if and only if NVML counts uncorrectable errors
since the driver loaded (volatile) or a failed row remapping (the rules of hangdbg/evidence/gpu/analysis.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from .conftest import load_json, suspects


def _nvml(fn, *args):
    """An NVML call's value, or the name of the error it raised (NotSupported on some boards)."""
    import pynvml

    try:
        value = fn(*args)
    except pynvml.NVMLError as exc:
        return {"error": str(exc)}
    return value.decode() if isinstance(value, bytes) else value


def read_nvml() -> list[dict]:
    import pynvml

    pynvml.nvmlInit()
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            ecc = {}
            for kind, kname in ((pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected"),
                                (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected")):
                for counter, cname in ((pynvml.NVML_VOLATILE_ECC, "volatile"), (pynvml.NVML_AGGREGATE_ECC, "aggregate")):
                    ecc[f"{cname}_{kname}"] = _nvml(pynvml.nvmlDeviceGetTotalEccErrors, h, kind, counter)
            rows = _nvml(pynvml.nvmlDeviceGetRemappedRows, h)
            remapped = rows if isinstance(rows, dict) else dict(zip(("correctable", "uncorrectable", "pending", "failure"), rows))
            mem = _nvml(pynvml.nvmlDeviceGetMemoryInfo, h)
            gpus.append({
                "index": i, "name": _nvml(pynvml.nvmlDeviceGetName, h), "uuid": _nvml(pynvml.nvmlDeviceGetUUID, h),
                "pci_bus_id": _nvml(lambda: pynvml.nvmlDeviceGetPciInfo(h).busId),
                "driver": _nvml(pynvml.nvmlSystemGetDriverVersion),
                "ecc_mode": _nvml(pynvml.nvmlDeviceGetEccMode, h), "ecc": ecc, "remapped_rows": remapped,
                "memory_total_bytes": getattr(mem, "total", None), "memory_used_bytes": getattr(mem, "used", None),
                "temperature_c": _nvml(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
                "power_w": (lambda mw: mw / 1000 if isinstance(mw, int) else mw)(_nvml(pynvml.nvmlDeviceGetPowerUsage, h)),
                "utilization_gpu_pct": _nvml(lambda: pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
            })
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _count(value) -> int:
    return value if isinstance(value, int) else 0


@pytest.mark.timeout(90)
def test_health_figures_are_recorded_and_hangdbg_reads_them_as_nvml_does(case):
    smi = shutil.which("nvidia-smi")
    assert smi, "nvidia-smi is not on PATH"
    ran = case.run("nvidia_smi_q", [smi, "-q"], timeout=60)
    assert ran.rc == 0 and "Product Name" in ran.stdout, f"nvidia-smi -q exit {ran.rc}:\n{ran.stderr[-2000:]}"
    smi_q = case.dir / "nvidia-smi-q.txt"
    smi_q.write_text(ran.stdout)
    case.figure("nvidia_smi_q_s", ran.seconds, "s")

    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    gpus = read_nvml()
    (case.dir / "nvml.json").write_text(json.dumps(gpus, indent=1, default=str) + "\n")
    assert gpus, "NVML sees no GPU"
    for g in gpus:
        i = g["index"]
        case.note(f"gpu{i}", f"{g['name']} {g['uuid']} driver {g['driver']}")
        for key in ("volatile_uncorrected", "aggregate_uncorrected", "volatile_corrected", "aggregate_corrected"):
            case.figure(f"gpu{i}_ecc_{key}", g["ecc"][key])
        case.figure(f"gpu{i}_remapped_rows", g["remapped_rows"])
        case.figure(f"gpu{i}_temperature", g["temperature_c"], "C")
        case.figure(f"gpu{i}_power", g["power_w"], "W")

    ran = case.hangdbg("hangdbg_gpu", "gpu", str(smi_q), "--json", timeout=60)
    doc = load_json(ran, "hangdbg gpu")
    case.note("hangdbg_gpu_headline", doc.get("headline"))
    flagged = {g for f in suspects(doc) if f["kind"] == "ecc" for g in f["gpus"]}
    bad = [g["index"] for g in gpus if _count(g["ecc"]["volatile_uncorrected"]) > 0
           or bool(g["remapped_rows"].get("failure"))]
    assert bool(flagged) == bool(bad), \
        f"hangdbg gpu flags {sorted(flagged) or 'no GPU'} as failing ECC; NVML counts failures on {bad or 'no GPU'}"
    assert ran.rc == (3 if bad else 0), f"hangdbg gpu exit {ran.rc}: {doc.get('headline')}"
