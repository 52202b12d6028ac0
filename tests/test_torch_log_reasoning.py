"""Cross-rank reasoning of the torch-log reader over watchdog timeouts and work-status lines.

The lines are written from the documented ProcessGroupNCCL formats (``ProcessGroupNCCL.cpp``:
``[Rank N] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=..., NumelIn=...,
NumelOut=..., Timeout(ms)=...) ran for ... milliseconds before timing out.``, the ``[PG ID N PG GUID
G(desc) Rank N]`` prefix of 2.4+, ``[PG N Rank N]`` of 2.2, ``Exception (either an error or timeout)
detected by watchdog at work: W, last enqueued NCCL work: E, last completed NCCL work: C.``,
``Timeout at NCCL work: ...``), with torchrun's ``[rankN]:`` prefix where that version prints it.
"""

from __future__ import annotations

from hangdbg.evidence.registry import headline_of
from hangdbg.evidence.torch_log.analysis import analyze_events
from hangdbg.evidence.torch_log import grammar as torch_log
from hangdbg.text.lines import iter_lines_from
from hangdbg.evidence.torch_log.reader import READER

GLOG = "[E1122 10:07:31.426415540 ProcessGroupNCCL.cpp:632]"
V24 = "PG ID 0 PG GUID 0(default_pg)"


def wd(rank: int, seq: int | None, op: str = "ALLREDUCE", numel: int = 4821568, launcher: bool = True,
       tag: str = "", numel_out: int | None = None) -> str:
    """One watchdog line; ``tag`` e.g. ``PG 0`` puts the group before ``Rank N`` (else ``[Rank N]``)."""
    work = (f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel if numel_out is None else numel_out}, "
            "Timeout(ms)=600000)") if seq is not None else f"WorkNCCL(OpType={op}, Timeout(ms)=1800000)"
    head = f"[rank{rank}]:{GLOG}" if launcher else "[E ProcessGroupNCCL.cpp:566]"
    who = f"[{tag} Rank {rank}]" if tag else f"[Rank {rank}]"
    return f"{head} {who} Watchdog caught collective operation timeout: {work} ran for 600015 milliseconds before timing out."


def status(rank: int, work: int, enq: int, done: int, tag: str = V24) -> str:
    return (f"[rank{rank}]:[E1122 10:07:31.484903450 ProcessGroupNCCL.cpp:1785] [{tag} Rank {rank}] Exception (either "
            f"an error or timeout) detected by watchdog at work: {work}, last enqueued NCCL work: {enq}, last completed "
            f"NCCL work: {done}.")


def read(tmp_path, lines: list[str], name: str = "job.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return READER.read([str(p)])


def sus(rep):
    return [f for f in rep.findings if f.severity == "suspect"]


def kinds(rep, kind):
    return [f for f in rep.findings if f.kind == kind]


# --- a different collective at the same SeqNum ---------------------------------------------------

def test_minority_in_another_collective_at_the_same_seqnum_is_the_suspect(tmp_path):
    rep = read(tmp_path, [wd(2, 4084), wd(1, 4084), wd(3, 4084, "BROADCAST", 56623104),
                          ("[rank3]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 3] Timeout at NCCL work: 4084, last enqueued "
                          "NCCL work: 4084, last completed NCCL work: 4083.")])
    (f,) = sus(rep)
    assert f.kind == "op-mismatch" and f.ranks == (3,)
    assert "rank 3 runs BROADCAST (numel 56623104)" in f.summary and "ranks {1-2} run ALLREDUCE" in f.summary
    assert "SeqNum 4084" in f.summary and f.action
    # the untagged lines of ranks 1, 2 joined rank 3's group: one group, not "the process group" and "0"
    assert set(rep.facts.seqs) == {"0"} and {s.rank for s in rep.facts.seqs["0"]} == {1, 2, 3}
    assert headline_of(rep).startswith("rank 3 runs BROADCAST")


def test_two_ranks_in_different_collectives_are_undecided(tmp_path):
    rep = read(tmp_path, [wd(7, 80078, "BROADCAST", 5056), status(7, 80078, 80078, 80077, "PG 0 (default_pg)"),
                          wd(3, 80078, "ALLREDUCE", 2106881)])
    assert not sus(rep)
    (f,) = kinds(rep, "op-mismatch")
    assert f.severity == "warning" and f.ranks == (3, 7) and "undecided" in f.summary
    assert "rank 7 BROADCAST" in f.summary and "rank 3 ALLREDUCE" in f.summary
    # the watchdog finding of rank 3 no longer says BROADCAST
    assert any(w.ranks == (3,) and "ALLREDUCE" in w.summary for w in kinds(rep, "watchdog-timeout"))


def test_same_op_other_size_is_a_mismatch_but_gather_sizes_may_differ(tmp_path):
    rep = read(tmp_path, [wd(r, 10, numel=1024) for r in (0, 1, 2)] + [wd(3, 10, numel=2048)])
    (f,) = sus(rep)
    assert f.ranks == (3,) and "numel 2048" in f.summary and "numel 1024" in f.summary
    # GATHER: the root's output holds every rank's input, the others' is empty
    rep = read(tmp_path, [wd(0, 10, "GATHER", 16, numel_out=64)] + [wd(r, 10, "GATHER", 16, numel_out=0) for r in (1, 2, 3)])
    assert not kinds(rep, "op-mismatch")


def test_old_format_without_seqnum_compares_the_timed_out_ops(tmp_path):
    rep = read(tmp_path, [wd(0, None, "ALLREDUCE", launcher=False)]
               + [wd(r, None, "BROADCAST", launcher=False) for r in (1, 3, 7, 2, 4)])
    # each rank timed out in its own first pending op: rank 0 may be one op ahead, so only a warning
    assert not sus(rep)
    (f,) = kinds(rep, "op-mismatch")
    assert f.ranks == (0,) and f.severity == "warning" and "no SeqNum" in f.summary and "ahead" in f.summary


# --- group identity and which SeqNums are compared --------------------------------------------

def test_untagged_line_joins_the_one_known_group(tmp_path):
    """Rank 2's tagged status line is cut off: its watchdog line still belongs to the default group."""
    rep = read(tmp_path, [wd(1, 808), status(1, 808, 811, 807), wd(0, 808), status(0, 808, 811, 807), wd(2, 808),
                          f"[rank2]:[E626 06:24:44.173689731 ProcessGroupNCCL.cpp:1785] [{V24} Rank 2] Exception (either"])
    assert list(rep.facts.seqs) == ["0 (default_pg)"]
    assert [(s.rank, s.seq) for s in rep.facts.seqs["0 (default_pg)"]] == [(0, 808), (1, 808), (2, 808)]
    assert {r.group for r in rep.ranks} == {"0 (default_pg)"}


def test_untagged_line_far_from_every_known_group_stays_apart(tmp_path):
    rep = read(tmp_path, [wd(0, 500, tag=V24), wd(1, 500, tag=V24), wd(2, 9000)])
    assert set(rep.facts.seqs) == {"0 (default_pg)", ""}
    assert not kinds(rep, "seq-lagging")


def test_seqnums_of_unknown_groups_are_not_compared(tmp_path):
    """Old format, no group tag: rank 0 prints three SeqNums (several groups), rank 7 one far away."""
    rep = read(tmp_path, [wd(0, s, launcher=False) for s in (96120, 96117, 96125)] + [wd(7, 64088, launcher=False)])
    assert not sus(rep) and not kinds(rep, "seq-lagging")
    assert any("not compared" in f.summary for f in rep.findings)


def test_global_prefix_beats_the_subgroup_rank():
    lines = [(f"[rank5]:{GLOG} [PG ID 1 PG GUID 3(tp) Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600015 "
             "milliseconds before timing out.")]
    ev = torch_log.scan(enumerate(lines, 1), "x.log")
    assert [(t.rank, t.group) for t in ev.timeouts] == [(5, "1 (tp)")]


# --- positions: the work that timed out; ahead and behind ---------------------------------------

def test_position_is_the_work_that_timed_out_not_the_last_enqueued(tmp_path):
    rep = read(tmp_path, [wd(0, 54), status(0, 54, 84, 53)])
    assert [(s.rank, s.seq) for s in rep.facts.seqs["0 (default_pg)"]] == [(0, 54)]
    assert rep.ranks[0].seq == 54 and "last enqueued 84" in rep.ranks[0].state
    assert "work 84" in rep.findings[0].summary


def test_rank_behind_that_never_entered_is_the_suspect_and_ranks_ahead_are_not(tmp_path):
    rep = read(tmp_path, [wd(0, 1516, tag="PG 1"), status(0, 1516, 1516, 1515, "PG 1"),
                          wd(1, 1517, numel=1), wd(2, 1517, numel=1)])
    (f,) = sus(rep)
    assert f.kind == "seq-lagging" and f.ranks == (0,) and "never entered collective #1517" in f.summary


def test_rank_behind_that_enqueued_the_next_collective_is_only_a_candidate(tmp_path):
    rep = read(tmp_path, [wd(0, 100), status(0, 100, 103, 99)] + [x for r in (1, 2, 3) for x in (wd(r, 101), status(r, 101, 103, 100))])
    assert not sus(rep)
    (f,) = kinds(rep, "seq-lagging")
    assert f.severity == "warning" and f.ranks == (0,) and "candidate" in f.summary


def test_two_ranks_without_status_lines_are_undecided(tmp_path):
    rep = read(tmp_path, [wd(0, 11, launcher=False), wd(1, 12, launcher=False)])
    assert not sus(rep)
    assert kinds(rep, "seq-lagging")[0].severity == "warning"


# --- cut-off lines prove nothing --------------------------------------------------------------

def test_cut_lines_do_not_make_a_silent_rank(tmp_path):
    body = [wd(r, 1892) for r in (0, 2, 3, 5)]
    for cut in ("[rank4]:[E816", f"[rank4]:{GLOG} [Rank 4] Watchdog caught collective operation"):
        rep = read(tmp_path, body + [cut])
        assert not sus(rep) and not kinds(rep, "no-timeout"), cut
        (inc,) = kinds(rep, "log-incomplete")
        assert inc.ranks == (4,) and inc.severity == "info"
        assert "incomplete" in next(r.state for r in rep.ranks if r.rank == 4)
    # a rank that printed whole lines and no timeout is still named
    rep = read(tmp_path, body + ["[rank4]:step 4100 loss 2.31"])
    assert [f.ranks for f in sus(rep)] == [(4,)] and sus(rep)[0].kind == "no-timeout"
    # an empty line of a rank (print()) is not a cut line
    rep = read(tmp_path, body + ["[rank4]:"])
    assert [f.ranks for f in sus(rep)] == [(4,)]


def test_cut_line_inside_a_skipped_run_is_seen(tmp_path):
    """A cut line in a 1 MiB run without a keyword is recorded as by the line-by-line scan."""
    filler = "[rank3]:step 100 loss 2.31 lr 0.0001 grad_norm 1.0\n" * 30000
    p = tmp_path / "big.log"
    p.write_text(wd(0, 5) + "\n" + filler + "[rank9]:[E816\n" + filler + wd(1, 5) + "\n")
    fast = torch_log.scan_file(str(p), "big.log")
    with open(p, "rb") as f:
        slow = torch_log.scan(iter_lines_from(f), "big.log")
    assert set(fast.cut) == set(slow.cut) == {9}


# --- verdict texts ------------------------------------------------------------------------------

def test_every_rank_in_the_same_op_says_none_stands_out_and_what_to_collect(tmp_path):
    rep = read(tmp_path, [wd(r, 469508, launcher=False) for r in (1, 3, 2, 6, 7)])
    (f,) = rep.findings
    assert f.kind == "watchdog-timeout" and f.severity == "warning"
    assert "none of the ranks in these logs stands out" in f.summary and "SeqNum 469508" in f.summary
    assert "collect" in f.action
    head = headline_of(rep)
    assert "no watchdog timeout" not in head and "ranks {1-3, 6-7} timed out in ALLREDUCE" in head


def test_first_collective_never_completed(tmp_path):
    rep = read(tmp_path, [f"[rank{r}]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank {r}] Timeout at NCCL work: 1, last "
                          f"enqueued NCCL work: 1, last completed NCCL work: {n}." for r, n in ((3, 910344404), (2, 374261579))])
    (f,) = kinds(rep, "first-collective")
    assert f.severity == "warning" and f.ranks == (2, 3) and "first collective never completed" in f.summary
    assert "NCCL_DEBUG" in f.action and not sus(rep)
    rep = read(tmp_path, [wd(r, 1, numel=1, launcher=False) for r in (1, 7, 4, 5)])
    assert kinds(rep, "first-collective")[0].ranks == (1, 4, 5, 7) and not sus(rep)


def test_abort_without_a_timeout_line_is_a_warning_not_an_all_clear(tmp_path):
    rep = read(tmp_path, [("[rank6]:[E624 04:14:29.224103812 ProcessGroupNCCL.cpp:684] [Rank 6] Some NCCL operations "
                          "have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
                          "operations might run on corrupted/incomplete data.")])
    assert [(f.kind, f.severity, f.ranks) for f in rep.findings] == [("watchdog-timeout", "warning", (6,))]
    assert "no rank stands out" not in headline_of(rep)


def test_analysis_of_no_events_is_empty():
    findings, ranks, facts = analyze_events(torch_log.TorchLogEvents())
    assert findings == [] and ranks == [] and facts.timeouts == 0


def test_rank_without_a_timeout_is_placed_at_the_work_it_is_in(tmp_path):
    """A dump-signal line with work enqueued past the last completed one: the rank is inside
    last completed + 1, not ahead at its last enqueued work."""
    dump = ("[rank{r}]:[E1122 10:07:31.5 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Received a "
            "dump signal due to a collective timeout from rank 0 and we will try our best to dump the debug info. Last "
            "enqueued NCCL work: {e}, last completed NCCL work: {c}.")
    rep = read(tmp_path, [wd(r, 1234, tag=V24) for r in (0, 1, 2)] + [dump.format(r=3, e=1240, c=1233)])
    assert not kinds(rep, "seq-lagging")
    rep = read(tmp_path, [wd(r, 1234, tag=V24) for r in (0, 1, 2)] + [dump.format(r=3, e=1233, c=1233)])
    assert [(f.kind, f.ranks) for f in sus(rep)] == [("seq-lagging", (3,))]


def test_id_only_tag_is_the_described_group_of_that_id(tmp_path):
    rep = read(tmp_path, [wd(0, 70, tag="PG 0 (default_pg)"), wd(1, 70, tag="PG 0 (default_pg)"),
                          wd(2, 69, tag="PG 0"), status(2, 69, 69, 68, "PG 0")])
    assert list(rep.facts.seqs) == ["0 (default_pg)"]
    assert [(f.kind, f.ranks) for f in sus(rep)] == [("seq-lagging", (2,))]


def test_status_line_alone_is_a_timeout_not_an_all_clear(tmp_path):
    """The watchdog line is missing (cut from the excerpt); the status line still reports the failed work."""
    rep = read(tmp_path, [status(7, 80078, 80078, 80077)])
    (f,) = rep.findings
    assert f.kind == "watchdog-timeout" and f.severity == "warning" and f.ranks == (7,) and "work 80078" in f.summary
    assert "no watchdog timeout" not in headline_of(rep)
    rep = read(tmp_path, [wd(7, 80078, tag=V24), status(7, 80078, 80078, 80077)])
    assert len(kinds(rep, "watchdog-timeout")) == 1


def test_status_only_rank_at_the_same_work_joins_the_all_waiting_verdict(tmp_path):
    rep = read(tmp_path, [wd(0, 1580, tag="PG 1"), wd(2, 1580, tag="PG 1"), status(3, 1580, 1582, 1579, "PG 1")])
    (f,) = rep.findings
    assert f.ranks == (0, 2, 3) and "none of the ranks in these logs stands out" in f.summary


def test_a_timeout_named_by_its_group_rank_is_not_compared_with_global_ranks(tmp_path):
    """A wrapped paste left the ``[rank13]:`` prefix on a line of its own: the watchdog line's ``[Rank 1]`` is the rank
    in process group 11, so rank 13 (seen only in a prefix) is no rank that "printed no timeout"."""
    rep = read(tmp_path, [f"[rank13]:{GLOG}",
                          wd(1, 216, op="ALLTOALL_BASE", launcher=False, tag="PG ID 11 PG GUID 119"),
                          f"[rank15]:{GLOG}",
                          wd(0, 57, launcher=False, tag="PG ID 11 PG GUID 112")])
    assert not sus(rep) and not kinds(rep, "no-timeout")
    rep = read(tmp_path, [wd(13, 216, op="ALLTOALL_BASE"), f"[rank15]:{GLOG} some other line"])  # one numbering
    assert [f.ranks for f in kinds(rep, "no-timeout")] == [(15,)]
