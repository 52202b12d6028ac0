"""Torch-log formats beyond the watchdog line: collective-fingerprint and DDP model mismatches,
the heartbeat monitor, NCCL errors, hard-wrapped lines and torchrun summaries pasted without
their header. Fixtures are written from the formats PyTorch's source prints (see
``hangdbg/evidence/torch_log/messages.py``)."""

from __future__ import annotations

import textwrap
import time

from conftest import FIXTURES

from hangdbg.evidence.torch_log.analysis import analyze_events
from hangdbg.model import Kind, Severity
from hangdbg.evidence.torch_log import grammar as torch_log
from hangdbg.evidence.torch_log.reader import READER

FX = FIXTURES / "torchlog_formats"


def _lines(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), 1))


def _findings(text: str):
    ev = torch_log.scan(_lines(text), "t.log")
    return ev, analyze_events(ev)[0]


def _suspects(findings):
    return [f for f in findings if f.severity is Severity.SUSPECT]


def _read(name: str):
    rep = READER.read([str(FX / name)])
    return list(rep.findings)


# --- collective fingerprints (TORCH_DISTRIBUTED_DEBUG=DETAIL) --------------------------------
def test_old_fingerprint_message_names_its_rank():
    text = ("RuntimeError: Detected mismatch between collectives on ranks. Rank 5 is running inconsistent collective: "
            "CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[512], TensorDtypes=Float, "
            "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda)")
    _, fs = _findings(text)
    sus = _suspects(fs)
    assert [(f.kind, f.ranks) for f in sus] == [(Kind.COLLECTIVE_MISMATCH, (5,))]
    assert "BROADCAST [512]" in sus[0].summary and sus[0].action


def test_fingerprints_of_several_ranks_blame_the_minority():
    fs = _read("desync_detail_4ranks.log")
    sus = _suspects(fs)
    assert [(f.kind, f.ranks) for f in sus] == [(Kind.COLLECTIVE_MISMATCH, (2,))]
    assert "BROADCAST" in sus[0].summary and "ranks {0-1}" in sus[0].summary


def test_one_pair_message_uses_pytorchs_comparison_order():
    # rank 0 compared ranks 1 and 2 with its own first: they agreed, rank 3 is the one off
    text = ("Detected mismatch between collectives on ranks. Rank 0 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=9, OpType=ALLREDUCE), but Rank 3 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=9, OpType=ALLGATHER).")
    _, fs = _findings(text)
    assert [f.ranks for f in _suspects(fs)] == [(3,)]


def test_pair_with_sequence_numbers_names_the_rank_behind():
    text = ("Exception: Detected mismatch between collectives on ranks. Rank 6 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=5OpType=BARRIER), but Rank 0 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=8OpType=BARRIER).Collectives differ in the following aspects: "
            "\t Sequence number: 5vs 8")
    _, fs = _findings(text)
    sus = _suspects(fs)
    assert [f.ranks for f in sus] == [(6,)]
    assert "3 collectives behind rank 0" in sus[0].summary


def test_undecidable_pair_blames_nobody():
    text = ("Detected mismatch between collectives on ranks. Rank 1 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=4, OpType=ALLREDUCE, TensorShape=[8], TensorDtypes=Float, "
            "TensorDeviceTypes=cuda), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=4, "
            "OpType=REDUCE, TensorShape=[8], TensorDtypes=Float, TensorDeviceTypes=cuda).")
    _, fs = _findings(text)
    assert not [f for f in _suspects(fs) if f.ranks]  # the cause is named, no rank is blamed
    mm = [f for f in fs if f.kind is Kind.COLLECTIVE_MISMATCH]
    assert mm and mm[0].severity is Severity.SUSPECT and "cannot tell" in mm[0].summary and not mm[0].ranks


# --- DDP model mismatch ------------------------------------------------------------------------
def test_ddp_param_mismatch_blames_the_inconsistent_rank_and_the_timeouts_wait():
    fs = _read("ddp_param_mismatch.log")
    sus = _suspects(fs)
    assert [(f.kind, f.ranks) for f in sus] == [(Kind.MODEL_MISMATCH, (2,))]
    assert "0 params" in sus[0].summary
    waiting = [f for f in fs if f.severity is Severity.WAITING]
    assert [(f.ranks, f.waits_for) for f in waiting] == [((1, 3), (2,))]


def test_ddp_majority_of_counts_decides():
    text = "\n".join(
        f"[rank{r}]: RuntimeError: DDP expects same model across all ranks, but Rank {r} has 300 params, "
        f"while rank 1 has inconsistent 298 params." for r in (0, 2, 3))
    _, fs = _findings(text)
    assert [f.ranks for f in _suspects(fs)] == [(1,)]


# --- heartbeat monitor -------------------------------------------------------------------------
def test_heartbeat_monitor_is_the_cause_when_nothing_else_is():
    fs = _read("heartbeat_monitor.log")
    sus = _suspects(fs)
    assert [(f.kind, f.ranks) for f in sus] == [(Kind.WATCHDOG_HUNG, (2,))]
    assert "480 s" in sus[0].summary and "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in sus[0].action


def test_heartbeat_after_a_watchdog_timeout_is_only_a_warning():
    text = (FX / "heartbeat_monitor.log").read_text() + (
        "[rank2]:[E ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600100 milliseconds "
        "before timing out.\n")
    _, fs = _findings(text)
    hung = [f for f in fs if f.kind is Kind.WATCHDOG_HUNG]
    assert hung and hung[0].severity is Severity.WARNING


# --- NCCL errors and app lines -----------------------------------------------------------------
def test_rank_prefixed_nccl_error():
    text = textwrap.dedent("""\
        [rank4]: Traceback (most recent call last):
        [rank4]:   File "/w/train.py", line 9, in run
        [rank4]:     dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        [rank4]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5
        """)
    _, fs = _findings(text)
    sus = _suspects(fs)
    assert [(f.kind, f.ranks) for f in sus] == [(Kind.RANK_ERROR, (4,))]
    assert "unhandled cuda error" in sus[0].summary and "2.20.5" in sus[0].summary


def test_app_rank_id_line_after_timeouts_is_a_warning():
    text = ("[E ProcessGroupNCCL.cpp:821] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=16, "
            "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1803620 milliseconds before timing out.\n"
            "2023-09-07 09:14:40,098 ERROR train.py:308 in <module> -- Raise exception from node7 with rank id: 3\n")
    _, fs = _findings(text)
    err = [f for f in fs if f.kind is Kind.RANK_ERROR]
    assert [(f.ranks, f.severity) for f in err] == [((3,), Severity.WARNING)]


# --- hard wraps --------------------------------------------------------------------------------
_WATCHDOG = ("[E ProcessGroupNCCL.cpp:915] [Rank 1] NCCL watchdog thread terminated with exception: [Rank 1] Watchdog "
             "caught collective operation timeout: WorkNCCL(SeqNum=7781, OpType=ALLREDUCE, NumelIn=5164000, "
             "NumelOut=5164000, Timeout(ms)=1800000) ran for 1800413 milliseconds before timing out.")


def test_fixed_width_wrap_is_joined():
    wrapped = "\n".join(_WATCHDOG[i:i + 75] for i in range(0, len(_WATCHDOG), 75))  # cuts words and numbers
    ev, fs = _findings(wrapped)
    assert [(t.rank, t.seq, t.op, t.numel_out, t.ran_ms) for t in ev.timeouts] == [(1, 7781, "ALLREDUCE", 5164000, 1800413)]


def test_wrap_mid_number_in_the_numel_field():
    cut = _WATCHDOG.index("NumelOut=5") + len("NumelOut=5")
    ev, _ = _findings(_WATCHDOG[:cut] + "\n" + _WATCHDOG[cut:])
    assert [t.numel_out for t in ev.timeouts] == [5164000]


def test_an_nccl_error_line_wrapped_inside_its_result_text_is_joined():
    """``NCCL error in: FILE:LINE, invalid`` / `` usage, NCCL version 2.6.3``: the result is one of ncclGetErrorString's
    texts, so "invalid" is a cut one; a whole line (``unhandled system error`` with no version, PyTorch 1.0-1.4) is not
    joined to the line after it."""
    text = ("RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:514, invalid\n"
            " usage, NCCL version 2.6.3\n")
    _, fs = _findings(text)
    assert [f.summary.split(" (")[0] for f in fs if f.kind is Kind.RANK_ERROR] == ["a rank failed in NCCL: invalid usage"]
    text = ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:290, unhandled system error\n"
            " usage of the GPU was high\n")
    _, fs = _findings(text)
    assert [f.summary.split(" (")[0] for f in fs if f.kind is Kind.RANK_ERROR] == [
        "a rank failed in NCCL: unhandled system error"]


def test_a_cut_line_is_not_glued_to_the_next_record():
    text = ("[rank4]:[E916 10:00:00.1 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation\n"
            "[rank5]:[E916 10:00:00.2 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 "
            "milliseconds before timing out.\n")
    ev, _ = _findings(text)
    assert [(t.rank, t.seq) for t in ev.timeouts] == [(5, 3)]
    assert ev.lines_read == 2


def test_host_stderr_prefix_and_wrapped_status_line():
    text = ("node-a [stderr] [rank12]:[E909 09:55:29.3 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 12] Exception "
            "(either an error or timeout) detected\n"
            "by watchdog at work: 2070, last enqueued NCCL work: 2070, last completed NCCL work: 2069.\n")
    ev, _ = _findings(text)
    assert [(s.rank, s.group, s.work, s.completed) for s in ev.statuses] == [(12, "0 (default_pg)", 2070, 2069)]


# --- torchrun summaries --------------------------------------------------------------------------
def test_root_cause_block_without_header_and_indented():
    fs = _read("root_cause_headerless.log")
    sus = _suspects(fs)
    assert [(f.kind, f.ranks, f.hosts) for f in sus] == [(Kind.CHILD_FAILED, (5,), ("gpu-node-7",))]
    assert "SIGSEGV" in sus[0].summary


def test_root_cause_block_inside_a_terminal_border():
    body = (FX / "root_cause_headerless.log").read_text().splitlines()
    text = "\n".join("│ " + ln.strip().ljust(70) + " │" for ln in body)
    _, fs = _findings(text)
    assert [f.ranks for f in _suspects(fs)] == [(5,)]


def test_sniff_takes_an_indented_elastic_log():
    head = (b"    E0816 01:45:43.466000 140650667333440 torch/distributed/elastic/multiprocessing/api.py:833] failed "
            b"(exitcode: -6) local_rank: 7 (pid: 340264) of binary: /usr/bin/python3\n")
    assert torch_log.sniff(head)
    assert not torch_log.sniff(b"Epoch 3: loss 0.12\nFailures are rare\n")


# --- bad input ----------------------------------------------------------------------------------
def test_garbage_lines_with_the_keywords_are_fast_and_harmless():
    junk = ("Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint("
            + "(" * 30000 + ", but Rank 4294967296 is running collective: CollectiveFingerPrint(" + "x" * 30000)
    lines = [junk, "DDP expects same model across all ranks, but Rank 99999999999 has 1 params, while rank 1 has "
             "inconsistent 2 params.", "WorkNCCL(" * 5000, "Heartbeat monitor timed out" + "!" * 60000]
    t0 = time.monotonic()
    ev, fs = _findings("\n".join(lines))
    assert time.monotonic() - t0 < 2
    assert all(r is None or r < 1 << 22 for f in ev.messages.params for r in (f.rank, f.other))
    assert all(r < 1 << 22 for f in fs for r in f.ranks)


def test_nccl_result_line_alone_names_its_rank():
    text = ("[rank10]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
            "[rank13]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
            ":1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n")
    _, fs = _findings(text)
    sus = _suspects(fs)
    assert [f.ranks for f in sus] == [(10, 13)] and "ProcessGroupNCCL.cpp:1970" in sus[0].summary


def test_joiner_passes_unjoinable_lines_through_unchanged():
    from hangdbg.evidence.torch_log.wrapped import Joiner

    j = Joiner(lambda t: t.endswith("("), lambda t: t.count("(") == t.count(")") and "(" in t)
    lines = [(1, "call("), (2, "x"), (3, "y"), (4, "z"), (5, "w"), (6, "v"), (7, "f("), (8, "a)"), (9, "g(")]
    assert list(j(lines)) == [(1, "call("), (2, "x"), (3, "y"), (4, "z"), (5, "w"), (6, "v"), (7, "f(a)"), (9, "g(")]
    assert j.joined == 1 and not j.pending


def test_group_ranks_of_a_subgroup_are_not_taken_for_global_ranks():
    # printed by global rank 9, which is rank 1 of its tensor-parallel group; the group's rank 0 is not global rank 0
    text = ("[rank9]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=3OpType=BARRIER), but Rank 0 is running collective: "
            "CollectiveFingerPrint(SequenceNumber=8OpType=BARRIER).")
    _, fs = _findings(text)
    sus = _suspects(fs)
    assert [f.ranks for f in sus] == [(9,)]
    assert "process group that checked" in sus[0].summary
    assert all(0 not in f.ranks for f in fs)


def test_monitored_barrier_names_the_missing_ranks():
    text = ("[rank0]: RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 5000 ms\n"
            "[rank2]: RuntimeError: Rank 2 successfully reached monitoredBarrier, but received errors while waiting for "
            "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n")
    _, fs = _findings(text)
    sus = _suspects(fs)
    assert [(f.kind, f.ranks) for f in sus] == [(Kind.BARRIER_MISSING, (1, 3))]


# --- a torchelastic failure entry cut above its "[0]:" line ------------------------------------------
def test_a_failure_entry_cut_above_its_header_is_still_read():
    text = ("  time      : 2024-05-02_10:11:12\n  host      : gpu-node-07\n  rank      : 5 (local_rank: 1)\n"
            "  exitcode  : -9 (pid: 31337)\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 31337\n"
            "============================================================\n")
    ev, fs = _findings(text)
    (f,) = [f for f in fs if f.kind is Kind.CHILD_FAILED]
    assert f.ranks == (5,) and f.hosts == ("gpu-node-07",) and "SIGKILL" in f.summary


def test_a_time_field_alone_starts_no_failure():
    ev, fs = _findings("  time      : 2024-05-02_10:11:12\nepoch 3 loss 0.25\nRuntimeError: boom\n")
    assert not [f for f in fs if f.kind is Kind.CHILD_FAILED] and ev.lines_read == 3


def test_ddp_two_ranks_with_two_real_counts_blame_neither():
    """The check pairs the printing rank with the first other rank that differs: with two counts and no
    majority, either may have built the wrong model."""
    text = ("[rank0]: RuntimeError: DDP expects same model across all ranks, but Rank 0 has 211 params, while rank 1 "
            "has inconsistent 210 params.\n")
    _, fs = _findings(text)
    assert not [f for f in _suspects(fs) if f.ranks]
    mm = [f for f in fs if f.kind is Kind.MODEL_MISMATCH]
    assert mm and mm[0].severity is Severity.SUSPECT and "cannot say which" in mm[0].summary


def test_ddp_equal_counts_in_a_failed_check_are_a_communication_problem():
    """TORCH_CHECK fails only on unequal counts: two equal printed counts mean the allgather delivered wrong data."""
    text = ("[rank0]: RuntimeError: DDP expects same model across all ranks, but Rank 0 has 0 params, while rank 1 "
            "has inconsistent 0 params.\n")
    _, fs = _findings(text)
    assert not [f for f in _suspects(fs) if f.ranks]
    assert any(f.kind is Kind.COLLECTIVE_DATA and "equal count" in f.summary for f in fs)


def test_ddp_a_zero_count_from_a_completed_allgather_blames_no_rank():
    """No rank can have 0 parameters in this check (DDP refuses such a module first); without a timeout of the
    first collective the allgather completed and delivered no data: a communication problem, or that rank never
    joined. With such timeouts (test above) the others waited for it, and it is named."""
    text = ("[rank2]: RuntimeError: DDP expects same model across all ranks, but Rank 2 has 363 params, while rank 0 "
            "has inconsistent 0 params.\n")
    _, fs = _findings(text)
    assert not [f for f in _suspects(fs) if f.ranks]
    assert any(f.kind is Kind.COLLECTIVE_DATA and "communication problem" in f.summary for f in fs)
