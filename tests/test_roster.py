"""The roster: ranks that launchers and frameworks announce (hangdbg/evidence/error_lines/roster.py).

Lines are built from the upstream formats the module cites (Lightning, nccl-tests, torch c10d)."""

from __future__ import annotations

from pathlib import Path

from hangdbg.evidence.chain import promote_first_failure
from hangdbg.evidence.error_lines.reader import READER
from hangdbg.model import Kind, Severity


def _read(tmp_path: Path, files: dict[str, str]):
    paths = []
    for name, text in files.items():
        p = tmp_path / name
        p.write_text(text)
        paths.append(str(p))
    rep = READER.read(paths)
    return list(rep.findings), rep.facts


def _lightning(ranks, world=8, zero=True):
    head = "GPU available: True (cuda), used: True\n" if zero else ""
    return head + "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{world}\n" for r in ranks)


def test_two_processes_claiming_one_rank_are_a_launch_mistake(tmp_path):
    findings, facts = _read(tmp_path, {"out.txt": _lightning([0, 1, 2, 3]) + _lightning([0, 1, 2, 3]) +
                                       "Traceback (most recent call last):\nRuntimeError: timed out\n"})
    (f,) = [f for f in findings if f.kind is Kind.LAUNCH_ERROR]
    assert f.severity is Severity.SUSPECT and not f.ranks and not f.hosts
    assert "ranks {0-3} announced by 2 processes" in f.summary and "rank 0 prints appears 2 times" in f.summary
    assert facts.first_failure == "roster"


def test_nccl_tests_started_as_separate_jobs(tmp_path):
    header = ("# nThread 1 nGpus 8 minBytes 1073741824 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
              "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n")
    rows = "".join(f"#  Rank {r:2d} Group  0 Pid {798 + h:6d} on {'hw%d' % h:>10s} device {r:2d} [0x0f] NVIDIA H800\n"
                   for h in (14, 15) for r in range(2))
    findings, _ = _read(tmp_path, {"all_reduce.out": header + header + rows})
    (f,) = [f for f in findings if f.kind is Kind.LAUNCH_ERROR]
    assert "ranks {0-1} announced by 2 processes" in f.summary and "MPI" in f.summary


def test_a_file_whose_every_line_is_doubled_proves_nothing(tmp_path):
    once = _lightning([0, 1]) + "some progress line\nanother line\n"
    doubled = "".join(line + "\n" + line + "\n" for line in once.splitlines())
    findings, _ = _read(tmp_path, {"out.txt": doubled})
    assert not [f for f in findings if f.kind is Kind.LAUNCH_ERROR]


def test_two_processes_printing_the_same_lines_interleave_them_and_are_no_doubled_log(tmp_path):
    """Each of two processes prints the rank-0 lines and its announcement: the copies are not next to each other
    throughout, as a logger with two handlers would write them."""
    head = "GPU available: True (cuda), used: True\nTPU available: False, using: 0 TPU cores\n"
    text = head + head + "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4\n" * 2 for r in (1, 0))
    findings, _ = _read(tmp_path, {"out.txt": text})
    (f,) = [f for f in findings if f.kind is Kind.LAUNCH_ERROR]
    assert "ranks {0-1} announced by 2 processes" in f.summary


def test_one_rank_in_two_files_is_two_runs_not_a_duplicate(tmp_path):
    findings, _ = _read(tmp_path, {"run1.txt": _lightning([0, 1, 2, 3]), "run2.txt": _lightning([0])})
    assert not [f for f in findings if f.kind is Kind.LAUNCH_ERROR]
    (m,) = [f for f in findings if f.kind is Kind.MISSING]
    assert m.severity is Severity.WARNING and "only 4 of 8 ranks" in m.summary and "ranks {4-7} never did" in m.summary


def test_missing_ranks_lead_only_when_nothing_else_names_a_cause(tmp_path):
    findings, facts = _read(tmp_path, {"out.txt": _lightning([0, 1, 2, 3])})
    promoted = promote_first_failure(findings, facts.first_failure)
    assert [f.severity for f in promoted if f.kind is Kind.MISSING] == [Severity.SUSPECT]
    findings, facts = _read(tmp_path, {"out.txt": _lightning([0, 1, 2, 3]) +
                                       "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"})
    assert facts.first_failure != "roster"
    assert [f.severity for f in promote_first_failure(findings, facts.first_failure) if f.kind is Kind.MISSING] \
        == [Severity.WARNING]


def test_every_rank_announced_says_nothing(tmp_path):
    findings, _ = _read(tmp_path, {"out.txt": _lightning(range(8))})
    assert not [f for f in findings if f.kind in (Kind.LAUNCH_ERROR, Kind.MISSING)]


def test_horovod_stall_report_names_the_missing_ranks(tmp_path):
    """The stall inspector's block (horovod common/stall_inspector.cc): rows of ranks that did not submit."""
    text = ("[1,0]<stderr>:[2020-12-06 09:54:57.653026: W horovod/common/stall_inspector.cc:105] One or more tensors "
            "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
            "ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different "
            "tensors or that only subset of ranks is submitting tensors, which will cause deadlock.\n"
            "[1,0]<stderr>:Missing ranks:\n"
            "[1,0]<stderr>:5: [horovod_allreduce.157]\n"
            "[1,0]<stderr>:7!: [horovod_allreduce.157]\n"
            "[1,0]<stderr>:12: epoch 3 done\n")
    findings, _ = _read(tmp_path, {"stall.txt": text})
    (f,) = [f for f in findings if f.kind is Kind.OUTSIDE_COLLECTIVE]
    assert f.ranks == (5, 7) and f.severity is Severity.SUSPECT and "7!: horovod_allreduce.157" in f.summary


def test_ranks_missing_different_tensors_diverged_and_none_is_blamed(tmp_path):
    """horovodrun's ``[0]<stderr>:`` prefix; the last report of the file decides."""
    block = "[0]<stderr>:Missing ranks:\n[0]<stderr>:0: [broadcast.bool.sz]\n"
    text = block + block + "[0]<stderr>:1: [allreduce.c_d1.bias, allreduce.c_d1.weight ...]\n"
    findings, _ = _read(tmp_path, {"stall.txt": text})
    (f,) = [f for f in findings if f.kind in (Kind.OUTSIDE_COLLECTIVE, Kind.COLLECTIVE_MISMATCH)]
    assert f.kind is Kind.COLLECTIVE_MISMATCH and not f.ranks and "diverged" in f.summary


def test_an_old_stall_report_names_the_ranks_not_ready(tmp_path):
    """horovod <= 0.12 (common/operations.cc CheckForStalledTensors): one line, each stalled tensor with the
    ranks that did submit it; a paste may end after a comma."""
    head = ("WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and "
            "are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are "
            "trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause "
            "deadlock. Stalled ops: ")
    text = head + "grad_a_0 [ready ranks: 4, 6, 7, 1, 5, 3, 2], grad_b_0 [ready ranks: 5, 4, 6, 7, 1, 3, 2],\n"
    findings, _ = _read(tmp_path, {"stall.txt": text})
    (f,) = [f for f in findings if f.kind is Kind.OUTSIDE_COLLECTIVE]
    assert f.ranks == (0,) and f.severity is Severity.SUSPECT
    # each tensor lacks a different rank: they diverged, nobody is blamed
    text = head + "grad_a_0 [ready ranks: 1, 2, 3], grad_b_0 [ready ranks: 0, 2, 3]\n"
    findings, _ = _read(tmp_path, {"stall.txt": text})
    (f,) = [f for f in findings if f.kind in (Kind.OUTSIDE_COLLECTIVE, Kind.COLLECTIVE_MISMATCH)]
    assert f.kind is Kind.COLLECTIVE_MISMATCH and not f.ranks


def test_rows_without_the_missing_ranks_header_are_nobody(tmp_path):
    findings, _ = _read(tmp_path, {"out.txt": "5: [horovod_allreduce.157]\nepoch 1 error: none\n"})
    assert not [f for f in findings if f.kind is Kind.OUTSIDE_COLLECTIVE]
