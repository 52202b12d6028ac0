"""One verdict from every kind of evidence (``hangdbg report``).

Heuristic (ours): a failure has a root cause and many symptoms. Findings are ordered by what
usually comes first in a post-mortem: the hardware (GPU fallen off the bus, fatal Xid, ECC), then
a process that died (core file, torchrun's first failure), then the network set-up (refused
connections, an init that never completed, hosts whose NCCL set-up differs), then what the
collectives show (a mismatch, a missing or lagging rank), and last the timeouts every rank
reports once a peer is gone. Within one level, a finding whose ranks or hosts other kinds of
evidence also name comes first.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Sequence

from ..model import SEVERITY_ORDER, Analysis, ClassifiedFile, FileError, Finding, Kind, Severity, SourceKind, SourceReport, Verdict
from ..headline import headline, unread_headline, verdict_all_clear
from .chain import chain, promote_first_failure
from .error_lines.facts import ErrorLinesFacts

__all__ = ["build_verdict", "PRIORITY", "order_findings", "with_error_lines", "with_catalog", "ERROR_LINES_MAX_BYTES"]

PRIORITY: dict[Kind, int] = {
    Kind.GPU_LOST: 0, Kind.XID: 1, Kind.ECC: 1, Kind.PCIE_AER: 1,
    Kind.CORE_CRASH: 2, Kind.CHILD_FAILED: 2, Kind.CHILD_ERROR: 2, Kind.CRASH: 2, Kind.FATAL_ERROR: 2,
    Kind.MIXED_JOBS: 0, Kind.NCCL_CONNECT_FAILED: 3, Kind.NCCL_INIT_INCOMPLETE: 3, Kind.NODE_FAILED: 3, Kind.NODE_UNHEALTHY: 5,
    Kind.NCCL_SETUP_DIFFERS: 4,
    # the stack analyzer's kinds share one level: it orders its own suspects (stable sort)
    Kind.MISSING: 5, Kind.JOB_ENDED: 5, Kind.DIFFERENT_COLLECTIVE: 5, Kind.DEADLOCK: 5, Kind.GIL_HOLDER: 5, Kind.OUTSIDE_COLLECTIVE: 5, Kind.BEHIND: 5,
    Kind.AHEAD: 5, Kind.P2P_MISMATCH: 5, Kind.STORE_KEY_MISSING: 5, Kind.WAIT_CYCLE: 5, Kind.FR_MISMATCH: 5, Kind.TRACE_DIVERGED: 5,
    Kind.FR_MISSING_RANK: 6, Kind.DESYNC_REPORT: 6, Kind.OP_MISMATCH: 6, Kind.TRACE_STOPPED: 6, Kind.NCCL_SLICE_DIFFERS: 6,
    Kind.SEQ_LAGGING: 7, Kind.NCCL_LAGGING: 7, Kind.NO_TIMEOUT: 7, Kind.DUMP_SIGNAL: 7,
    Kind.FR_STUCK: 8, Kind.FR_CONTRADICTS: 8, Kind.CPP_EXCEPTION: 8, Kind.CORE_KILLED: 8, Kind.NCCL_ABORTED: 8,
    Kind.NCCL_INIT_FAILED: 3, Kind.NCCL_BOOTSTRAP: 3, Kind.NCCL_P2P_BLOCKED: 4, Kind.NCCL_OP_MISMATCH: 6,
    # analyze/torch_messages.py: a rank's own NCCL error; mismatches PyTorch detected; the watchdog's own hang
    Kind.RANK_ERROR: 3, Kind.COLLECTIVE_MISMATCH: 5, Kind.MODEL_MISMATCH: 5, Kind.COLLECTIVE_DATA: 4, Kind.WATCHDOG_HUNG: 6,
    Kind.BARRIER_MISSING: 5,
    Kind.UNREADABLE: 8, Kind.UNDECIDED: 8, Kind.NCCL_WARN: 8, Kind.CORE_UNREADABLE: 8, Kind.FIRST_COLLECTIVE: 8,
    Kind.WATCHDOG_TIMEOUT: 9, Kind.LOG_INCOMPLETE: 9, Kind.WAITING: 9, Kind.FR_AGREES: 9, Kind.CORE_ON_DEMAND: 9,
    Kind.RAS_ERROR: 3, Kind.RAS_UNREACHABLE: 3, Kind.RAS_MISMATCH: 7, Kind.RAS_OK: 9,
    # native stack texts (analyze/native_causes.py)
    Kind.CUDA_ERROR: 1, Kind.ABORT_HANG: 3, Kind.COMM_INIT_FAILED: 3, Kind.CUDA_STUCK: 8,
    Kind.STALL: 5,  # hangdbg watch: the suspects of its stall dump
    Kind.CHECK_SETUP: 0, Kind.CHECK_FAILED: 3, Kind.CHECK_INTERFACE: 4, Kind.CHECK_SLOW: 7,  # hangdbg check
    # the error catalog (evidence/error_lines): a launch mistake before all, the rest beside their kin
    Kind.LAUNCH_ERROR: 0, Kind.HARDWARE_ERROR: 1, Kind.RESOURCE_ERROR: 2, Kind.KNOWN_ERROR: 2, Kind.GPU_BLOCKED: 5,
    Kind.PEER_ERROR: 9, Kind.ECHO: 9, Kind.UNRECOGNISED_ERROR: 8,
    Kind.STRAGGLER: 7, Kind.LAST_STACKS: 9,  # hangdbg watch: slow, not hung; the last samples before an end
    Kind.NOT_SAVED: 9,  # hangdbg's own output dir (disk full, read-only): never about the job
}
"""Root cause before symptom: lower first. Every :class:`Kind` has a level (a test checks)."""


def _first_id(sources: Sequence[SourceReport]) -> tuple[str, tuple[str, int] | None]:
    """The catalog entry of the error lines' first failure ("" when none) and its first line (file, line
    number), for the finding of another reader that cites that line instead (:func:`chain` drops the
    error-lines finding another reader explains)."""
    for s in sources:
        if isinstance(s.facts, ErrorLinesFacts):
            first = s.facts.first_failure
            at = next(((f.evidence[0].source, f.evidence[0].line) for f in s.findings
                       if first and f.evidence and f.evidence[-1].text.startswith(first + ":")
                       and f.evidence[0].line is not None), None)
            return first, at
    return "", None


def _structured(sources: Sequence[SourceReport]) -> bool:
    """Whether a reader other than the error lines' read records (an NCCL log, a torch log, stacks...): its view
    of the job is then the one to trust, and an error line no reader knows is not made the lead on its own
    (:func:`hangdbg.evidence.chain.promote_first_failure`'s ``unknown_lead``): a healthy run's log carries stray
    error lines (a transport's retries) that must not make it exit 3."""
    return any(s.records for s in sources if s.kind is not SourceKind.ERROR_LINES)


def _corroboration(f: Finding, named: dict[object, set[str]]) -> int:
    """How many other kinds of evidence name the same ranks or hosts as a suspect."""
    kinds: set[str] = set()
    for r in f.ranks:
        kinds |= named.get(("rank", r), set())
    for h in f.hosts:
        kinds |= named.get(("host", h), set())
    kinds.discard(str(f.source))
    return len(kinds)


def build_verdict(sources: Sequence[SourceReport], analysis: Analysis | None = None,
                  unparsed: Sequence[FileError] = (), files: Sequence[ClassifiedFile] = (),
                  notes: Sequence[Finding] = ()) -> Verdict:
    """Merge the readers' reports into one :class:`Verdict`.

    Args:
        sources: one report per reader that found files (each finding's ``source`` set).
        analysis: the joint stack analysis, when stacks were read.
        unparsed: files no reader took.
        files: every file looked at.
        notes: findings about the inputs as a whole (:mod:`hangdbg.evidence.jobs`).
    """
    named: dict[object, set[str]] = {}
    every = promote_first_failure(chain([f for s in sources for f in s.findings] + list(notes)), *_first_id(sources),
                                  unknown_lead=not _structured(sources))
    for f in every:
        if f.severity is Severity.SUSPECT:
            for r in f.ranks:
                named.setdefault(("rank", r), set()).add(str(f.source))
            for h in f.hosts:
                named.setdefault(("host", h), set()).add(str(f.source))

    def order(f: Finding) -> tuple:
        return (SEVERITY_ORDER[f.severity], PRIORITY.get(f.kind, 8), -_corroboration(f, named), len(f.ranks) or 10**9)

    findings = tuple(sorted(every, key=order))
    states = sorted((st for s in sources for st in s.ranks), key=lambda st: st.rank)
    errors = [e for s in sources for e in s.errors]
    n_files = len(files)
    if not any(s.records for s in sources):
        text = unread_headline(n_files)
    else:
        text = headline(findings, verdict_all_clear(n_files, analysis.headline if analysis is not None else None))
        mixed = next((f for f in notes if f.kind is Kind.MIXED_JOBS), None)
        if mixed is not None and mixed is not findings[0]:  # never merged silently
            text += f" [{mixed.summary.split(':', 1)[0]}: {mixed.action}]"
    return Verdict(
        headline=text,
        findings=findings,
        sources=tuple(sources),
        analysis=analysis,
        rank_states=tuple(states),
        unparsed=tuple(unparsed) + tuple(errors),
        files=tuple(files),
    )


def order_findings(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """``findings`` by severity, then by :data:`PRIORITY` (stable)."""
    return tuple(sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], PRIORITY.get(f.kind, 8))))


ERROR_LINES_MAX_BYTES = 64 << 20
"""The per-kind commands (``logs``, ``nccl summary``, ``gpu``) also read the other error lines (the
catalog) of files up to this size (bytes): an excerpt or one job's log; a multi-GB log keeps the
speed of its own reader (``report`` reads every file's)."""


def with_catalog(rep: SourceReport, files: Sequence[str]) -> SourceReport:
    """``rep`` with the error lines of those of ``files`` up to :data:`ERROR_LINES_MAX_BYTES`
    read by the catalog (:func:`with_error_lines`), and, unless ``rep`` is the GPU reader's own, the
    NVIDIA driver's lines among them (Xid, a lost GPU: :mod:`hangdbg.evidence.gpu`), which a job's
    log holds when the job's output and the kernel log were pasted or collected together."""
    small = [f for f in files if _size(f) <= ERROR_LINES_MAX_BYTES]
    if not small:
        return rep  # (before the readers' imports: a multi-GB log's command starts faster without them)
    from .error_lines.reader import READER
    from .gpu.reader import READER as GPU

    if rep.kind is not SourceKind.GPU:
        gpu = GPU.read(small)
        if gpu.findings:
            rep = replace(rep, findings=tuple(rep.findings) + tuple(gpu.findings))
    return with_error_lines(rep, READER.read(small))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def with_error_lines(rep: SourceReport, lines: SourceReport) -> SourceReport:
    """``rep`` (one kind's report, for ``logs`` / ``nccl summary``) with the findings of the
    error-lines reader on the same files added, chained (:func:`hangdbg.evidence.chain.chain`) and
    ordered; its records count the error lines too, so that a file holding an error line is
    never "nothing could be read"."""
    merged = order_findings(promote_first_failure(chain(list(rep.findings) + list(lines.findings)), *_first_id([lines]),
                                                  unknown_lead=not _structured([rep])))
    return replace(rep, findings=merged, records=rep.records + lines.records)
