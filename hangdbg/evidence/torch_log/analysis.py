"""From the events of PyTorch distributed logs to findings and per-rank rows.

Heuristics (each names its evidence):

* **SeqNum per process group, op mismatch.** :mod:`hangdbg.evidence.torch_log.seq`: group identity,
  each rank's position (the work that timed out), which groups' SeqNums may be compared, ranks in
  another collective at the same SeqNum (``op-mismatch``), ranks behind or ahead (``seq-lagging``;
  ranks ahead are never blamed).
* **Silent ranks.** A rank seen in the log (``[rankN]:`` prefix) that printed no timeout while
  others timed out probably never entered the collective (``no-timeout``). A rank whose line is cut
  off (``[rank9]:[E816``, a watchdog line that stops short) is not silent: it is named as
  incomplete (``log-incomplete``, info).
* **First collective.** SeqNum 1 timed out: the group's first collective never completed, an
  init/connectivity problem (``first-collective``, warning; NCCL connects inside the first collective).
* **Everyone in the same op.** When every rank in the logs timed out in one op and nothing else
  stands out, the timeout finding says so and that the rank they wait for is not in these logs.
* **Desync report.** The ranks PyTorch's desync debug names (``desync-report``).
* **Messages naming a rank** (fingerprint and DDP model mismatches, heartbeat monitor, NCCL
  errors): :mod:`hangdbg.evidence.torch_log.message_findings`.
* **ChildFailedError.** The root-cause entry (first observed failure) is the suspect
  (``child-failed``); ranks the agent stopped with SIGTERM afterwards are victims. ``error.json``
  files not referenced by a summary: the earliest by timestamp is the suspect (``child-error``),
  as torchelastic's own ``get_first_failure`` rule.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from .facts import CppFrames, RankSeq, TorchLogFacts
from ...exit_status import SIGNAL_MEANING
from ...model import Evidence, Finding, Kind, RankState, Severity, SourceKind
from .grammar import ChildFailure, ErrorFile, Timeout, TorchLogEvents, WorkStatus, signal_name
from .messages import FingerprintMismatch, ParamMismatch
from ...rankset import ranks_text
from .message_findings import message_findings
from .seq import Pos, comparable, lag_findings, mismatch_findings, positions, resolve_groups
from .seq import pg as _pg

__all__ = ["analyze_events"]

SOURCE = SourceKind.TORCH_LOG

_PEER_LOSS = re.compile(r"Connection closed by peer|Connection reset by peer|remote worker crashing|"
                        r"communicator was aborted|Broken pipe|DistNetworkError", re.IGNORECASE)


_TOGETHER = {
    -7: "SIGBUS in every process at once: the node's shared memory (/dev/shm) or host memory ran out",
    -9: "SIGKILL in every process at once: the kernel's OOM killer (host memory) or the scheduler killed them",
    -11: "SIGSEGV in every process at once: a broken library or driver on the node",
}
"""What a signal that ended every rank of a node at one time says (torchelastic's exitcode is -SIGNAL)."""


def _died_together(fails: list) -> list:
    """The failures when at least two ranks of one node ended with the same signal at the same
    second (torchelastic's ChildFailedError table): no rank is first, the node is the cause.
    Heuristic (ours)."""
    fails = [f for f in fails if f.time and f.exitcode is not None]  # a block cut off by an excerpt says nothing
    if len(fails) < 2:
        return []
    keys = {(f.host, f.exitcode, f.time) for f in fails}
    if len(keys) != 1:
        return []
    host, code, when = next(iter(keys))
    return list(fails) if code is not None and code < 0 and code != -15 and when else []


def _queued(ts: list[Timeout], pos: dict[str, dict[int, Pos]]) -> str:
    """`` (last enqueued: rank 0 up to work 84; later works queue behind the stuck one)`` from the status
    lines, when a rank enqueued more than one work past the one that timed out."""
    far = sorted({(t.rank, p.enqueued) for t in ts if (p := pos.get(t.group, {}).get(t.rank)) is not None
                  and p.enqueued is not None and t.seq is not None and p.enqueued > t.seq + 1})
    if not far:
        return ""
    who = ", ".join(f"rank {r} up to work {e}" for r, e in far[:3])
    return f" (last enqueued: {who}; later works queue behind the stuck one)"


def _timeout_findings(timeouts: list[Timeout], pos: dict[str, dict[int, Pos]]) -> list[Finding]:
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
                     + (f" after {ran} ms" if ran is not None else "") + f" (timeout {ts[0].timeout_ms} ms)"
                     + _queued(ts, pos)),
            ranks=tuple(ranks), evidence=tuple(t.evidence for t in ts[:4]), severity=Severity.WARNING))
    return out


def _main_timeout(timeouts: list[Timeout]) -> Timeout:
    """A timeout of the (group, SeqNum, op) most ranks timed out in (the lowest SeqNum on a tie)."""
    counts = Counter((t.group, t.seq, t.op) for t in timeouts)
    key = max(counts, key=lambda k: (counts[k], -(k[1] or 0)))
    return next(t for t in timeouts if (t.group, t.seq, t.op) == key)


def _silent_findings(ev: TorchLogEvents, timeouts: list[Timeout], statuses: list[WorkStatus],
                     exclude: set[int]) -> list[Finding]:
    """Ranks seen in the log that printed no timeout (a rank whose line is cut off is not silent:
    what it printed is unknown)."""
    if not timeouts or (ev.prefix_ranks and not all(t.global_rank for t in timeouts)):
        return []  # a timeout named by its process-group rank beside global ranks: not one numbering, no comparison
    active = {t.rank for t in timeouts} | {s.rank for s in statuses}
    silent = sorted(ev.seen_ranks - active - exclude - set(ev.cut))
    if not silent:
        return []
    t0 = _main_timeout(timeouts)
    return [Finding(
        kind=Kind.NO_TIMEOUT,
        summary=(f"{ranks_text(silent)} printed no watchdog timeout while {ranks_text(active)} timed out "
                 f"({t0.op}{f' SeqNum {t0.seq}' if t0.seq is not None else ''}, {_pg(t0.group)}): "
                 f"{'it' if len(silent) == 1 else 'they'} likely never entered that collective "
                 f"(if a member of that group)"),
        ranks=tuple(silent), evidence=(t0.evidence,), severity=Severity.SUSPECT,
        action=f"look at the stacks (py-spy dump / hangdbg dump) or the last log lines of {ranks_text(silent)}")]


def _reporters(ev: TorchLogEvents) -> set[int]:
    """The ranks that printed a DDP model or collective-fingerprint mismatch (``reducer.cpp`` /
    ``ProcessGroupWrapper.cpp`` raise it as a ``RuntimeError`` on the printing rank): they did not
    time out because they failed with that error, so they are never "silent"."""
    msgs: list[ParamMismatch | FingerprintMismatch] = [*ev.messages.params, *ev.messages.fingerprints]
    return {r for m in msgs if (r := m.printer if m.printer is not None else m.rank) is not None}


def _incomplete_findings(ev: TorchLogEvents, timeouts: list[Timeout], statuses: list[WorkStatus]) -> list[Finding]:
    """Ranks whose only watchdog trace is a cut-off line: named, never blamed."""
    active = {t.rank for t in timeouts} | {s.rank for s in statuses}
    cut = sorted(set(ev.cut) - active)
    if not cut:
        return []
    return [Finding(
        kind=Kind.LOG_INCOMPLETE,
        summary=(f"{ranks_text(cut)}: the line is cut off ({ev.cut[cut[0]].text.strip()[:80]!r}); what "
                 f"{'it' if len(cut) == 1 else 'they'} printed is unknown, so {'it is' if len(cut) == 1 else 'they are'} "
                 "neither counted as timed out nor as silent"),
        ranks=tuple(cut), evidence=tuple(ev.cut[r] for r in cut[:3]), severity=Severity.INFO,
        action=f"get the complete log of {ranks_text(cut)}")]


def _aborted_findings(ev: TorchLogEvents, timeouts: list[Timeout], statuses: list[WorkStatus]) -> list[Finding]:
    """Ranks that took their process down ("Some NCCL operations have failed or timed out") with no
    timeout or status line of their own in the logs: abnormal, the cause not shown."""
    quiet = sorted(set(ev.aborted) - {t.rank for t in timeouts} - {s.rank for s in statuses})
    if not quiet:
        return []
    return [Finding(
        kind=Kind.WATCHDOG_TIMEOUT,
        summary=(f"{ranks_text(quiet)} took {'its' if len(quiet) == 1 else 'their'} process down after a failed or "
                 "timed-out NCCL operation; the watchdog line naming the collective is not in these logs"
                 + (" (cut off)" if set(quiet) & set(ev.cut) else "")),
        ranks=tuple(quiet), evidence=tuple(ev.aborted[r] for r in quiet[:3]), severity=Severity.WARNING,
        action="collect the complete logs of every rank (the watchdog's 'Watchdog caught collective operation "
               "timeout' lines) or the flight recorder")]


def _status_only(timeouts: list[Timeout], statuses: list[WorkStatus]) -> dict[tuple[str, int], list[WorkStatus]]:
    """(group, work) -> status lines of ranks whose watchdog reported a failed work (``Timeout at NCCL
    work: N``, ``detected by watchdog at work: N``) with no watchdog line naming the collective in the
    logs (SeqNum 1 is :func:`_first_collective_findings`'s)."""
    named = {(t.rank, t.group) for t in timeouts}
    at: dict[tuple[str, int], list[WorkStatus]] = defaultdict(list)
    for st in statuses:
        if st.work is not None and st.work != 1 and (st.rank, st.group) not in named:
            at[(st.group, st.work)].append(st)
    return at


def _status_only_findings(at: dict[tuple[str, int], list[WorkStatus]]) -> list[Finding]:
    out = []
    for (group, work), sts in sorted(at.items()):
        ranks = sorted({st.rank for st in sts})
        out.append(Finding(
            kind=Kind.WATCHDOG_TIMEOUT,
            summary=(f"{ranks_text(ranks)}: the watchdog detected a timeout or error at work {work} of {_pg(group)}; "
                     "the line naming the collective is not in these logs"),
            ranks=tuple(ranks), evidence=tuple(st.evidence for st in sts[:3]), severity=Severity.WARNING,
            action="collect the complete logs of every rank (the 'Watchdog caught collective operation timeout' lines)"))
    return out


def _first_collective_findings(timeouts: list[Timeout], statuses: list[WorkStatus]) -> list[Finding]:
    """SeqNum 1 timed out (``WorkNCCL(SeqNum=1, ...)``, ``Timeout at NCCL work: 1``): the group's
    first collective never completed, which points at communicator set-up or connectivity, not at a
    rank's code path (NCCL connects lazily, inside the first collective)."""
    first: dict[str, set[int]] = defaultdict(set)
    evid: list[Evidence] = []
    ops: set[str] = set()
    for t in timeouts:
        if t.seq == 1:
            first[t.group].add(t.rank)
            ops.add(t.op)
            evid.append(t.evidence)
    for st in statuses:
        if st.work == 1:
            first[st.group].add(st.rank)
            evid.append(st.evidence)
    out = []
    for group, ranks in sorted(first.items()):
        op = f"{'/'.join(sorted(ops))} " if ops else ""
        out.append(Finding(
            kind=Kind.FIRST_COLLECTIVE,
            summary=(f"{ranks_text(sorted(ranks))} timed out in {op}SeqNum 1 of {_pg(group)}: the first collective "
                     "never completed: init/connectivity problem (NCCL sets up its connections inside the first "
                     "collective: a peer-to-peer, NVLink or shared-memory path between GPUs of a node, or the network "
                     "between nodes, that does not work), or a rank never reached it"),
            ranks=tuple(sorted(ranks)), evidence=tuple(evid[:4]), severity=Severity.WARNING,
            action=("check the NCCL_DEBUG=INFO init lines of every rank (hangdbg nccl summary) and the network "
                    "between the hosts (hangdbg check; NCCL_SOCKET_IFNAME, firewalls)")))
    return out


def _all_waiting(timeouts: list[Timeout], pos: dict[str, dict[int, Pos]], also: list[WorkStatus]) -> Finding:
    """Every rank in the logs timed out in the same op (``also``: status lines of ranks at that work
    whose watchdog line is missing): nobody here stands out."""
    t0 = timeouts[0]
    ranks = sorted({t.rank for t in timeouts} | {st.rank for st in also})
    seq = f" SeqNum {t0.seq}" if t0.seq is not None else " (no SeqNum: old PyTorch)"
    return Finding(
        kind=Kind.WATCHDOG_TIMEOUT,
        summary=(f"{ranks_text(ranks)} timed out in {t0.op}{seq} ({_pg(t0.group)}){_queued(timeouts, pos)}; none of "
                 "the ranks in these logs "
                 "stands out: the rank they wait for is not in them (or all are stuck in the same place): collect the "
                 "missing ranks' logs / stacks"),
        ranks=tuple(ranks), evidence=tuple(t.evidence for t in timeouts[:4]), severity=Severity.WARNING,
        action=("collect the missing ranks' logs / stacks (py-spy dump / hangdbg dump on every node) or the "
                "flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE)"))


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
    together = _died_together(active)
    if together:
        root = None
        f0 = together[0]
        rs = sorted(f.rank for f in together if f.rank is not None)
        out.append(Finding(
            kind=Kind.CHILD_FAILED,
            summary=(f"every failed rank on {f0.host or 'the node'} ({ranks_text(rs)}) died of {f0.state} at the same "
                     f"time ({f0.time}): a cause of the node, not of one rank - "
                     + _TOGETHER.get(f0.exitcode or 0, "something every process of the node shares")),
            hosts=(f0.host,) if f0.host else (), evidence=tuple(x for f in together[:3] for x in f.evidence[:1]),
            action="look at the node: dmesg (OOM killer, Xid), free memory and /dev/shm (df -h /dev/shm), the "
                   "scheduler's log for a kill"))
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
                     + (f": {m}" if m else "") + note + (_signal_meaning(f.exitcode) if f is root else "")),
            ranks=(f.rank,) if f.rank is not None else (), hosts=(f.host,) if f.host else (),
            evidence=f.evidence + ((Evidence(e.path, None, e.message[:500]),) if e is not None else ()),
            severity=Severity.WARNING if consequence or together else Severity.SUSPECT if f is root or root is None
            else Severity.WARNING))
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
            + _signal_meaning(code)
            + " (torchrun agent line; the global rank is not printed)",
            evidence=(evid,), severity=Severity.SUSPECT if root is None else Severity.WARNING))
    return out, {f.rank for f in active if f.rank is not None}, used_files


def _signal_meaning(code: int | None) -> str:
    """`` - SIGKILL: killed from outside: ...`` for an exit status that reports a signal (hangdbg.exit_status), else ""."""
    sig = signal_name(code) if code is not None else ""
    return f" - {sig}: {SIGNAL_MEANING[sig]}" if sig in SIGNAL_MEANING else ""


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
    timeouts, statuses = resolve_groups(ev)
    pos = positions(timeouts, statuses)
    skip = {g for g, by in pos.items() if not comparable(g, timeouts, by)}
    fail_findings, failed_ranks, used = _failure_findings(ev, {t.rank for t in timeouts} | set(ev.aborted))
    findings = [f for f in fail_findings if f.severity is Severity.SUSPECT]
    findings += _desync_findings(ev)
    findings += mismatch_findings(timeouts, skip)
    findings += lag_findings(pos, skip)
    findings += _silent_findings(ev, timeouts, statuses, failed_ranks | _reporters(ev))
    findings += _error_file_findings(ev, used)
    findings += [f for f in fail_findings if f.severity is not Severity.SUSPECT]
    findings += _first_collective_findings(timeouts, statuses)
    if skip:
        findings.append(Finding(
            kind=Kind.WATCHDOG_TIMEOUT, severity=Severity.INFO,
            summary=(f"SeqNums not compared in {', '.join(_pg(g) for g in sorted(skip))}: a rank timed out at several "
                     "SeqNums there, or they lie far apart: the lines belong to several process groups (or jobs)"),
            evidence=tuple(t.evidence for t in timeouts if t.group in skip)[:3],
            action="collect logs of a PyTorch version that tags the process group ([PG ID N ...]), or the flight recorder"))
    # messages PyTorch printed about a rank (desync fingerprints, DDP mismatch, heartbeat): analyze/torch_messages.py
    mine = message_findings(ev.messages, timeouts, any(f.is_suspect for f in findings))
    keys = {(t.group, t.seq, t.op) for t in timeouts}
    only = _status_only(timeouts, statuses)
    if len(keys) == 1 and not any(f.severity is Severity.SUSPECT for f in findings + mine) \
            and not any(f.kind is Kind.FIRST_COLLECTIVE for f in findings) \
            and set(only) <= {(g, s) for g, s, _ in keys if s is not None}:
        findings.append(_all_waiting(timeouts, pos, [st for sts in only.values() for st in sts]))
    else:
        findings += _timeout_findings(timeouts, pos)
        findings += _status_only_findings(only)
    findings += _aborted_findings(ev, timeouts, statuses)
    findings += _incomplete_findings(ev, timeouts, statuses)
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

    for t in sorted(timeouts, key=lambda t: -(t.seq or 0)):  # the first work that timed out last
        r = row(t.rank, t.group)
        r["last_collective"], r["seq"] = t.op, t.seq
        if "timed out" not in r["state"]:
            r["state"].append("timed out")
    for group, by_rank in pos.items():
        for rank, p in by_rank.items():
            r = row(rank, group)
            r["seq"] = p.seq  # the work that timed out; last enqueued only when none did
            if p.enqueued is not None and p.enqueued > p.seq + 1:
                note = f"last enqueued {p.enqueued}"
                if note not in r["state"]:
                    r["state"].append(note)
    for rank in sorted(set(ev.cut) - {k[0] for k in rows}):
        row(rank, "")["state"].append("incomplete (line cut off)")
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
        seqs={g: tuple(RankSeq(r, p.seq) for r, p in sorted(by.items())) for g, by in sorted(pos.items())},
        desync_reports=len(ev.desyncs),
        child_failures=len(ev.failures),
        error_files=len(ev.error_files),
        cpp_frames=tuple(CppFrames(k, tuple(v[:12])) for k, v in sorted(ev.frames.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))),
        ranks_seen=tuple(sorted(ev.seen_ranks | set(ev.cut))),
    )
    return findings, ranks, facts
