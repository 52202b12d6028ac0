"""`hangdbg traces` on trace files of the format v1 (unit level; real traced jobs: test_tracer)."""

from __future__ import annotations

import re

from conftest import check_golden, of_kind, run_main, main_json
from hangdbg.evidence.traces.grammar import divergence, read_trace

HEAD = "# tracer v1 host=node{n} rank={r} pid={p} start=2026-11-22T03:20:00Z argv=train.py --lr 0.1\n"


def _write(d, rank, body, ended=True, host=1):
    path = d / f"trace-node{host}-{rank}-{100 + rank}.txt"
    path.write_text(HEAD.format(n=host, r=rank, p=100 + rank) + body + ("# tracer end elapsed=1.5\n" if ended else ""))
    return path


STEP = "    0.0{s}0000 > __main__:20 train_step\n    0.0{s}0001 train.py:21 | dist.all_reduce(t)\n"


def test_read_trace_fields_and_garbage(tmp_path):
    p = _write(tmp_path, 3, "    0.000100 > __main__:10 main\n not a trace line\n" + STEP.format(s=1) + "#count train.py:21 1\n")
    t = read_trace(p, last=2, grep=re.compile("all_reduce"))
    assert (t.rank, t.host, t.pid, t.argv) == (3, "node1", 103, "train.py --lr 0.1")
    assert t.calls == ("__main__:10 main", "__main__:20 train_step")
    assert t.last_lines == ("    0.010000 > __main__:20 train_step", "    0.010001 train.py:21 | dist.all_reduce(t)")
    assert (t.ended, t.elapsed, t.grep_count, t.garbled, t.events) == (True, 1.5, 1, 1, 3)


def test_divergence_names_the_ranks_that_stopped(tmp_path):
    for r in range(4):
        steps = 2 if r == 1 else 4
        _write(tmp_path, r, "".join(STEP.format(s=s) for s in range(steps)), ended=r != 1)
    traces = sorted((read_trace(p) for p in tmp_path.glob("trace-*.txt")), key=lambda t: t.rank)
    assert [t.rank for t in traces] == [0, 1, 2, 3]
    d = divergence(traces)
    assert d.common == 2 and d.diverged and [traces[i].rank for i in d.behind] == [1]
    rc, doc = main_json("traces", tmp_path, "--grep", "all_reduce")
    assert rc == 3
    (diverged,) = of_kind(doc, "trace-diverged")
    assert diverged["ranks"] == [1] and diverged["severity"] == "suspect"
    (stopped,) = of_kind(doc, "trace-stopped")
    assert stopped["severity"] == "suspect" and "1 of 4 traces end without the tracer's end line" in stopped["summary"]
    assert stopped["ranks"] == [1]
    assert "rank 1 stopped at train.py:21 | dist.all_reduce(t) after call #2" in doc["headline"]
    assert "1 more suspect finding" in doc["headline"]  # trace-stopped: the same kind of evidence, no corroboration
    assert [r["grep_count"] for r in doc["source"]["facts"]["traces"]] == [4, 2, 4, 4]
    check_golden(doc, "traces")


def test_all_ended_same_calls_exit_0(tmp_path):
    for r in range(2):
        _write(tmp_path, r, STEP.format(s=1))
    res = run_main("traces", tmp_path, "-n", "2")
    assert res.returncode == 0, res.stderr
    assert "all 2 traces ended normally" in " ".join(res.stdout.split())


def test_bad_inputs(tmp_path):
    (tmp_path / "trace-x-0-1.txt").write_text("not a header\n")
    res = run_main("traces", tmp_path)  # a garbled trace is reported, and nothing could be read
    assert res.returncode == 1 and "not a tracer v1 file" in " ".join(res.stderr.split())
    assert run_main("traces", tmp_path / "missing").returncode == 2
    assert run_main("traces", tmp_path, "--grep", "(").returncode == 2


def test_nul_padding_of_a_dead_process_is_ignored(tmp_path):
    p = _write(tmp_path, 0, STEP.format(s=1), ended=False)
    with open(p, "ab") as f:
        f.write(b"\0" * 4096)
    t = read_trace(p)
    assert t.garbled == 0 and t.events == 2 and t.last_lines[-1].endswith("dist.all_reduce(t)")
    assert not t.cut


def test_line_cut_by_sigkill_is_dropped(tmp_path):
    p = _write(tmp_path, 0, STEP.format(s=1), ended=False)
    with open(p, "ab") as f:
        f.write(b"    0.010002 train.py:22 | loss.back" + b"\0" * 4000)  # the copy stopped at a page boundary
    t = read_trace(p)
    assert t.cut and t.garbled == 0 and t.events == 2 and t.last_lines[-1].endswith("dist.all_reduce(t)")


def test_same_calls_stopped_elsewhere_and_no_blame_without_a_majority(tmp_path):
    """Every rank made the same calls; traces without an end line are compared by where they end:
    the ones away from the (unique) most common line are named; with no such line, nobody is."""
    for r in range(4):
        text = STEP.format(s=1) + (f"    0.020000 train.py:{30 + r} | other_work()\n" if r == 2 else "")
        _write(tmp_path, r, text, ended=False)
    rc, doc = main_json("traces", tmp_path)
    (odd,) = of_kind(doc, "trace-diverged")
    assert rc == 3 and odd["ranks"] == [2] and "while ranks {0-1, 3} are at train.py:21 | dist.all_reduce(t)" in odd["summary"]
    for r in range(4):  # a job killed while every rank computed somewhere else: no majority, no blame
        _write(tmp_path, r, STEP.format(s=1) + f"    0.020000 train.py:{40 + r} | step_{r}()\n", ended=False)
    rc, doc = main_json("traces", tmp_path)
    assert rc == 0 and not of_kind(doc, "trace-diverged")
    assert [f["severity"] for f in of_kind(doc, "trace-stopped")] == ["warning"] and doc["headline"].startswith("no suspect")


def test_report_reads_trace_files(tmp_path):
    for r in range(4):
        steps = 2 if r == 1 else 4
        _write(tmp_path, r, "".join(STEP.format(s=s) for s in range(steps)), ended=r != 1)
    (tmp_path / "notes.txt").write_text("nothing here\n")
    rc, doc = main_json("report", tmp_path)
    assert rc == 3 and [s["kind"] for s in doc["sources"]] == ["traces"]
    assert [(f["kind"], f["ranks"], f["source"]) for f in doc["findings"] if f["severity"] == "suspect"][0] == (
        "trace-diverged", [1], "traces")
    assert {f["file"].rsplit("/", 1)[-1]: f["kinds"] for f in doc["files"]}["trace-node1-1-101.txt"] == ["traces"]


def test_display_options_do_not_change_the_findings_and_odd_numbers_stay_json(tmp_path):
    for r in range(4):
        text = STEP.format(s=1) + ("    0.020000 train.py:30 | read_shard()\n" if r == 2 else "")
        _write(tmp_path, r, text, ended=False)
    with open(tmp_path / "trace-node1-3-103.txt", "a") as f:
        f.write("# tracer end elapsed=inf\n")  # a garbled end line: no time, and never `Infinity` in JSON
    full = main_json("traces", tmp_path, "-n", "8")[1]
    none = main_json("traces", tmp_path, "-n", "0")[1]  # a display option: same findings, same status
    assert [f["ranks"] for f in of_kind(full, "trace-diverged")] == [[2]] == [f["ranks"] for f in of_kind(none, "trace-diverged")]
    assert full["findings"] == none["findings"] and none["source"]["facts"]["traces"][2]["last_line"].endswith("read_shard()")
    assert full["source"]["facts"]["traces"][3]["ended"] and full["source"]["facts"]["traces"][3]["elapsed"] is None
