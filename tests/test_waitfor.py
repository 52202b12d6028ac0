"""The wait-for graph on recorded dumps of real hung jobs (tests/fixtures/topology, taken
from hangdbg/demo/topology.py) and on small synthetic cases: who waits for whom, the roots, and
what the adaptive dump must collect next."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdbg.stacks.analysis import analyze
from hangdbg.collect.needs import needs
from hangdbg.stacks.waitfor import key_rank, program_order
from hangdbg.model import Kind, RankDump, Severity, Thread
from hangdbg.frames import Frame
from hangdbg.stacks.saved import load_dumps
from test_analyze import TRAIN, coll, rank

TOPO = Path(__file__).parent / "fixtures" / "topology"


def load(scenario: str, mode: str):
    dumps, _stats = load_dumps([TOPO / scenario / mode])
    return analyze(dumps)


def named(a) -> set[int]:
    return {r for f in a.suspects for r in f.ranks}


def waiting(a) -> dict[tuple[int, ...], tuple[int, ...]]:
    return {f.ranks: f.waits_for for f in a.findings if f.kind is Kind.WAITING}


def test_two_groups_blame_only_the_rank_reading_a_file():
    for mode in ("plain", "native", "locals"):
        a = load("tp-dp", mode)
        assert named(a) == {5}, a.headline
        assert waiting(a) == {(4, 6, 7): (5,), (0, 1, 2, 3): (4, 5, 6, 7)}
    # the chain, nearest first, in a person's words
    assert "ranks {4, 6-7} wait for it in all_reduce at demo/topology.py:98 in train_step(); ranks {0-3} wait for ranks {4-7}" in a.headline


def test_pipeline_blames_the_stage_that_never_sent():
    a = load("pipeline", "locals")
    assert [(s.ranks, s.kind) for s in a.suspects] == [((1,), Kind.P2P_MISMATCH)]
    assert "never sent to rank 2" in a.suspects[0].summary
    assert waiting(a)[(2,)] == (1,) and waiting(a)[(3,)] == (2,)
    # without --locals the peers are unknown: nobody is blamed, the dump is told to take locals
    plain = load("pipeline", "plain")
    assert not plain.suspects and [f.kind for f in plain.findings if f.severity is Severity.WARNING] == [Kind.UNDECIDED]
    assert needs(plain).locals == {2, 3} and not needs(plain).native


def test_ddp_unused_parameter_needs_native_frames():
    plain = load("ddp-unused", "plain")
    assert not plain.suspects and plain.headline.startswith("undecided: ranks {0-2} are inside a C++ call")
    assert needs(plain).native == {0, 1, 2}
    a = load("ddp-unused", "native")
    assert [(s.ranks, s.kind) for s in a.suspects] == [((3,), Kind.DIFFERENT_COLLECTIVE)]
    assert "DDP all_reduce at demo/topology.py:207" in a.suspects[0].summary


def test_ring_and_store_waits_ask_for_what_decides_them():
    ring = load("p2p-ring", "plain")
    assert not ring.suspects and needs(ring).native == {1, 2}
    store = load("store-barrier", "locals")
    assert not store.suspects and needs(store).store_keys == tuple(f"step2/done/{r}" for r in range(4))
    # with the store's answer the rank that never set its key is the culprit, not the waiter
    dumps, _ = load_dumps([TOPO / "store-barrier" / "locals"])
    answer = {f"step2/done/{r}": r != 3 for r in range(4)}
    a = analyze(dumps, store_keys=answer)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((3,), Kind.STORE_KEY_MISSING)]
    assert waiting(a) == {(0,): (3,), (1, 2): (0,)}


def test_controls_name_nobody():
    for scenario, mode in (("healthy-midstep", "samples"), ("healthy-midstep", "samples-locals"),
                           ("pollers", "plain"), ("pollers", "samples-locals")):
        a = load(scenario, mode)
        assert not a.suspects, (scenario, mode, a.headline)
        assert not any(f.kind in (Kind.BEHIND, Kind.AHEAD) for f in a.findings)
    one = load("healthy-midstep", "plain")  # one sample, ranks on CPU: undecided, sample again
    assert not one.suspects and needs(one).resample == {0, 1, 2, 3}


def test_unreadable_rank_among_waiters_is_the_suspect():
    dumps = [rank(r, coll("all_reduce", 0, 120)) for r in (0, 1, 2)]
    dumps.append(RankDump(rank=3, pid=13, world_size=4, error="py-spy: Failed to find a python interpreter in the process"))
    a = analyze(dumps)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((3,), Kind.UNREADABLE)]  # never an all-clear
    assert a.found and "ranks {0-2} wait for it" in a.suspects[0].summary


def test_send_send_deadlock_is_a_cycle():
    def send(peer):
        return (Frame("send", "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 2700,
                      locals=(("dst", str(peer)),)), Frame("step", TRAIN, 10), Frame("<module>", TRAIN, 20))
    a = analyze([rank(0, send(1), world=2), rank(1, send(0), world=2)])
    assert [(s.ranks, s.kind) for s in a.suspects] == [((0, 1), Kind.WAIT_CYCLE)]


def test_program_order_and_key_rank():
    f = lambda line: Frame("train_step", TRAIN, line)  # noqa: E731
    top = Frame("main", TRAIN, 5)
    assert program_order((top, f(10)), (top, f(12))) == -1
    assert program_order((top, f(12)), (top, f(10))) == 1
    assert program_order((top, f(10)), (top, Frame("other", TRAIN, 3))) is None
    assert program_order((top,), (top, f(10))) == 0
    assert key_rank("step2/done/13") == 13 and key_rank("ready") is None


@pytest.mark.parametrize("mode", ["plain", "native", "locals"])
def test_every_recorded_rank_is_read(mode):
    for scenario in ("tp-dp", "pipeline", "p2p-ring", "store-barrier", "ddp-unused"):
        dumps, stats = load_dumps([TOPO / scenario / mode])
        assert all(d.threads for d in dumps) and stats.garbled_lines == 0
        assert len(dumps) == (8 if scenario == "tp-dp" else 4)




def test_native_frames_of_a_few_ranks_stand_for_their_class():
    plain = {d.rank: d for d in load_dumps([TOPO / "ddp-unused" / "plain"])[0]}
    native = {d.rank: d for d in load_dumps([TOPO / "ddp-unused" / "native"])[0]}
    # as the adaptive dump leaves it: rank 0 got a native pass, ranks {1-2} (same Python stack) did not
    rank0 = RankDump(rank=0, pid=plain[0].pid, world_size=4, threads=native[0].threads,
                     samples=(plain[0].threads, native[0].threads), steps=("native",))
    a = analyze([rank0, plain[1], plain[2], plain[3]])
    assert [(s.ranks, s.kind) for s in a.suspects] == [((3,), Kind.DIFFERENT_COLLECTIVE)]
    assert "ranks {0-2} wait in DDP all_reduce" in a.suspects[0].summary
    assert a.waits[1].op == "DDP all_reduce" and "native of rank 0" in a.waits[1].evidence
