"""``hangdbg check``'s verdict: the findings, the headline and the ``--exclude=`` value.

Inputs are the trials (:mod:`hangdbg.check.blame`) and what the bisection found
(:mod:`hangdbg.check.bisection`). The bad nodes are the ones that fail by themselves and the
ones that make the others fail; a GPU is named instead of its node when some GPUs of the node
pass and others fail. A first trial that failed is never followed by an all-clear: when no
subset fails and the whole set passes again (an intermittent fault), a warning says so and names
no node (exit 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import hostlist

from ..model import Evidence, Finding, Kind, Severity, SourceKind
from ..rankset import ranks_text
from .bisection import Isolation
from .blame import Bandwidth, Blame, RankResult, Trial, bandwidth, blame, slots_text, slow_nodes, slow_ranks
from .health import gpu_faults, medians, slow_gpus, slow_links, slow_node_busbw
from .mismatch import Mismatch, mismatch

__all__ = ["CheckVerdict", "check_verdict"]


@dataclass(frozen=True, slots=True)
class CheckVerdict:
    """``bad_nodes``: nodes to leave out; ``bad_gpus``: ``host:slot`` of GPUs to leave out (their
    node passes otherwise); ``exclude``: ``bad_nodes`` as a SLURM host list (``node[2,5]``), or None."""

    headline: str
    findings: tuple[Finding, ...]
    bad_nodes: tuple[str, ...]
    bad_gpus: tuple[str, ...]
    exclude: str | None
    bandwidth: Bandwidth | None


def _evidence(lines: tuple[str, ...] | list[str]) -> tuple[Evidence, ...]:
    return tuple(Evidence("check", None, w) for w in list(lines)[:6])


def _finding(kind: Kind, summary: str, severity: Severity = Severity.SUSPECT, **kw) -> Finding:
    return Finding(kind, summary, severity=severity, source=SourceKind.CHECK, **kw)


def _why_for(host: str, blames: list[Blame]) -> list[str]:
    """The blame lines about ``host``, one per distinct cause (the same fault seen in several
    runs under other rank numbers is one line)."""
    out: dict[str, str] = {}
    for b in blames:
        for w in b.why:
            if w.startswith(f"{host}:") or f"({host} slot" in w:
                out.setdefault(re.sub(r"\d+", "N", w.split(") ", 1)[-1]), w)  # other ports, other ranks: the same cause
    return list(out.values())


def check_verdict(trials: list[Trial], retry: Trial | None, nodes: Isolation[str] | None,
                  gpus: dict[str, Isolation[int]], backend: str, slow_factor: float = 0.5) -> CheckVerdict:
    """The verdict of a check (``trials`` in order, the first one with every node).

    Args:
        trials: every trial run; ``retry``: the interface retry (one of them) or None.
        nodes: the bisection over nodes (None: one node, or not bisected).
        gpus: the bisection over the slots of each node that failed by itself.
        backend: ``gloo`` or ``nccl`` (names the interface variable).
        slow_factor: ranks and nodes below this fraction of the median bandwidth are slow.
    """
    first = trials[0]
    mm = mismatch(first)
    if mm is not None:
        return _mismatch_verdict(mm)
    findings: list[Finding] = []
    blames = [blame(t) for t in trials if not t.passed]
    nccl = backend == "nccl" or any(r.backend == "nccl" for r in first.ranks)
    env = "NCCL_SOCKET_IFNAME" if nccl else "GLOO_SOCKET_IFNAME"
    bad_nodes: list[str] = []
    bad_gpus: list[str] = []
    if not first.passed:
        b0 = blames[0]  # the first trial failed: its blame comes first
        passed_on = {h for t in trials if t.passed for h in t.hosts}  # nodes where the same set-up passed
        passed_on |= {h for subset, ok in (nodes.runs if nodes is not None else []) if ok for h in subset}
        if nodes is None:
            alone = [first.hosts[0]] if len(first.hosts) == 1 else []
            with_others: list[str] = []
            together: list[tuple[str, ...]] = []
            intermittent: list[tuple[str, ...]] = []
        else:
            alone, with_others, together, intermittent = nodes.alone, nodes.with_others, nodes.together, nodes.intermittent
        findings, bad_nodes, bad_gpus, undecided = _alone_findings(alone, first, gpus, b0, blames, passed_on)
        for host in with_others:
            bad_nodes.append(host)
            findings.append(_node_finding(host, "passes alone but the others fail with it", first, b0, blames,
                                          f"leave it out (sbatch --exclude={host}); check its network: the route and "
                                          f"firewall to the other nodes, {env}, the address its name resolves to"))
        for group in together:
            findings.append(_finding(
                Kind.CHECK_FAILED, f"{', '.join(group)} fail the check only together (every half passes): the network "
                f"between them, or a fault that needs them all", hosts=tuple(sorted(group)), evidence=_evidence(b0.why),
                action="run `hangdbg check` on pairs of these nodes, and with NCCL_DEBUG=INFO; exclude them if it persists"))
        if undecided:
            findings.append(_finding(
                Kind.CHECK_FAILED, f"{', '.join(undecided)} fail{'s' if len(undecided) == 1 else ''} the check "
                f"({b0.why[0] if b0.why else 'no detail'}), and no node passed it with the same set-up: a fault of "
                f"{'the node' if len(undecided) == 1 else 'every node'} and one of the set-up look alike here: undecided",
                severity=Severity.WARNING, hosts=tuple(undecided), ranks=b0.ranks, evidence=_evidence(b0.why),
                action="run the same `hangdbg check` on a node known to be good: a node fault if it passes there, the "
                       "set-up if it fails the same way"))
        if not (bad_nodes or bad_gpus or together or undecided or any(f.hosts for f in findings)):
            again = " and the whole set passed when run again" if intermittent else ""
            findings.append(_finding(
                Kind.CHECK_FAILED, f"the check failed once ({b0.why[0] if b0.why else 'no detail'}) but no subset fails "
                f"again{again}: an intermittent fault; no node is named", severity=Severity.WARNING,
                evidence=_evidence(b0.why),
                action="run `hangdbg check` again (several times), and `hangdbg dump` the job if it hangs; a node that "
                       "fails again then is the one to look at"))
        if b0.waiting and b0.ranks:
            findings.append(_finding(
                Kind.WAITING, f"{ranks_text(b0.waiting)} only waited for {ranks_text(b0.ranks)} (they timed out)",
                severity=Severity.WAITING, ranks=b0.waiting, waits_for=b0.ranks))
        if retry is not None:
            findings.append(_interface_finding(first, retry, env))
    best = max((t for t in trials if t.passed), key=lambda t: (len(t.ranks), -t.number), default=None)
    bw = bandwidth(best) if best is not None and (first.passed or len(best.ranks) > 1) else None
    if best is not None:
        findings += _slow_findings(best.ranks, slow_factor)
    measured = first if any(r.matmul_tflops is not None for r in first.ranks) else best
    if measured is not None:
        findings += _health_findings(measured.ranks, slow_factor)
    for host, gpu, faults, label in gpu_faults(first.nodes):
        if gpu is not None and gpu not in bad_gpus:
            bad_gpus.append(gpu)
        findings.append(_finding(Kind.ECC, f"{label} of {host}: {'; '.join(faults)}" +
                                 ("" if gpu else " (a GPU the check did not use)"), hosts=(host,),
                                 gpus=(gpu,) if gpu else (), evidence=_evidence([f"NVML: {x}" for x in faults]),
                                 action=f"{faults[0].split(': ', 1)[-1]}; until then leave the GPU out, or the node "
                                        f"(sbatch --exclude={host})"))
    exclude = hostlist.collect_hostlist(bad_nodes) if bad_nodes else None
    findings.sort(key=lambda f: (f.severity is not Severity.SUSPECT, f.severity is Severity.WAITING))
    headline = _headline(first, findings, bad_nodes, bad_gpus, exclude, bw)
    if first.passed and measured is not None and not bad_gpus:
        headline += _health_text(measured.ranks)
    return CheckVerdict(headline, tuple(findings), tuple(bad_nodes), tuple(bad_gpus), exclude, bw)


def _alone_findings(alone: list[str], first: Trial, gpus: dict[str, Isolation[int]], b0: Blame, blames: list[Blame],
                    passed_on: set[str]) -> tuple[list[Finding], list[str], list[str], list[str]]:
    """The findings of the nodes that fail by themselves, the bad nodes, the bad GPUs (``host:slot``)
    and the nodes left undecided. A node is blamed only when the same set-up passed on another
    node; a GPU when the node's other GPUs passed (or only waited for it, in a run not bisected);
    GPUs that pass alone but fail together are a warning about their links or the set-up."""
    findings: list[Finding] = []
    bad_nodes: list[str] = []
    bad_gpus: list[str] = []
    undecided: list[str] = []
    for host in alone:
        iso = gpus.get(host)
        slots = dict(first.layout)[host]
        if iso is not None and not iso.bad and iso.intermittent and not iso.together:
            findings.append(_finding(
                Kind.CHECK_FAILED, f"{host} failed the check by itself, then every subset of its GPUs and all of them "
                f"together passed: an intermittent fault, no GPU is named", severity=Severity.WARNING, hosts=(host,),
                evidence=_evidence(_why_for(host, blames) or b0.why),
                action=f"run `hangdbg check` on {host} again (several times); `hangdbg gpu` reads its kernel log for Xid "
                       "lines"))
            continue
        if iso is not None and not iso.bad:  # every subset of its GPUs passes: they fail only together
            findings.append(_finding(
                Kind.CHECK_FAILED, f"GPUs {', '.join(slots_text(g) for g in iso.together) or slots_text(slots)} of {host} "
                f"pass alone and fail only together: the links between them (P2P, NVLink, shared memory) or the "
                f"set-up, not one GPU", severity=Severity.WARNING, hosts=(host,), evidence=_evidence(b0.why),
                action="run `hangdbg check` again with NCCL_DEBUG=INFO (and NCCL_P2P_DISABLE=1 to test the P2P path); "
                       "`nvidia-smi topo -m` shows the links"))
            continue
        if iso is not None and iso.bad and len(iso.bad) < len(slots):
            for slot in iso.bad:
                bad_gpus.append(f"{host}:{slot}")
            keep = slots_text([s for s in slots if s not in iso.bad])
            why = _why_for(host, blames)
            how = [f"GPU {slots_text(iso.alone)} of {host} fails the check by itself"] if iso.alone else []
            how += [f"GPU {slots_text(iso.with_others)} of {host} passes alone but the others fail with it"] \
                if iso.with_others else []
            findings.append(_finding(
                Kind.CHECK_FAILED, f"{'; '.join(how)}; its other GPUs pass" + (f": {why[0]}" if why else ""),
                hosts=(host,),
                gpus=tuple(f"{host}:{s}" for s in iso.bad), evidence=_evidence(why),
                action=f"leave the GPU out (CUDA_VISIBLE_DEVICES={keep} on {host}) or the node (sbatch --exclude={host}); "
                       "then look at `nvidia-smi -q` and the kernel log (hangdbg gpu) for it"))
            continue
        if not passed_on - {host}:
            own = tuple(sl for h, sl in b0.slots if h == host)
            if iso is None and own and len(own) < len(slots):  # one run: its other GPUs took part and only waited
                bad_gpus += [f"{host}:{sl}" for sl in own]
                keep = slots_text([sl for sl in slots if sl not in own])
                findings.append(_finding(
                    Kind.CHECK_FAILED, f"GPU {slots_text(own)} of {host} fails the check while its other GPUs only "
                    f"waited for it: {b0.why[0] if b0.why else 'no detail'}", hosts=(host,), ranks=b0.ranks,
                    gpus=tuple(f"{host}:{sl}" for sl in own), evidence=_evidence(b0.why),
                    action=f"run `hangdbg check` without --no-bisect to confirm it alone; leave the GPU out "
                           f"(CUDA_VISIBLE_DEVICES={keep} on {host})"))
            else:
                undecided.append(host)
            continue
        bad_nodes.append(host)
        findings.append(_node_finding(host, "fails the check by itself", first, b0, blames,
                                      f"leave it out: sbatch --exclude={host} (and drain it: scontrol update "
                                      f"nodename={host} state=drain reason=hangdbg-check)"))
    return findings, bad_nodes, bad_gpus, undecided


def _mismatch_verdict(mm: Mismatch) -> CheckVerdict:
    """The verdict of a first run whose set-up did not fit (:func:`~.mismatch.mismatch`): the
    launch when it is so everywhere, never a node; else the nodes that differ: a node that lost
    GPUs is left out (and drained), one whose own ``CUDA_VISIBLE_DEVICES`` hides GPUs is fixed."""
    findings: list[Finding] = []
    bad_nodes = list(mm.lost)
    if mm.everywhere:
        findings.append(_finding(Kind.CHECK_SETUP, f"the check was launched wrong: {mm.summary}", severity=Severity.WARNING,
                                 action=mm.remedy))
        headline = f"set-up error, no node is at fault: {mm.summary}"
    else:
        for host in mm.lost:
            findings.append(_finding(Kind.CHECK_SETUP, f"{host} lists fewer GPUs than the other nodes ({mm.summary})",
                                     hosts=(host,), action=f"leave it out: sbatch --exclude={host}; `nvidia-smi -q` and the "
                                     f"kernel log (hangdbg gpu) tell whether a GPU fell off the bus (then drain it: "
                                     f"scontrol update nodename={host} state=drain reason=hangdbg-check)"))
        for host in mm.hidden:
            findings.append(_finding(Kind.CHECK_SETUP, f"{host}'s environment hides GPUs from the ranks ({mm.summary})",
                                     hosts=(host,), action=f"unset CUDA_VISIBLE_DEVICES on {host} (a prolog, a module "
                                     "or the shell sets it); the node itself is not at fault"))
        headline = f"set-up differs on {', '.join([*mm.lost, *mm.hidden])}: {mm.summary}"
    exclude = hostlist.collect_hostlist(bad_nodes) if bad_nodes else None
    return CheckVerdict(headline, tuple(findings), tuple(bad_nodes), (), exclude, None)


def _node_finding(host: str, what: str, first: Trial, b0: Blame, blames: list[Blame], action: str) -> Finding:
    why = _why_for(host, blames)
    return _finding(Kind.CHECK_FAILED, f"{host} {what}" + (f": {why[0]}" if why else ""), hosts=(host,),
                    ranks=tuple(r for r in b0.ranks if _host_of(first, r) == host), evidence=_evidence(why), action=action)


def _host_of(trial: Trial, rank: int) -> str | None:
    return next((r.host for r in trial.ranks if r.rank == rank), None)


def _interface_finding(first: Trial, retry: Trial, env: str) -> Finding:
    used = sorted({f"{n.host}: {n.ifname_set}" for n in retry.nodes if n.ifname_set})
    configured = sorted({f"{n.host}: {n.ifname_configured}" for n in first.nodes if n.ifname_configured})
    set_to = ", ".join(used) or "the interface that routes to the rendezvous"
    if retry.passed:
        was = f"as configured ({', '.join(configured)})" if configured else f"with {env} unset"
        return _finding(Kind.CHECK_INTERFACE, f"every check passes with {env} set to the interface that routes to the "
                        f"rendezvous ({set_to}); {was} the start-up fails", severity=Severity.WARNING,
                        hosts=tuple(n.host for n in first.nodes if n.ifname_configured),
                        action=f"set {env} to that interface for the job (or fix the nodes' setting)")
    b = blame(retry)
    return _finding(Kind.CHECK_INTERFACE, f"another interface does not help: with {env} set to {set_to} the check fails too"
                    + (f" ({b.why[0]})" if b.why else ""), severity=Severity.INFO)


def _slow_findings(ranks: tuple[RankResult, ...], factor: float) -> list[Finding]:
    out = []
    for host, mine, mid in slow_nodes(ranks, factor):
        out.append(_finding(Kind.CHECK_SLOW, f"{host} is slow: its ranks receive at {mine:.3g} GB/s, the nodes' median is "
                            f"{mid:.3g} GB/s", severity=Severity.WARNING, hosts=(host,),
                            action=f"check its network links (ibstat, ethtool, `nvidia-smi topo -m`); leave it out with "
                                   f"sbatch --exclude={host} if it stays slow"))
    slow = slow_ranks(ranks, factor)
    if slow:
        rows = "; ".join(f"rank {r.rank} ({r.where}) from rank {r.recv_from}: {r.recv_gbps:.3g} GB/s" for r in slow[:8])
        out.append(_finding(Kind.CHECK_SLOW, f"{ranks_text([r.rank for r in slow])} receive far below the median: {rows}",
                            severity=Severity.WARNING, ranks=tuple(r.rank for r in slow),
                            hosts=tuple(sorted({r.host for r in slow})), gpus=tuple(f"{r.host}:{r.slot}" for r in slow)))
    return out


def _health_findings(ranks: tuple[RankResult, ...], factor: float) -> list[Finding]:
    """Slow GPUs, nodes (busbw within the node) and links between nodes (:mod:`~.health`)."""
    out = []
    for slow in slow_gpus(ranks, factor):
        out.append(_finding(Kind.CHECK_SLOW, f"GPU {slow.what} is slow: {slow.words} {slow.value:.3g} {slow.unit}, the "
                            f"GPUs' median is {slow.median:.3g} {slow.unit}", severity=Severity.WARNING,
                            hosts=(slow.what.split(":")[0],), gpus=(slow.what,),
                            ranks=(slow.rank,) if slow.rank is not None else (),
                            action=f"look at its clocks, temperature and throttle reasons (nvidia-smi -q -d "
                                   f"PERFORMANCE,TEMPERATURE) and run `dcgmi diag -r 2` on it; leave it out if it stays slow"))
    for slow in slow_node_busbw(ranks, factor) + slow_links(ranks, factor):
        host = slow.what.split(" -> ")
        out.append(_finding(Kind.CHECK_SLOW, f"{slow.what} is slow: {slow.words} {slow.value:.3g} {slow.unit}, the "
                            f"median is {slow.median:.3g} {slow.unit}", severity=Severity.WARNING, hosts=tuple(host),
                            action="check the links (`nvidia-smi topo -m`, `nvidia-smi nvlink -s`, ibstat) and run "
                                   "nccl-tests between these nodes"))
    return out


def _health_text(ranks: tuple[RankResult, ...]) -> str:
    """The GPU figures for a healthy headline: one GPU's own, or the medians of several."""
    figures = medians(ranks)
    if not figures:
        return ""
    gpu = [r for r in ranks if r.on_gpu]
    who = f"GPU {gpu[0].host}:{gpu[0].slot}" + (f" ({gpu[0].gpu})" if gpu[0].gpu else "") \
        if len(gpu) == 1 else f"{len(gpu)} GPUs, medians"
    return f"; {who}: " + ", ".join(f"{f.words} {f.median:.3g} {f.unit}" for f in figures)


def _headline(first: Trial, findings: list[Finding], bad_nodes: list[str], bad_gpus: list[str], exclude: str | None,
              bw: Bandwidth | None) -> str:
    n_nodes, n_ranks = len(first.hosts), len(first.ranks)
    if first.passed:
        figures = f"; all_reduce of {bw.bytes} bytes: algbw {bw.algbw_gbps:.3g} GB/s, busbw {bw.busbw_gbps:.3g} GB/s" if bw else ""
        slow = [f for f in findings if f.kind is Kind.CHECK_SLOW]
        return (f"healthy: {n_ranks} rank{'s' if n_ranks != 1 else ''} on {n_nodes} node(s) passed every check{figures}"
                + (f" ({len(slow)} slow finding(s))" if slow else ""))
    parts = []
    if bad_nodes:
        parts.append(f"bad node(s) {', '.join(bad_nodes)}")
    if bad_gpus:
        parts.append(f"bad GPU(s) {', '.join(bad_gpus)}")
    suspects = [f for f in findings if f.severity is Severity.SUSPECT]
    what = suspects[0].summary if suspects else "the check failed"
    if parts:
        tail = f"; run with --exclude={exclude}" if exclude else ""
        return f"{' and '.join(parts)}: {what}{tail}"
    return what
