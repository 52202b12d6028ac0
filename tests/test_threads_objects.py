"""Unit tests, on hand-built stacks, of the rules that look past a rank's main thread: another thread
that holds the GIL (stacks/threads_gil.py), and the phases of an object collective (places.object_phase).
The real jobs are in tests/test_real_in_process.py."""

from __future__ import annotations

from hangdbg.collect.needs import needs
from hangdbg.enums import ObjectPhase, PlaceKind, ThreadStatus
from hangdbg.frames import Frame
from hangdbg.model import Kind, RankDump, Severity, Thread
from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.places import place_of
from hangdbg.stacks.threads_gil import resample_ranks, thread_key
from test_analyze import C10D, LOGGER, TRAIN, coll

THREADING = "/usr/lib/python3.11/threading.py"
QUEUE = "/usr/lib/python3.11/queue.py"
IDLE, ACTIVE, GIL = ThreadStatus.IDLE, ThreadStatus.ACTIVE, ThreadStatus.ACTIVE_GIL


def helper(status: ThreadStatus, name: str = "log filter", tid: int = 7, top: int = 64) -> Thread:
    """A helper thread: busy at ``filter_logs`` line ``top``, or idle in ``Queue.get``."""
    base = (Frame("Thread.run", THREADING, 982), Frame("Thread._bootstrap_inner", THREADING, 1045),
            Frame("Thread._bootstrap", THREADING, 1002))
    if status == IDLE:
        frames = (Frame("Condition.wait", THREADING, 327), Frame("Queue.get", QUEUE, 171),
                  Frame("filter_logs", TRAIN, 63), *base)
    else:
        frames = (Frame("filter_logs", TRAIN, top), *base)
    return Thread(tid, name, status, frames)


def dump(r: int, main_frames, helpers_per_sample, world: int = 4) -> RankDump:
    """A rank whose main thread sits in ``main_frames`` in every sample, with the given helper threads per sample."""
    samples = tuple((Thread(100 + r, "MainThread", IDLE, tuple(main_frames)), *hs) for hs in helpers_per_sample)
    return RankDump(rank=r, pid=100 + r, host="n1", local_rank=r, world_size=world, threads=samples[-1], samples=samples)


def job(statuses: dict[int, list[ThreadStatus]], world: int = 4, main=None) -> list[RankDump]:
    """Every rank in the same all_reduce line; rank r's helper has ``statuses[r]`` (default idle) per sample."""
    n = max((len(v) for v in statuses.values()), default=1)
    return [dump(r, (main or {}).get(r, coll("all_reduce", 0, 120)),
                 [(helper(s),) for s in statuses.get(r, [IDLE] * n)], world) for r in range(world)]


def suspects(a) -> dict[tuple[int, ...], str]:
    return {f.ranks: f.kind for f in a.findings if f.severity is Severity.SUSPECT}


def test_a_thread_holding_the_gil_in_every_sample_is_the_culprit():
    a = analyze(job({1: [GIL, GIL, GIL]}))
    assert suspects(a) == {(1,): Kind.GIL_HOLDER}
    s = a.suspects[0].summary
    assert 'thread "log filter" holds the GIL in filter_logs' in s and "all 3 samples" in s
    assert "in all_reduce" in s and "the same thread is idle on ranks {0, 2-3}" in s
    waiting = [f for f in a.findings if f.kind is Kind.WAITING]
    assert [(f.ranks, f.waits_for) for f in waiting] == [((0, 2, 3), (1,))]
    assert "no single rank" not in a.headline and a.headline.startswith("suspect rank 1")


def test_one_sample_is_undecided_and_the_adaptive_step_samples_the_rank_again():
    dumps = job({r: [IDLE] for r in range(8)} | {5: [GIL]}, world=8)
    a = analyze(dumps)
    assert not a.suspects
    (u,) = [f for f in a.findings if f.kind is Kind.UNDECIDED]
    assert u.ranks == (5,) and "one sample" in u.summary and u.severity is Severity.WARNING
    assert resample_ranks(a.findings) == {5}
    assert 5 in needs(a).resample  # a class of 8 ranks: only a few of it would be sampled for itself


def test_a_logging_thread_busy_in_one_sample_of_three_is_not_blamed():
    a = analyze(job({2: [IDLE, GIL, IDLE]}))
    assert not suspects(a) and not any(f.kind is Kind.UNDECIDED for f in a.findings)


def test_the_same_thread_busy_on_every_rank_is_the_jobs_own_work():
    a = analyze(job({r: [GIL, GIL] for r in range(4)}))
    assert not suspects(a) and not a.findings
    a = analyze(job({0: [GIL, GIL], 1: [GIL, GIL], 2: [IDLE, IDLE], 3: [IDLE, IDLE]}))
    assert not suspects(a), "busy on half the ranks is no odd one"


def test_threads_are_compared_by_name_without_their_numbers():
    assert thread_key(helper(IDLE, "Thread-3 (worker)")) == thread_key(helper(IDLE, "Thread-12 (worker)"))
    dumps = [dump(r, coll("all_reduce", 0, 120), [(helper(GIL if r == 3 else IDLE, f"Thread-{r + 2} (worker)"),)] * 2)
             for r in range(4)]
    a = analyze(dumps)
    assert suspects(a) == {(3,): Kind.GIL_HOLDER}
    assert "the same thread is idle on ranks {0-2}" in a.suspects[0].summary


def test_active_without_the_gil_while_another_thread_holds_it_is_not_busy():
    other = Thread(9, "tokenizer", GIL, (Frame("tokenize", TRAIN, 10),))
    dumps = job({})
    dumps[1] = dump(1, coll("all_reduce", 0, 120), [(helper(ACTIVE), other), (helper(ACTIVE), other)])
    dumps[2] = dump(2, coll("all_reduce", 0, 120), [(helper(IDLE), other), (helper(IDLE), other)])
    dumps[3] = dump(3, coll("all_reduce", 0, 120), [(helper(IDLE), other), (helper(IDLE), other)])
    dumps[0] = dump(0, coll("all_reduce", 0, 120), [(helper(IDLE),), (helper(IDLE),)])
    a = analyze(dumps)
    assert not suspects(a), "the tokenizer holds the GIL on three of four ranks; the log filter runs C code"


def test_a_rank_whose_main_thread_moves_is_not_blamed():
    dumps = job({1: [GIL, GIL]})
    moved = (Thread(101, "MainThread", IDLE, coll("all_reduce", 0, 120)),
             Thread(101, "MainThread", ACTIVE, (Frame("compute", TRAIN, 50), *coll("all_reduce", 0, 118)[2:])))
    dumps[1] = RankDump(rank=1, pid=101, host="n1", local_rank=1, world_size=4, threads=(moved[1], helper(GIL)),
                        samples=((moved[0], helper(GIL)), (moved[1], helper(GIL))))
    assert not any(f.kind is Kind.GIL_HOLDER for f in analyze(dumps).findings)


def test_a_root_elsewhere_is_named_not_the_busy_thread():
    reading = (Frame("load_shard", TRAIN, 30), Frame("train_step", TRAIN, 118), Frame("main", TRAIN, 200))
    a = analyze(job({1: [GIL, GIL]}, main={3: reading}))
    assert set(suspects(a)) == {(3,)}


# --- object collectives ---------------------------------------------------------------------
def obj(api: str, inner: tuple[Frame, ...], site_line: int = 114) -> tuple[Frame, ...]:
    """``inner`` frames (innermost first) under the object collective ``api`` called at train.py:site_line."""
    return (*inner, Frame(api, C10D, 3500), Frame("_exception_logger.<locals>.wrapper", LOGGER, 83),
            Frame("share", TRAIN, site_line), Frame("main", TRAIN, 200), Frame("<module>", TRAIN, 210))


def exchange(api: str, op: str) -> tuple[Frame, ...]:
    return obj(api, (Frame(op, C10D, 4287), Frame("_exception_logger.<locals>.wrapper", LOGGER, 83)))


PICKLING = (Frame("RemoteHandle.__reduce__", TRAIN, 92), Frame("_object_to_tensor", C10D, 3405))
UNPICKLING = (Frame("Shard.__setstate__", TRAIN, 40), Frame("_tensor_to_object", C10D, 3435))


def ranks_at(stacks: dict[int, tuple[Frame, ...]]) -> list[RankDump]:
    out = []
    for r, frames in stacks.items():
        t = Thread(100 + r, "MainThread", IDLE, frames)
        out.append(RankDump(rank=r, pid=100 + r, host="n1", local_rank=r, world_size=len(stacks), threads=(t,),
                            samples=((t,),)))
    return out


def test_a_rank_still_pickling_is_where_the_others_wait():
    stacks = {r: exchange("all_gather_object", "all_gather") for r in (0, 1, 3)} | {2: obj("all_gather_object", PICKLING)}
    a = analyze(ranks_at(dict(sorted(stacks.items()))))
    assert suspects(a) == {(2,): Kind.OUTSIDE_COLLECTIVE}
    s = a.suspects[0].summary
    assert s.startswith("still pickling its object for all_gather_object") and "RemoteHandle.__reduce__" in s
    assert [(f.ranks, f.waits_for) for f in a.findings if f.kind is Kind.WAITING] == [((0, 1, 3), (2,))]
    p = a.places[2]
    assert (p.kind, p.collective, p.phase) == (PlaceKind.OUTSIDE, "all_gather_object", ObjectPhase.PICKLE)
    assert a.places[0].phase is ObjectPhase.EXCHANGE and a.places[0].kind is PlaceKind.COLLECTIVE


def test_broadcast_object_list_source_pickling_in_a_list_comprehension():
    comp = Frame("broadcast_object_list.<locals>.<listcomp>", C10D, 4017)
    stacks = {0: exchange("broadcast_object_list", "broadcast"), 1: obj("broadcast_object_list", (*PICKLING, comp)),
              2: exchange("broadcast_object_list", "broadcast"), 3: exchange("broadcast_object_list", "broadcast")}
    a = analyze(ranks_at(stacks))
    assert suspects(a) == {(1,): Kind.OUTSIDE_COLLECTIVE}
    assert "broadcast_object_list" in a.suspects[0].summary


def test_send_object_list_pickling_blames_the_sender_not_the_receiver():
    recv = Thread(100, "MainThread", IDLE, exchange("recv_object_list", "recv"))
    assert place_of(recv).phase is ObjectPhase.EXCHANGE
    send = Thread(101, "MainThread", IDLE, obj("send_object_list", PICKLING))
    assert place_of(send).kind is PlaceKind.OUTSIDE and place_of(send).phase is ObjectPhase.PICKLE


def test_a_rank_unpickling_after_the_exchange_is_not_blamed():
    stacks = {r: exchange("all_gather_object", "all_gather") for r in (0, 1, 3)} | {2: obj("all_gather_object", UNPICKLING)}
    a = analyze(ranks_at(dict(sorted(stacks.items()))))
    assert not suspects(a)
    p = a.places[2]
    assert (p.kind, p.phase) == (PlaceKind.COLLECTIVE, ObjectPhase.UNPICKLE)
    assert "unpickling what it received" in p.describe()
    assert "no rank waits" not in a.headline and "all_gather_object" in a.headline  # the headline agrees with the JSON


def test_pickle_frames_outside_an_object_collective_change_nothing():
    t = Thread(1, "MainThread", IDLE, (*PICKLING, Frame("save", TRAIN, 10), Frame("main", TRAIN, 200)))
    p = place_of(t)
    assert p.phase is None and p.kind is PlaceKind.OUTSIDE
    t = Thread(1, "MainThread", IDLE, coll("all_reduce", 0, 120))
    assert place_of(t).phase is None


def _timed(dumps: list[RankDump], seconds: float) -> list[RankDump]:
    """``dumps`` with their samples spread evenly over ``seconds`` (Unix times)."""
    from dataclasses import replace

    out = []
    for d in dumps:
        n = len(d.samples)
        out.append(replace(d, sample_times=tuple(1000.0 + seconds * k / max(1, n - 1) for k in range(n))))
    return out


def test_a_gil_holder_is_named_only_once_the_samples_span_the_window():
    """Progress before blame: a thread may hold the GIL for seconds in a healthy job (a checkpoint pickled)."""
    from hangdbg.stacks.window import OBSERVING, Window, wants_samples

    short = analyze(_timed(job({1: [GIL, GIL, GIL]}), 1.5), window=Window(min_seconds=10.0))
    assert not short.suspects
    (u,) = [f for f in short.findings if f.kind is Kind.UNDECIDED]
    assert u.ranks == (1,) and u.summary.startswith(OBSERVING) and "1.5 s of the 10.0 s window" in u.summary
    assert wants_samples(short.findings)  # dump samples on
    long = analyze(_timed(job({1: [GIL, GIL, GIL]}), 12.0), window=Window(min_seconds=10.0))
    assert suspects(long) == {(1,): Kind.GIL_HOLDER}
    assert suspects(analyze(_timed(job({1: [GIL, GIL, GIL]}), 1.5), window=Window(min_seconds=0.0))) == {
        (1,): Kind.GIL_HOLDER}  # --min-window 0: the samples decide, as before
