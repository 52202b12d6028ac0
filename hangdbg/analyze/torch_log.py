"""From the events of PyTorch distributed logs to findings and per-rank rows.

Heuristics (each names its evidence):

* **SeqNum per process group.** A rank's position in a group is the highest sequence number it
  printed for it (timed-out ``WorkNCCL(SeqNum=)``, ``last enqueued NCCL work``). Positions are
  compared per group, never across groups. The most common position is the norm; ranks below it
  lag (``seq-lagging``). When a few ranks are *ahead* and most are behind, the many are reported
  as behind and the few as ahead, with both directions in the summary: the many never called the
  collective the few entered (or the few issued one too many).
* **Silent ranks.** A rank seen in the log (``[rankN]:`` prefix) that printed no timeout while
  others timed out probably never entered the collective (``no-timeout``).
* **Desync report.** The ranks PyTorch's desync debug names (``desync-report``).
* **Messages naming a rank** (fingerprint and DDP model mismatches, heartbeat monitor, NCCL
  errors): :mod:`hangdbg.analyze.torch_messages`.
* **ChildFailedError.** The root-cause entry (first observed failure) is the suspect
  (``child-failed``); ranks the agent stopped with SIGTERM afterwards are victims. ``error.json``
  files not referenced by a summary: the earliest by timestamp is the suspect (``child-error``),
  as torchelastic's own ``get_first_failure`` rule.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from ..facts import CppFrames, RankSeq, TorchLogFacts
from ..model import Evidence, Finding, Kind, RankState, Severity, SourceKind
from ..parse.torch_log import (
    ChildFailure,
    ErrorFile,
    Timeout,
    TorchLogEvents,
    WorkStatus,
    signal_name,
)
from ..rankset import compress, ranks_text
from .torch_messages import message_findings

__all__ = ["analyze_events"]

SOURCE = SourceKind.TORCH_LOG

_PEER_LOSS = re.compile(r"Connection closed by peer|Connection reset by peer|remote worker crashing|"
                        r"communicator was aborted|Broken pipe|DistNetworkError", re.IGNORECASE)


def _pg(group: str) -> str:
    return f"process group {group}" if group else "the process group"


def _assign_groups(ev: TorchLogEvents) -> list[Timeout]:
    """Give timeouts printed without a ``[PG ...]`` tag the group of the same rank's matching status
    line or tagged timeout (same SeqNum); then drop duplicates (one message is printed up to three
    times: LOG(ERROR), the watchdog's exception, ``what():``)."""
    known: dict[tuple[int, int], set[str]] = defaultdict(set)
    for s in ev.statuses:
        for seq in (s.work, s.enqueued):
            if seq is not None and s.group:
                known[(s.rank, seq)].add(s.group)
    for t in ev.timeouts:
        if t.group and t.seq is not None:
            known[(t.rank, t.seq)].add(t.group)
    out: dict[tuple, Timeout] = {}
    for t in ev.timeouts:
        if not t.group and t.seq is not None and len(known.get((t.rank, t.seq), ())) == 1:
            t = Timeout(t.rank, next(iter(known[(t.rank, t.seq)])), t.seq, t.op, t.timeout_ms, t.ran_ms,
                        t.numel_in, t.numel_out, t.evidence)
        out.setdefault((t.rank, t.group, t.seq, t.op), t)
    return list(out.values())


def _positions(timeouts: list[Timeout], statuses: list[WorkStatus]) -> dict[str, dict[int, tuple[int, Evidence]]]:
    pos: dict[str, dict[int, tuple[int, Evidence]]] = defaultdict(dict)

    def put(group: str, rank: int, seq: int | None, evid: Evidence) -> None:
        if seq is None:
            return
        cur = pos[group].get(rank)
        if cur is None or seq > cur[0]:
            pos[group][rank] = (seq, evid)

    for t in timeouts:
        put(t.group, t.rank, t.seq, t.evidence)
    for s in statuses:
        put(s.group, s.rank, max((x for x in (s.enqueued, s.work) if x is not None), default=None), s.evidence)
    return pos


def _lag_findings(pos: dict[str, dict[int, tuple[int, Evidence]]]) -> list[Finding]:
    out = []
    for group, by_rank in sorted(pos.items()):
        if len(by_rank) < 2:
            continue
        counts = Counter(v for v, _ in by_rank.values())
        if len(counts) == 1:
            continue
        norm = max(counts, key=lambda v: (counts[v], v))
        behind = sorted(r for r, (v, _) in by_rank.items() if v < norm)
        ahead = sorted(r for r, (v, _) in by_rank.items() if v > norm)
        at_norm = sorted(r for r, (v, _) in by_rank.items() if v == norm)
        total = len(by_rank)
        if behind:
            vals = sorted({by_rank[r][0] for r in behind})
            where = "SeqNum " + ", ".join(map(str, vals))
            ev = tuple(by_rank[r][1] for r in behind[:3]) + (by_rank[at_norm[0]][1],)
            even = " (the ranks split evenly: direction uncertain)" if counts[norm] * 2 <= total and not ahead else ""
            out.append(Finding(
                kind=Kind.SEQ_LAGGING,
                summary=(f"{ranks_text(behind)} lag{'s' if len(behind) == 1 else ''} in {_pg(group)}: last {where} while "
                         f"{len(at_norm)} other rank{'s' if len(at_norm) != 1 else ''} reached SeqNum {norm}; "
                         f"{'it' if len(behind) == 1 else 'they'} never got past collective #{vals[-1] + 1}{even}"),
                ranks=tuple(behind), evidence=ev, severity=Severity.SUSPECT))
        if ahead:
            vals = sorted({by_rank[r][0] for r in ahead})
            ev = tuple(by_rank[r][1] for r in ahead[:3]) + (by_rank[at_norm[0]][1],)
            out.append(Finding(
                kind=Kind.SEQ_LAGGING,
                summary=(f"most ranks ({len(at_norm)} of {total}: {compress(at_norm)}) are behind in {_pg(group)} at "
                         f"SeqNum {norm} while {ranks_text(ahead)} {'is' if len(ahead) == 1 else 'are'} ahead at SeqNum "
                         f"{', '.join(map(str, vals))}: the many never called collective #{norm + 1} "
                         f"(or {ranks_text(ahead)} issued one the others did not)"),
                ranks=tuple(at_norm), evidence=ev, severity=Severity.SUSPECT))
    return out


def _timeout_findings(timeouts: list[Timeout]) -> list[Finding]:
    by: dict[tuple, list[Timeout]] = defaultdict(list)
    for t in timeouts:
        by[(t.group, t.seq, t.op)].append(t)
    out = []
    for (group, seq, op), ts in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1, kv[0][2])):
        ranks = sorted({t.rank for t in ts})
        ran = max((t.ran_ms for t in ts if t.ran_ms is not None), default=None)
        seqtxt = f"SeqNum {seq}" if seq is not None else "no SeqNum (old PyTorch)"
        out.append(Finding(
            kind=Kind.WATCHDOG_TIMEOUT,
            summary=(f"{ranks_text(ranks)} timed out in {op} ({seqtxt}, {_pg(group)})"
                     + (f" after {ran} ms" if ran is not None else "") + f" (timeout {ts[0].timeout_ms} ms)"),
            ranks=tuple(ranks), evidence=tuple(t.evidence for t in ts[:4]), severity=Severity.WARNING))
    return out


def _silent_findings(ev: TorchLogEvents, timeouts: list[Timeout], exclude: set[int]) -> list[Finding]:
    if not timeouts:
        return []
    active = {t.rank for t in timeouts} | {s.rank for s in ev.statuses}
    silent = sorted(ev.seen_ranks - active - exclude)
    if not silent:
        return []
    t0 = min(timeouts, key=lambda t: (t.seq is None, t.seq or 0))
    return [Finding(
        kind=Kind.NO_TIMEOUT,
        summary=(f"{ranks_text(silent)} printed no watchdog timeout while {ranks_text(active)} timed out "
                 f"({t0.op}{f' SeqNum {t0.seq}' if t0.seq is not None else ''}, {_pg(t0.group)}): "
                 f"{'it' if len(silent) == 1 else 'they'} likely never entered that collective "
                 f"(if a member of that group)"),
        ranks=tuple(silent), evidence=(t0.evidence,), severity=Severity.SUSPECT)]


def _desync_findings(ev: TorchLogEvents) -> list[Finding]:
    out, seen = [], set()
    for d in ev.desyncs:
        key = (d.op, d.seq, d.missing, d.joined_not_finished, d.finished_not_joined)
        if key in seen:
            continue
        seen.add(key)
        parts, ranks = [], set()
        if d.missing:
            parts.append(f"{ranks_text(d.missing)} never joined any collective")
            ranks |= set(d.missing)
        if d.joined_not_finished:
            parts.append(f"{ranks_text(d.joined_not_finished)} joined but did not finish collective #{d.lag_seq}")
            ranks |= set(d.joined_not_finished)
        if d.finished_not_joined:
            parts.append(f"{ranks_text(d.finished_not_joined)} finished collective #{d.lag_seq} but did not join #{(d.lag_seq or 0) + 1}")
            ranks |= set(d.finished_not_joined)
        if not parts:
            continue
        at = f" at {d.op} #{d.seq}" if d.op else ""
        by = f" (reported by rank {d.reporter})" if d.reporter is not None else ""
        out.append(Finding(kind=Kind.DESYNC_REPORT, summary=f"desync debug{at}{by}: " + "; ".join(parts),
                           ranks=tuple(sorted(ranks)), evidence=d.evidence, severity=Severity.SUSPECT))
    return out


def _match_error_file(f: ChildFailure, files: list[ErrorFile]) -> ErrorFile | None:
    if not f.error_file or f.error_file == "<N/A>":
        return None
    for e in files:
        if e.path == f.error_file or e.path.endswith(f.error_file) or f.error_file.endswith(e.path.lstrip("./")):
            return e
    # a copy collected elsewhere: same ``attempt_N/<local_rank>/error.json`` tail (and the host in the
    # path when several nodes' copies share that tail)
    tail = _tail(f.error_file)
    same = [e for e in files if _tail(e.path) == tail]
    if len(same) > 1 and f.host:
        same = [e for e in same if f.host in e.path.replace("\\", "/").split("/")]
    return same[0] if len(same) == 1 else None


def _tail(path: str) -> tuple[str, ...]:
    return tuple(path.replace("\\", "/").split("/")[-3:])


def _failure_findings(ev: TorchLogEvents, timed_out: set[int]) -> tuple[list[Finding], set[int], set[str]]:
    """Findings from ChildFailedError entries (+ their error files) and bare agent lines.

    torchelastic picks its "Root Cause (first observed failure)" by the failure timestamps, in whole
    seconds; a rank whose peer crashed ("Connection closed by peer") can win that race against the
    rank that crashed (seen here with a real SIGSEGV under load). When torchrun's root cause only lost
    its peer and another rank failed on its own, the other rank is named first.
    """
    uniq: dict[tuple, ChildFailure] = {}
    for f in ev.failures:
        key = (f.rank, f.pid, f.exitcode)
        if key not in uniq or f.root:
            uniq[key] = f
    fails = list(uniq.values())
    files = {id(f): _match_error_file(f, ev.error_files) for f in fails}
    used_files = {e.path for e in files.values() if e is not None}

    def msg(f: ChildFailure) -> str:
        e = files[id(f)]
        return e.message if e is not None and e.message else f.message

    def lost_peer(f: ChildFailure) -> bool:
        return bool(_PEER_LOSS.search(msg(f)))

    victims = [f for f in fails if not f.root and f.exitcode == -15]
    active = [f for f in fails if f.root or f.exitcode != -15]  # the rest (by identity: fails are unique)
    # one root per agent (node) that printed a summary: the earliest is the job's
    torch_root = min((f for f in active if f.root), key=lambda f: f.time, default=None)
    root = torch_root
    if torch_root is not None and lost_peer(torch_root):
        own = [f for f in active if f is not torch_root and not lost_peer(f)]
        if own:
            root = min(own, key=lambda f: f.time)
    out: list[Finding] = []
    for f in sorted(active, key=lambda f: f is not root):
        e = files[id(f)]
        where = f" on {f.host}" if f.host else ""
        local = f" (local_rank {f.local_rank})" if f.local_rank is not None else ""
        m = msg(f)
        if f is root:
            first = "failed first"
        elif f is torch_root:
            first = "was named the root cause by torchrun but only lost its peer"
        else:
            first = "also failed"
        note = ""
        if f is root and torch_root is not None and root is not torch_root:
            note = f" (torchrun named rank {torch_root.rank}, which only lost its peer)"
        # a rank the watchdog took down (SIGABRT after its own timeout) is a consequence of the hang
        consequence = f.rank in timed_out and f.exitcode in (-6, 134, 1)
        if consequence:
            note += " - after its own watchdog timeout: a consequence of the hang, not its cause"
        out.append(Finding(
            kind=Kind.CHILD_FAILED,
            summary=(f"rank {f.rank}{local}{where} {first}: {f.state}" + (f", pid {f.pid}" if f.pid is not None else "")
                     + (f": {m}" if m else "") + note),
            ranks=(f.rank,) if f.rank is not None else (), hosts=(f.host,) if f.host else (),
            evidence=f.evidence + ((Evidence(e.path, None, e.message[:500]),) if e is not None else ()),
            severity=Severity.WARNING if consequence else Severity.SUSPECT if f is root or root is None else Severity.WARNING))
    if victims:
        vr = [f.rank for f in victims if f.rank is not None]
        out.append(Finding(
            kind=Kind.CHILD_FAILED,
            summary=f"{ranks_text(vr)} stopped by the agent (SIGTERM) after the failure: victims, not causes",
            ranks=tuple(sorted(vr)), hosts=tuple(sorted({f.host for f in victims if f.host})),
            evidence=tuple(x for f in victims[:2] for x in f.evidence[:1]), severity=Severity.INFO))
    known_pids = {f.pid for f in fails}
    for local_rank, pid, code, evid in ev.agent_failures:
        if pid in known_pids:
            continue
        known_pids.add(pid)
        sig = signal_name(code)
        out.append(Finding(
            kind=Kind.CHILD_FAILED,
            summary=f"local_rank {local_rank} (pid {pid}) failed: exit {code}" + (f" ({sig})" if sig else "")
            + " (torchrun agent line; the global rank is not printed)",
            evidence=(evid,), severity=Severity.SUSPECT if root is None else Severity.WARNING))
    return out, {f.rank for f in active if f.rank is not None}, used_files


def _error_file_findings(ev: TorchLogEvents, used: set[str]) -> list[Finding]:
    # torchelastic's rule: the earliest timestamp (whole seconds). On a tie, a rank that lost its peer
    # ("Connection closed by peer", an aborted communicator) is a consequence, not a cause.
    rest = sorted((e for e in ev.error_files if e.path not in used),
                  key=lambda e: (e.timestamp is None, e.timestamp or 0, bool(_PEER_LOSS.search(e.message))))
    out = []
    for i, e in enumerate(rest):
        who = f"local_rank {e.local_rank}" if e.local_rank is not None else "a worker"
        tb = [ln for ln in e.traceback.splitlines() if ln.strip()]
        where = next((ln.strip() for ln in reversed(tb) if ln.strip().startswith("File ")), "")
        out.append(Finding(
            kind=Kind.CHILD_ERROR,
            summary=(f"{who} recorded {'the earliest' if i == 0 and len(rest) > 1 else 'an'} error"
                     + (f" at {e.timestamp}" if e.timestamp else "") + f": {e.message.splitlines()[0] if e.message else '?'}"
                     + (f" ({where})" if where else "")),
            evidence=(Evidence(e.path, None, e.message[:500]),),
            severity=Severity.SUSPECT if i == 0 else Severity.WARNING))
    return out


def analyze_events(ev: TorchLogEvents) -> tuple[list[Finding], list[RankState], TorchLogFacts]:
    """Findings (most important first), per-rank rows and the facts."""
    timeouts = _assign_groups(ev)
    pos = _positions(timeouts, ev.statuses)
    fail_findings, failed_ranks, used = _failure_findings(ev, {t.rank for t in timeouts} | set(ev.aborted))
    findings = [f for f in fail_findings if f.severity is Severity.SUSPECT]
    findings += _desync_findings(ev)
    findings += _lag_findings(pos)
    findings += _silent_findings(ev, timeouts, failed_ranks)
    findings += _error_file_findings(ev, used)
    findings += [f for f in fail_findings if f.severity is not Severity.SUSPECT]
    findings += _timeout_findings(timeouts)
    mine = message_findings(ev.messages, timeouts, any(f.is_suspect for f in findings))  # analyze/torch_messages.py
    findings = [f for f in mine if f.is_suspect] + findings + [f for f in mine if not f.is_suspect]
    for rank, evid in sorted(ev.dump_from.items())[:1]:
        findings.append(Finding(kind=Kind.DUMP_SIGNAL, summary=f"rank {rank} detected the timeout first and signalled "
                                "the others to dump their flight recorder", ranks=(rank,), evidence=(evid,),
                                severity=Severity.INFO))

    rows: dict[tuple[int, str], dict] = {}
    groups_of: dict[int, list[tuple[int, str]]] = defaultdict(list)  # a rank's row keys, in rows' order

    def row(rank: int, group: str) -> dict:
        r = rows.get((rank, group))
        if r is None:
            r = rows[(rank, group)] = {"rank": rank, "group": group, "host": "", "pid": None,
                                       "last_collective": None, "seq": None, "state": []}
            groups_of[rank].append((rank, group))
        return r

    for t in sorted(timeouts, key=lambda t: t.seq or -1):
        r = row(t.rank, t.group)
        r["last_collective"], r["seq"] = t.op, t.seq
        if "timed out" not in r["state"]:
            r["state"].append("timed out")
    for group, by_rank in pos.items():
        for rank, (seq, _) in by_rank.items():
            r = row(rank, group)
            if r["seq"] is None or seq > r["seq"]:
                r["seq"] = seq
    for rank in ev.aborted:
        for key in list(groups_of.get(rank, ())) or [(rank, "")]:
            st = row(*key)["state"]
            if "aborted" not in st:
                st.append("aborted")
    for f in {(f.rank, f.pid): f for f in ev.failures}.values():
        if f.rank is None:
            continue
        for key in list(groups_of.get(f.rank, ())) or [(f.rank, "")]:
            r = row(*key)
            r["host"], r["pid"] = f.host or r["host"], f.pid
            st = f.state + (" (torchrun root cause)" if f.root else "")
            if st not in r["state"]:
                r["state"].append(st)
    ranks = [RankState(rank=r["rank"], host=r["host"], pid=r["pid"], last_collective=r["last_collective"],
                       seq=r["seq"], group=r["group"], state="; ".join(r["state"]), source=SOURCE)
             for r in sorted(rows.values(), key=lambda r: (r["rank"], r["group"]))]
    facts = TorchLogFacts(
        timeouts=len(timeouts),
        seqs={g: tuple(RankSeq(r, v) for r, (v, _) in sorted(by.items())) for g, by in sorted(pos.items())},
        desync_reports=len(ev.desyncs),
        child_failures=len(ev.failures),
        error_files=len(ev.error_files),
        cpp_frames=tuple(CppFrames(k, tuple(v[:12])) for k, v in sorted(ev.frames.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))),
        ranks_seen=tuple(sorted(ev.seen_ranks)),
    )
    return findings, ranks, facts
