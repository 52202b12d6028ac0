"""Merge at the nodes (issue 28): the agents' ``class`` messages, the coordinator's merge of them,
the raw outputs kept on the node (``--keep-raw``) or brought home (``--fetch-raw``).

The round trip is checked on hand-built dumps with every optional part (locals, native frames,
several samples, explicit threads, unreadable and gone ranks); the coordinator on recorded agent
output (the class form of ``bench/fanout_scale.py``'s job, via ``bench/fanout_classes.py``); the
agent on a real process with real py-spy.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from hangdbg.collect.fanout import fan_out
from hangdbg.enums import DumpState, ThreadStatus
from hangdbg.frames import Frame
from hangdbg.model import RankDump, Thread
from hangdbg.outdir import OutDir
from hangdbg.stacks.analysis import analyze
from hangdbg.transport.classes import ClassMerger, WireError, encode_classes
from hangdbg.transport.codec import from_wire, to_wire
from hangdbg.transport.runners import FakeRunner
from hangdbg.transport.wire import FrameDecoder, encode_message

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from fanout_classes import class_outputs  # noqa: E402
from fanout_scale import recorded_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

C10D = Frame("all_reduce", "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 3252)
STEP = Frame("train_step", "/work/train.py", 120, locals=(("step", "7"), ("loss", "tensor(0.5)")))
MAIN = Frame("<module>", "/work/train.py", 410)
FUTEX = Frame("__futex_abstimed_wait_common", "libc.so.6", None, native=True)
WAIT = Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 331)


def _rank(rank: int, pid: int, step: str = "7", samples: int = 2) -> RankDump:
    main = Thread(pid, "MainThread", ThreadStatus.IDLE, (FUTEX, C10D, replace(STEP, locals=(("step", step),)), MAIN))
    pin = Thread(pid + 5, "pin_memory", ThreadStatus.ACTIVE_GIL, (WAIT,))
    first = (Thread(pid, "MainThread", ThreadStatus.ACTIVE, (STEP, MAIN)), pin)
    taken = ((first,) * (samples - 1)) + ((main, pin),)
    return RankDump(rank, pid, "node1", rank % 4, 8, 4, taken[-1], taken, None, "RANK", "python -u train.py", "3.11.7",
                    ("locals", "resampled"))


def _merge(dumps: list[RankDump]) -> tuple[list[RankDump], int]:
    merger = ClassMerger()
    msgs = list(encode_classes(dumps))
    return [d for m in msgs for d in merger.add(m)], len(msgs)


def test_classes_round_trip_every_field_and_share_the_stacks():
    dumps = [_rank(r, 1000 + 10 * r) for r in range(4)]
    dumps.append(_rank(4, 2000, step="6"))  # another loop counter: another class
    dumps.append(_rank(5, 2100, samples=1))
    explicit = _rank(6, 2200)
    dumps.append(replace(explicit, threads=explicit.samples[0]))  # threads other than the last sample
    dumps.append(RankDump(7, 2300, "node1", 3, 8, 4, error="py-spy: Permission denied", rank_source="RANK"))
    gone = _rank(8, 2400)
    dumps.append(replace(gone, error="process 2400 is gone", state=DumpState.GONE))  # gone, its samples kept
    dumps.append(RankDump(9, None, "node1", error="not dumped", state=DumpState.UNREADABLE))  # no pid, defaults
    back, classes = _merge(dumps)
    back.sort(key=lambda d: d.rank)
    assert back == dumps
    assert classes == 5  # one stack for 0-3 and 8 (gone after its samples), one for 7 and 9 (none); 4, 5, 6
    assert back[8].state == DumpState.GONE and back[7].state == DumpState.UNREADABLE and back[9].pid is None
    assert [t.thread_id for t in back[2].threads] == [1020, 1025]
    # one frames tuple for all ranks of a class (the analysis buckets stacks by identity), one
    # Frame object per distinct frame across classes
    assert back[0].threads[0].frames is back[3].threads[0].frames
    assert back[0].threads[1].frames is back[4].threads[1].frames
    assert back[0].samples[0][0].frames[1] is back[4].samples[0][0].frames[1]


def test_codec_carries_any_optional_field_generically():
    """A field another part adds to the model (a nested dataclass, floats, a dict, an enum)
    travels by its type hints: no code per field."""
    @dataclass(frozen=True)
    class Blocker:
        kind: str
        path: str | None = None
        holders: tuple[int, ...] = ()

    @dataclass(frozen=True)
    class Facts:
        rank: int
        times: tuple[float, ...] = ()
        blockers: tuple[Blocker, ...] = ()
        state: DumpState = DumpState.OK
        extra: dict[str, int] = field(default_factory=dict)
        frame: Frame | None = None

    globals()["Blocker"] = Blocker  # the hints name it (resolved in this module's globals)
    facts = Facts(3, (1.5, 2.0), (Blocker("flock", "/tmp/x.lock", (44,)),), DumpState.GONE, {"a": 1}, STEP)
    assert to_wire(Facts(3)) == {"rank": 3}  # fields at their default are left out
    assert from_wire(Facts, to_wire(facts)) == facts
    assert from_wire(Facts, {**to_wire(facts), "from_a_newer_agent": 1}) == facts  # unknown fields ignored
    for bad in ({"times": [1.0]}, {"rank": "3"}, {"rank": 3, "state": "sleeping"}, {"rank": 3, "times": "1"}):
        with pytest.raises(WireError):
            from_wire(Facts, bad)
    d = _rank(1, 77)
    assert from_wire(RankDump, to_wire(d)) == d


@pytest.mark.parametrize("spoil", [
    lambda m: m.update(n=m["n"] + 1),
    lambda m: m["same"].update(rank=1 << 40),
    lambda m: m["same"].update(rank="0"),
    lambda m: m["same"].update(world_size=True),
    lambda m: m["same"].update({"@tids": [["x", 1]]}),
    lambda m: m["same"].update({"@tids": [[0]]}),
    lambda m: m.update(stack="{not json"),
    lambda m: m.update(stack='{"samples": [[{"name": "x"}]], "threads": null}'),
    lambda m: m["same"].update(state="sleeping"),
    lambda m: m["same"].pop("rank"),
])
def test_a_garbled_class_message_is_refused_not_raised(spoil):
    (msg,) = encode_classes([_rank(0, 100)])
    spoil(msg)
    with pytest.raises(WireError):
        ClassMerger().add(msg)


def test_a_field_of_a_newer_agent_is_ignored():
    (msg,) = encode_classes([_rank(0, 100), _rank(1, 110)])
    msg["same"]["cgroup"] = "/slurm/job42"
    msg["each"]["gpu_clock_hz"] = [[1.0], [2.0]]
    assert ClassMerger().add(msg) == [_rank(0, 100), _rank(1, 110)]


def test_coordinator_merges_classes_and_keeps_no_raw_file(tmp_path):
    outputs = class_outputs(6, 4)
    result = fan_out(FakeRunner(outputs), list(outputs), ["agent"], OutDir(tmp_path), timeout=10)
    assert [(n.host, n.status, n.ranks, n.raw_dir) for n in result.nodes][:1] == [
        ("node0001", "ok", (0, 1, 2, 3), "/out/raw/node0001")]
    assert len(result.dumps) == 24 and result.garbled_lines == 0
    a = analyze(result.dumps, whole_job=True)
    assert [s.ranks for s in a.suspects] == [(23,)]
    assert not (tmp_path / "raw").exists()  # the raw outputs stayed on the nodes


def test_a_rank_sent_again_replaces_its_first_dump(tmp_path):
    """The agent sends its first round at once, then the ranks its adaptive steps changed."""
    outputs = class_outputs(2, 2)
    node = outputs["node0002"]
    dec = FrameDecoder()
    msgs = [m for line in node for _, m in dec.feed(line)]
    first = [d for m in msgs if m["type"] == "class" for d in ClassMerger().add(m) if d.rank == 3][0]
    again = replace(first, steps=("locals",), samples=first.samples * 2)
    resent = [{**m, "host": "node0002"} for m in encode_classes([again])]
    lines = [line for i, m in enumerate([*msgs[:-1], *resent, msgs[-1]]) for line in encode_message("node0002", i + 1, m)]
    result = fan_out(FakeRunner({"node0001": outputs["node0001"], "node0002": lines}), ["node0001", "node0002"],
                     ["agent"], OutDir(tmp_path), timeout=10)
    by_rank = {d.rank: d for d in result.dumps}
    assert sorted(by_rank) == [0, 1, 2, 3] and by_rank[3] == again and by_rank[2].steps == ()


def test_class_and_raw_paths_give_the_same_verdict(tmp_path):
    raw = fan_out(FakeRunner(recorded_outputs(5, 4)), [f"node{i:04d}" for i in range(1, 6)], ["agent"],
                  OutDir(tmp_path / "raw-path"), timeout=10)
    cls = fan_out(FakeRunner(class_outputs(5, 4)), [f"node{i:04d}" for i in range(1, 6)], ["agent"],
                  OutDir(tmp_path / "class-path"), timeout=10)
    assert raw.dumps == cls.dumps
    a, b = analyze(raw.dumps, whole_job=True), analyze(cls.dumps, whole_job=True)
    assert (a.headline, a.findings) == (b.headline, b.findings) and a.suspects


def test_an_agent_of_another_wire_version_fails_its_node_clearly(tmp_path):
    good = class_outputs(2, 2)
    newer = [line for i, msg in enumerate([
        {"type": "hello", "host": "node0002", "version": "9.0", "wire": 7},
        {"type": "class", "n": 1, "stack": "{}", "same": {}, "each": {}},
        {"type": "done", "host": "node0002", "status": "ok", "ranks": [2, 3], "seconds": 1.0}])
        for line in encode_message("node0002", i + 1, msg)]
    result = fan_out(FakeRunner({"node0001": good["node0001"], "node0002": newer}), ["node0001", "node0002"],
                     ["agent"], OutDir(tmp_path), timeout=10)
    status = {n.host: (n.status, n.reason) for n in result.nodes}
    assert status["node0001"][0] == "ok" and status["node0002"][0] == "error"
    assert "hangdbg 9.0" in status["node0002"][1] and "wire format 7" in status["node0002"][1]
    assert "same hangdbg version" in status["node0002"][1]
    assert sorted(d.rank for d in result.dumps) == [0, 1]


def test_an_old_agent_refusing_a_new_option_gets_a_version_hint(tmp_path):
    result = fan_out(FakeRunner({}, failures={"n1": ("error", "hangdbg: error: unrecognized arguments: --keep-raw /o/raw")}),
                     ["n1"], ["agent"], OutDir(tmp_path), timeout=10)
    assert "another version" in result.nodes[0].reason


def test_real_agent_keeps_raw_on_the_node_and_sends_classes(rank_process, tmp_path):
    """The default: the raw py-spy output is written into the agent's --keep-raw DIR/<node>/ and
    only the classes travel; with --fetch-raw the raw texts travel too."""
    def agent(*extra: str) -> list[dict]:
        res = subprocess.run([sys.executable, "-m", "hangdbg", "agent", "--pid", str(rank_process), "--node-name", "nodeA",
                              "--no-adapt", *extra], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert res.returncode == 0, res.stderr
        dec = FrameDecoder()
        return [m for line in res.stdout.splitlines() for _, m in dec.feed(line)]

    msgs = agent("--keep-raw", str(tmp_path / "node-disk"))
    assert [m["type"] for m in msgs] == ["hello", "class", "done"] and msgs[0]["wire"] == 2
    kept = tmp_path / "node-disk" / "nodeA" / "rank-0000.txt"
    assert kept.read_text().startswith("# hangdbg rank=0")
    assert msgs[-1]["raw"] == {"dir": str(kept.parent), "saved": 1, "not_saved": []}
    (dump,) = ClassMerger().add(msgs[1])
    assert (dump.rank, dump.pid, dump.host) == (0, rank_process, "nodeA")
    assert any(f.function == "<module>" for f in dump.threads[0].frames)

    msgs = agent("--fetch-raw")
    assert [m["type"] for m in msgs] == ["hello", "rank", "class", "done"] and msgs[-1]["raw"] is None
    assert msgs[1]["text"].startswith("# hangdbg rank=0") and msgs[1]["name"] == "rank-0000.txt"


def test_a_value_read_before_is_not_taken_for_an_equal_value_of_another_type():
    merger = ClassMerger()
    (msg,) = encode_classes([replace(_rank(0, 100), world_size=1)])
    assert merger.add(msg)[0].world_size == 1
    msg["same"]["world_size"] = True  # == 1 in Python, not a number in JSON
    with pytest.raises(WireError):
        merger.add(msg)
