"""The chain of findings across readers (hangdbg/evidence/chain.py), on findings built by hand."""
from __future__ import annotations

from hangdbg.evidence.chain import chain
from hangdbg.model import Evidence, Finding, Kind, Severity, SourceKind


def _rank_error(line: int) -> Finding:
    return Finding(Kind.RANK_ERROR, "rank 0 failed in NCCL: unhandled system error", ranks=(0,),
                   evidence=(Evidence("job.log", line - 1, "NCCL error in: ..."), Evidence("job.log", line, "ncclSystemError")),
                   source=SourceKind.TORCH_LOG)


def _outside(kind: Kind, line: int) -> Finding:
    return Finding(kind, "the cause", evidence=(Evidence("job.log", line, "the WARN text"),), source=SourceKind.ERROR_LINES)


def test_a_rank_error_whose_last_error_line_is_the_hosts_resource_is_no_suspect():
    """torch's NCCL error: 'ncclSystemError: ...' / 'Last error:' / the /dev/shm WARN two lines later."""
    out = chain([_outside(Kind.RESOURCE_ERROR, 4), _rank_error(2)])
    (r,) = [f for f in out if f.kind is Kind.RANK_ERROR]
    assert r.severity is Severity.WARNING and "outside this rank" in r.summary


def test_a_hardware_fault_in_the_chain_keeps_the_rank_a_suspect():
    out = chain([_outside(Kind.HARDWARE_ERROR, 4), _rank_error(2)])
    (r,) = [f for f in out if f.kind is Kind.RANK_ERROR]
    assert r.severity is Severity.SUSPECT


def test_an_outside_cause_far_from_the_rank_error_explains_nothing():
    out = chain([_outside(Kind.RESOURCE_ERROR, 40), _rank_error(2)])
    (r,) = [f for f in out if f.kind is Kind.RANK_ERROR]
    assert r.severity is Severity.SUSPECT


def test_the_first_failure_another_reader_explains_is_promoted_in_its_words():
    from hangdbg.evidence.chain import promote_first_failure
    nccl = Finding(Kind.NCCL_CONNECT_FAILED, "on h1: the interface cannot reach its peer", hosts=("h1",),
                   evidence=(Evidence("nccl.log", 7, "h1:1:1 [0] NCCL WARN ..."),), severity=Severity.WARNING,
                   source=SourceKind.NCCL)
    count = Finding(Kind.NCCL_WARN, "1 NCCL WARN line", evidence=(Evidence("nccl.log", 7, "..."),),
                    severity=Severity.WARNING, source=SourceKind.NCCL)
    out = promote_first_failure([count, nccl], "nccl.some-entry", ("nccl.log", 7))
    assert [f.severity for f in out] == [Severity.WARNING, Severity.SUSPECT]
    assert out[1].summary.endswith("nothing else names a cause)")
    # not the first failure's line: the only failure these logs show, said as such, with no host to drain
    other = promote_first_failure([count, nccl], "nccl.some-entry", ("nccl.log", 8))
    assert other[0] == count and other[1].is_suspect and other[1].hosts == ()
    assert "the only failure these logs show" in other[1].summary


def test_a_wait_a_signal_or_a_rank_is_never_the_only_failure():
    """Warnings that are waits (a timeout), a stop from outside (a signal), or that name a rank stay warnings."""
    from hangdbg.evidence.chain import promote_first_failure
    for f in (Finding(Kind.PEER_ERROR, "a collective timed out after 600 s", severity=Severity.WARNING),
              Finding(Kind.PEER_ERROR, "the launcher got a termination signal", severity=Severity.WARNING),
              Finding(Kind.NCCL_CONNECT_FAILED, "rank 3 cannot reach its peer", ranks=(3,), severity=Severity.WARNING),
              Finding(Kind.UNRECOGNISED_ERROR, "unrecognised error line: “recv timed out”", severity=Severity.WARNING)):
        assert promote_first_failure([f], "") == [f]


def test_with_no_known_failure_the_first_unknown_error_line_is_the_lead():
    """Logs whose only errors are lines no reader knows do not exit 0: the first such line (no rank, no host)
    becomes the suspect and says why; a known failure, when there is one, is preferred to it."""
    from hangdbg.evidence.chain import promote_first_failure
    first = Finding(Kind.UNRECOGNISED_ERROR, "unrecognised error line: “fabric manager error”", hosts=("n1",),
                    severity=Severity.WARNING)
    second = Finding(Kind.UNRECOGNISED_ERROR, "unrecognised error line: “failed to configure”",
                     severity=Severity.WARNING)
    out = promote_first_failure([first, second], "")
    assert [f.severity for f in out] == [Severity.SUSPECT, Severity.WARNING]
    assert out[0].hosts == () and "no known failure is in them" in out[0].summary
    # the first unknown line is often a wrapper of the one after it: the lead quotes the next ones too
    assert out[0].summary.endswith("; the next: “failed to configure”")
    assert "the next" not in promote_first_failure([first], "")[0].summary
    # an unknown line a rank printed is the lead, but blames no rank
    ranked = Finding(Kind.UNRECOGNISED_ERROR, "unrecognised error line: “[rank2]: boom”", ranks=(2,),
                     severity=Severity.WARNING)
    [lead] = promote_first_failure([ranked], "")
    assert lead.is_suspect and lead.ranks == () and "printed by rank 2, no rank is blamed" in lead.summary
    # a JSON object no log format read (a tool's data record with an "error" field) is no lead
    record = Finding(Kind.UNRECOGNISED_ERROR, "unrecognised error line: “{\"type\": \"trial\", ...}”",
                     evidence=(Evidence("trials/3.json", 1, '{"type": "trial", "error": "exit 1"}'),),
                     severity=Severity.WARNING)
    assert promote_first_failure([record], "") == [record]
    # a structured reader (an NCCL log, stacks) read the job and found nothing: a stray line stays a warning
    assert promote_first_failure([first, second], "", unknown_lead=False) == [first, second]
    # the launcher's death signal, with no failure before it: the job was stopped from outside, and that is the lead
    signal = Finding(Kind.PEER_ERROR, "the launcher got a termination signal", hosts=("n1",), severity=Severity.WARNING,
                     evidence=(Evidence("a.log", 1, "... Received 15 death signal, shutting down workers"),
                               Evidence("catalog", None, "pytorch.elastic-death-signal: pytorch/pytorch ...")))
    out = promote_first_failure([first, signal], "")
    assert [f.severity for f in out] == [Severity.WARNING, Severity.SUSPECT]
    assert out[1].hosts == () and "stopped from outside" in out[1].summary
    # no error at all: the step a quiet log stops at is the lead, naming no rank or host; an error line comes first
    stall = Finding(Kind.STALL, "rank 1: no error line; the output stops at “Bind mem”", ranks=(1,), hosts=("n1",),
                    severity=Severity.WARNING)
    [lead] = promote_first_failure([stall], "")
    assert lead.is_suspect and lead.ranks == () and lead.hosts == () and "where the output stops" in lead.summary
    assert [f.severity for f in promote_first_failure([stall, second], "")] == [Severity.WARNING, Severity.SUSPECT]
    # a peer's failure a rank printed: the only failure shown, the printing rank (its victim) not blamed
    peer = Finding(Kind.PEER_ERROR, "rank 13: the EFA path to a peer failed", ranks=(13,), hosts=("w1",),
                   severity=Severity.WARNING)
    [lead] = promote_first_failure([peer], "")
    assert lead.is_suspect and lead.ranks == () and lead.hosts == () and "its victim, not blamed" in lead.summary
    known = Finding(Kind.RESOURCE_ERROR, "on n1: /dev/shm is full", hosts=("n1",), severity=Severity.WARNING)
    out = promote_first_failure([first, known], "")
    assert [f.severity for f in out] == [Severity.WARNING, Severity.SUSPECT]
    assert out[1].hosts == ("n1",) and out[1].ranks == ()  # a host's own resource: the host is where the fault is


def test_a_setup_that_makes_such_a_job_fail_leads_when_a_failure_names_no_cause():
    """DeepSpeed's launcher without a hostfile (context: right on one node) and a traceback cut before its exception
    line: the setup is the lead, naming no rank; with only a wait after it (an exception that says it waited), or with
    no failure at all, it stays a warning."""
    from hangdbg.evidence.chain import promote_first_failure
    setup = Finding(Kind.LAUNCH_ERROR, "the launch configuration: DeepSpeed's launcher found no hostfile",
                    severity=Severity.WARNING,
                    evidence=(Evidence("w.txt", 1, "Unable to find hostfile, will proceed with training with local "
                                                   "resources only."),
                              Evidence("catalog", None, "frameworks.deepspeed.no-hostfile-local-only: deepspeed ...")))
    cut = Finding(Kind.RANK_ERROR, "a process of the job failed in a traceback that the excerpt ends inside",
                  severity=Severity.WARNING, evidence=(Evidence("tb.txt", 9, "Traceback (mo"),))
    out = promote_first_failure([setup, cut], "")
    assert [f.severity for f in out] == [Severity.SUSPECT, Severity.WARNING]
    assert "a setup that makes such a job fail" in out[0].summary
    assert promote_first_failure([setup], "") == [setup]
    waited = Finding(Kind.RANK_ERROR, "rank 1 raised “socket timeout” (its words say it waited)", ranks=(1,),
                     severity=Severity.WARNING,
                     evidence=(Evidence("traceback", None, "python.exception-waited: https://docs.python.org"),))
    assert all(f.severity is Severity.WARNING for f in promote_first_failure([setup, waited], ""))


def test_a_launcher_stopping_survivors_with_no_error_before_it_is_a_silent_end():
    """A launcher stopping the processes left after one ended, and no error in the logs: the one that ended printed
    nothing (the OOM killer's SIGKILL most often), and that is the lead, naming no rank; with a failure or a wait in
    the logs (a rank that timed out, the agent's exit-code line) the launcher's line stays a warning."""
    from hangdbg.evidence.chain import promote_first_failure
    kill = Finding(Kind.PEER_ERROR, "DeepSpeed's launcher kills the remaining local processes", ranks=(0,),
                   severity=Severity.WARNING,
                   evidence=(Evidence("a.log", 9, "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 1080504"),
                             Evidence("catalog", None, "frameworks.deepspeed.killing-subprocess: deepspeedai/...")))
    count = Finding(Kind.NCCL_WARN, "1 NCCL WARN line", severity=Severity.WARNING)
    [lead, rest] = promote_first_failure([kill, count], "")
    assert lead.is_suspect and lead.ranks == () and "SIGKILL" in lead.summary and not rest.is_suspect
    timeout = Finding(Kind.PEER_ERROR, "rank 0: a collective timed out after 600 s", ranks=(0,),
                      severity=Severity.WARNING)
    assert promote_first_failure([timeout, kill], "") == [timeout, kill]
    other = Finding(Kind.PEER_ERROR, "the launcher kills the remaining processes", severity=Severity.WARNING,
                    evidence=(Evidence("catalog", None, "frameworks.other.entry: x"),))
    assert promote_first_failure([other], "") == [other]


def test_a_first_collective_that_never_completed_is_the_lead_naming_no_rank():
    """Ranks timed out in SeqNum 1 and nothing failed: the first collective is the lead, undecided, with no rank
    (they waited); a failure in the logs comes first."""
    from hangdbg.evidence.chain import promote_first_failure
    first = Finding(Kind.FIRST_COLLECTIVE, "ranks {1, 4} timed out in ALLGATHER SeqNum 1", ranks=(1, 4),
                    severity=Severity.WARNING)
    [lead] = promote_first_failure([first], "")
    assert lead.is_suspect and lead.ranks == () and "undecided" in lead.summary
    known = Finding(Kind.RESOURCE_ERROR, "on n1: /dev/shm is full", severity=Severity.WARNING)
    assert [f.severity for f in promote_first_failure([first, known], "")] == [Severity.WARNING, Severity.SUSPECT]
