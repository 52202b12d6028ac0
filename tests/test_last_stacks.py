"""``watch --keep-last`` (issue 29, part 4): the ring under ``OUT/last/`` and its reader, read by
``hangdbg report`` (the real job killed mid-run is tests/test_real_keep_last.py)."""

from __future__ import annotations

import stat

from conftest import run_json
from hangdbg.evidence.last_stacks.reader import READER
from hangdbg.evidence.stacks.reader import READER as STACKS
from hangdbg.evidence.walk import classify
from hangdbg.frames import Frame
from hangdbg.model import Kind, RankDump, Severity, SourceKind, Thread
from hangdbg.enums import ThreadStatus
from hangdbg.outdir import OutDir
from hangdbg.watch.keep_last import LastRing, pyspy_like

ALLREDUCE = ("all_reduce", "torch/distributed/distributed_c10d.py", 2947)


def _text(rank: int, top: tuple[str, str, int], status: str = "idle") -> str:
    fn, file, line = top
    return (f"# hangdbg rank={rank} pid={1000 + rank} host=n1 sample=1\nProcess {1000 + rank}: python train.py\n"
            f"Python v3.11.7 (/usr/bin/python3.11)\n\nThread {1000 + rank} ({status}): \"MainThread\"\n"
            f"    {fn} ({file}:{line})\n    train_step (train.py:40)\n    <module> (train.py:90)\n")


def _ring(tmp_path, rounds: list[dict[int, tuple[str, str, int]]], exited=None, end: bool = True) -> LastRing:
    ring = LastRing(OutDir(tmp_path), 3)
    t = 1000.0
    for sampled in rounds:
        t += 1.0
        ring.add([(r, _text(r, top), t) for r, top in sampled.items()], exited)
    if end:
        ring.end()
    return ring


def test_the_ring_keeps_n_samples_per_rank_owner_only(tmp_path):
    _ring(tmp_path, [{0: ALLREDUCE, 1: ALLREDUCE}] * 5)
    last = tmp_path / "last"
    assert stat.S_IMODE(last.stat().st_mode) == 0o700
    names = sorted(p.name for p in last.iterdir())
    assert names == ["end.txt", "rank-0000.s0.txt", "rank-0000.s1.txt", "rank-0000.s2.txt",
                     "rank-0001.s0.txt", "rank-0001.s1.txt", "rank-0001.s2.txt"]
    assert not list(last.glob("*.part"))


def test_report_shows_where_every_rank_was_and_names_the_rank_that_stopped_first(tmp_path):
    compute = ("matmul", "model.py", 12)
    _ring(tmp_path, [{0: ALLREDUCE, 1: compute, 2: ALLREDUCE}] * 3 + [{0: ALLREDUCE, 2: ALLREDUCE}])
    files = [str(p) for p in (tmp_path / "last").iterdir()]
    rep = READER.read(files)
    facts = rep.facts
    assert facts.end_source == "watch" and [s.rank for s in facts.ranks] == [0, 1, 2]
    by_rank = {s.rank: s for s in facts.ranks}
    assert by_rank[1].round == 3 and by_rank[0].round == 4 and by_rank[1].gone_round == 4
    assert by_rank[1].gone_why == "exited" and by_rank[1].unchanged == 3 and by_rank[0].samples == 3
    assert "all_reduce" in by_rank[0].place and "matmul" in by_rank[1].frame
    assert by_rank[1].age_seconds > by_rank[0].age_seconds >= 0
    (warn,) = [f for f in rep.findings if f.severity is Severity.WARNING]
    assert warn.kind is Kind.LAST_STACKS and warn.ranks == (1,) and "its process had exited" in warn.summary
    infos = [f for f in rep.findings if f.severity is Severity.INFO]
    assert sorted(r for f in infos for r in f.ranks) == [0, 1, 2]
    assert {st.rank: st.source for st in rep.ranks} == {0: SourceKind.LAST_STACKS, 1: SourceKind.LAST_STACKS,
                                                          2: SourceKind.LAST_STACKS}


def test_ranks_sampled_together_to_the_end_get_no_warning_and_the_newest_sample_is_the_end(tmp_path):
    _ring(tmp_path, [{0: ALLREDUCE, 1: ALLREDUCE}] * 2, end=False)
    rep = READER.read([str(p) for p in (tmp_path / "last").iterdir()])
    assert rep.facts.end_source == "newest-sample"
    assert not [f for f in rep.findings if f.severity is not Severity.INFO]
    assert {s.age_seconds for s in rep.facts.ranks} == {0.0}


def test_a_node_that_did_not_answer_is_not_called_exited(tmp_path):
    _ring(tmp_path, [{0: ALLREDUCE, 1: ALLREDUCE}, {0: ALLREDUCE}], exited=set())
    rep = READER.read([str(p) for p in (tmp_path / "last").iterdir()])
    (warn,) = [f for f in rep.findings if f.severity is Severity.WARNING]
    assert "could not be sampled" in warn.summary and "exited" not in warn.summary


def test_the_files_are_last_stacks_only_not_dumps_of_now(tmp_path):
    _ring(tmp_path, [{0: ALLREDUCE}])
    for p in (tmp_path / "last").iterdir():
        assert classify(str(p)).kinds == (SourceKind.LAST_STACKS,)
        assert not STACKS.sniff(p.read_bytes())


def test_report_over_the_watch_folder(tmp_path):
    _ring(tmp_path, [{0: ALLREDUCE, 1: ALLREDUCE, 2: ALLREDUCE}, {0: ALLREDUCE, 2: ALLREDUCE}])
    code, doc = run_json("report", tmp_path)
    assert code == 0 and not doc["found"]
    (src,) = [s for s in doc["sources"] if s["kind"] == "last-stacks"]
    assert [r["rank"] for r in src["facts"]["ranks"]] == [0, 1, 2]
    assert "rank 1 stopped answering before the others" in doc["headline"]


def test_a_fan_out_sample_is_written_as_py_spy_text_the_reader_reads(tmp_path):
    th = Thread(7, "MainThread", ThreadStatus.IDLE, (Frame(*ALLREDUCE), Frame("step", "train.py", 40)))
    d = RankDump(rank=5, pid=77, host="n2", threads=(th,), cmdline="python train.py", python="3.11.7")
    ring = LastRing(OutDir(tmp_path), 2)
    ring.add([(5, pyspy_like(d), 1000.0)], set())
    rep = READER.read([str(p) for p in (tmp_path / "last").iterdir()])
    (s,) = rep.facts.ranks
    assert (s.rank, s.pid, s.host, s.idle) == (5, 77, "n2", True) and "all_reduce" in s.place


def test_a_last_sample_without_python_frames_says_where_the_rank_was_before(tmp_path):
    ring = LastRing(OutDir(tmp_path), 3)
    ring.add([(0, _text(0, ALLREDUCE), 1001.0)])
    exiting = "# hangdbg rank=0 pid=1000 host=n1 sample=1\nProcess 1000: python train.py\nPython v3.11.7\n\n" \
              "Thread 1000 (idle): \"MainThread\"\n"
    ring.add([(0, exiting, 1002.0)])
    (s,) = READER.read([str(p) for p in (tmp_path / "last").iterdir()]).facts.ranks
    assert s.round == 2 and s.place.startswith("no Python frame") and "all_reduce" in s.place
    assert s.frame.startswith("all_reduce")
