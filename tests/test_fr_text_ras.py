"""fr_trace (torchfrtrace) text output and NCCL RAS reports: grammars, findings, readers, CLI.

Fixtures in tests/fixtures/fr_text are written from the printing code: torch
``torch/distributed/flight_recorder/components/{types,utils,builder}.py`` (``EntryState.log``,
``error_analysis``, the torch 2.4/2.5 ``build_collectives``) and NCCL ``src/ras/client_support.cc``.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, main_json

from hangdbg.model import Kind, Severity, SourceKind
from hangdbg.evidence.flight_recorder import trace_text as fr_trace_text
from hangdbg.evidence.nccl_ras import grammar as nccl_ras
from hangdbg.evidence.flight_recorder.reader import READER as FR
from hangdbg.evidence.nccl_ras.reader import READER as RAS
from hangdbg.evidence.walk import classify

D = FIXTURES / "fr_text"


def _suspects(rep):
    return [f for f in rep.findings if f.severity is Severity.SUSPECT]


# --- fr_trace text -------------------------------------------------------------------------------
def test_fr_trace_block_is_parsed_field_by_field():
    t = fr_trace_text.read_fr_trace(str(D / "fr_trace_missing.txt"))
    (r,) = t.reports
    assert (r.what, r.seq, r.record_id, r.group, r.collective) == ("missing", 812, 811, "1:tp_group",
                                                                    "nccl:reduce_scatter")
    assert r.missing_ranks == (1,) and r.expected_ranks == (0, 1, 2, 3) and r.world_size == 4
    assert r.state == "scheduled" and r.input_sizes == "[[4096, 1024]]"
    assert [f.function for f in r.frames] == ["reduce_scatter_tensor", "wrapper", "backward_step", "train"]
    assert r.frames[2].line == 211 and t.skipped == 0


def test_missing_ranks_are_the_suspects_and_the_others_wait_for_them():
    rep = FR.read([str(D / "fr_trace_missing.txt")])
    (s,) = _suspects(rep)
    assert s.kind is Kind.FR_MISSING_RANK and s.ranks == (1,)
    assert "812" in s.summary and "1:tp_group" in s.summary and "backward_step" in s.summary
    (w,) = [f for f in rep.findings if f.severity is Severity.WAITING]
    assert w.ranks == (0, 2, 3) and w.waits_for == (1,)
    assert rep.records == 1 and rep.facts.formats == {"fr_trace text": 1}


def test_torch_2_4_one_line_print_is_read():
    (r,) = fr_trace_text.read_fr_trace(str(D / "fr_trace_v24_print.txt")).reports
    assert (r.group, r.collective, r.missing_ranks, r.world_size, r.state) == (
        "0:default_pg", "nccl:all_gather", (2, 3), 4, "scheduled")
    assert r.output_sizes == "[[32, 16]]" and [f.function for f in r.frames] == ["all_gather", "gather_outputs"]


def test_culprit_rank_of_a_size_mismatch_is_a_mismatch_suspect():
    rep = FR.read([str(D / "fr_trace_errors_v25.txt")])
    (s,) = _suspects(rep)
    assert s.kind is Kind.FR_MISMATCH and s.ranks == (2,) and "57" in s.summary and "sizes" in s.summary


def test_when_most_ranks_are_culprits_the_first_rank_is_the_odd_one():
    """torch compares every rank with the first: 3 of 4 'culprits' means rank 0 differs."""
    rep = FR.read([str(D / "fr_trace_errors_majority.txt")])
    (s,) = _suspects(rep)
    assert s.ranks == (0,) and "collective type" in s.summary and "all_reduce" in s.summary


def test_state_mismatch_is_a_warning_not_a_suspect():
    lines = ["Collective sequence number: 4 has errors", "group info: 0:default_pg", "collective: nccl:all_reduce",
             "expected ranks: {0, 1}", "collective state: completed",
             "error msg: Culprit rank 1; Error type: COLLECTIVE_STATE_MISMATCH, Expected state: 'completed' does "
             "not match found state: 'scheduled'"]
    t = fr_trace_text.parse_lines(enumerate(lines, 1))
    from hangdbg.evidence.flight_recorder.trace_analysis import analyze_text
    findings, _, _ = analyze_text([t])
    assert [(f.kind, f.severity, f.ranks) for f in findings] == [(Kind.FR_STUCK, Severity.WARNING, (1,))]


def test_ranks_without_dumps_and_repeated_blocks_counted_once():
    lines = ["We cannot decide what's wrong with this collective entry because we missed FR dumps from ranks "
             "({5, 6}) so we don't have enough information. If you want to debug further use -j to dump all raw trace"]
    block = ["Not all ranks joining collective, sequence number: 4", "collective: nccl:all_reduce",
             "missing ranks: {1}", "expected ranks: {0, 1}"]
    t = fr_trace_text.parse_lines(enumerate(lines + block + block, 1))
    from hangdbg.evidence.flight_recorder.trace_analysis import analyze_text
    findings, _, _ = analyze_text([t])
    sus = [f.ranks for f in findings if f.severity is Severity.SUSPECT]
    assert sorted(sus) == [(1,), (5, 6)]


def test_garbage_numbers_and_long_lines_are_skipped_not_raised():
    lines = ["Not all ranks joining collective, sequence number: 4", "missing ranks: {4294967296}",
             "x" * 70000, "collective state: scheduled", "\x00\xff garbage"]
    t = fr_trace_text.parse_lines(enumerate(lines, 1))
    (r,) = t.reports
    assert r.missing_ranks == () and t.skipped == 3


def test_fr_reads_content_before_the_name(tmp_path):
    """A fr_trace text whose name ends in no number is read; a text that is none is refused for its content."""
    shutil.copy(D / "fr_trace_missing.txt", tmp_path / "analysis-output.txt")
    (tmp_path / "notes_rank.txt").write_text("hello\n")
    rep = FR.read([str(tmp_path / "analysis-output.txt"), str(tmp_path / "notes_rank.txt")])
    assert rep.records == 1 and _suspects(rep)[0].ranks == (1,)
    (err,) = rep.errors
    assert "neither JSON nor a pickle" in err.reason


def test_sniff_needs_a_key_line_with_the_header():
    assert fr_trace_text.sniff((D / "fr_trace_missing.txt").read_bytes())
    assert not fr_trace_text.sniff(b"Not all ranks joining collective is a sentence\n")
    assert classify(str(D / "fr_trace_v24_print.txt")).kinds == (SourceKind.FLIGHT_RECORDER,)


# --- NCCL RAS ------------------------------------------------------------------------------------
def test_ras_report_is_parsed():
    (rep,) = nccl_ras.read_ras(str(D / "ras_behind_listed.txt")).reports
    assert (rep.nccl_version, rep.nodes, rep.processes, rep.gpus) == ("2.25.1", 2, 8, 8)
    (row,) = rep.comm_groups
    assert (row.ranks_per_comm, row.status, row.errors) == (8, "RUNNING", "MISMATCH")
    (issue,) = rep.issues
    assert (issue.section, issue.kind, issue.comm, issue.comm_hash) == ("Warnings", "MISMATCH", "#0-0", "3c1e55a0b2d94f10")
    (topic,) = issue.topics
    assert topic.collective == "AllReduce"
    assert [(g.count, g.value, [r.rank for r in g.ranks]) for g in topic.groups] == [(6, "1200", []), (2, "1199", [5, 6])]
    assert topic.groups[1].ranks[0].node == "node-b" and topic.groups[1].ranks[0].pid == 40111


def test_ras_listed_ranks_behind_are_the_stragglers():
    rep = RAS.read([str(D / "ras_behind_listed.txt")])
    (s,) = _suspects(rep)
    assert s.kind is Kind.RAS_MISMATCH and s.ranks == (5, 6) and s.hosts == ("node-b",) and "1199" in s.summary
    assert not [f for f in rep.findings if f.severity is Severity.INFO and "ahead" in f.summary]


def test_ras_majority_behind_few_ahead_blames_the_majority_never_the_ahead(tmp_path):
    """The listed ranks are *ahead*: the unlisted majority at the lower count are the stragglers."""
    text = (D / "ras_behind_listed.txt").read_text().replace("6 ranks have launched up to operation 1200",
                                                               "6 ranks have launched up to operation 1198")
    p = tmp_path / "ras.txt"
    p.write_text(text)
    rep = RAS.read([str(p)])
    (s,) = _suspects(rep)
    assert s.ranks == (0, 1, 2, 3, 4, 7) and "1198" in s.summary
    (ahead,) = [f for f in rep.findings if "ahead" in f.summary and f.severity is Severity.INFO]
    assert ahead.ranks == (5, 6)


def test_ras_single_rank_line_and_collapsed_table():
    rep = RAS.read([str(D / "ras_single_behind_collapsed.txt")])
    (s,) = _suspects(rep)
    assert s.ranks == (7,) and s.hosts == ("node1",) and "60" in s.summary


def test_ras_counts_that_advanced_between_queries_are_a_warning(tmp_path):
    one = (D / "ras_behind_listed.txt").read_text()
    two = one.replace("operation 1200", "operation 1300").replace("operation 1199", "operation 1299")
    p = tmp_path / "ras_twice.txt"
    p.write_text(one + "\n" + two)
    rep = RAS.read([str(p)])
    assert rep.records == 2 and not _suspects(rep)
    (w,) = [f for f in rep.findings if f.kind is Kind.RAS_MISMATCH and f.severity is Severity.WARNING]
    assert "1299" in w.summary and "advanced" in w.summary


def test_ras_errors_and_dead_processes():
    rep = RAS.read([str(D / "ras_errors_dead.txt")])
    kinds = {(f.kind, f.ranks, f.hosts) for f in _suspects(rep)}
    assert (Kind.RAS_UNREACHABLE, (), ("10.1.0.7",)) in kinds
    assert (Kind.RAS_ERROR, (2,), ("10.1.0.7",)) in kinds
    assert rep.lines_skipped == 0


def test_ras_running_ok_is_info_never_an_all_clear_for_the_job():
    rep = RAS.read([str(D / "ras_ok.txt")])
    (f,) = rep.findings
    assert f.kind is Kind.RAS_OK and f.severity is Severity.INFO and "not the job" in f.summary
    assert rep.facts.comm_groups[0].comms == 8


def test_ras_garbage_is_counted_not_raised(tmp_path):
    p = tmp_path / "ras.txt"
    p.write_text("Warnings\n========\n\n#0-0 (abcdef0123456789) MISMATCH\n"
                 "  Communicator ranks have different AllReduce operation counts\n"
                 "  99999999999 ranks have launched up to operation 3\n  \x00garbled\n  " + "9" * 70000 + "\n")
    p.write_text("Job summary\n===========\n" + p.read_text())
    t = nccl_ras.read_ras(str(p))
    assert t.skipped == 3


# --- CLI -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,ranks", [("fr_trace_missing.txt", [1]), ("ras_behind_listed.txt", [5, 6])])
def test_fr_and_report_read_both(tmp_path, name, ranks):
    shutil.copy(D / name, tmp_path / name)
    for cmd in (["fr"], ["report"]):
        code, doc = main_json(*cmd, tmp_path)
        assert code == 3, doc["headline"]
        assert [f["ranks"] for f in doc["findings"] if f["severity"] == "suspect"] == [ranks]


def test_fr_on_ras_ok_alone_is_no_all_clear(tmp_path):
    shutil.copy(D / "ras_ok.txt", tmp_path / "ras_ok.txt")
    code, doc = main_json("fr", tmp_path)
    assert code == 0 and "not an all-clear for the job" in doc["headline"]


def test_logging_basicconfig_prefix_is_peeled():
    lines = ["INFO:Flight Recorder:Not all ranks joining collective 5 at entry 4",
             "INFO:Flight Recorder:group info: 0:default_pg", "INFO:Flight Recorder:collective: nccl:all_reduce",
             "INFO:Flight Recorder:missing ranks: {1}", "INFO:Flight Recorder:expected ranks: 2"]
    (r,) = fr_trace_text.parse_lines(enumerate(lines, 1)).reports
    assert (r.seq, r.record_id, r.missing_ranks, r.world_size) == (5, 4, (1,), 2)


def test_ras_table_flag_without_its_entry_is_a_warning(tmp_path):
    p = tmp_path / "ras.txt"
    text = (D / "ras_behind_listed.txt").read_text()
    p.write_text(text[:text.index("\nErrors\n")])
    rep = RAS.read([str(p)])
    (w,) = rep.findings
    assert w.severity is Severity.WARNING and "MISMATCH" in w.summary and not _suspects(rep)


def test_later_blocks_of_the_same_ranks_follow_from_the_first():
    def block(seq):
        return [f"Not all ranks joining collective, sequence number: {seq}", "group info: 0:default_pg",
                "collective: nccl:all_reduce", "missing ranks: {3}", "expected ranks: {0, 1, 2, 3}"]
    t = fr_trace_text.parse_lines(enumerate(block(12) + block(11) + block(13), 1))
    from hangdbg.evidence.flight_recorder.trace_analysis import analyze_text
    findings, _, _ = analyze_text([t])
    (s,) = [f for f in findings if f.severity is Severity.SUSPECT]
    assert s.ranks == (3,) and "seq 11 " in s.summary and "2 later collectives" in s.summary


_RAS_HEAD = """Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      1          4            1          4        4

Communicators... (0.00s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         1         4         4         4   RUNNING  {errors}

Errors
======

"""


def test_ras_status_and_unreachable_ranks(tmp_path):
    p = tmp_path / "ras.txt"
    p.write_text(_RAS_HEAD.format(errors="INCOMPLETE,MISMATCH") + """#0-0 (00000000000000aa) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 3 -- GPU 3 managed by process 903 on node gpu-07

Warnings
========

#0-0 (00000000000000aa) MISMATCH
  Communicator ranks have different status
  2 ranks have status RUNNING
  Rank 1 has status ABORT -- GPU 1 managed by process 901 on node gpu-07
  Rank 2 has status INIT -- GPU 2 managed by process 902 on node gpu-07
""")
    rep = RAS.read([str(p)])
    got = {(f.kind, f.severity, f.ranks) for f in rep.findings}
    assert (Kind.RAS_UNREACHABLE, Severity.SUSPECT, (3,)) in got
    assert (Kind.RAS_MISMATCH, Severity.SUSPECT, (2,)) in got  # still initializing while the others run
    assert (Kind.RAS_MISMATCH, Severity.WARNING, (1,)) in got  # aborted: a reaction, not the cause
    assert rep.lines_skipped == 0


def test_a_mismatch_state_torch_may_add_is_still_a_wrong_call():
    lines = ["Collective sequence number: 4 has errors", "group info: 0:default_pg", "collective: nccl:all_reduce",
             "expected ranks: {0, 1, 2, 3}", "error msg: Culprit rank 3; Error type: SIZE_OF_TENSOR_MISMATCH"]
    from hangdbg.evidence.flight_recorder.trace_analysis import analyze_text
    findings, _, _ = analyze_text([fr_trace_text.parse_lines(enumerate(lines, 1))])
    (s,) = [f for f in findings if f.severity is Severity.SUSPECT]
    assert s.kind is Kind.FR_MISMATCH and s.ranks == (3,) and "size of tensor" in s.summary


# --- fr_trace -j table ---------------------------------------------------------------------------
def test_entry_table_column_that_ends_first_is_the_straggler():
    t = fr_trace_text.read_fr_trace(str(D / "fr_trace_entries_j.txt"))
    (tab,) = t.tables
    assert tab.ranks == (0, 1, 2) and [len(e) for e in tab.entries] == [3, 3, 2]
    assert tab.entries[0][1].op == "broadcast" and tab.entries[0][2].state == "scheduled"
    rep = FR.read([str(D / "fr_trace_entries_j.txt")])
    (s,) = _suspects(rep)
    assert s.kind is Kind.FR_MISSING_RANK and s.ranks == (2,) and "#3" in s.summary


def test_entry_table_first_difference_blames_the_minority():
    w = 50
    row = lambda *cells: "".join(c.ljust(w + 2) for c in cells).rstrip()  # noqa: E731
    lines = [row("Rank 0", "Rank 1", "Rank 2"), row(*["-" * w] * 3),
             row(*["all_reduce(input_sizes=[[8]], state=completed)"] * 3),
             row("all_reduce(input_sizes=[[8]], state=started)", "all_reduce(input_sizes=[[8]], state=started)",
                 "broadcast(input_sizes=[[8]], state=started)")]
    t = fr_trace_text.parse_lines(enumerate(lines, 1))
    from hangdbg.evidence.flight_recorder.trace_analysis import analyze_text
    findings, _, _ = analyze_text([t])
    (s,) = [f for f in findings if f.severity is Severity.SUSPECT]
    assert s.kind is Kind.FR_MISMATCH and s.ranks == (2,) and "broadcast" in s.summary
