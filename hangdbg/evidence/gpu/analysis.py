"""GPU errors -> findings per node and GPU, and :class:`GpuFacts`.

From the events of kernel logs and ``nvidia-smi -q`` (:mod:`hangdbg.evidence.gpu.grammar`): every primary
Xid per node and GPU with its meaning, severity and action (:mod:`hangdbg.evidence.gpu.xid_codes`),
secondary Xids (``caused by previous Xid N``) folded into their cause, lost GPUs without an Xid
number, and ECC / row-remapping state.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from .facts import EccFacts, GpuFacts, GpuState, XidCount
from ...model import SEVERITY_ORDER, Finding, Kind, Severity
from .grammar import _RECOVERY, UNNAMED_BUS, GpuLogEvents, XidEvent
from .xid_codes import xid_info
from .fault_findings import aer_findings, fault_findings

__all__ = ["findings_from"]


def _gpu(host: str, bus: str) -> str:
    if bus == UNNAMED_BUS:
        return f"a GPU of {host} (PCI address not shown)" if host else "a GPU (PCI address not shown)"
    return f"{host}:{bus}" if host else bus


def _gpus(host: str, bus: str) -> tuple[str, ...]:
    return () if bus == UNNAMED_BUS else (_gpu(host, bus),)


def findings_from(ev: GpuLogEvents) -> tuple[list[Finding], GpuFacts]:
    """Findings per node and GPU (most severe first) and the facts."""
    out: list[Finding] = []
    by: dict[tuple[str, str, int], list[XidEvent]] = defaultdict(list)
    secondary: dict[tuple[str, str, int], list[XidEvent]] = defaultdict(list)
    for x in ev.xids:
        if x.previous is not None:  # x.secondary: filed under the Xid that caused it
            secondary[(x.host, x.bus, x.previous)].append(x)
        else:
            by[(x.host, x.bus, x.code)].append(x)
    for (host, bus, code), xs in by.items():
        info = xid_info(code)
        sec = secondary.pop((host, bus, code), [])
        severity, action = info.severity, info.action
        if code == 154:
            m = _RECOVERY.search(xs[-1].message)
            if m:
                action = f"recovery action: {m.group('to')}"
                severity = Severity.INFO if m.group("to").strip().lower() == "none" else Severity.SUSPECT
        procs = sorted({f"{x.process} (pid {x.pid})" for x in xs if x.process and x.pid and not x.pid.startswith("<")})
        when = f", first at {xs[0].time}" if xs[0].time else ""
        extra = f"; +{len(sec)} secondary Xid {', '.join(sorted({str(s.code) for s in sec}))} caused by it" if sec else ""
        out.append(Finding(
            kind=Kind.GPU_LOST if code == 79 else Kind.XID,
            summary=(f"Xid {code} on {_gpu(host, bus)}" + (f" x{len(xs)}" if len(xs) > 1 else "") + f"{when}: {info.meaning}"
                     + (f" ({xs[0].message})" if xs[0].message and code not in (79,) else "")
                     + (f"; process {', '.join(procs[:3])}" if procs else "") + extra),
            hosts=(host,) if host else (), gpus=_gpus(host, bus), severity=severity, action=action,
            evidence=tuple(x.evidence for x in xs[:3]) + tuple(s.evidence for s in sec[:1])))
    for (host, bus, prev), xs in secondary.items():  # fallout whose primary Xid is not in these files
        out.append(Finding(
            kind=Kind.XID,
            summary=(f"Xid {', '.join(sorted({str(x.code) for x in xs}))} on {_gpu(host, bus)} x{len(xs)} caused by a "
                     f"previous Xid {prev} ({xid_info(prev).meaning}) that is not in these logs"),
            hosts=(host,) if host else (), gpus=_gpus(host, bus), severity=xid_info(prev).severity,
            action=xid_info(prev).action, evidence=tuple(x.evidence for x in xs[:2])))
    xid79 = {(x.host, x.bus) for x in ev.xids if x.code == 79}
    for g in ev.lost:
        if (g.host, g.bus) in xid79:
            continue
        uuid = ev.uuids.get((g.host, g.bus), "")
        out.append(Finding(
            kind=Kind.GPU_LOST,
            summary=f"GPU {_gpu(g.host, g.bus)}{f' ({uuid})' if uuid else ''} has fallen off the bus"
                    + (f" at {g.time}" if g.time else "") + " (driver report without an Xid number)",
            hosts=(g.host,) if g.host else (), gpus=(_gpu(g.host, g.bus),), severity=Severity.SUSPECT,
            action=xid_info(79).action, evidence=g.evidence))
    for e in ev.ecc:
        gpu = _gpu(e.host, e.bus)
        if e.remap_failed:
            out.append(Finding(kind=Kind.ECC, summary=f"GPU {gpu}: row remapping failed (nvidia-smi -q Remapped Rows)",
                               hosts=(e.host,) if e.host else (), gpus=(gpu,), severity=Severity.SUSPECT,
                               action="drain the node; RMA the GPU", evidence=tuple(e.evidence[:4])))
        if e.volatile_uncorrectable:
            out.append(Finding(kind=Kind.ECC, summary=f"GPU {gpu}: {e.volatile_uncorrectable} uncorrectable ECC errors since "
                               "the last driver load (volatile)", hosts=(e.host,) if e.host else (), gpus=(gpu,),
                               severity=Severity.SUSPECT, action=xid_info(48).action, evidence=tuple(e.evidence[:4])))
        elif e.aggregate_uncorrectable:
            out.append(Finding(kind=Kind.ECC, summary=f"GPU {gpu}: {e.aggregate_uncorrectable} uncorrectable ECC errors over "
                               "its lifetime (aggregate), none since the last driver load", hosts=(e.host,) if e.host else (),
                               gpus=(gpu,), severity=Severity.WARNING, action="watch the GPU; RMA if the count grows",
                               evidence=tuple(e.evidence[:4])))
        if e.remap_pending or e.retired_pending:
            out.append(Finding(kind=Kind.ECC, summary=f"GPU {gpu}: a row remapping / page retirement is pending",
                               hosts=(e.host,) if e.host else (), gpus=(gpu,), severity=Severity.WARNING,
                               action="reset the GPU (or reboot) to apply it", evidence=tuple(e.evidence[:4])))
    lost_gpus = {(g.host, g.bus) for g in ev.lost} | xid79
    out.extend(f for f in fault_findings(ev.faults) if f.kind is not Kind.GPU_LOST or not lost_gpus & _fault_keys(f, ev))
    buses = {(x.host, x.bus) for x in ev.xids} | lost_gpus | set(ev.uuids) | {(f.host, f.bus) for f in ev.faults}
    out.extend(aer_findings(ev.aer, buses, ev.aer_lost))
    out.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.kind is not Kind.GPU_LOST))
    return out, _facts(ev)


def _fault_keys(f: Finding, ev: GpuLogEvents) -> set[tuple[str, str]]:
    """The ``(host, bus)`` of the faults a finding stands for (a GPU already reported lost is not lost twice)."""
    return {(x.host, x.bus) for x in ev.faults if _gpu(x.host, x.bus) in f.gpus}


def _facts(ev: GpuLogEvents) -> GpuFacts:
    xids: dict[str, Counter] = defaultdict(Counter)
    uuid: dict[str, str] = {}
    serial: dict[str, str] = {}
    lost: set[str] = set()
    ecc: dict[str, EccFacts] = {}
    names: set[str] = set()
    for x in ev.xids:
        names.add(_gpu(x.host, x.bus))
        xids[_gpu(x.host, x.bus)][x.code] += 1
    for (h, b), u in ev.uuids.items():
        names.add(_gpu(h, b))
        uuid[_gpu(h, b)] = u
    for (h, b), sn in ev.serials.items():
        names.add(_gpu(h, b))
        serial[_gpu(h, b)] = sn
    for g in ev.lost:
        names.add(_gpu(g.host, g.bus))
        lost.add(_gpu(g.host, g.bus))
    for e in ev.ecc:
        name = _gpu(e.host, e.bus)
        names.add(name)
        ecc[name] = EccFacts(e.volatile_uncorrectable, e.aggregate_uncorrectable, e.remapped_uncorrectable,
                             e.remap_pending, e.remap_failed, e.retired_pending)
        if e.uuid:
            uuid[name] = e.uuid
    gpus = tuple(GpuState(gpu=n, xids=tuple(XidCount(c, k) for c, k in sorted(xids[n].items())), uuid=uuid.get(n, ""),
                          serial=serial.get(n, ""), fallen_off_bus=n in lost, ecc=ecc.get(n)) for n in sorted(names))
    return GpuFacts(gpus=gpus, xid_events=len(ev.xids), hosts=tuple(sorted({n.split(":")[0] for n in names if n.count(":") > 2})))
