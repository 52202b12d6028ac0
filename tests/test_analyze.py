"""Unit tests of the analyzer on hand-built stacks (the collectors are tested on real jobs)."""

from __future__ import annotations

import pytest

from hangdbg.stacks.analysis import analyze
from hangdbg.rankset import compress, expand
from hangdbg.stacks.places import place_of
from hangdbg.model import RankDump, Thread
from hangdbg.frames import Frame
from hangdbg.enums import DumpState

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"
TRAIN = "/job/train.py"


def coll(name: str, line: int, site_line: int, fn: str = "train_step", locals_=()) -> tuple[Frame, ...]:
    return (
        Frame(name, C10D, 3000 + len(name)),
        Frame("_exception_logger.<locals>.wrapper", LOGGER, 83),
        Frame(fn, TRAIN, site_line, locals=locals_),
        Frame("main", TRAIN, 200),
        Frame("<module>", TRAIN, 210),
    )


def outside(fn: str, line: int) -> tuple[Frame, ...]:
    return (Frame(fn, TRAIN, line), Frame("train_step", TRAIN, 118), Frame("main", TRAIN, 200), Frame("<module>", TRAIN, 210))


def rank(r: int, frames, world: int = 4, threads=(), **kw) -> RankDump:
    main = Thread(1000 + r, "MainThread", "idle", tuple(frames))
    return RankDump(rank=r, pid=1000 + r, host="n1", local_rank=r % 8, world_size=world,
                    threads=(main, *threads), samples=((main, *threads),), **kw)


def test_rankset_roundtrip():
    assert compress([0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15]) == "0-6,8-15"
    assert compress([5]) == "5" and compress([]) == ""
    assert expand("0-6,8-15") == [*range(7), *range(8, 16)]
    with pytest.raises(ValueError):
        expand("5-3")


def test_minority_collective_is_the_suspect():
    dumps = [rank(r, coll("all_reduce", 0, 120), world=16) for r in range(15)] + [rank(15, coll("broadcast", 0, 118), world=16)]
    a = analyze(dumps)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((15,), "different-collective")]
    assert a.suspects[0].summary == (
        "different collective: in broadcast at job/train.py:118 while ranks {0-14} wait in all_reduce at job/train.py:120"
    )
    assert [g.ranks for g in a.classes] == [tuple(range(15)), (15,)]
    assert a.found


def test_same_collective_other_call_site():
    dumps = [rank(r, coll("all_reduce", 0, 120)) for r in range(3)] + [rank(3, coll("all_reduce", 0, 130))]
    a = analyze(dumps)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((3,), "different-collective")]
    assert a.suspects[0].summary.startswith("same collective from a different call site")


def test_no_majority_names_every_split():
    dumps = [rank(r, coll("all_reduce", 0, 120)) for r in range(2)] + [rank(r, coll("broadcast", 0, 118)) for r in (2, 3)]
    a = analyze(dumps)
    assert sorted(s.ranks for s in a.suspects) == [(0, 1), (2, 3)]
    assert all("no majority" in s.summary for s in a.suspects)
    assert a.headline.startswith("suspect ranks {0-3}: collective mismatch with no majority")


def test_rank_outside_collectives_with_its_top_frame():
    dumps = [rank(r, coll("all_reduce", 0, 120)) for r in (0, 2, 3)] + [rank(1, outside("read_shard", 44))]
    a = analyze(dumps)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((1,), "outside-collective")]
    assert "read_shard (job/train.py:44)" in a.suspects[0].summary
    assert "ranks {0, 2-3} wait for it in all_reduce" in a.suspects[0].summary


def test_all_in_same_place_names_nobody():
    a = analyze([rank(r, coll("all_reduce", 0, 120)) for r in range(4)])
    assert a.suspects == ()
    assert "same place" in a.headline and "no single rank" in a.headline
    assert not a.found


def test_missing_rank_and_init_waiters_not_blamed():
    init = (Frame("_store_based_barrier", C10D, 500), Frame("init_process_group", C10D, 1600),
            Frame("main", TRAIN, 20), Frame("<module>", TRAIN, 210))
    store_host = (Frame("_create_c10d_store", "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py", 180),) + init[1:]
    a = analyze([rank(0, store_host), rank(1, init), rank(3, init)])
    assert a.missing_ranks == (2,)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((2,), "missing")]
    assert "init_process_group" in a.suspects[0].summary


def test_multi_node_job_seen_from_one_node_is_not_missing_ranks():
    dumps = [rank(r, coll("all_reduce", 0, 120), world=16, local_world_size=8) for r in range(8, 16)]
    a = analyze(dumps)
    assert a.missing_ranks == ()
    assert "8 ranks live on nodes not examined" in a.headline
    dumps = dumps[:-1]
    assert analyze(dumps).missing_ranks == (15,)


def test_deadlock_from_native_lock_frames():
    lock = (Frame("pthread_cond_wait", "libc.so.6", native=True),
            Frame("PyThread_acquire_lock_timed", "python3.11", native=True))
    main = lock + outside("load_batch", 51)
    other = Thread(7, "data prefetcher", "idle", lock + (Frame("prefetch", TRAIN, 61), Frame("run", "/usr/lib/python3.11/threading.py", 982)))
    dumps = [rank(r, coll("all_reduce", 0, 120)) for r in (0, 2, 3)] + [rank(1, main, threads=(other,))]
    a = analyze(dumps)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((1,), "deadlock")]
    assert "data prefetcher" in a.suspects[0].summary


def test_collective_in_a_non_main_thread_is_seen():
    worker = Thread(9, "trainer", "idle", coll("broadcast", 0, 118))
    idle_main = (Frame("join", "/usr/lib/python3.11/threading.py", 1112), Frame("<module>", TRAIN, 210))
    dumps = [rank(r, coll("all_reduce", 0, 120)) for r in range(3)] + [rank(3, idle_main, threads=(worker,))]
    a = analyze(dumps)
    assert a.places[3].collective == "broadcast" and a.places[3].thread == "trainer"
    assert [s.ranks for s in a.suspects] == [(3,)]


def test_outermost_collective_is_reported():
    frames = (Frame("all_gather", C10D, 2900), Frame("all_gather_object", C10D, 3100),
              Frame("_exception_logger.<locals>.wrapper", LOGGER, 83), Frame("sync", TRAIN, 70), Frame("<module>", TRAIN, 210))
    place = place_of(Thread(1, "MainThread", "idle", frames))
    assert (place.kind, place.collective, place.call_site.function) == ("collective", "all_gather_object", "sync")


def test_loop_counters_find_rank_behind_and_direction():
    def at(r, step):
        return rank(r, coll("all_reduce", 0, 120, locals_=(("step", str(step)), ("loss", "0.5"))))

    a = analyze([at(0, 5), at(1, 5), at(2, 4), at(3, 5)])
    assert [(s.ranks, s.kind) for s in a.suspects] == [((2,), "behind")]
    assert "step=4" in a.suspects[0].summary and "ranks {0-1, 3} are at step=5" in a.suspects[0].summary
    # one rank ahead of three: the three are behind, but the odd one is the one that differs
    a = analyze([at(0, 4), at(1, 4), at(2, 5), at(3, 4)])
    assert [(s.ranks, s.kind) for s in a.suspects] == [((2,), "ahead")]


def test_progress_between_samples():
    def sampled(r, stacks):
        samples = tuple((Thread(1, "MainThread", "active", s),) for s in stacks)
        return RankDump(rank=r, pid=r, world_size=4, threads=samples[-1], samples=samples)

    stuck = [coll("all_reduce", 0, 120)] * 3
    busy = [outside("compute", 10), outside("compute", 11), outside("compute", 10)]
    a = analyze([sampled(0, stuck), sampled(1, busy), sampled(2, stuck), sampled(3, stuck)])
    assert a.progressing == (1,)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((1,), "outside-collective")]
    assert "still running" in a.suspects[0].summary
    a = analyze([sampled(r, busy) for r in range(4)])
    assert a.suspects == () and a.headline.startswith("no hang")


def test_unreadable_and_gone_ranks():
    dumps = [rank(r, coll("all_reduce", 0, 120)) for r in (0, 1)]
    dumps.append(RankDump(rank=2, pid=12, world_size=4, error="permission denied attaching to pid 12: ..."))
    dumps.append(RankDump(rank=3, pid=13, world_size=4, error="process 13 is gone (it exited while hangdbg was looking): x",
                          state=DumpState.GONE))
    a = analyze(dumps)
    assert a.unreadable == (2,)
    assert a.missing_ranks == (3,)
    assert [(s.ranks, s.kind) for s in a.suspects] == [((3,), "missing")]
    assert "could not read the stacks of rank 2" in a.headline
    # the ranks that only wait are never suspects: they say whom they wait for
    waiting = [f for f in a.findings if f.kind == "waiting"]
    assert [(f.ranks, f.waits_for, f.severity) for f in waiting] == [((0, 1), (2, 3), "waiting")]  # the gone and the unreadable rank
    unreadable = [f for f in a.findings if f.kind == "unreadable"]
    assert [(f.ranks, f.severity) for f in unreadable] == [((2,), "warning")] and "permission denied" in unreadable[0].summary


def test_tree_carries_rank_sets_and_deep_stacks():
    deep = tuple(Frame(f"f{i}", TRAIN, i) for i in range(3000))  # deeper than the recursion limit
    a = analyze([rank(0, deep), rank(1, deep)])
    node, depth = a.tree, 0
    while node.children:
        (node,) = node.children
        depth += 1
        assert node.ranks == frozenset({0, 1})
    assert depth == 3000 and node.frame.function == "f0"


def test_equal_frames_group_without_interning():
    a = analyze([rank(r, coll("all_reduce", 0, 120)) for r in range(4)])  # fresh Frame objects per rank
    assert len(a.classes) == 1 and a.classes[0].ranks == (0, 1, 2, 3)
