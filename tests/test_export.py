"""Exports of the stacks to flame-graph tools (issue 16, Export): folded stacks and speedscope files,
built from the saved fixtures and hand-made stacks, and written by `analyze` and `report`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import FIXTURES, run_main

from hangdbg.stacks.analysis import analyze
from hangdbg.model import Analysis, RankDump, Thread
from hangdbg.frames import Frame
from hangdbg.stacks.saved import load_dumps
from hangdbg.report.export import SPEEDSCOPE_SCHEMA, folded_lines, speedscope_document

FEW = FIXTURES / "pyspy_few"
TORCH = [FIXTURES / "pyspy" / "torch_rank0.txt", FIXTURES / "pyspy" / "torch_rank1.txt"]
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
TRAIN = "/job/train.py"

# What https://www.speedscope.app/file-format-schema.json requires (read from the format's spec,
# src/lib/file-format-spec.ts of jlfwong/speedscope): checked by hand, nothing downloaded.
FILE_REQUIRED = {"$schema", "shared", "profiles"}
SAMPLED_REQUIRED = {"type", "name", "unit", "startValue", "endValue", "samples", "weights"}
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def check_speedscope(doc: dict[str, Any]) -> None:
    """The structure the speedscope schema requires, and frame indices in range."""
    doc = json.loads(json.dumps(doc))  # what a reader of the file sees
    assert FILE_REQUIRED <= doc.keys()
    assert doc["$schema"] == SPEEDSCOPE_SCHEMA
    assert isinstance(doc.get("name", ""), str) and isinstance(doc.get("exporter", ""), str)
    frames = doc["shared"]["frames"]
    assert isinstance(frames, list) and frames
    for f in frames:
        assert isinstance(f["name"], str) and f["name"]
        assert isinstance(f.get("file", ""), str)
        assert "line" not in f or isinstance(f["line"], int)
    assert 0 <= doc.get("activeProfileIndex", 0) < len(doc["profiles"])
    for p in doc["profiles"]:
        assert SAMPLED_REQUIRED <= p.keys(), p.keys()
        assert p["type"] == "sampled" and p["unit"] in UNITS and isinstance(p["name"], str)
        assert len(p["samples"]) == len(p["weights"])
        assert all(isinstance(w, (int, float)) and w > 0 for w in p["weights"])
        assert p["endValue"] - p["startValue"] == sum(p["weights"])
        for s in p["samples"]:
            assert s and all(isinstance(i, int) and 0 <= i < len(frames) for i in s)


def threads_with_frames(dumps) -> int:
    return sum(1 for d in dumps for t in d.threads if t.frames)


def few() -> Analysis:
    dumps, _ = load_dumps([str(FEW)])
    assert len(dumps) >= 4
    return analyze(dumps)


def rank(r: int, frames: tuple[Frame, ...], extra: tuple[Thread, ...] = ()) -> RankDump:
    main = Thread(1000 + r, "MainThread", "idle", frames)
    return RankDump(rank=r, pid=1000 + r, host="n1", world_size=4, threads=(main, *extra), samples=((main, *extra),))


def coll(name: str, site: int) -> tuple[Frame, ...]:
    """A thread in a collective, innermost first."""
    return (Frame(name, C10D, 3000), Frame("train_step", TRAIN, site), Frame("main", TRAIN, 200), Frame("<module>", TRAIN, 210))


HELPER = Thread(7, "pin_memory", "idle", (Frame("wait", "/usr/lib/python3.11/threading.py", 324),
                                          Frame("_bootstrap", "/usr/lib/python3.11/threading.py", 973)))


def majority() -> Analysis:
    """Ranks 0-2 in all_reduce (with a helper thread each), rank 3 in broadcast."""
    return analyze([rank(r, coll("all_reduce", 120), (HELPER,)) for r in range(3)] + [rank(3, coll("broadcast", 118))])


# --- folded stacks ------------------------------------------------------------------------------
@pytest.mark.parametrize("paths", [[str(FEW)], [str(p) for p in TORCH]], ids=["few", "torch"])
def test_folded_counts_add_up_to_the_threads(paths):
    dumps, _ = load_dumps(paths)
    lines = folded_lines(analyze(dumps))
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines]
    assert sum(counts) == threads_with_frames(dumps) > 0
    stacks = [line.rsplit(" ", 1)[0] for line in lines]
    assert len(set(stacks)) == len(stacks), "one line per distinct stack"
    assert all("\n" not in line for line in lines)


def test_folded_is_outermost_first_and_merges_identical_stacks():
    lines = folded_lines(majority())
    assert lines == sorted(lines)
    by_stack = dict(line.rsplit(" ", 1) for line in lines)
    main = "<module> (job/train.py:210);main (job/train.py:200);train_step (job/train.py:{});{} " \
           "(torch/distributed/distributed_c10d.py:3000)"
    assert by_stack[main.format(120, "all_reduce")] == "3"
    assert by_stack[main.format(118, "broadcast")] == "1"
    assert by_stack["_bootstrap (threading.py:973);wait (threading.py:324)"] == "3"  # every thread, not only the chosen one
    assert len(lines) == 3


def test_folded_escapes_separators_in_frame_names():
    odd = (Frame("f;g", "/job/a;b.py", 3), Frame("multi\nline\rname", "/job/x.py", 4), Frame("<module>", "/job/x.py", 9))
    lines = folded_lines(analyze([rank(0, odd), rank(1, odd)]))
    assert lines == ["<module> (job/x.py:9);multi line name (job/x.py:4);f,g (job/a,b.py:3) 2"]
    assert [len(line.rsplit(" ", 1)[0].split(";")) for line in lines] == [3]


# --- speedscope ---------------------------------------------------------------------------------
def test_speedscope_one_profile_per_class():
    a = majority()
    doc = speedscope_document(a)
    check_speedscope(doc)
    assert [len(g.ranks) for g in a.classes] == [3, 1]
    names = [p["name"] for p in doc["profiles"]]
    assert len(names) == 2 and names[0].startswith("ranks {0-2}") and names[1].startswith("rank 3")
    assert [sum(p["weights"]) for p in doc["profiles"]] == [6, 1]  # main + helper thread of 3 ranks; 1 thread
    frames = doc["shared"]["frames"]
    first = doc["profiles"][0]
    heaviest = first["samples"][first["weights"].index(3)]
    assert frames[heaviest[0]]["name"] == "<module> (job/train.py:210)"  # outermost first
    assert frames[heaviest[-1]] == {"name": "all_reduce (torch/distributed/distributed_c10d.py:3000)",
                                    "file": C10D, "line": 3000}
    assert len(frames) == len({(f["name"], f.get("file"), f.get("line")) for f in frames}), "frames shared, not repeated"


def test_speedscope_one_profile_per_rank():
    a = majority()
    doc = speedscope_document(a, by="rank")
    check_speedscope(doc)
    assert [p["name"] for p in doc["profiles"]] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert [sum(p["weights"]) for p in doc["profiles"]] == [2, 2, 2, 1]


@pytest.mark.parametrize("by", ["class", "rank"])
def test_speedscope_of_saved_dumps(by):
    a = few()
    doc = speedscope_document(a, by=by)
    check_speedscope(doc)
    readable = [d for d in a.ranks if d.threads]
    assert len(doc["profiles"]) == (len(a.classes) if by == "class" else len(readable))
    if by == "rank":
        assert sum(sum(p["weights"]) for p in doc["profiles"]) == threads_with_frames(a.ranks)


def test_speedscope_rejects_an_unknown_grouping():
    with pytest.raises(ValueError):
        speedscope_document(majority(), by="host")  # type: ignore[arg-type]


# --- the command line -----------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["analyze", "report"])
def test_cli_writes_both_files_and_keeps_the_exit_status(command, tmp_path):
    plain = run_main(command, FEW, "--json")
    ss, fo = tmp_path / "out" / "stacks.speedscope.json", tmp_path / "stacks.folded"
    res = run_main(command, FEW, "--json", "--speedscope", ss, "--speedscope-by", "rank", "--folded", fo)
    assert res.returncode == plain.returncode == 3, res.stderr
    assert json.loads(res.stdout)["found"] == json.loads(plain.stdout)["found"]
    doc = json.loads(ss.read_text())
    check_speedscope(doc)
    dumps, _ = load_dumps([str(FEW)])
    assert [p["name"] for p in doc["profiles"]] == [f"rank {d.rank}" for d in dumps if d.threads]
    lines = fo.read_text().splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == threads_with_frames(dumps)


def test_report_without_stacks_writes_nothing_and_warns(tmp_path):
    plain = run_main("report", FIXTURES / "gpu_text")
    fo = tmp_path / "x.folded"
    res = run_main("report", FIXTURES / "gpu_text", "--folded", fo)
    assert res.returncode == plain.returncode
    assert not fo.exists()
    assert "no stacks among the inputs" in res.stderr and str(fo) in res.stderr


def test_cli_file_not_writable_is_reported_not_raised(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_main("analyze", *TORCH, "--json", "--folded", blocker / "x.folded")
    assert res.returncode == 3, res.stderr
    assert "not saved" in res.stderr and "Traceback" not in res.stderr
    assert any(f["kind"] == "not-saved" for f in json.loads(res.stdout)["findings"])


def test_dump_has_the_export_options():
    res = run_main("dump", "--help")
    assert res.returncode == 0
    assert all(opt in res.stdout for opt in ("--speedscope", "--speedscope-by", "--folded"))
