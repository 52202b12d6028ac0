"""The documented enums of the ground floor (issue 25, item 4): each member has its one-line
description, serialises to the string it replaced (the JSON does not change), and a value written
elsewhere that this hangdbg does not know is read, never raised."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, run_cli, run_json
from hangdbg.enums import DocumentedEnum, DumpState, Level, NodeStatus, PlaceKind, ThreadStatus
from hangdbg.evidence.core.json_reader import read_documents
from hangdbg.model import KIND_LEVELS, Kind, Place, RankDump, Thread
from hangdbg.frames import Frame
from hangdbg.report.schema import json_schema, to_json
from hangdbg.stacks.places import place_of
from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.pyspy_text import parse_pyspy_dump
from hangdbg.stacks.saved import load_dump_texts, load_dumps

ENUMS = [Level, PlaceKind, ThreadStatus, DumpState, NodeStatus]


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_every_member_has_a_description_and_is_its_string(enum):
    for m in enum:
        assert isinstance(m, str) and m == m.value and str(m) == m.value and f"{m}" == m.value
        assert m.doc and "\n" not in m.doc
        assert json.loads(to_json({"v": m})) == {"v": m.value}
        assert enum(m.value) is m


def test_read_never_raises_and_falls_back():
    assert Level.read("gpu", Level.RANK) is Level.GPU
    for garbled in ("GPU", "", None, 3, ["gpu"], {"a": 1}, "gpu\x00"):
        assert Level.read(garbled, Level.RANK) is Level.RANK
    assert issubclass(Level, DocumentedEnum)


def test_every_kind_has_exactly_one_level():
    listed = [v for values in KIND_LEVELS.values() for v in values.split()]
    assert sorted(listed) == sorted(k.value for k in Kind), "each kind in exactly one level"
    assert all(isinstance(k.level, Level) for k in Kind)
    assert set(KIND_LEVELS) == set(Level)
    # the examples of the issue
    assert Kind.NODE_FAILED.level is Level.NODE and Kind.CHECK_FAILED.level is Level.NODE
    assert {Kind.XID.level, Kind.ECC.level, Kind.GPU_LOST.level, Kind.CUDA_STUCK.level} == {Level.GPU}
    assert {Kind.MIXED_JOBS.level, Kind.OP_MISMATCH.level, Kind.NCCL_OP_MISMATCH.level, Kind.FR_MISMATCH.level,
            Kind.COLLECTIVE_DATA.level} == {Level.JOB}
    assert Kind.NOT_SAVED.level is Level.TOOL
    assert Kind.MISSING.level is Level.RANK and Kind.WAITING.level is Level.RANK


def test_schema_kinds_shows_each_kinds_level():
    res = run_cli("schema", "--kinds")
    assert res.returncode == 0, res.stderr
    rows = {}
    for line in res.stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 3 and cells[0] in {k.value for k in Kind}:
            rows[cells[0]] = cells[1]
    assert "level" in res.stdout
    assert rows == {k.value: k.level.value for k in Kind}


def test_thread_status_of_every_grammar():
    (proc,), garbled = parse_pyspy_dump((FIXTURES / "pyspy" / "busy_statuses.txt").read_text())
    assert garbled == 0
    assert [t.status for t in proc.threads] == [ThreadStatus.ACTIVE_GIL, ThreadStatus.ACTIVE, ThreadStatus.IDLE]
    assert all(type(t.status) is ThreadStatus for t in proc.threads)
    (proc,), _ = parse_pyspy_dump('Thread 7 (gil): "old"\n    f (a.py:1)\n')  # older py-spy's word
    assert proc.threads[0].status is ThreadStatus.ACTIVE_GIL
    # a status py-spy never prints: the line is not a thread header, it is counted, never raised
    procs, garbled = parse_pyspy_dump('Thread 7 (sleepy): "x"\n    f (a.py:1)\n')
    assert garbled == 2 and not any(p.threads for p in procs)


def test_garbled_thread_status_in_a_core_document_is_read_as_unknown(tmp_path):
    doc = {"tool": "hangdbg", "command": "core", "schema_version": 3, "findings": [],
           "cores": [{"rank": 0, "threads": [{"thread_id": 1, "name": "MainThread", "status": status,
                                               "frames": [{"function": "f", "file": "a.py", "line": 1}]}]}
                     for status in ("idle", "active+gil", "zzz", None, 3, ["idle"])]}
    for i, core in enumerate(doc["cores"]):
        core["rank"] = i
    path = tmp_path / "core.json"
    path.write_text(json.dumps(doc))
    report, dumps = read_documents([str(path)])
    assert not report.errors
    assert [d.threads[0].status for d in dumps] == [ThreadStatus.IDLE, ThreadStatus.ACTIVE_GIL] + [ThreadStatus.UNKNOWN] * 4


def test_place_kinds_and_statuses_keep_their_strings_in_the_json():
    ranks = []
    for name, want in (("busy_statuses.txt", 0), ("torch_xargs.txt", 3)):
        code, doc = run_json("analyze", FIXTURES / "pyspy" / name)
        assert code == want
        ranks += doc["stacks"]["ranks"]
    assert {t["status"] for r in ranks for t in r["threads"]} == {"idle", "active", "active+gil"}
    assert {r["place"]["kind"] for r in ranks if r["place"]} == {"collective", "outside"}
    defs = json_schema()["$defs"]
    for enum in (PlaceKind, ThreadStatus):
        assert [m["const"] for m in defs[enum.__name__]["oneOf"]] == [m.value for m in enum]


def test_place_kind_of_a_thread():
    c10d = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    assert place_of(Thread(1, "MainThread", ThreadStatus.IDLE, (Frame("all_reduce", c10d, 1), Frame("step", "t.py", 2)))).kind \
        is PlaceKind.COLLECTIVE
    assert place_of(Thread(1, "MainThread", ThreadStatus.IDLE, ())).kind is PlaceKind.UNKNOWN
    assert place_of(Thread(1, "MainThread", ThreadStatus.ACTIVE, (Frame("step", "t.py", 2),))).kind is PlaceKind.OUTSIDE
    # a place or a thread made with the plain strings (as before the enums) still compares
    assert Place("init").describe() == "in rendezvous" and Thread(1, None, "idle", ()).idle  # type: ignore[arg-type]


GONE_TEXT = "process 13 is gone (it exited while hangdbg was looking): Error: Failed to get process executable name"
STACK = 'Process 13: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\nThread 13 (idle): "MainThread"\n    step (train.py:2)\n'


def test_rank_dump_state_follows_its_error():
    assert RankDump(rank=0).state is DumpState.OK
    assert RankDump(rank=0, error="permission denied").state is DumpState.UNREADABLE  # an error without a state
    assert RankDump(rank=0, error=GONE_TEXT).state is DumpState.UNREADABLE  # the text is not read
    assert RankDump(rank=0, error=GONE_TEXT, state=DumpState.GONE).state is DumpState.GONE
    with pytest.raises(ValueError):
        RankDump(rank=0, state=DumpState.GONE)  # gone without the error that says so


def test_analysis_reads_the_state_not_the_error_text():
    c10d = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    waiting = [RankDump(rank=r, world_size=3, threads=(Thread(1, "MainThread", ThreadStatus.IDLE, (
        Frame("all_reduce", c10d, 1), Frame("step", "t.py", 2))),)) for r in (0, 1)]
    gone = analyze([*waiting, RankDump(rank=2, world_size=3, error="py-spy timed out", state=DumpState.GONE)])
    assert gone.missing_ranks == (2,) and gone.unreadable == () and gone.waits[2].kind.value == "gone"
    unreadable = analyze([*waiting, RankDump(rank=2, world_size=3, error=GONE_TEXT, state=DumpState.UNREADABLE)])
    assert unreadable.missing_ranks == () and unreadable.unreadable == (2,) and unreadable.waits[2].kind.value == "unknown"


def test_saved_dumps_take_the_state_from_the_header_and_old_files_from_the_text():
    header = "# hangdbg rank=2 pid=13 host=n1 sample=1"
    texts = [
        ("rank-0000.txt", f"# hangdbg rank=0 pid=13 sample=1 state=ok\n{STACK}"),
        ("rank-0001.txt", f"# hangdbg rank=1 pid=14 sample=1 state=gone\nError: py-spy timed out and the process has exited\n"),
        ("rank-0002.txt", f"{header} state=unreadable\nError: {GONE_TEXT}\n"),  # the header wins over the text
        ("rank-0003.txt", f"# hangdbg rank=3 pid=16 sample=1\nError: {GONE_TEXT}\n"),  # an older hangdbg's file
        ("rank-0004.txt", f"# hangdbg rank=4 pid=17 sample=1\nError: permission denied\n"),
        ("rank-0005.txt", f"# hangdbg rank=5 pid=18 sample=1 state=sleepy\nError: permission denied\n"),  # garbled state
    ]
    dumps, _ = load_dump_texts(texts)
    assert [d.state for d in dumps] == [DumpState.OK, DumpState.GONE, DumpState.UNREADABLE, DumpState.GONE,
                                        DumpState.UNREADABLE, DumpState.UNREADABLE]
    # samples: the last one found the process gone, the earlier stack is kept with the state
    dumps, _ = load_dump_texts([("rank-0000.sample-1.txt", f"# hangdbg rank=0 pid=13 sample=1 state=ok\n{STACK}"),
                                ("rank-0000.sample-2.txt", f"# hangdbg rank=0 pid=13 sample=2 state=gone\nError: {GONE_TEXT}\n")])
    (d,) = dumps
    assert (d.state, len(d.samples), d.error) == (DumpState.GONE, 1, GONE_TEXT)


def test_interrupted_dump_ranks_are_unreadable(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "rank-0000.txt").write_text(f"# hangdbg rank=0 pid=13 sample=1 state=ok\n{STACK}")
    (tmp_path / "processes.json").write_text(json.dumps({"processes": [{"rank": 0, "pid": 13}, {"rank": 1, "pid": 14}]}))
    dumps, _ = load_dumps([tmp_path])
    assert [(d.rank, d.state) for d in dumps] == [(0, DumpState.OK), (1, DumpState.UNREADABLE)]


def test_pyspy_on_a_process_that_exited_is_gone(tmp_path):
    import subprocess
    import sys

    from hangdbg.collect.local import threads_of
    from hangdbg.errors import diagnose_pyspy_failure
    from hangdbg.tools.pyspy import PySpyOptions, PySpyResult, run_pyspy

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    res = run_pyspy(proc.pid, PySpyOptions(timeout=10))
    assert res.state is DumpState.GONE and f"process {proc.pid} is gone" in (res.error or "")
    assert threads_of(res)[1:3] == (DumpState.GONE, res.error)
    state, msg = diagnose_pyspy_failure("Error: Permission Denied (os error 1)", None, 1)
    assert state is DumpState.UNREADABLE and msg.startswith("permission denied")
    assert PySpyResult(1, "", "py-spy not found", 0.0).state is DumpState.UNREADABLE
    assert threads_of(PySpyResult(1, "garbage\n", None, 0.0))[1] is DumpState.UNREADABLE  # no stack printed


def test_node_status_failed_is_the_old_list():
    assert {s.value for s in NodeStatus if s.failed} == {"error", "unreachable", "no-hangdbg", "timeout", "no-answer"}
    assert {s.value for s in NodeStatus if not s.failed} == {"ok", "no-ranks", "nothing", "failed", "setup"}  # setup: the launch, not the node


def test_fanout_reads_node_statuses_it_does_not_know_as_error(tmp_path):
    from hangdbg.collect.fanout import fan_out
    from hangdbg.report.build import node_entry
    from hangdbg.transport.runners import FakeRunner
    from hangdbg.transport.wire import encode_message

    lines = []
    for i, said in enumerate(("ok", "no-ranks", "exploded", None, 5, ["ok"], "unreachable")):
        lines += encode_message(f"n{i}", 1, {"type": "done", "status": said, "error": None, "processes": []})
    runner = FakeRunner({"all": lines}, failures={"n8": ("timeout", "no answer within 3 s"), "n9": ("zzz", "?")})
    result = fan_out(runner, [f"n{i}" for i in range(10)], ["agent"], tmp_path, timeout=10)
    got = {n.host: n.status for n in result.nodes}
    assert got == {"n0": NodeStatus.OK, "n1": NodeStatus.NO_RANKS, "n2": NodeStatus.ERROR, "n3": NodeStatus.ERROR,
                   "n4": NodeStatus.ERROR, "n5": NodeStatus.ERROR,
                   "n6": NodeStatus.ERROR,  # a transport's status is not the agent's to say
                   "n7": NodeStatus.NO_ANSWER, "n8": NodeStatus.TIMEOUT, "n9": NodeStatus.ERROR}
    assert all(type(s) is NodeStatus for s in got.values())
    assert json.loads(to_json(node_entry(result.nodes[-1])))["status"] == "error"  # the JSON's string


def test_agent_without_ranks_says_so_by_the_error_type(monkeypatch):
    from hangdbg.collect import agent
    from hangdbg.collect.local import CollectOptions
    from hangdbg.errors import NoRanksFound, RanksUnreadable

    for exc, want in ((NoRanksFound("nothing here"), NodeStatus.NO_RANKS),
                      (RanksUnreadable("permission denied: no training process found"), NodeStatus.ERROR)):
        def find_ranks(_pids, _keep, exc=exc):
            raise exc
        monkeypatch.setattr(agent, "find_ranks", find_ranks)
        sent = []
        assert agent.run_agent(CollectOptions(), sent.append) is want
        assert sent[-1]["type"] == "done" and sent[-1]["status"] == want.value


def _facts(setup, error="RuntimeError: x"):
    return {"step": "facts", "rank": 0, "ok": False, "seconds": 0.1, "error": error, **({"setup": setup} if setup else {})}


def test_check_setup_errors_are_values_the_ranks_send():
    import subprocess
    import sys

    from hangdbg.check import rank
    from hangdbg.check.blame import SetupError, rank_setup

    assert [m.value for m in SetupError] == ["no-hangdbg", "transport", "no-torch", "cpu-only"] and all(m.doc for m in SetupError)
    assert rank_setup([_facts("no-torch", "ModuleNotFoundError: No module named 'torch'")]) is SetupError.NO_TORCH
    assert rank_setup([_facts(None, "ModuleNotFoundError: No module named 'torch'")]) is None  # the text is not read
    assert rank_setup([_facts("martian")]) is None and rank_setup([_facts(["cpu-only"])]) is None  # garbled: read, not raised
    assert rank_setup([{"step": "facts", "ok": True}, {"step": "alloc", "ok": False, "setup": "no-torch"}]) is None
    # the rank decides it where it fails, and its error text stays torch's words
    assert rank._setup(ModuleNotFoundError("No module named 'torch'", name="torch")) == {"setup": "no-torch"}
    assert rank._setup(ModuleNotFoundError("No module named 'torch.distributed'", name="torch.distributed")) == {}
    assert rank._error(rank.SetupFailed("cpu-only", "--backend nccl needs CUDA")) == "RuntimeError: --backend nccl needs CUDA"
    # end to end: the rank script where torch cannot be imported (-S: no site-packages)
    res = subprocess.run([sys.executable, "-S", rank.__file__], capture_output=True, text=True, timeout=60,
                         env={"RANK": "0", "WORLD_SIZE": "1", "PATH": "/usr/bin:/bin"})
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith(rank.PREFIX)]
    msg = json.loads(line[len(rank.PREFIX):])
    assert (res.returncode, msg["step"], msg["ok"], msg["setup"]) == (1, "facts", False, "no-torch")
    assert rank_setup([msg]) is SetupError.NO_TORCH


def test_check_setup_error_of_a_trial():
    from dataclasses import replace

    from hangdbg.check.blame import SetupError, Trial, check_node, rank_result
    from hangdbg.check.run import SetupFailure, ranks_setup_error, setup_error

    layout = (("n1", (0,)), ("n2", (0,)))
    ranks = tuple(rank_result(r, h, 0, 0, [_facts("cpu-only")], {"state": "exited", "exit": 1}) for r, (h, _) in enumerate(layout))
    nodes = tuple(check_node(h, s, None, NodeStatus.RANK_FAILED, None, "nccl") for h, s in layout)
    t = Trial(1, "all", layout, None, "127.0.0.1:1", nodes, ranks, 1.0, {0: SetupError.CPU_ONLY, 1: SetupError.CPU_ONLY})
    assert ranks_setup_error(t) is SetupError.CPU_ONLY and setup_error(t) is None
    assert ranks_setup_error(replace(t, setup={0: SetupError.CPU_ONLY})) is None  # not every rank
    assert ranks_setup_error(replace(t, setup={0: SetupError.CPU_ONLY, 1: SetupError.NO_TORCH})) is None
    silent = tuple(rank_result(r, h, 0, 0, [], None) for r, (h, _) in enumerate(layout))
    missing = tuple(check_node(h, s, None, NodeStatus.NO_HANGDBG, "hangdbg is not installed there", "gloo") for h, s in layout)
    t = Trial(1, "all", layout, None, "127.0.0.1:1", missing, silent, 1.0)
    assert setup_error(t) == SetupFailure(SetupError.NO_HANGDBG, "hangdbg is not installed there")
    refused = tuple(check_node(h, s, None, NodeStatus.ERROR, "srun: Unable to create step", "gloo") for h, s in layout)
    assert setup_error(replace(t, nodes=refused)) == SetupFailure(SetupError.TRANSPORT, "srun: Unable to create step")
    apart = (refused[0], check_node("n2", (0,), None, NodeStatus.TIMEOUT, "no answer", "gloo"))
    assert setup_error(replace(t, nodes=apart)) is None  # the nodes fail each their own way: bisection decides
