"""Progress before blame (hangdbg.stacks.window) on hand-built timed samples: a rank on CPU outside any
collective is a suspect only once the samples cover the window; until then "undecided: still
observing"; the adaptive collection samples until the analysis decides or the limit passes."""

from __future__ import annotations

import pytest

from hangdbg.collect import adaptive
from hangdbg.collect.needs import needs
from hangdbg.collect.plan import DumpPlan
from hangdbg.frames import Frame
from hangdbg.model import Kind, RankDump, Severity, Thread
from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.window import (OBSERVING, Seen, Timing, Window, seen_outside, step_estimate, wants_samples)
from test_analyze import TRAIN, coll

T0 = 1_764_000_000.0


def mm(step: int | None = None, line: int = 40) -> tuple[Frame, ...]:
    """On CPU in torch.mm at train.py:40 (step-like local in main() when ``step`` is given)."""
    main_locals = (("step", str(step)),) if step is not None else ()
    return (Frame("compute", TRAIN, line), Frame("main", TRAIN, 200, locals=main_locals), Frame("<module>", TRAIN, 210))


def waiting(step: int | None = None) -> tuple[Frame, ...]:
    frames = coll("all_reduce", 0, 120)
    if step is None:
        return frames
    return tuple(Frame(f.function, f.file, f.line, locals=(("step", str(step)),) if f.function == "main" else ())
                 for f in frames)


def timed(r: int, stacks: list[tuple[Frame, ...]], times: list[float] | None, active: bool = False,
          started: float | None = None) -> RankDump:
    samples = tuple((Thread(1000 + r, "MainThread", "active" if active else "idle", s),) for s in stacks)
    return RankDump(rank=r, pid=1000 + r, host="n1", local_rank=r, world_size=4, threads=samples[-1], samples=samples,
                    sample_times=tuple(times) if times is not None else (), started=started)


def job(span: float, n: int = 3, started: float | None = None, step: int | None = None) -> list[RankDump]:
    """Ranks 0-2 wait in all_reduce, rank 3 computes in mm: ``n`` samples over ``span`` seconds."""
    times = [T0 + span * k / (n - 1) for k in range(n)] if n > 1 else [T0]
    dumps = [timed(r, [waiting(step)] * n, times, started=started) for r in range(3)]
    return dumps + [timed(3, [mm(step)] * n, times, active=True, started=started)]


def observing(a):
    return [f for f in a.findings if f.kind is Kind.UNDECIDED and f.summary.startswith(OBSERVING)]


def test_a_rank_on_cpu_is_still_observed_until_the_window_is_covered():
    a = analyze(job(4.0), window=Window(10.0))
    assert not a.suspects and not a.found
    [f] = observing(a)
    assert f.ranks == (3,) and f.severity is Severity.WARNING
    assert "rank 3 computing in compute" in f.summary and "for 4.0 s over 3 samples" in f.summary
    assert "ranks {0-2} wait in all_reduce" in f.summary and "the window is 10.0 s (--min-window 10)" in f.summary
    assert "hangdbg dump --min-window 10" in f.action
    assert a.headline.startswith("undecided: still observing:")
    assert wants_samples(a.findings) and needs(a).resample == {0, 1, 2, 3}


def test_once_covered_the_rank_is_the_suspect_and_says_for_how_long():
    a = analyze(job(12.0, n=5), window=Window(10.0))
    assert [(s.ranks, s.kind) for s in a.suspects] == [((3,), Kind.OUTSIDE_COLLECTIVE)]
    assert ", seen there for 12.0 s over 5 samples; ranks {0-2} wait for it" in a.suspects[0].summary
    assert not observing(a) and not wants_samples(a.findings)


def test_one_sample_never_covers_a_window_even_a_zero_one():
    a = analyze(job(0.0, n=1), window=Window(0.0))
    assert not a.suspects and [f.ranks for f in observing(a)] == [(3,)]
    assert needs(a).resample  # sample again


def test_without_a_window_two_samples_decide_as_before_and_the_time_is_told():
    a = analyze(job(1.0, n=2))
    assert [s.ranks for s in a.suspects] == [(3,)] and "seen there for 1.0 s over 2 samples" in a.suspects[0].summary
    untimed = analyze([replace_times(d) for d in job(1.0, n=2)])
    assert [s.ranks for s in untimed.suspects] == [(3,)] and "seen there" not in untimed.suspects[0].summary


def replace_times(d: RankDump) -> RankDump:
    from dataclasses import replace
    return replace(d, sample_times=())


def test_the_step_time_estimate_widens_the_window():
    # the job was 150 s old at step 5 when first seen: a step takes at most 30 s, so 12 s of watching is not enough
    dumps = job(12.0, n=4, started=T0 - 150.0, step=5)
    est = step_estimate(dumps, {d.rank: "MainThread" for d in dumps})
    assert est is not None and est.seconds == pytest.approx(30.0) and (est.variable, est.value) == ("step", 5)
    a = analyze(dumps, window=Window(10.0))
    [f] = observing(a)
    assert "the window is 45.0 s (the job's step time, at most 30.0 s (rank 0's step=5 after 150 s) x 1.5)" in f.summary
    assert "--min-window 45" in f.action
    # taken at the first sample, the bound does not grow while the dump watches
    covered = analyze(job(46.0, n=6, started=T0 - 150.0, step=5), window=Window(10.0))
    assert [s.ranks for s in covered.suspects] == [(3,)]


def test_the_estimate_is_told_even_when_the_floor_decides():
    a = analyze(job(4.0, started=T0 - 20.0, step=5), window=Window(10.0))
    [f] = observing(a)
    assert "the window is 10.0 s (--min-window 10; the job's step time, at most 4.0 s (rank 0's step=5 after 20 s))" in f.summary


def test_no_estimate_in_the_first_steps_without_a_start_or_without_locals():
    # at step 4 start-up dominates age / step: a hang of the first steps is held for --min-window only
    assert step_estimate(job(5.0, started=T0 - 60, step=4), {}) is None
    assert step_estimate(job(5.0, step=40), {}) is None
    assert step_estimate(job(5.0, started=T0 - 60), {}) is None


def test_the_run_of_samples_ends_at_a_collective_or_a_new_step():
    times = [T0, T0 + 5, T0 + 12]
    assert seen_outside(timed(3, [mm(4), mm(5), mm(5)], times, True), "MainThread") == Seen(7.0, 2)
    assert seen_outside(timed(3, [waiting(4), mm(5), mm(5)], times, True), "MainThread") == Seen(7.0, 2)
    # an inner loop counter (i) moves within a step: the rank stays in the same place
    inner = [(Frame("compute", TRAIN, 40, locals=(("i", str(k)),)), *mm(5)[1:]) for k in range(3)]
    assert seen_outside(timed(3, inner, times, True), "MainThread") == Seen(12.0, 3)
    assert seen_outside(timed(3, [mm(5)] * 3, None, True), "MainThread") == Seen(None, 3)


def test_a_job_whose_waiters_move_is_healthy_inside_the_window():
    times = [T0, T0 + 1, T0 + 2]
    dumps = [timed(r, [waiting(7), mm(8), waiting(8)], times) for r in range(3)]
    dumps.append(timed(3, [mm(7), mm(7), mm(8)], times, active=True))
    a = analyze(dumps, window=Window(10.0))
    assert not a.findings and a.headline.startswith("no hang")


def test_a_blocked_root_is_named_while_a_computing_one_is_still_observed():
    times = [T0, T0 + 2]
    fifo = (Frame("__libc_read", "libc.so.6", None, native=True), Frame("read_shard", TRAIN, 60),
            Frame("main", TRAIN, 200), Frame("<module>", TRAIN, 210))  # idle in read(2): a named wait
    dumps = [timed(r, [waiting()] * 2, times) for r in range(2)]
    dumps += [timed(2, [fifo] * 2, times), timed(3, [mm()] * 2, times, active=True)]
    a = analyze(dumps, window=Window(10.0))
    assert [s.ranks for s in a.suspects] == [(2,)]
    assert [f.ranks for f in observing(a)] == [(3,)]


def test_a_stall_watch_saw_counts_into_the_window():
    a = analyze(job(0.0, n=1), window=Window(10.0, observed=300.0))
    assert [s.ranks for s in a.suspects] == [(3,)]
    timing = Timing({d.rank: d for d in job(2.0)}, {}, Window(10.0, observed=300.0))
    assert timing.seen(3) == Seen(302.0, 3) and timing.covered(3)


def test_the_plan_makes_the_window_and_timeout_bounds_it():
    assert DumpPlan(min_window=0).window is None
    assert DumpPlan().window == Window(10.0, 20.0, 0.0)
    assert DumpPlan(min_window=60, timeout=5).window == Window(60.0, 60.0, 0.0)
    assert DumpPlan(observed=42.0).window == Window(10.0, 20.0, 42.0)
    assert DumpPlan(min_window=3).agent_argv(False)[-2:] == ["--min-window", "3"]


class Clock:
    """``time.time`` and ``time.sleep`` of the adaptive loop, on a fake clock."""

    def __init__(self) -> None:
        self.now = T0

    def time(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


@pytest.mark.parametrize("min_seconds, moves_at, stop", [
    (30.0, None, (20.0, 20.5)),  # never covered: the limit (--timeout) ends it, still observing
    (10.0, None, (10.0, 12.5)),  # covered after 10 s: named then
    (10.0, 4, (4.25, 4.5)),  # a rank moved in the 4th round: healthy, stop early
])
def test_the_adaptive_loop_samples_until_decided_or_the_limit(monkeypatch, min_seconds, moves_at, stop):
    clock = Clock()
    monkeypatch.setattr(adaptive, "time", clock)
    taken: list[float] = []
    window = Window(min_seconds, limit=20.0)

    def sample() -> None:
        taken.append(clock.now)
        clock.now += 0.25  # py-spy's run

    def analysis():
        if moves_at is not None and len(taken) >= moves_at:
            return analyze([])  # a rank moved: nothing to say
        return analyze(job(clock.now - T0, n=len(taken) + 1), window=window)

    a = adaptive._observe([3], sample, analysis, window, T0, lambda _m: None)
    assert stop[0] <= clock.now - T0 <= stop[1]
    gaps = [b - a for a, b in zip(taken, taken[1:])]
    assert gaps[0] == pytest.approx(0.75) and max(gaps) <= adaptive.RESAMPLE_MAX_INTERVAL + 0.25 + 1e-9
    assert bool(observing(a)) == (min_seconds > 20.0) and bool(a.suspects) == (moves_at is None and min_seconds < 20)


def _raw(rank: int, sample: int, at: float, frames: str, status: str) -> str:
    from hangdbg.collect.local import raw_text
    from hangdbg.model import RankProcess
    from hangdbg.tools.pyspy import PySpyResult

    pid = 1000 + rank
    text = (f"Process {pid}: python /job/train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            f"Thread {pid} ({status}): \"MainThread\"\n{frames}")
    p = RankProcess(pid, rank, "n1", rank, 4, 4, "RANK", "python /job/train.py")
    return raw_text(p, sample, PySpyResult(pid, text, None, 0.1), "", at, T0 - 5.0)


RAW_WAIT = (f"    all_reduce ({coll('all_reduce', 0, 120)[0].file}:3010)\n    train_step (/job/train.py:120)\n"
            "    main (/job/train.py:200)\n    <module> (/job/train.py:210)\n")
RAW_MM = "    compute (/job/train.py:40)\n    main (/job/train.py:200)\n    <module> (/job/train.py:210)\n"


def test_saved_samples_keep_their_times_and_analyze_applies_the_window(tmp_path):
    """The raw headers carry ``unix=`` and ``started=``: the fan-out's coordinator and ``hangdbg analyze``
    rebuild the times, and a dump that stopped "still observing" is not blamed on the same files."""
    from hangdbg.api import analyze as analyze_files
    from hangdbg.stacks.saved import load_dump_texts

    texts = []
    for k, at in enumerate((T0, T0 + 1.5, T0 + 3.0), start=1):
        for r in range(4):
            texts.append((f"rank-{r:04d}.sample-{k}.txt", _raw(r, k, at, RAW_MM if r == 3 else RAW_WAIT,
                                                              "active" if r == 3 else "idle")))
    dumps, _ = load_dump_texts(texts)
    assert [d.sample_times for d in dumps] == [(T0, T0 + 1.5, T0 + 3.0)] * 4 and dumps[3].started == T0 - 5.0
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, text in texts:
        (raw / name).write_text(text)
    held = analyze_files([tmp_path])
    assert not held.suspects and held.headline.startswith("undecided: still observing:")
    assert "for 3.0 s over 3 samples" in held.headline
    named = analyze_files([tmp_path], min_window=0)
    assert [s.ranks for s in named.suspects] == [(3,)] and "seen there for 3.0 s over 3 samples" in named.suspects[0].summary


def test_a_mid_step_rank_of_a_slowed_healthy_job_is_not_blamed():
    """healthy-midstep caught mid-step on a loaded machine (issue 28: blamed in 1 of 4 dumps): the first
    round (no locals) and two --locals rounds 0.5 s apart all fall inside one stretched step, so the
    waiters did not move and the rank computing (its inner counter ``i`` moving) looked "still running"
    to the two-sample rule. The window holds it until a rank moves or 10 s have passed."""
    times = [T0, T0 + 0.9, T0 + 1.5]
    compute = [(Frame("compute", TRAIN, 70, locals=(("x", "7"), ("i", str(i)))),
                Frame("run_healthy_midstep", TRAIN, 220, locals=(("step", "7"),)), Frame("<module>", TRAIN, 300))
               for i in (None, 41, 163)]
    compute[0] = tuple(Frame(f.function, f.file, f.line) for f in compute[0])  # the first round has no locals
    wait = [waiting(None), waiting(7), waiting(7)]
    dumps = [timed(r, wait, times) for r in (0, 1, 3)] + [timed(2, compute, times, active=True)]
    old = analyze(dumps)
    assert [s.ranks for s in old.suspects] == [(2,)] and "still running" in old.suspects[0].summary
    held = analyze(dumps, window=Window(10.0))
    assert not held.suspects and [f.ranks for f in observing(held)] == [(2,)] and wants_samples(held.findings)


def test_ranks_seen_moving_are_not_behind():
    """Two waiting ranks sampled a moment apart across a step boundary differ by one step: a rank whose
    counters moved between samples is not stuck behind; one that stays behind is."""
    times = [T0, T0 + 1.0]
    moving = [timed(r, [waiting(8), waiting(8)], times) for r in (0, 1)]
    moving += [timed(3, [waiting(7), waiting(8)], times), timed(2, [waiting(6), waiting(7)], times)]
    a = analyze(moving)
    assert set(a.progressing) == {2, 3} and not a.headline.startswith("no hang")  # not enough to call it progress
    assert not [f for f in a.findings if f.kind in (Kind.BEHIND, Kind.AHEAD)], a.headline
    stuck = [timed(r, [waiting(8), waiting(8)], times) for r in (0, 1, 3)] + [timed(2, [waiting(7), waiting(7)], times)]
    assert [(s.ranks, s.kind) for s in analyze(stuck).suspects] == [((2,), Kind.BEHIND)]


def test_an_idle_rank_whose_frames_name_no_wait_is_observed_like_a_computing_one():
    """py-spy says ``idle`` for a thread not running at that instant: a computing rank descheduled on a
    loaded node (healthy-midstep blamed on a 2-core CI run: "blocked outside torch.distributed in
    compute"). With nothing in its frames that names a wait, it gets the window, not the blame."""
    times = [T0, T0 + 0.6, T0 + 1.2]
    dumps = [timed(r, [waiting()] * 3, times) for r in range(3)] + [timed(3, [mm()] * 3, times)]  # idle in mm
    a = analyze(dumps, window=Window(10.0))
    assert not a.suspects and [f.ranks for f in observing(a)] == [(3,)] and wants_samples(a.findings)
    late = [timed(r, [waiting()] * 3, [T0, T0 + 6, T0 + 12]) for r in range(3)]
    late += [timed(3, [mm()] * 3, [T0, T0 + 6, T0 + 12])]
    assert [s.ranks for s in analyze(late, window=Window(10.0)).suspects] == [(3,)]
