"""Findings of every reader chained to their cause (``hangdbg report``, ``logs``, ``nccl summary``).

Heuristic (ours, after the issue's first-failure rule): the error-lines reader
(:mod:`hangdbg.evidence.error_lines`) reads every error line with the catalog, so it often cites a
line another reader already explained with more context (a watchdog timeout with its SeqNum, a
NCCL init failure with its error chain). Then:

1. an error-lines finding whose lines another reader's findings of the same or a higher severity
   cite is dropped (the other reader knows more), and so is one that shares a line with another
   reader's finding of the same kind (the same conclusion); an unrecognised line that any other
   finding cites is not unrecognised;
2. (:func:`promote_first_failure`) where no reader names a suspect, the earliest root-class event
   of the error lines names the culprit (the catalog's first failure, even one whose line alone is
   only a warning: ``Unable to resolve hostname ... Using the loopback`` before every timeout);
3. an uncaught exception of a rank that another reader names a suspect (a rank that printed no
   watchdog timeout, one that failed first) is that rank's own failure: a suspect too;
4. a failed child whose own error lines say the cause was outside it (a lost peer, the host's
   resource, the hardware), and a rank's error whose own chain (PyTorch's ``Last error:`` block) names
   a lost peer or the host's resource, is a warning, not a suspect (:func:`_failed_for_a_reason_outside`);
5. a process that ended by SIGKILL or SIGTERM while Slurm ended the whole job (a time limit, a preemption,
   scancel) or its launcher got a death signal is no suspect (:func:`_ended_by_the_scheduler`);
6. a communicator init that failed because the other end of its socket closed (``Broken pipe``, ``Connection reset
   by peer``: :mod:`hangdbg.evidence.nccl.causes` makes it a warning) is the echo of its peer's failure; only when
   no reader names any suspect is the broken connection itself the first failure (a suspect again);
7. a launch mistake (:attr:`~hangdbg.model.Kind.LAUNCH_ERROR`, a suspect) is the cause of the
   process failures that follow it: the suspects that blame a rank or a node for ending (a failed
   child, an init that failed or never completed, a crash) become warnings that say so. Hardware
   findings stay suspects: a fault is a fault.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Sequence

from ..model import SEVERITY_ORDER, Finding, Kind, Severity, SourceKind
from ..rankset import ranks_text

__all__ = ["chain", "promote_first_failure", "ECHOES_OF_LAUNCH"]

ECHOES_OF_LAUNCH = frozenset({
    Kind.CHILD_FAILED, Kind.CHILD_ERROR, Kind.CRASH, Kind.FATAL_ERROR, Kind.RANK_ERROR, Kind.CPP_EXCEPTION,
    Kind.NCCL_INIT_FAILED, Kind.NCCL_INIT_INCOMPLETE, Kind.COMM_INIT_FAILED, Kind.NCCL_CONNECT_FAILED,
    Kind.NCCL_BOOTSTRAP, Kind.MISSING, Kind.CORE_CRASH, Kind.NODE_FAILED, Kind.CHECK_FAILED, Kind.KNOWN_ERROR,
})
"""Kinds of suspects that a launch mistake explains (the processes it made fail)."""


_COUNTS = frozenset({Kind.NCCL_WARN})
"""Kinds that only count lines (\"2 NCCL WARN lines\"): they explain none of them."""


def _lines(f: Finding) -> list[tuple[str, int]]:
    return [(e.source, e.line) for e in f.evidence if e.line is not None]


def chain(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with duplicates of other readers' findings dropped and the echoes of a launch
    mistake made warnings (order kept)."""
    cited: dict[tuple[str, int], int] = {}
    same_kind: dict[tuple[Kind, tuple[str, int]], int] = {}
    for f in findings:
        if f.source is not SourceKind.ERROR_LINES and f.kind not in _COUNTS:
            for key in _lines(f):
                cited[key] = min(cited.get(key, 99), SEVERITY_ORDER[f.severity])
                same_kind[(f.kind, key)] = min(same_kind.get((f.kind, key), 99), SEVERITY_ORDER[f.severity])
    out = []
    for f in findings:
        if f.source is SourceKind.ERROR_LINES:
            keys = _lines(f)
            if keys and all(k in cited for k in keys) and (
                    f.kind is Kind.UNRECOGNISED_ERROR or max(cited[k] for k in keys) <= SEVERITY_ORDER[f.severity]):
                continue
            if any(same_kind.get((f.kind, k), 99) <= SEVERITY_ORDER[f.severity] for k in keys):
                continue  # the same conclusion, from a reader that saw more of it
        out.append(f)
    out = _own_exceptions(out)
    out = _failed_for_a_reason_outside(out)
    out = _ended_by_the_scheduler(out)
    launch = next((f for f in out if f.kind is Kind.LAUNCH_ERROR and f.severity is Severity.SUSPECT), None)
    if launch is None:
        return out
    cause = launch.summary.split(":", 2)[1].strip() if launch.summary.count(":") >= 2 else launch.summary
    return [replace(f, severity=Severity.WARNING, summary=f"{f.summary} (a consequence of the launch mistake: {cause})")
            if f.severity is Severity.SUSPECT and f.kind in ECHOES_OF_LAUNCH else f for f in out]


_JOB_END = re.compile(r"(?:system\.slurm\.cancelled(?:-(?:time-limit|preemption|node-failure|requeue|signal))?"
                      r"|pytorch\.elastic-death-signal(?:-sighup-num|-sighup-name)?|frameworks\.deepspeed\.main-received-signal):")
"""The catalog ids of an end that came from outside the processes, as an error-lines finding cites them: Slurm's end
of a whole job or step (slurmstepd ``*** JOB N ON node CANCELLED AT t DUE TO ... ***``; not a task's failure), or a
launcher that got a death signal (torchelastic ``Received Signals.SIGTERM death signal, shutting down workers``,
DeepSpeed ``Main process received SIGTERM, exiting``): the workers are then signalled."""
_SIGNAL_END = re.compile(r"exit -(?:9|15) \(SIG(?:KILL|TERM)\)|exit(?: status)? (?:137|143)\b|exited on signal (?:9|15)\b")
"""A process's end by SIGKILL or SIGTERM as the findings word it (torchelastic's exit -9/-15, a shell's 137/143,
mpirun's 'exited on signal 9')."""
_SIGNALLED = frozenset({Kind.CHILD_FAILED, Kind.CHILD_ERROR, Kind.RANK_ERROR, Kind.CRASH, Kind.KNOWN_ERROR})


def _ended_by_the_scheduler(findings: list[Finding]) -> list[Finding]:
    """When Slurm ended the whole job (a time limit, a preemption, a node failure, scancel) or the launcher got a
    death signal (:data:`_JOB_END`), a process that ended by SIGKILL or SIGTERM was ended by it: such a suspect
    becomes a warning that says so (the first one the launcher noticed is no culprit)."""
    end = next((f for f in findings if f.source is SourceKind.ERROR_LINES
                and any(_JOB_END.match(e.text) for e in f.evidence[-1:])), None)
    if end is None:
        return findings
    return [replace(f, severity=Severity.WARNING, summary=f"{f.summary} (ended from outside: the scheduler or the launcher's death signal sent these signals)")
            if f.severity is Severity.SUSPECT and f.kind in _SIGNALLED and _SIGNAL_END.search(f.summary) else f
            for f in findings]


_OUTSIDE = frozenset({Kind.PEER_ERROR, Kind.RESOURCE_ERROR, Kind.HARDWARE_ERROR})
"""Error-lines kinds whose cause is outside the rank that printed them (a lost peer, the host's resource,
the hardware)."""


def _failed_for_a_reason_outside(findings: list[Finding]) -> list[Finding]:
    """A failed child (torchrun's first failure) whose own error lines say the cause was outside it (a peer
    that went away, the host's exhausted resource, a hardware fault) is not blamed for it: the suspect
    becomes a warning that says why; the outside cause keeps its own finding."""
    why: dict[int, str] = {}
    after: dict[tuple[str, int], str] = {}  # the lines of outside causes: (file, line) -> kind
    for f in findings:
        if f.source is SourceKind.ERROR_LINES and f.kind in _OUTSIDE:
            for r in f.ranks:
                why.setdefault(r, f.kind.value)
            if f.kind is not Kind.HARDWARE_ERROR:  # a faulty GPU or NIC is its rank's node's own fault
                for key in _lines(f):
                    after.setdefault(key, f.kind.value)
    if not why and not after:
        return findings
    out = []
    for f in findings:
        if f.severity is Severity.SUSPECT and f.kind in (Kind.CHILD_FAILED, Kind.CHILD_ERROR) and f.ranks \
                and all(r in why for r in f.ranks):
            f = replace(f, severity=Severity.WARNING,
                        summary=f"{f.summary} (its own error lines say the cause was outside it: {why[f.ranks[0]]})")
        elif f.severity is Severity.SUSPECT and f.kind is Kind.RANK_ERROR and "NCCL" in f.summary \
                and (cause := _explained(f, after)):  # PyTorch's NCCL error, whose "Last error:" block follows
            f = replace(f, severity=Severity.WARNING,
                        summary=f"{f.summary} (the error's own chain names the cause outside this rank: {cause})")
        out.append(f)
    return out


_CHAIN_GAP = 3
"""Most lines between a rank's error and the line that explains it: PyTorch's NCCL error is
``NCCL error in: ...`` / ``ncclSystemError: ...`` / ``Last error:`` / the NCCL WARN text
(torch/csrc/distributed/c10d/NCCLUtils.hpp ``C10D_NCCL_CHECK``, ``getNcclErrorDetailStr``)."""


def _explained(f: Finding, after: dict[tuple[str, int], str]) -> str:
    """The kind of an outside cause whose line follows ``f``'s last line in the same file within
    :data:`_CHAIN_GAP` lines (the "Last error:" block of PyTorch's NCCL error), else ""."""
    keys = _lines(f)
    if not keys:
        return ""
    src, last = max(keys, key=lambda k: k[1])
    return next((after[(src, n)] for n in range(last + 1, last + 1 + _CHAIN_GAP) if (src, n) in after), "")


def _own_exceptions(findings: list[Finding]) -> list[Finding]:
    """An uncaught exception the error lines quote (a warning) for a rank another reader already names
    a suspect is that suspect's own failure: it is made a suspect too, saying so."""
    blamed = {r for f in findings if f.severity is Severity.SUSPECT and f.source is not SourceKind.ERROR_LINES
              for r in f.ranks}
    return [replace(f, severity=Severity.SUSPECT, summary=f"{f.summary} (the suspect rank's own exception)")
            if f.source is SourceKind.ERROR_LINES and f.kind is Kind.RANK_ERROR and f.severity is Severity.WARNING
            and f.ranks and set(f.ranks) <= blamed else f for f in findings]


def promote_first_failure(findings: Sequence[Finding], first_id: str,
                          first_at: tuple[str, int] | None = None, unknown_lead: bool = True) -> list[Finding]:
    """``findings`` with the error-lines finding of catalog entry ``first_id`` (the earliest
    root-class event, :attr:`~hangdbg.evidence.error_lines.facts.ErrorLinesFacts.first_failure`)
    made a suspect when no finding is one. Its own words say so ("the first failure in these logs").
    When :func:`chain` dropped it for another reader's finding of the same line (``first_at``: file,
    line), that finding is the one made a suspect (a line-count finding never is)."""
    if any(f.severity is Severity.SUSPECT for f in findings):
        return list(findings)
    out = _promoted(list(findings), first_id, first_at) if first_id else list(findings)
    if any(f.severity is Severity.SUSPECT for f in out):
        return out
    # an init that failed because the peer's end of a socket closed is an echo of the peer's failure; with no failure
    # in these logs, the broken connection is the first failure seen (nccl/causes.py makes it a warning)
    out = [replace(f, severity=Severity.SUSPECT, summary=f.summary + "; no failure of a peer is in these logs: the "
                   "connection broke first") if f.kind is Kind.NCCL_INIT_FAILED and f.severity is Severity.WARNING
           else f for f in out]
    return out if any(f.severity is Severity.SUSPECT for f in out) else _only_failure(out, unknown_lead)


_NO_FAILURE = frozenset({Kind.UNRECOGNISED_ERROR, Kind.NCCL_WARN, Kind.STALL})
"""Warnings that say no process failed: an unknown line, a count of lines, where an excerpt stops."""
_WAIT_WORDS = re.compile(r"time[ds]?[ -]?out|watchdog|heartbeat|\bwait|signal|kills? the remaining|terminates? "
                         r"(?:its|the) remaining|an excerpt|the excerpt ends", re.I)
"""A warning about a wait (a timeout, a watchdog), a signal sent from outside or the launcher stopping the survivors,
or a cut excerpt: never the failure itself (a rank that waits is no suspect; a job stopped from outside has none)."""


def _only_failure(out: list[Finding], unknown_lead: bool = True) -> list[Finding]:
    """``out`` (no suspect in it) with one warning made the suspect, the first of the first kind of :func:`_leads`
    that is there, its ranks and hosts cleared and its words saying why:

    1. a warning that reports a failure naming no rank, or a peer's failure a rank printed (that rank is its
       victim): the only failure these logs show (a refused connection, a launch without its hostfile, a resource
       error). Never a wait, a launcher stopping survivors, a cut excerpt, an unknown line, a count of lines, a
       catalog entry that is only context, or a process's report of its own end;
    2. a catalog entry that is context with the launch's or the environment's blame (a setup right in some jobs that
       makes others fail: DeepSpeed's launcher without a hostfile), when the logs also show a failure that names no
       cause of its own (an exception, a cut traceback, an unknown error line; not one that says it waited);
    2b. an end from outside (:data:`_JOB_END`: Slurm cancelled the job, the launcher got a death signal);
    3. the first error line no reader knows, not a wait nor a JSON object (only with ``unknown_lead``: no structured
       reader read the job and found it healthy);
    4. with no error line at all, the step a quiet log stops at (a stall: a step that can wait forever);
    5. the first collective of a process group that never completed (its ranks timed out in SeqNum 1): a connection
       NCCL cannot make or a rank that never reached it, undecided;
    6. a launcher stopping the processes left after one ended (:data:`_STOPS_SURVIVORS`), when nothing else but
       warnings that say no process failed is in the logs: the one that ended printed no error these logs hold (a
       signal such as the OOM killer's SIGKILL, or its log is elsewhere).

    A rank is never blamed this way, and no host either (the finding's hosts are where it was seen, not proof that
    the node is bad), so nothing is drained on it - but for a host's own resource or hardware error (:data:`_HOSTS_OWN`:
    its full /dev/shm, its GPU's Xid), whose host is where the fault is, as when such an error is the first failure.
    Heuristic (ours): exit 0 on logs of a job that failed, was
    killed or stopped in a step that hangs would be a false all-clear."""
    silent_end = all(f.kind in _NO_FAILURE or _cites(f, _STOPS_SURVIVORS) for f in out)
    failed = any(f.kind in _FAILURES and _may_be_cause(f) for f in out)  # not an exception that says it waited
    for pick, said in _leads(unknown_lead, silent_end, failed):
        for i, f in enumerate(out):
            if f.severity is Severity.WARNING and pick(f):
                out[i] = replace(f, severity=Severity.SUSPECT, ranks=(), hosts=f.hosts if f.kind in _HOSTS_OWN else (),
                                 summary=f.summary + said(f) + _next_unknown(out, f))
                return out
    return out


_NEXT_UNKNOWN = 2
"""How many more unrecognised error lines the unknown-line lead quotes after its own."""


def _next_unknown(out: list[Finding], lead: Finding) -> str:
    """For a lead that is an unrecognised error line: the next :data:`_NEXT_UNKNOWN` distinct unrecognised lines
    of ``out`` quoted after it (the first error line is often a wrapper, "unexpected error when ...", whose cause is
    the line after it); "" for any other lead. Heuristic (ours)."""
    if lead.kind is not Kind.UNRECOGNISED_ERROR:
        return ""
    quotes = [m.group(0) for f in out if f is not lead and f.kind is Kind.UNRECOGNISED_ERROR and not _json_object(f)
              and (m := _QUOTED.search(f.summary)) is not None][:_NEXT_UNKNOWN]
    return "; the next: " + "; ".join(quotes) if quotes else ""


_QUOTED = re.compile("\u201c[^\u201d]*\u201d")
"""The quoted line of a finding's summary (error_lines/analysis.py quotes the line between curly quotes)."""


def _json_object(f: Finding) -> bool:
    """Whether the line ``f`` quotes is a JSON object that no log format read as a record (a tool's data, such as
    hangdbg check's own trial records, whose fields hold the word "error"): data, not a message to lead with."""
    return bool(f.evidence) and f.evidence[0].text.lstrip().startswith("{")


def _printed_by(f: Finding, why: str) -> str:
    return f" (printed by {ranks_text(f.ranks)}, {why})" if f.ranks else ""


def _leads(unknown_lead: bool, silent_end: bool,
           failed: bool = False) -> list[tuple[Callable[[Finding], bool], Callable[[Finding], str]]]:
    """The kinds of lead of :func:`_only_failure`, in order: which warning, and the words added to it (the last one
    only with ``silent_end``: no finding but launchers stopping survivors and warnings that say no process failed)."""
    leads = [
        (lambda f: (not f.ranks or f.kind is Kind.PEER_ERROR) and not f.waits_for and f.kind not in _NO_FAILURE
         and not _WAIT_WORDS.search(f.summary) and _may_be_cause(f),
         lambda f: f"; the only failure these logs show{_printed_by(f, 'its victim, not blamed')} (which process "
                   "failed first is not in them: collect every rank's log)"),
        (lambda f: failed and _setup_context(f),
         lambda f: "; a setup that makes such a job fail, and the only cause-like line in these logs (they also show "
                   "a failure that names no cause of its own)"),
        (lambda f: not f.ranks and bool(f.evidence) and _JOB_END.match(f.evidence[-1].text) is not None,
         lambda f: "; nothing in these logs failed before it: the job was stopped from outside (what sent it - "
                   "scancel, a time limit, a preemption, a failure on another node - is in the scheduler's or that "
                   "node's log)"),
    ]
    if unknown_lead:
        leads.append((lambda f: f.kind is Kind.UNRECOGNISED_ERROR and not _WAIT_WORDS.search(f.summary)
                      and not _json_object(f),
                      lambda f: "; the first error line these logs show, and no known failure is in them"
                                f"{_printed_by(f, 'no rank is blamed on a line hangdbg cannot read')}: read it and "
                                "the lines before it"))
    leads.append((lambda f: f.kind is Kind.STALL,
                  lambda f: "; no error is in these logs: where the output stops is the lead (if the job was still "
                            "running, collect stacks with hangdbg dump instead)"))
    leads.append((lambda f: f.kind is Kind.FIRST_COLLECTIVE,
                  lambda f: "; no process failed in these logs: the first collective that never completed is the lead, "
                            "undecided between a connection NCCL cannot make and a rank that never reached it (collect "
                            "every rank's log with NCCL_DEBUG=INFO, or stacks with hangdbg dump)"))
    leads.append((lambda f: silent_end and _cites(f, _STOPS_SURVIVORS),
                  lambda f: "; a process of the job ended and these logs hold no error of it: a process that prints "
                            "nothing as it ends was most often killed by a signal (the kernel's OOM killer sends SIGKILL, "
                            "exit -9: check dmesg and the node's memory; a segfault is exit -11), else its error is in "
                            "a log not given here (collect every rank's output and the launcher's exit codes)"))
    return leads


_STOPS_SURVIVORS = frozenset({"frameworks.deepspeed.killing-subprocess", "pytorch.elastic-sending-closing-signal"})
"""Catalog entries of a launcher stopping the processes that are left after one of them ended (DeepSpeed
launcher/launch.py sigkill_handler, torchelastic multiprocessing/api.py close): with no failure in the logs, the one
that ended printed nothing (:func:`_leads`' last lead)."""


def _cited(f: Finding) -> list[str]:
    """The ids of the catalog entries finding ``f`` cites, in its evidence's order."""
    return [e.text.split(":", 1)[0] for e in f.evidence if e.source == "catalog" and e.text]


def _cites(f: Finding, ids: frozenset[str]) -> bool:
    """Whether finding ``f`` cites one of the catalog entries ``ids``."""
    return any(i in ids for i in _cited(f))


_WAITED = "python.exception-waited:"
"""The evidence id of an exception raised because its process waited for others (error_lines/analysis.py)."""


_HOSTS_OWN = frozenset({Kind.RESOURCE_ERROR, Kind.HARDWARE_ERROR})
"""Kinds of finding whose hosts are where the fault is (a host's full disk, its GPU's Xid), kept by a lead."""
_FAILURES = frozenset({Kind.RANK_ERROR, Kind.UNRECOGNISED_ERROR, Kind.CHILD_FAILED, Kind.CHILD_ERROR})
"""Findings of a process that failed without a known cause (an exception, an unknown error line, a worker's end)."""


def _cited_entry(f: Finding):
    """The catalog entry finding ``f`` cites last (:class:`~hangdbg.catalog.entry.CatalogEntry`), None when it cites
    none, or an unknown id, or the package data cannot be read."""
    ids = _cited(f)
    if not ids:
        return None
    try:
        from ..catalog.catalog import load

        return load().get(ids[-1])
    except Exception:  # an unknown id or unreadable package data: no entry
        return None


def _setup_context(f: Finding) -> bool:
    """Whether ``f`` cites a catalog entry that is context with the launch's or the environment's blame: a setup that is
    right in some jobs and makes others fail (DeepSpeed's launcher without a hostfile runs on one node only)."""
    from ..catalog.entry import Blame, Role

    entry = _cited_entry(f) if not f.ranks else None
    return entry is not None and entry.role is Role.CONTEXT and entry.blame in (Blame.LAUNCH, Blame.ENVIRONMENT) \
        and entry.severity == "warning"


def _may_be_cause(f: Finding) -> bool:
    """False when the catalog entry the finding cites is context, or a process's report of its own end (blame
    ``self``: an agent's "worker failed" line, whose cause is in that worker's log); True otherwise (an entry that
    cannot be read: the finding is taken as it is)."""
    from ..catalog.entry import Blame, Role

    if any(e.source == "traceback" and e.text.startswith(_WAITED) for e in f.evidence):
        return False  # an exception that says its process waited for others (error_lines' WAITED_ID)
    entry = _cited_entry(f)
    return entry is None or (entry.role is not Role.CONTEXT and entry.blame is not Blame.SELF)


def _promoted(out: list[Finding], first_id: str, first_at: tuple[str, int] | None) -> list[Finding]:
    """``out`` with the error-lines finding of entry ``first_id`` (or the finding of another reader that cites the
    line ``first_at``) made a suspect."""
    said = "; the first failure in these logs (nothing else names a cause)"
    for i, f in enumerate(out):
        if f.source is SourceKind.ERROR_LINES and f.severity is Severity.WARNING and f.evidence and \
                f.evidence[-1].source in ("catalog", "roster", "traceback") and f.evidence[-1].text.startswith(first_id + ":"):
            out[i] = replace(f, severity=Severity.SUSPECT, summary=f.summary + said)
            return out
    if first_at is None:
        return out
    for i, f in enumerate(out):
        if f.source is not SourceKind.ERROR_LINES and f.severity is Severity.WARNING and f.kind not in _COUNTS \
                and first_at in _lines(f):
            out[i] = replace(f, severity=Severity.SUSPECT, summary=f.summary + said)
            break
    return out
