"""Suspects from NCCL_DEBUG logs: a scanned :class:`~hangdbg.evidence.nccl.grammar.NcclLog` -> findings, per-rank rows and :class:`NcclFacts`.

Heuristics (each finding carries the raw lines behind it):

* ``nccl-init-incomplete``: a rank logged ``Init START`` for a communicator but never ``Init
  COMPLETE`` (NCCL 2.x ``init.cc``), or a rank of ``0..nranks-1`` of a communicator wrote no line
  at all while the others did.
* ``nccl-lagging``: per communicator, ranks whose last ``opCount`` (``enqueue.cc`` prints one per
  collective, ``%lx``) is lower than the highest. Direction is reported: when a few ranks are
  ahead and most are behind, the stragglers are the many (the few ahead already entered the next
  collective and wait for the others).
* ``nccl-op-mismatch``: per communicator, the first opCount where ranks issued different
  collectives (type, count, datatype, reduction, root): :mod:`hangdbg.evidence.nccl.ops`.
* ``nccl-connect-failed``: ``Connect to IP<port> failed : ...`` WARNs (``misc/socket.cc``) and
  errors naming ``peer IP<port>`` (``net_ib.cc`` completion errors, ``net_socket.cc``); the peer's
  host comes from the same logs' own ``Bootstrap``/``NET/Socket``/``NET/IB ... OOB`` lines.
* ``nccl-setup-differs``: hosts whose NCCL version, net plugin (found or not), network,
  interfaces or transports differ from the majority of hosts; a net plugin present on only some
  hosts is a known cause of hangs (NCCL then mixes ``IB`` and ``Socket`` transports).
* ``nccl-init-failed``, ``nccl-bootstrap``, ``nccl-p2p-blocked`` and connect retries / socket errors:
  :mod:`hangdbg.evidence.nccl.causes` (error chains through ``init.cc``, duplicate check-in, virtual
  bootstrap interfaces, a single-node stop after GPU set-up: PCIe ACS / IOMMU).
* A rank without init line is a suspect only when others wait for it in ``Init START``; when some
  rank wrote ``Init COMPLETE`` (which needs every rank) it is not, and a log cut mid-record (an
  excerpt) makes an opCount lag only a warning.
* ``nccl-warn`` / ``nccl-aborted`` (warnings): other WARN lines, error chains, ``Abort COMPLETE``.
* ``nccl-slice-differs`` (``--split-on``): the slice where a rank's collective counts first differ
  from the majority.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

from .facts import NcclComm, NcclCommunicator, NcclFacts, NcclProcess
from ...model import SEVERITY_ORDER, Evidence, Finding, Kind, RankState, Severity, SourceKind
from .grammar import Comm, NcclLog, Proc
from ...rankset import ranks_text
from ...text.addresses import ip_text
from .causes import (MAX_EV, known_root, _bootstrap_findings, _hosts, _init_fail_findings, _names, _net_error_findings,
    _p2p_findings, _ranks)
from .ops import op_mismatches
from ...catalog.entry import Blame

__all__ = ["analyze", "slice_table"]



def groups(log: NcclLog) -> dict[str, list[tuple[Proc, Comm]]]:
    """Communicator key -> its members ``(process, comm)`` across processes."""
    out: dict[str, list[tuple[Proc, Comm]]] = defaultdict(list)
    for p in log.procs.values():
        for c in p.all_comms:
            out[c.key].append((p, c))
    return out


def _comm_name(key: str, members) -> str:
    n = next((c.nranks for _, c in members if c.nranks), None)
    return f"communicator {key}" + (f" ({n} ranks)" if n else "")


def _init_findings(log: NcclLog, grp) -> list[Finding]:
    """Ranks stuck in init, and ranks of a communicator that wrote no init line.

    ``Init COMPLETE`` (NCCL 2.x ``init.cc``) is printed after the bootstrap all-gather, which needs
    every rank: when one rank completed, the ranks without a line did start (their lines are just
    not in these logs). Only when ranks are stuck at ``Init START`` and none completed are the
    ranks without any line the ones the others wait for. Teardown lines (``Abort COMPLETE``,
    ``Destroy COMPLETE``) are not init records."""
    out = []
    world_size = max((c.nranks or 0 for q in log.procs.values() for c in q.all_comms), default=0)
    # processes of unknown rank may be the "missing" ranks: their init lines are just not in the logs
    unknown = [p for p in log.procs.values() if p.rank is None]
    for key, members in grp.items():
        # a process driving more GPUs than it logged ranks of (nccl-tests -g N, ncclCommInitAll, a group
        # init) may hold the "missing" ranks itself: their lines are interleaved away, not evidence
        own = [p for p in {id(p): p for p, _ in members}.values()
               if len(p.devs) > len({c.rank for q, c in members if q is p})]
        unknown_here = unknown + own
        inited = [(p, c) for p, c in members if c.had_init]
        any_complete = any(c.state == "complete" for _, c in members)
        stuck = [(p, c) for p, c in members if c.state == "start"]
        missing: list[int] = []
        nranks = Counter(c.nranks for _, c in inited if c.nranks).most_common(1)
        if nranks and inited:
            n = nranks[0][0]
            present = {c.rank for _, c in members if c.rank is not None}
            missing = sorted(set(range(n)) - present)
            if len(missing) >= n:
                missing = []
        if stuck:
            procs = [p for p, _ in stuck]
            done = sum(1 for _, c in members if c.state == "complete")
            ev = tuple(c.init_ev for _, c in stuck[:MAX_EV] if c.init_ev)
            waiting = bool(missing) and not any_complete and not unknown_here
            out.append(Finding(
                Kind.NCCL_INIT_INCOMPLETE,
                f"{_names(procs)} never completed init of {_comm_name(key, members)}: Init START without "
                f"Init COMPLETE ({done} of {len(members)} ranks completed)"
                + (f"; they wait for {ranks_text(missing)}, which wrote no init line"
                   if waiting else ""),
                ranks=_ranks(procs), hosts=_hosts(procs), evidence=ev,
                severity=Severity.WAITING if waiting else Severity.SUSPECT,
                waits_for=tuple(missing) if waiting else (),
                action="look at these ranks' own logs and stacks: they hang in ncclCommInitRank (bootstrap or "
                       "transport set-up), often waiting for a peer that died or cannot be reached"))
        if missing:
            n = nranks[0][0]
            world = n == world_size
            ev2 = tuple(c.init_ev for _, c in inited[:2] if c.init_ev)
            if stuck and not any_complete and not unknown_here:
                out.append(Finding(
                    Kind.NCCL_INIT_INCOMPLETE,
                    f"{_comm_name(key, members)}: {ranks_text(missing)} (of 0-{n - 1}) wrote no init line "
                    f"while {_names(p for p, _ in stuck)} wait in init for them: never started, died early, or stuck "
                    "before ncclCommInitRank",
                    ranks=tuple(missing) if world else (), evidence=ev2,
                    action="find the processes of these ranks: did they start, did they reach the communicator "
                           "creation, and where did their logs go?"))
            elif any_complete:
                out.append(Finding(
                    Kind.NCCL_INIT_INCOMPLETE,
                    f"{_comm_name(key, members)}: {ranks_text(missing)} (of 0-{n - 1}) wrote no init line in "
                    "these logs, but other ranks completed init, which needs every rank: their lines are just not here",
                    severity=Severity.INFO, evidence=ev2))
            else:
                maybe = f"; {_names(unknown, 4)} wrote NCCL lines without a rank and may be them" if unknown else ""
                maybe += (f"; {_names(own, 4)} drive{'s' if len(own) == 1 else ''} more GPUs than ranks logged and "
                          "may hold them" if own else "")
                out.append(Finding(
                    Kind.NCCL_INIT_INCOMPLETE,
                    f"{_comm_name(key, members)}: {ranks_text(missing)} (of 0-{n - 1}) wrote no init line in "
                    f"these logs (an excerpt, or their logs are elsewhere): not evidence that they failed{maybe}",
                    severity=Severity.WARNING, evidence=ev2,
                    action="pass every rank's NCCL_DEBUG output (NCCL_DEBUG_FILE=/dir/nccl.%h.%p)"))
    return out


def _lag_findings(log: NcclLog, grp, mism: dict | None = None) -> list[Finding]:
    """Ranks whose last opCount lags the others'. On a communicator where ranks already issued
    different collectives (``mism``: key -> (opCount, finding), :func:`~hangdbg.evidence.nccl.ops.op_mismatches`)
    at or below the laggards' opCount, the lag is that mismatch's consequence: a warning only."""
    mism = mism or {}
    out = []
    for key, members in grp.items():
        live = [(p, c) for p, c in members if c.state != "start"]
        if len(live) < 2 or not any(c.last_op is not None for _, c in live):
            continue
        val = {id(c): (c.last_op if c.last_op is not None else -1) for _, c in live}
        top = max(val.values())
        if len(set(val.values())) == 1:
            continue
        ahead = [(p, c) for p, c in live if val[id(c)] == top]
        behind = [(p, c) for p, c in live if val[id(c)] < top]
        by_val: dict[int, list] = defaultdict(list)
        for p, c in behind:
            by_val[val[id(c)]].append((p, c))
        parts = []
        for v in sorted(by_val, reverse=True):
            ms = by_val[v]
            last = Counter(c.last_coll for _, c in ms if c.last_coll).most_common(1)
            what = f"opCount 0x{v:x} ({last[0][0]})" if v >= 0 and last else "no collective"
            parts.append(f"{_names(p for p, _ in ms)} at {what}")
        top_coll = Counter(c.last_coll for _, c in ahead if c.last_coll).most_common(1)
        top_txt = f"opCount 0x{top:x}" + (f" ({top_coll[0][0]})" if top_coll else "")
        name = _comm_name(key, members)
        if len(behind) > len(ahead):
            summary = (f"{name}: {len(behind)} of {len(live)} ranks are behind - {'; '.join(parts)} - while only "
                       f"{_names(p for p, _ in ahead)} went on to {top_txt}. The stragglers are the many: the few "
                       f"ahead already entered the next collective and wait for them")
        else:
            summary = (f"{name}: {'; '.join(parts)} - behind the other {len(ahead)} ranks, which reached {top_txt}")
        ev = [log.evidence_of_last(c) for _, c in behind[:MAX_EV - 1]]
        ev.append(log.evidence_of_last(ahead[0][1]))
        procs = [p for p, _ in behind]
        cut = bool(log.cut_files)
        if cut:
            summary += (". But the log ends in a cut line (an excerpt): the last opCounts may only show where it "
                        "was cut")
        after = key in mism and mism[key][0] <= max(val[id(c)] for _, c in behind)
        if after:
            summary += (f". Ranks of this communicator already issued different collectives at opCount "
                        f"0x{mism[key][0]:x} (nccl-op-mismatch): the lag follows from that")
        out.append(Finding(Kind.NCCL_LAGGING, summary, ranks=_ranks(procs), hosts=_hosts(procs),
                           severity=Severity.WARNING if cut or after else Severity.SUSPECT,
                           evidence=tuple(e for e in ev if e is not None),
                           action="look at where these ranks are (stacks, their own logs): they never issued the "
                                  "collective the others wait in"))
    return out


def _norm_ip(peer: str) -> str:
    ip = peer.strip("[]").split("%", 1)[0]
    if ip.lower().startswith("::ffff:") and "." in ip:
        ip = ip[7:]
    return ip


def _connect_findings(log: NcclLog) -> list[Finding]:
    by_peer: dict[str, list] = defaultdict(list)
    for p in log.procs.values():
        for cf in p.connects:
            by_peer[_norm_ip(cf.peer)].append((p, cf))
    out = []
    known_hosts = {p.host for p in log.procs.values()}
    for peer, items in by_peer.items():
        host = log.ip_hosts.get(peer) or (peer if not ip_text(peer) and peer in known_hosts else None)
        ordered = sorted(items, key=lambda it: (it[1].evidence.source, it[1].evidence.line or 0))
        first = next((cf.reason for _, cf in ordered if cf.reason), None)
        nreasons = len({cf.reason for _, cf in items if cf.reason})
        ports = sorted({cf.port for _, cf in items})
        procs = list({id(p): p for p, _ in items}.values())
        ptxt = f"{peer}<{ports[0]}>" if len(ports) == 1 else f"{peer} (ports {', '.join(map(str, ports[:4]))})"
        where = f" = host {host} (from the logs' own interface lines)" if host and host != peer else (
            "" if host else " (an address no process in these logs announced)")
        why = (f": first {first}" + (f" ({nreasons - 1} other error{'s' if nreasons > 2 else ''} follow)"
                                     if nreasons > 1 else "")) if first else ""
        known = next((e for e in (known_root(cf.evidence.text) for _, cf in ordered[:4]) if e is not None), None)
        if known is not None and known.blame is Blame.ENVIRONMENT:  # this host's setup, not the peer
            out.append(Finding(
                Kind.NCCL_CONNECT_FAILED,
                f"{_names(procs)} on {', '.join(_hosts(procs))}: {known.meaning} (with peer {ptxt}{where}{why})",
                ranks=(), hosts=_hosts(procs), evidence=tuple(cf.evidence for _, cf in ordered[:MAX_EV]) + (
                    Evidence("catalog", None, f"{known.id}: {known.source}"),), action=known.action))
            continue
        if known is not None:
            why += f" ({known.meaning})"
        out.append(Finding(
            Kind.NCCL_CONNECT_FAILED,
            f"{_names(procs)} on {', '.join(_hosts(procs))} could not reach peer {ptxt}{where}{why}",
            ranks=(), hosts=(host,) if host else (), evidence=tuple(cf.evidence for _, cf in ordered[:MAX_EV]),
            action=(f"check the NCCL processes on {host}: crashed, never started, or blocked by a firewall/interface "
                    f"choice (NCCL_SOCKET_IFNAME)" if host else "find which host owns this address")))
    return out


_SETUP = (
    ("NCCL version", lambda p: {p.version} if p.version else set()),
    ("net plugin", lambda p: {_plugin_kind(p.plugin)} if p.plugin else set()),
    ("network", lambda p: set(p.networks)),
    ("interfaces", lambda p: set(p.ifaces)),
    ("transports", lambda p: set(p.transports)),
)


def _plugin_kind(plugin: str) -> str:
    """``"none"`` -> ``internal``; ``"loaded: NAME"`` -> ``external`` (hosts are compared on this:
    two lines of one plugin name it differently; the names go into the finding's text)."""
    return "external" if plugin.startswith("loaded") else "internal"


def _fmt(v: frozenset) -> str:
    return ", ".join(sorted(v)) or "-"


def setup_by_host(log: NcclLog) -> dict[str, dict[str, frozenset]]:
    """Host -> attribute -> the values its processes logged (attributes of :data:`_SETUP`)."""
    per: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for p in log.procs.values():
        for name, get in _SETUP:
            per[p.host][name] |= get(p)
    return {h: {k: frozenset(v) for k, v in d.items() if v} for h, d in per.items()}


def _setup_findings(log: NcclLog) -> list[Finding]:
    hosts = setup_by_host(log)
    out = []
    for name, _ in _SETUP:
        vals = {h: d[name] for h, d in hosts.items() if name in d}
        if len(vals) < 2:
            continue
        tally = Counter(vals.values())
        if len(tally) < 2:
            continue
        ranked = tally.most_common()
        if ranked[0][1] > ranked[1][1]:
            major = ranked[0][0]
            odd = sorted(h for h, v in vals.items() if v != major)
            majority = sorted(h for h, v in vals.items() if v == major)
            detail = "; ".join(f"{h} has {_fmt(vals[h])}" for h in odd[:8])
            summary = (f"{name} differs on {len(odd)} of {len(vals)} hosts: {detail}, while the other "
                       f"{len(majority)} hosts have {_fmt(major)}")
        else:
            odd = sorted(vals)
            by: dict[frozenset, list] = defaultdict(list)
            for h, v in vals.items():
                by[v].append(h)
            summary = f"{name} differs between hosts (no majority): " + "; ".join(
                f"{', '.join(sorted(hs))} have {_fmt(v)}" for v, hs in by.items())
        action = ("make the NCCL installation and environment (NCCL_*, LD_LIBRARY_PATH, libnccl-net.so) the same on "
                  "every host")
        if name == "net plugin":
            raw: dict[str, set] = defaultdict(set)
            for p in log.procs.values():
                if p.plugin:
                    raw[p.host].add("internal (no libnccl-net.so)" if p.plugin == "none" else
                                    "external " + p.plugin.split(": ", 1)[-1])
            ext = sorted(h for h, v in vals.items() if "external" in v)
            summary = ("net plugin differs between hosts: " + "; ".join(
                f"{h} uses {', '.join(sorted(raw[h]))}" for h in (odd + [h for h in sorted(vals) if h not in odd])[:8])
                + " - a net plugin (libnccl-net.so) present on only some hosts is a known cause of NCCL hangs "
                  "(the hosts then pick different network transports)")
            action = (f"the net plugin differs on hosts {', '.join(odd[:8])}: install the same libnccl-net.so "
                      f"everywhere or remove it from the library path of {', '.join(ext) or 'the odd hosts'} "
                      "(or set NCCL_NET_PLUGIN=none on every host)")
        odd_hosts = set(odd)
        procs = [p for p in log.procs.values() if p.host in odd_hosts]
        ev = []
        for h in odd[:MAX_EV]:
            p = next(q for q in procs if q.host == h)
            if p.first_ev:
                ev.append(Evidence(p.first_ev.source, None, f"{h}: {name} = {_fmt(vals[h])}"))
        out.append(Finding(Kind.NCCL_SETUP_DIFFERS, summary, ranks=_ranks(procs), hosts=tuple(odd), evidence=tuple(ev),
                           action=action))
    return out


def _warn_findings(log: NcclLog) -> list[Finding]:
    out = []
    warned = [p for p in log.procs.values() if p.nwarns or p.nchains]
    if warned:
        ev = [e for p in warned for e in (p.warns[:2] + p.chains[:1])][:MAX_EV]
        n = sum(p.nwarns for p in warned)
        out.append(Finding(Kind.NCCL_WARN, f"{n} NCCL WARN line{'s' if n != 1 else ''} and "
                           f"{sum(p.nchains for p in warned)} error-chain lines from {_names(warned)}",
                           ranks=_ranks(warned), hosts=_hosts(warned), severity=Severity.WARNING, evidence=tuple(ev)))
    aborted = [(p, c) for p in log.procs.values() for c in p.all_comms if c.state == "aborted"]
    if aborted:
        procs = list({id(p): p for p, _ in aborted}.values())
        out.append(Finding(Kind.NCCL_ABORTED, f"{_names(procs)} aborted a communicator (Abort COMPLETE)",
                           ranks=_ranks(procs), hosts=_hosts(procs), severity=Severity.WARNING,
                           evidence=tuple(c.init_ev for _, c in aborted[:MAX_EV] if c.init_ev)))
    return out


def _slice_rows(log: NcclLog) -> list[tuple[Proc, list[tuple]]]:
    """``--split-on``: per process (in ``log.procs`` order), per slice its collective counts by
    type over all communicators, as sorted ``(type, count)`` pairs."""
    out = []
    for p in log.procs.values():
        rows: list[Counter[str]] = [Counter() for _ in range(log.nslices)]
        for c in p.all_comms:
            for s, cnt in c.slices.items():
                rows[s].update(cnt)
        out.append((p, [tuple(sorted(r.items())) for r in rows]))
    return out


def _slice_majority(log: NcclLog, rows: list[tuple[Proc, list[tuple]]]) -> list[tuple]:
    """Per slice, the counts most processes have (a tie: those of the first process among them)."""
    if not rows:
        return []
    return [Counter(r[s] for _, r in rows).most_common(1)[0][0] for s in range(log.nslices)]


def slice_table(log: NcclLog, rows: list[tuple[Proc, list[tuple]]] | None = None) -> dict[str, list[dict[str, int]]]:
    """``--split-on``: process label (:func:`_labels`) -> per slice, collective counts by type (all
    communicators); ``rows``: :func:`_slice_rows` when already built."""
    labels = _labels(log)
    rows = _slice_rows(log) if rows is None else rows
    return {labels[id(p)]: [dict(r) for r in rs] for p, rs in sorted(rows, key=lambda pr: pr[0].sort_key)}


def _slice_findings(log: NcclLog, rows: list[tuple[Proc, list[tuple]]], major: list[tuple]) -> list[Finding]:
    if log.split_on is None or log.nslices < 2:
        return []
    first: dict[int, list] = defaultdict(list)
    flagged: set[int] = set()
    for s in range(log.nslices):
        for k, (_, rs) in enumerate(rows):
            if rs[s] != major[s] and k not in flagged:
                first[s].append(k)
                flagged.add(k)
    out = []
    for s, ks in sorted(first.items()):
        ps = [rows[k][0] for k in ks]
        last = s == log.nslices - 1
        out.append(Finding(Kind.NCCL_SLICE_DIFFERS,
                           f"{_names(ps)}: collective counts first differ from the majority in slice {s}"
                           + (" (the last slice: where the run stopped)" if last else ""),
                           ranks=_ranks(ps), hosts=_hosts(ps), severity=Severity.WARNING if last else Severity.SUSPECT))
    return out


def _labels(log: NcclLog) -> dict[int, str]:
    """``id(process)`` -> a label unique among the processes: ``rank 3``, ``rank 3 (HOST.PID)``
    when two processes have rank 3 (two jobs' logs, a restarted rank), ``HOST.PID`` without a rank."""
    ranks = Counter(p.rank for p in log.procs.values() if p.rank is not None)
    return {id(p): p.label if p.rank is None else f"rank {p.rank}" if ranks[p.rank] == 1 else f"rank {p.rank} ({p.label})"
            for p in log.procs.values()}


def _state(p: Proc) -> str:
    if p.init_fail is not None:
        return "init failed"
    if any(c.state == "start" for c in p.all_comms):
        return "init incomplete"
    if any(c.state == "aborted" for c in p.all_comms):
        return "aborted"
    if any(c.state == "complete" for c in p.all_comms) or any(c.counts for c in p.all_comms):
        return "ok"
    if any(c.had_init for c in p.all_comms):
        return "init logged"  # an init line without Init START/COMPLETE (older NCCL, an excerpt)
    return "no init line"


def _last(p: Proc) -> Comm | None:
    cs = [c for c in p.all_comms if c.last_where is not None]
    return max(cs, key=lambda c: c.last_where) if cs else None


def _init_behind_p2p(findings: list[Finding]) -> list[Finding]:
    """When the single-node P2P/IOMMU symptom is the suspect, ranks stuck in init on that host are its
    consequence (every rank of the node stops together; none is the cause): a warning, not a suspect."""
    hosts = {h for f in findings if f.kind is Kind.NCCL_P2P_BLOCKED and f.is_suspect for h in f.hosts}
    if not hosts:
        return findings
    return [replace(f, severity=Severity.WARNING,
                    summary=f.summary + " - the symptom of the blocked P2P traffic on this node, not its cause")
            if f.kind is Kind.NCCL_INIT_INCOMPLETE and f.is_suspect and f.hosts and set(f.hosts) <= hosts else f
            for f in findings]


def analyze(log: NcclLog) -> tuple[list[Finding], list[RankState], NcclFacts]:
    """Turn a scanned :class:`NcclLog` into findings (most important first), per-rank rows and facts."""
    grp = groups(log)
    mism = op_mismatches(log, grp)
    srows = _slice_rows(log) if log.split_on is not None else []
    major = _slice_majority(log, srows)
    findings = (_init_fail_findings(log) + _bootstrap_findings(log) + _init_findings(log, grp) + _connect_findings(log)
                + _net_error_findings(log) + [f for _, f in mism.values()] + _lag_findings(log, grp, mism)
                + _setup_findings(log)
                + _p2p_findings(log, bool(log.cut_files)) + _slice_findings(log, srows, major) + _warn_findings(log))
    findings = _init_behind_p2p(findings)
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    rows = []
    procs = []
    labels = _labels(log)
    for p in sorted(log.procs.values(), key=lambda p: p.sort_key):
        last = _last(p)
        state = _state(p)
        if p.rank is not None:
            rows.append(RankState(p.rank, p.host, p.pid, last.last_coll if last else None,
                                  last.last_op if last else None, last.key if last else "", state, SourceKind.NCCL))
        procs.append(NcclProcess(
            rank=p.rank, host=p.host, pid=p.pid, label=labels[id(p)], devices=tuple(sorted(p.devs)),
            version=p.version, plugin=p.plugin, networks=tuple(sorted(p.networks)),
            interfaces=tuple(sorted(p.ifaces)), ips=tuple(sorted(p.ips)), transports=tuple(sorted(p.transports)),
            state=state, records=p.records, warns=p.nwarns,
            collectives=dict(sum((c.counts for c in p.all_comms), Counter())),
            comms=tuple(NcclComm(comm=c.ptr, key=c.key, rank=c.rank, nranks=c.nranks, state=c.state or None,
                                 parent=c.parent, collectives=dict(c.counts), last_op=c.last_op,
                                 last_op_hex=f"{c.last_op:x}" if c.last_op is not None else None,
                                 last_collective=c.last_coll) for c in p.all_comms),
        ))
    total = sum((Counter(p.collectives) for p in procs), Counter())
    facts = NcclFacts(
        processes=tuple(procs),
        hosts={h: {k: tuple(sorted(v)) for k, v in d.items()} for h, d in sorted(setup_by_host(log).items())},
        ip_hosts=dict(sorted(log.ip_hosts.items())),
        collectives=dict(total),
        communicators={k: NcclCommunicator(len(m), next((c.nranks for _, c in m if c.nranks), None)) for k, m in grp.items()},
    )
    if log.split_on is not None:
        facts = replace(facts, slices={k: tuple(v) for k, v in slice_table(log, srows).items()},
                        slice_majority=tuple(dict(m) for m in major), split_on=log.split_on.pattern)
    return findings, rows, facts
