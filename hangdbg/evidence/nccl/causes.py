"""NCCL findings that name a cause outside the collective counts: init failures from error chains,
socket errors and connect retries, bootstrap problems (a duplicate rank, virtual interfaces) and a
single-node hang after GPU set-up (PCIe ACS / IOMMU). Used by :mod:`hangdbg.evidence.nccl.analysis`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ...catalog.entry import Blame, Role
from ...model import Evidence, Finding, Kind, Severity
from .grammar import NcclLog, Proc
from ...rankset import ranks_text

if TYPE_CHECKING:
    from ...catalog.entry import CatalogEntry
# (the catalog and its line parser are imported where a WARN line is read: a log without one, the usual multi-GB
# case, starts without them)

__all__ = ["MAX_EV"]

MAX_EV = 6


def _ranks(procs) -> tuple[int, ...]:
    return tuple(sorted({p.rank for p in procs if p.rank is not None}))


def _names(procs, limit: int = 8) -> str:
    procs = list(procs)
    known = _ranks(procs)
    unknown = [p for p in procs if p.rank is None]
    parts = []
    if known:
        parts.append(ranks_text(known))
    for p in unknown[:limit]:
        parts.append(f"{p.host} pid {p.pid}")
    if len(unknown) > limit:
        parts.append(f"{len(unknown) - limit} more")
    return ", ".join(parts)


def _hosts(procs) -> tuple[str, ...]:
    return tuple(sorted({p.host for p in procs}))


_INIT_HELP = {
    "bootstrap": "check that every node reaches the bootstrap root (MASTER_ADDR / the NCCL_COMM_ID port): "
                 "firewall, a wrong MASTER_ADDR, or NCCL_SOCKET_IFNAME choosing an interface the nodes do not share",
    "socket": "the socket error is the root: check NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY (IPv4 vs IPv6) and "
              "that the interface works on these hosts",
    "": "read the first line of the error chain (and the WARN just before it): it names what failed",
}


def _init_fail_findings(log: NcclLog) -> list[Finding]:
    """``file.cc:LINE -> N`` chains that reach ``init.cc``/``init.cu`` (NCCLCHECK in
    ``include/checks.h`` prints one line per frame): communicator init returned an error."""
    failed = [p for p in log.procs.values() if p.init_fail is not None or p.boot_chain]
    by_host: dict[str, list[Proc]] = defaultdict(list)
    for p in failed:
        by_host[p.host].append(p)
    out = []
    for host, procs in sorted(by_host.items()):
        p0 = procs[0]
        root = p0.chain_first
        errs = [e for p in procs for e in p.net_errors]
        what, help_key = "communicator init failed", ""
        if any(p.boot_chain for p in procs):
            what, help_key = "bootstrap failed during communicator init", "bootstrap"
            ifaces = sorted({i for q in log.procs.values() if q.host == host for i in q.boot_ifaces})
            if ifaces:  # the interface the bootstrap sockets used (Bootstrap : Using / NET/IB's OOB)
                what += f" (NCCL's bootstrap and out-of-band sockets on {host} use {', '.join(ifaces[:4])})"
        elif errs or (root and "socket" in root[0]):
            help_key = "socket"
        detail = ""
        if errs:
            detail = f" after {errs[0][0]}"
        elif root:
            detail = f", error chain from {root[0]} -> {root[1]}" + (f" {root[2]}" if root[2] else "")
        ev = [e for _, e in errs[:2]] + [p.chain_first[3] for p in procs[:2] if p.chain_first] + \
             [p.init_fail for p in procs[:MAX_EV] if p.init_fail]
        uniq = list({(e.source, e.line): e for e in ev}.values())[:MAX_EV]
        known = _known_warn(procs)
        if known is not None:
            entry, warn = known
            cited = (warn,) + tuple(e for e in uniq if e is not warn)[:MAX_EV - 1] + (
                Evidence("catalog", None, f"{entry.id}: {entry.source}"),)
            from ...catalog.message import parse_line
            from ...catalog.nccl_areas import areas_of

            msg = parse_line(warn.text)
            areas = areas_of([msg.src]) if msg.src else []
            said = f"\u201c{msg.text[:200]}\u201d" + (f" (NCCL {msg.src.rsplit(':', 1)[0]}: {areas[0]})" if areas else "")
            if entry.blame is Blame.LAUNCH:  # a launch mistake: no rank, no node is to blame
                out.append(Finding(
                    Kind.LAUNCH_ERROR, f"the launch configuration: {entry.meaning}: {said} ({_names(procs)} on {host}: "
                    f"communicator init failed)", evidence=cited, action=entry.action))
            else:
                out.append(Finding(
                    Kind.NCCL_INIT_FAILED, f"{_names(procs)} on {host}: communicator init failed: {entry.meaning}: {said}",
                    ranks=_ranks(procs), hosts=(host,), evidence=cited, action=entry.action or _INIT_HELP[help_key]))
            continue
        ends = "the chain ends in init" if any(p.init_fail for p in procs) else "the chain's end is not in these lines"
        gone = _peer_closed(procs)
        if gone is not None:  # the socket's other end went away: the peer failed or exited first, this is its echo
            from ...catalog.message import parse_line

            out.append(Finding(
                Kind.NCCL_INIT_FAILED, f"{_names(procs)} on {host}: {what}{detail} ({ends}): the other end of the "
                f"connection closed it (\u201c{parse_line(gone.text).text[:160]}\u201d): a peer failed or exited first",
                ranks=_ranks(procs), hosts=(host,), severity=Severity.WARNING, evidence=(gone,) + tuple(
                    e for e in uniq if e is not gone)[:MAX_EV - 1],
                action="find the rank that failed first (its exception, crash or own NCCL error): these processes only "
                       "lost their connection to it; if none failed, the connection itself broke: "
                       + _INIT_HELP["bootstrap"]))
            continue
        out.append(Finding(
            Kind.NCCL_INIT_FAILED, f"{_names(procs)} on {host}: {what}{detail} ({ends})",
            ranks=_ranks(procs), hosts=(host,), evidence=tuple(uniq), action=_INIT_HELP[help_key]))
    return out


def _peer_closed(procs: list[Proc]) -> Evidence | None:
    """The first WARN line of these processes that the error catalog reads as the peer's end of a socket gone
    (role consequence, blame peer: ``Call to recv failed : Broken pipe``, ``Connection reset by peer``,
    ``Connection closed by remote peer``), when no WARN of theirs is a root cause."""
    for p in procs:
        for w in p.warns:
            e = _entry_of(w.text)
            if e is not None and e.role is Role.CONSEQUENCE and e.blame is Blame.PEER:
                return w
    return None


def _known_warn(procs: list[Proc]) -> tuple[CatalogEntry, Evidence] | None:
    """The first WARN line of these processes that the error catalog knows as a root cause (the
    WARN printed just before the ``-> N`` chain names what failed: ``include/checks.h``)."""
    for p in procs:
        for w in p.warns:
            entry = known_root(w.text)
            if entry is not None:
                return entry, w
    return None


def known_root(line: str) -> CatalogEntry | None:
    """The catalog's most specific entry for an NCCL line (prefixes peeled) when it is a root
    cause above info severity; None otherwise or when the package data cannot be read."""
    e = _entry_of(line)
    return e if e is not None and e.role is Role.ROOT and e.severity != "info" else None


def _entry_of(line: str) -> CatalogEntry | None:
    """The catalog's most specific entry for an NCCL line (prefixes peeled); None for none, or when the package data
    cannot be read (broken package data, which the tests catch: the line is read without it)."""
    from ...catalog.catalog import CatalogError, load
    from ...catalog.message import parse_line

    try:
        catalog = load()
    except CatalogError:
        return None
    m = catalog.match(parse_line(line).text)
    return m.innermost if m is not None else None


def _net_error_findings(log: NcclLog) -> list[Finding]:
    """Socket errors of processes whose init did not (visibly) fail, and connect retries
    (``misc/socket.cc``: ``Call to connect returned Connection refused, retrying``: nobody listens
    at the address: the peer or the bootstrap root is not up, died, or the address is wrong)."""
    out = []
    for p in log.procs.values():
        if p.net_errors and p.init_fail is None:
            out.append(Finding(
                Kind.NCCL_CONNECT_FAILED, f"{_names([p])} on {p.host}: {p.net_errors[0][0]}",
                ranks=_ranks([p]), hosts=(p.host,), evidence=tuple(e for _, e in p.net_errors[:MAX_EV]),
                action=_INIT_HELP["socket"]))
    retrying = [p for p in log.procs.values() if p.retries]
    by_host: dict[str, list[Proc]] = defaultdict(list)
    for p in retrying:
        by_host[p.host].append(p)
    for host, procs in sorted(by_host.items()):
        n = sum(p.retries for p in procs)
        why = "refused" if any("refused" in (p.retry_ev.text if p.retry_ev else "") for p in procs) else "failed"
        out.append(Finding(
            Kind.NCCL_CONNECT_FAILED,
            f"{_names(procs)} on {host}: connection {why} {n} time{'s' if n != 1 else ''} (NCCL kept retrying): "
            "nothing listens at the address it connects to - the bootstrap root or a peer is not up, died, could not "
            "open its port (taken by a stale run of the job), or is looked for at the wrong address",
            ranks=_ranks(procs), hosts=(host,), evidence=tuple(p.retry_ev for p in procs[:MAX_EV] if p.retry_ev),
            severity=Severity.WARNING,  # the processes that retry wait for the one that does not listen
            action="check that the rank-0 / bootstrap-root process is alive and that MASTER_ADDR (NCCL_COMM_ID) and "
                   f"the interface {host} uses (NCCL_SOCKET_IFNAME) reach it"))
    return out


_VIRTUAL_IFACE = ("veth", "docker", "virbr", "ip6tnl", "br-", "cni", "flannel", "cali", "vxlan", "tunl", "weave", "kube")


def _bootstrap_findings(log: NcclLog) -> list[Finding]:
    """A bootstrap root that saw a rank check in twice (``bootstrap.cc``: ``Bootstrap Root : rank R
    of N ranks has already checked in``) and bootstraps on virtual interfaces (container bridges,
    tunnels: the NCCL troubleshooting guide's advice is NCCL_SOCKET_IFNAME)."""
    out = []
    dup = [p for p in log.procs.values() if p.checked_in]
    if dup:
        ev = tuple(e for p in dup for e in p.checked_in)[:MAX_EV]
        out.append(Finding(
            Kind.NCCL_BOOTSTRAP,
            f"the bootstrap root ({_names(dup)} on {', '.join(_hosts(dup))}) saw a rank check in twice: two processes "
            "were started with the same rank - a wrong launch configuration (node rank, nnodes, ranks per node) or two "
            "jobs sharing one MASTER_ADDR:MASTER_PORT",
            hosts=_hosts(dup), evidence=ev,
            action="check the launcher's RANK / node-rank / nproc-per-node settings on every node and that no other job "
                   "uses the same MASTER_PORT"))
    virt: dict[str, list[Proc]] = defaultdict(list)
    for p in log.procs.values():
        for name in p.boot_ifaces:
            if name.startswith(_VIRTUAL_IFACE):
                virt[name].append(p)
    if virt:
        procs = list({id(p): p for ps in virt.values() for p in ps}.values())
        phys = sorted({n for p in procs for n in p.boot_ifaces if not n.startswith(_VIRTUAL_IFACE)})
        hint = f" (e.g. NCCL_SOCKET_IFNAME={phys[0]})" if phys else ""
        ev = tuple(p.first_ev for p in procs[:2] if p.first_ev)
        # connections that failed in the same log make the interface the likely cause, not a remark
        failed = [p for p in log.procs.values() if p.net_errors or p.retries]
        for p in failed[:2]:  # the failed connections of two of them, as evidence
            ev += ((p.retry_ev,) if p.retry_ev else ()) + tuple(e for _, e in p.net_errors[:1])
        why = (f"; connections failed ({_names(failed, 4)}): NCCL most likely reached for a peer over the virtual "
               "interface" if failed else "")
        # an interface with only a link-local address cannot carry traffic to another node: with NCCL's network
        # transport in use (a ring over NET/...), connections over it fail whatever else the log shows
        local = sorted({n for p in procs for n in p.link_local if n in virt})
        if local and any(t.startswith("NET/") for q in log.procs.values() for t in q.transports):
            failed = failed or [p for p in procs if p.link_local]
            why += (f"; {', '.join(local)} has only a link-local address (fe80::/10 or 169.254/16), which no other "
                    "node can reach, and the job talks between nodes over NET/")
        out.append(Finding(
            Kind.NCCL_BOOTSTRAP,
            f"bootstrap on a virtual interface ({', '.join(sorted(virt))}) on {', '.join(_hosts(procs))}: container "
            "bridges and tunnels are often not reachable from other nodes, and NCCL may pick a different one per node"
            + why,
            hosts=_hosts(procs), severity=Severity.SUSPECT if failed else Severity.WARNING, evidence=ev,
            action=f"set NCCL_SOCKET_IFNAME to the physical interface every node shares{hint}"))
    return out


def _single_node(log: NcclLog) -> tuple[str, int] | None:
    """``(host, GPUs)`` when the logs prove a job on one node with several GPUs: ``nranks N`` of
    ``ncclCommInitAll`` (NCCL <= 2.4: one process drives all N GPUs), one process with several
    GPUs, ``nNodes 1`` on init lines, every rank of the largest communicator on one host, or (NCCL
    < 2.9, no nranks before Init COMPLETE) every rank of a ring line (``Channel 00/02 :    0   1``) on one host."""
    hosts = {p.host for p in log.procs.values()}
    if len(hosts) != 1:
        return None
    host = next(iter(hosts))
    procs = list(log.procs.values())
    n_all = max((p.init_all or 0 for p in procs), default=0)
    if n_all >= 2:
        return host, n_all
    if len(procs) == 1 and len(procs[0].devs) >= 2 and (procs[0].nnodes or 1) == 1 \
            and not any(t.startswith("NET") for t in procs[0].transports):  # one process drives every GPU (nccl-tests -g N)
        return host, max(len(procs[0].devs), max((c.nranks or 0 for c in procs[0].all_comms), default=0))
    if any(p.nnodes == 1 for p in procs) and not any((p.nnodes or 1) > 1 for p in procs):
        n = max((c.nranks or 0 for p in procs for c in p.all_comms), default=0)
        return (host, n) if n >= 2 else None
    big = max((c.nranks or 0 for p in procs for c in p.all_comms), default=0)
    ranks = {c.rank for p in procs for c in p.all_comms if c.nranks == big}
    if big >= 2 and ranks >= set(range(big)):
        return host, big
    # NCCL < 2.9 logs no nranks before Init COMPLETE: a ring line lists every rank of the communicator
    ring = max((p.ring_size for p in procs), default=0)
    if not big and ring >= 2 and {p.rank for p in procs} >= set(range(ring)):
        return host, ring
    return None


def _p2p_findings(log: NcclLog, cut: bool) -> list[Finding]:
    """A job on one node with several GPUs whose log stops during or right after GPU set-up, with
    no error and no collective progress: the NCCL troubleshooting guide's symptom of PCIe ACS or
    the IOMMU blocking GPU peer-to-peer traffic (docs.nvidia.com/deeplearning/nccl/user-guide/docs/
    troubleshooting.html, "PCI Access Control Services (ACS)"). Only when the GPUs set up P2P links
    (``via P2P/...`` lines) or one process drives every GPU (no other process it could wait for).
    A suspect when the log stops inside init; a warning when init completed and the collective
    lines stop at opCount 0; nothing when init completed and no collective line was logged (a
    healthy log with plain ``NCCL_DEBUG=INFO`` reads the same). Not for a log with P2P disabled,
    a real error (WARN other than a missing libibverbs, error chains, failed connects, aborts) or
    progress (an opCount above 0)."""
    one = _single_node(log)
    if one is None:
        return []
    host, ngpus = one
    procs = list(log.procs.values())
    if any(p.p2p_env and not p.p2p_env.rstrip().endswith(("0", "NVL")) for p in procs):
        return []
    if any(p.nwarns > p.benign_warns or p.nchains or p.connects or p.net_errors or p.retries or p.checked_in
           for p in procs):
        return []
    comms = [c for p in procs for c in p.all_comms]
    if any(c.state == "aborted" for c in comms) or any((c.last_op or 0) > 0 for c in comms):
        return []
    p2p = sorted({t for p in procs for t in p.transports if t.startswith("P2P")})
    one_proc = len(procs) == 1 and (len(procs[0].devs) >= 2 or (procs[0].init_all or 0) >= 2)
    if not p2p and not one_proc:
        return []  # several processes and no P2P line: the stop may be a process that never arrived
    done = any(c.state == "complete" for c in comms)
    colls = any(c.counts for c in comms)
    if done and not colls:
        return []  # init completed and no collective lines were logged: a healthy log reads the same
    if p2p:
        where = f"after setting up {'/'.join(p2p)} links between the GPUs"
    else:
        where = "during GPU set-up" if not done else "after init"
    stop = "first collective never got past opCount 0" if colls else "no collective progress"
    ev = tuple(e for e in (procs[0].first_ev, log.evidence_of_last(comms[0]) if comms else None) if e)[:2]
    return [Finding(
        Kind.NCCL_P2P_BLOCKED,
        f"single-node job on {host} ({ngpus} GPUs) stops {where}: no error, {stop}"
        + (" (the log is cut mid-line)" if cut else "")
        + ". The known symptom of PCIe ACS / the IOMMU blocking GPU peer-to-peer (P2P) traffic"
        + (" (inferred from where the log stops)" if not done else
           " - or the log is an excerpt (inferred from where the log stops; init completed)"),
        hosts=(host,), evidence=ev,
        # a stop inside init with no error is the symptom; after a completed init, the first collective's
        # lines alone cannot tell a blocked P2P transfer from an excerpt that ends there
        severity=Severity.SUSPECT if not done else Severity.WARNING,
        action="confirm with NCCL_P2P_DISABLE=1 (if it then runs, P2P is blocked) or cuda-samples "
               "p2pBandwidthLatencyTest; fix by disabling PCIe ACS (BIOS or setpci) or booting with iommu=pt / "
               "intel_iommu=off (amd_iommu=off); `dmesg | grep -i iommu`, `lspci -vvv | grep ACSCtl` show it")]
