"""NCCL RAS reports -> findings: stragglers by operation count, errors, unreachable processes.

The reports are read by :mod:`hangdbg.evidence.nccl_ras.grammar`. What RAS's entries mean (NCCL
``src/ras/client_support.cc`` and the RAS section of the NCCL user guide):

* ``Communicator ranks have different <Coll> operation counts`` (a ``MISMATCH`` warning): each
  rank's count of launched operations of that collective. Within one communicator every rank
  launches the same sequence, so the ranks at the **lowest** count have not launched an
  operation the others launched: they are the stragglers (``ras-mismatch``, suspect), however many
  they are. Ranks at higher counts are *ahead*, never blamed (RAS lists the outlier group, which may
  be the few ranks ahead). When the stragglers are the majority RAS does not list them: they are
  the communicator's ranks minus the listed ones, when every other group is listed. A count
  sampled while the job runs may differ by one operation on a healthy job: the action asks to
  query again; when the same file holds several queries and the low count advanced, it is a
  warning (a slow rank, not a hang).
* ``Communicator ranks have different status``: ranks still in ``INIT``, or that left the
  communicator (``FINALIZE``, ``NOCOMM``) while the others run it, are suspects; ``ABORT`` is a
  warning (a reaction to an error, usually).
* ``Initialization``/``Asynchronous errors``: the ranks that reported an NCCL error (``ras-error``).
* ``INCOMPLETE`` / ``DEAD``: ranks or processes RAS could not reach (``ras-unreachable``).
* Every communicator ``OK``: one ``ras-ok`` info finding; NCCL saw no error and equal counts at
  the time of the query, which clears NCCL, not the job.

``Rank N`` in RAS is the rank in the communicator: it is given as the global rank only for a
communicator as large as the job (``Ranks per comm`` = ``Processes (total)``; without a job
summary: the only communicator of the table), else it is named in the text and the hosts are given.
"""

from __future__ import annotations

from typing import Sequence

from .facts import RasComm, RasFacts
from ...model import SEVERITY_ORDER, Evidence, Finding, Kind, RankState, Severity, SourceKind
from .grammar import RasCount, RasIssue, RasRank, RasReport, RasText, RasTopic
from ...rankset import ranks_text

__all__ = ["analyze_ras"]

KIND = SourceKind.NCCL_RAS
_REQUERY = ("run ncclras again twice, 10 s apart: if the counts do not advance, the job hangs there and the "
            "ranks behind never launched the next operation (take their stacks: hangdbg dump); if they advance, "
            "this was a moving sample")


def _comm_size(rep: RasReport, issue: RasIssue) -> int | None:
    g = issue.group
    row = next((c for c in rep.comm_groups if c.group == g), None)
    return row.ranks_per_comm if row is not None else None


def _global(rep: RasReport, issue: RasIssue) -> bool:
    """True when the communicator's ranks are the job's ranks (it is as large as the job)."""
    n = _comm_size(rep, issue)
    if rep.processes is None:  # no job summary: a single communicator in the table is the job's
        return n is not None and sum(c.comms for c in rep.comm_groups) == 1
    return n is not None and n == rep.processes


def _where(rs: Sequence[RasRank]) -> str:
    """``GPU 4 pid 323032 on 10.137.190.124`` per rank, ``; ``-joined (at most 4)."""
    parts = []
    for r in rs[:4]:
        who = f"rank {r.rank}" if r.rank is not None else f"process {r.pid}"
        bits = [f"GPU {r.gpu}" if r.gpu else "", f"pid {r.pid}" if r.pid is not None and r.rank is not None else "",
                f"on {r.node}" if r.node else ""]
        parts.append(f"{who} ({' '.join(b for b in bits if b)})" if any(bits) else who)
    if len(rs) > 4:
        parts.append(f"{len(rs) - 4} more")
    return "; ".join(parts)


def _hosts(rs: Sequence[RasRank]) -> tuple[str, ...]:
    return tuple(sorted({r.node for r in rs if r.node}))


def _gpus(rs: Sequence[RasRank]) -> tuple[str, ...]:
    return tuple(sorted({f"{r.node}:{r.gpu}" for r in rs if r.node and r.gpu and r.gpu.isdigit()}))


def _ev(path: str, issue: RasIssue, topic: RasTopic, *groups: RasCount) -> tuple[Evidence, ...]:
    ev = [Evidence(path, issue.line, issue.header), Evidence(path, topic.line, topic.text)]
    for g in groups:
        if g.count > 1:
            ev.append(Evidence(path, g.line, f"{g.count} ranks: {g.what} {g.value}"))
        ev += [Evidence(path, r.line, f"Rank {r.rank} -- GPU {r.gpu} managed by process {r.pid} on node {r.node}")
               for r in g.ranks[:3]]
    return tuple(ev)


def _members(g: RasCount, groups: Sequence[RasCount], size: int | None) -> tuple[int, ...] | None:
    """The ranks of count group ``g``: those listed, or (all unlisted) the communicator's ranks
    that no other group lists, when that adds up; None when unknown."""
    listed = tuple(sorted(r.rank for r in g.ranks if r.rank is not None))
    if len(listed) == g.count:
        return listed
    if size is None or any(len(o.ranks) != o.count for o in groups if o is not g):
        return None
    rest = set(range(size)) - {r.rank for o in groups if o is not g for r in o.ranks if r.rank is not None}
    return tuple(sorted(rest)) if len(rest) == g.count else None


def _opcount(path: str, rep: RasReport, issue: RasIssue, t: RasTopic, advanced: bool
             ) -> tuple[list[Finding], list[RankState]]:
    ops = [g for g in t.groups if g.what == "op" and g.value.isdigit()]
    if len(ops) < 2:
        return [], []
    size = _comm_size(rep, issue)
    glob = _global(rep, issue)
    low = min(int(g.value) for g in ops)
    high = max(int(g.value) for g in ops)
    behind = [g for g in ops if int(g.value) == low]
    ahead = [g for g in ops if int(g.value) > low]
    coll = t.collective if t.collective and t.collective != "collective" else "collective"
    comm = f"communicator {issue.comm} ({issue.comm_hash}{f', {size} ranks' if size else ''})"
    n_behind = sum(g.count for g in behind)
    b_ranks: list[int] = []
    known = True
    for g in behind:
        m = _members(g, t.groups, size)
        if m is None:
            known = False
        else:
            b_ranks += m
    b_listed = [r for g in behind for r in g.ranks]
    a_listed = [r for g in ahead for r in g.ranks]
    one = n_behind == 1
    at_low = (("has" if one else "have") + " not launched any") if low == 0 else \
        f"{'is' if one else 'are'} at {coll} operation {low}"
    who = (ranks_text(sorted(b_ranks)) if known and b_ranks else f"{n_behind} ranks") + \
        (" of the communicator" if not glob else "")
    ahead_txt = ", ".join(f"{g.count} at {g.value}" + (f" ({ranks_text(sorted(r.rank for r in g.ranks if r.rank is not None))})"
                                                       if g.ranks else "") for g in ahead)
    text = (f"{comm}: {who} {at_low} while {ahead_txt} went on: the {n_behind} rank{'s' if n_behind != 1 else ''} "
            f"at {low} {'are' if n_behind != 1 else 'is'} the straggler{'s' if n_behind != 1 else ''} (never launched "
            f"{coll} operation {low + 1}); the {sum(g.count for g in ahead)} ahead "
            f"{'are' if sum(g.count for g in ahead) != 1 else 'is'} not stuck")
    if b_listed:
        text += f"; behind: {_where(b_listed)}"
    sev = Severity.SUSPECT
    if advanced:
        sev = Severity.WARNING
        text += "; the low count advanced between the queries in this file: a slow rank, not a hang"
    findings = [Finding(Kind.RAS_MISMATCH, text, ranks=tuple(sorted(b_ranks)) if glob and known else (),
                        hosts=_hosts(b_listed), gpus=_gpus(b_listed), severity=sev,
                        evidence=_ev(path, issue, t, *behind, *ahead), action=_REQUERY)]
    a_ranks = sorted(r.rank for r in a_listed if r.rank is not None)
    if a_listed:
        findings.append(Finding(
            Kind.RAS_MISMATCH, f"{comm}: {ranks_text(a_ranks) if a_ranks else 'some ranks'} "
            f"({_where(a_listed)}) are ahead at {coll} operation {high}: not stragglers, they wait for the others",
            ranks=tuple(a_ranks) if glob else (), hosts=_hosts(a_listed), severity=Severity.INFO,
            evidence=_ev(path, issue, t, *ahead)))
    rows: list[RankState] = []
    if glob:
        for g in ops:
            for r in g.ranks:
                if r.rank is not None:
                    rows.append(RankState(r.rank, host=r.node, pid=r.pid, last_collective=coll, seq=int(g.value),
                                          group=issue.comm_hash, state="behind (RAS)" if g in behind else "ahead (RAS)",
                                          source=KIND))
    return findings, rows


_STATUS_BLAME = {"INIT": "are still initializing the communicator", "FINALIZE": "finalized or destroyed the communicator",
                 "NOCOMM": "are no longer (or not yet) members of the communicator"}


def _status(path: str, rep: RasReport, issue: RasIssue, t: RasTopic) -> list[Finding]:
    if not t.groups:
        return []
    top = max(t.groups, key=lambda g: g.count)
    size = _comm_size(rep, issue)
    glob = _global(rep, issue)
    out = []
    for g in t.groups:
        if g is top or g.value == top.value:
            continue
        ranks = _members(g, t.groups, size)
        listed = list(g.ranks)
        who = ranks_text(ranks) if ranks else f"{g.count} ranks"
        blame = _STATUS_BLAME.get(g.value)
        what = blame or ("aborted the communicator" if g.value == "ABORT" else f"have status {g.value}")
        text = (f"communicator {issue.comm} ({issue.comm_hash}): {who} {what} while {top.count} ranks are {top.value}"
                + (f": {_where(listed)}" if listed else ""))
        out.append(Finding(Kind.RAS_MISMATCH, text, ranks=tuple(ranks) if ranks and glob else (), hosts=_hosts(listed),
                           severity=Severity.SUSPECT if blame else Severity.WARNING, evidence=_ev(path, issue, t, g),
                           action="see where these ranks are (stacks, logs): the others wait for them in the communicator"
                           if blame else "look for the error that made these ranks abort (NCCL WARN lines, logs)"))
    return out


def _errors(path: str, rep: RasReport, issue: RasIssue, t: RasTopic) -> list[Finding]:
    size = _comm_size(rep, issue)
    glob = _global(rep, issue)
    phase = "initialization" if t.kind == "init-error" else "asynchronous"
    out = []
    for g in t.groups:
        ranks = _members(g, t.groups, size) if g.ranks else None
        listed = list(g.ranks)
        who = ranks_text(ranks) if ranks else f"{g.count} rank{'s' if g.count != 1 else ''}"
        out.append(Finding(Kind.RAS_ERROR, f"communicator {issue.comm} ({issue.comm_hash}): {who} reported the NCCL "
                           f"{phase} error {g.value}" + (f": {_where(listed)}" if listed else ""),
                           ranks=tuple(ranks) if ranks and glob else (), hosts=_hosts(listed), gpus=_gpus(listed),
                           evidence=_ev(path, issue, t, g),
                           action="read the NCCL WARN lines of these ranks (NCCL_DEBUG=WARN) for the failing call"))
    return out


def _unreachable(path: str, rep: RasReport, issue: RasIssue, t: RasTopic) -> list[Finding]:
    ms = list(t.members)
    glob = _global(rep, issue)
    ranks = tuple(sorted(r.rank for r in ms if r.rank is not None))
    n = t.number if t.number is not None else len(ms)
    if t.kind == "dead-processes":
        what = f"{n} job process{'es are' if n != 1 else ' is'} considered dead by RAS (unreachable over its network)"
        action = "check these nodes and processes: they crashed, were killed, or their node is down"
    elif t.kind == "missing-processes":
        what = f"RAS got no communicator data from {n} job process{'es' if n != 1 else ''}"
        action = "check these processes: hung hard (not even the RAS thread answers) or their node is unreachable"
    else:
        what = f"communicator {issue.comm} ({issue.comm_hash}): RAS got no data from {n} rank{'s' if n != 1 else ''}"
        action = "check these processes: hung hard (not even the RAS thread answers) or their node is unreachable"
    text = what + (f": {_where(ms)}" if ms else "")
    return [Finding(Kind.RAS_UNREACHABLE, text, ranks=ranks if glob else (), hosts=_hosts(ms), gpus=_gpus(ms),
                    evidence=(Evidence(path, issue.line, issue.header), Evidence(path, t.line, t.text)) +
                    tuple(Evidence(path, r.line, f"rank {r.rank} pid {r.pid} node {r.node}") for r in ms[:3]),
                    action=action)]


def _low_counts(rep: RasReport) -> dict[tuple[str, str], int]:
    """(communicator hash, collective) -> the lowest operation count of a mismatch."""
    out = {}
    for i in rep.issues:
        for t in i.topics:
            vals = [int(g.value) for g in t.groups if g.what == "op" and g.value.isdigit()]
            if t.kind == "opcount" and vals:
                out[(i.comm_hash, t.collective)] = min(vals)
    return out


def _report(path: str, rep: RasReport, earlier: Sequence[RasReport]) -> tuple[list[Finding], list[RankState]]:
    findings: list[Finding] = []
    rows: list[RankState] = []
    before: dict[tuple[str, str], int] = {}
    for e in earlier:
        for k, v in _low_counts(e).items():
            before.setdefault(k, v)
    for issue in rep.issues:
        for t in issue.topics:
            if t.kind == "opcount":
                first = before.get((issue.comm_hash, t.collective))
                now = _low_counts(rep).get((issue.comm_hash, t.collective))
                f, r = _opcount(path, rep, issue, t, advanced=first is not None and now is not None and now > first)
                findings += f
                rows += r
            elif t.kind == "status":
                findings += _status(path, rep, issue, t)
            elif t.kind in ("init-error", "async-error"):
                findings += _errors(path, rep, issue, t)
            elif t.kind in ("missing-ranks", "missing-processes", "dead-processes"):
                findings += _unreachable(path, rep, issue, t)
            elif t.kind == "timeouts":
                findings.append(Finding(Kind.RAS_UNREACHABLE, f"RAS: {t.text} (the report may be incomplete)",
                                        severity=Severity.WARNING, evidence=(Evidence(path, t.line, t.text),)))
    told = {i.group for i in rep.issues}
    for c in rep.comm_groups:  # a table row flags a problem whose entry is not in the file (a cut paste)
        if c.errors != "OK" and c.group not in told:
            findings.append(Finding(
                Kind.RAS_MISMATCH if c.errors == "MISMATCH" else Kind.RAS_ERROR,
                f"NCCL RAS flags {c.errors} for communicator group {c.group} ({c.comms} communicator"
                f"{'s' if c.comms != 1 else ''} of {c.ranks_per_comm} ranks, {c.status}), but its Errors/Warnings "
                "entry is not in the file", severity=Severity.WARNING,
                evidence=(Evidence(path, c.line, f"group {c.group}: {c.status} {c.errors}"),),
                action="save the whole ncclras output: the entry below the table names the ranks"))
    ok = rep.comm_groups and all(c.errors == "OK" for c in rep.comm_groups) and not rep.issues
    if ok:
        n_comms = sum(c.comms for c in rep.comm_groups)
        status = ", ".join(sorted({c.status for c in rep.comm_groups}))
        where = f" of {rep.processes} processes on {rep.nodes} nodes" if rep.processes and rep.nodes else ""
        findings.append(Finding(
            Kind.RAS_OK,
            f"NCCL RAS{f' (NCCL {rep.nccl_version})' if rep.nccl_version else ''}: {n_comms} communicator"
            f"{'s' if n_comms != 1 else ''}{where} {status} OK: at the time of the query no NCCL error, no missing "
            "or dead process, and every rank had launched the same operations; this clears NCCL's own state, not "
            "the job (a hang inside a running collective, outside NCCL, or after the query stays possible)",
            severity=Severity.INFO, evidence=tuple(Evidence(path, c.line, f"group {c.group}: {c.comms} comms, "
                                                             f"{c.ranks_per_comm} ranks, {c.status} {c.errors}")
                                                    for c in rep.comm_groups[:3]),
            action="read the other evidence of the hang (watchdog lines, stacks); query RAS again while it hangs"))
    return findings, rows


def analyze_ras(texts: Sequence[RasText]) -> tuple[list[Finding], list[RankState], RasFacts]:
    """Findings, per-rank rows and facts of RAS report files (the last report of each file is
    judged; earlier reports in the same file tell whether the counts advanced).

    Args:
        texts: parsed files (:func:`hangdbg.evidence.nccl_ras.grammar.read_ras`).

    Returns:
        ``(findings, rows, facts)``: ``ras-mismatch``, ``ras-error``, ``ras-unreachable`` and
        ``ras-ok`` findings, most important first; rows for ranks RAS lists (global ranks only);
        :class:`RasFacts` of the last report read.
    """
    findings: list[Finding] = []
    rows: list[RankState] = []
    last: RasReport | None = None
    for t in texts:
        if not t.reports:
            continue
        f, r = _report(t.path, t.reports[-1], t.reports[:-1])
        findings += f
        rows += r
        last = t.reports[-1]
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    facts = RasFacts(reports=sum(len(t.reports) for t in texts))
    if last is not None:
        facts = RasFacts(reports=facts.reports, nccl_version=last.nccl_version, nodes=last.nodes,
                         processes=last.processes, gpus=last.gpus,
                         comm_groups=tuple(RasComm(c.group, c.comms, c.nodes, c.ranks_per_comm, c.status, c.errors)
                                           for c in last.comm_groups))
    return findings, rows, facts
