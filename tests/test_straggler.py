"""Stragglers (issue 29, part 3): the heartbeat's step ring, the per-step decision, chronic against
transient, the CPU-time variant of stacks mode, and the ``watch`` document that carries them."""

from __future__ import annotations

import importlib
import random

import pytest

from hangdbg.hooks.heartbeat import FORMAT_LINE, heartbeat, synced
from hangdbg.model import Kind, Severity
from hangdbg.report.build import watch_document
from hangdbg.transport.targets import TargetSpec
from hangdbg.watch.cpu_straggler import CpuBook
from hangdbg.watch.plan import WatchPlan, WatchResult
from hangdbg.watch.probes import HeartbeatProbe
from hangdbg.watch.straggler import PERSIST, StepBook, StepMark, parse_heartbeat, slow_steps, straggler_report
from hangdbg.errors import UsageError


def _book(n_ranks: int, steps: int, compute, seed: int = 1, arrival_only: bool = False) -> StepBook:
    """Ranks whose step ``s`` computes ``compute(rank, s, rng)`` seconds and then sync (they leave together)."""
    rng = random.Random(seed)
    book = StepBook()
    t = 1000.0
    marks: dict[int, list[StepMark]] = {r: [] for r in range(n_ranks)}
    for s in range(steps):
        c = {r: compute(r, s, rng) for r in range(n_ranks)}
        for r in range(n_ranks):
            marks[r].append(StepMark(s, t + c[r], None if arrival_only else c[r]))
        t += max(c.values()) + 0.01  # the collective ends when the last rank arrived
    for r, m in marks.items():
        book.add(r, m)
    return book


def _jitter(base: float = 0.3, spread: float = 0.02):
    return lambda r, s, rng: base * (1 + rng.uniform(-spread, spread))


def test_the_heartbeat_keeps_its_first_line_and_adds_the_step_ring(tmp_path, monkeypatch):
    hooks_heartbeat = importlib.import_module("hangdbg.hooks.heartbeat")  # the module (the package exports the function)
    monkeypatch.setattr(hooks_heartbeat, "_synced_at", [None])
    monkeypatch.setattr(hooks_heartbeat, "_last", {})
    monkeypatch.setattr(hooks_heartbeat, "_ring", {})
    monkeypatch.setenv("RANK", "2")
    assert heartbeat(0, str(tmp_path), min_interval=60)
    synced()
    assert not heartbeat(1, str(tmp_path), min_interval=60)  # too soon: in memory only
    synced()
    monkeypatch.setattr(hooks_heartbeat, "_last", {})
    assert heartbeat(2, str(tmp_path), min_interval=60)
    text = (tmp_path / "heartbeat.rank2").read_text()
    first, second = text.splitlines()[:2]
    wall, step, pid = first.split()
    assert step == "2" and int(pid) > 0 and float(wall) > 0  # the first format, unchanged
    assert second == FORMAT_LINE
    marks = parse_heartbeat(text)
    assert [m.step for m in marks] == [0, 1, 2]
    assert marks[0].compute is None and marks[1].compute is not None and marks[1].compute >= 0
    assert HeartbeatProbe(str(tmp_path)).rings() == {2: marks}


def test_a_first_format_heartbeat_and_garbage_have_no_ring():
    assert parse_heartbeat("1700000000.000 12 4242\n") == []
    assert parse_heartbeat("1 2 3\ns x y z\ns 1 2\ns 1 2.0 -\n") == [StepMark(1, 2.0, None)]


def test_one_rank_thirty_percent_slower_is_a_chronic_straggler_since_it_slowed():
    jitter = _jitter()
    book = _book(4, 60, lambda r, s, rng: jitter(r, s, rng) * (1.3 if r == 3 and s >= 20 else 1.0))
    rep = straggler_report(book)
    assert rep is not None and rep.basis == "compute"
    (f,) = rep.findings
    assert f.kind is Kind.STRAGGLER and f.severity is Severity.WARNING and f.ranks == (3,)
    (e,) = [e for e in rep.ranks if e.chronic]
    assert e.rank == 3 and e.since_step == 20 and 25 <= e.lag_percent <= 35 and 0.07 <= e.lag_seconds <= 0.11
    assert "since step 20" in f.summary and "rank 3" in f.summary


@pytest.mark.parametrize("arrival_only", [False, True])
def test_a_healthy_job_with_jitter_gets_no_finding(arrival_only):
    for seed in range(20):
        rep = straggler_report(_book(8, 80, _jitter(spread=0.05), seed, arrival_only))
        assert rep is not None and not rep.findings, (seed, rep)


def test_two_ranks_can_be_compared_and_arrival_times_are_used_without_synced():
    book = _book(2, 30, lambda r, s, rng: 0.3 * (1.3 if r == 1 else 1.0), arrival_only=True)
    rep = straggler_report(book)
    assert rep is not None and rep.basis == "arrival"
    assert [f.ranks for f in rep.findings] == [(1,)]
    # lag relative to the step period (0.4 s): 0.09 s is about 22 %
    assert 18 <= rep.ranks[0].lag_percent <= 26


def test_a_few_slow_steps_are_transient_no_finding():
    spikes = {10, 30, 31, 50}
    book = _book(4, 60, lambda r, s, rng: 0.3 * (1.5 if r == 1 and s in spikes else 1.0))
    rep = straggler_report(book)
    assert rep is not None and not rep.findings
    (e,) = rep.ranks
    assert (e.rank, e.chronic, e.steps_slow, e.last_slow_step) == (1, False, 4, 50)
    assert "transient" in rep.summary


def test_a_straggler_that_recovered_is_no_longer_chronic():
    book = _book(4, 80, lambda r, s, rng: 0.3 * (1.3 if r == 0 and s < 40 else 1.0))
    rep = straggler_report(book)
    assert rep is not None and not rep.findings and rep.ranks[0].steps_slow == 40


def test_too_few_steps_or_ranks_make_no_report():
    assert straggler_report(_book(4, PERSIST, _jitter())) is None
    assert straggler_report(_book(1, 50, _jitter())) is None


def test_the_slow_step_rule_needs_the_floor_and_the_robust_outlier():
    assert slow_steps({0: 0.30, 1: 0.30, 2: 0.31, 3: 0.39}, 0.3) == pytest.approx({3: 0.09})
    assert slow_steps({0: 0.30, 1: 0.30, 2: 0.31, 3: 0.32}, 0.3) == {}  # 5 %: jitter
    # the others spread widely: a rank at their edge is no outlier
    assert slow_steps({0: 0.20, 1: 0.30, 2: 0.40, 3: 0.45}, 0.3) == {}


def _cpu(n: int, samples: int, rate) -> CpuBook:
    book, used = CpuBook(), {r: 0.0 for r in range(n)}
    for i in range(samples):
        book.add(float(i), dict(used))
        for r in range(n):
            used[r] += rate(r, i)
    return book


def test_cpu_time_names_the_rank_that_computes_while_the_others_wait():
    rep = _cpu(4, 12, lambda r, i: 1.0 if r == 2 else 0.77).report()
    assert rep is not None and rep.basis == "cpu-time" and [f.ranks for f in rep.findings] == [(2,)]
    assert 25 <= rep.ranks[0].lag_percent <= 35


@pytest.mark.parametrize("rate", [
    lambda r, i: 1.0,                               # every rank spins (a CUDA synchronize): alike, nothing
    lambda r, i: 0.25 if r == 2 else 0.15,          # a mostly idle job: the "straggler" keeps no core busy
    lambda r, i: 0.9 + 0.05 * ((r + i) % 3),        # jitter
])
def test_cpu_time_stays_silent_without_clear_evidence(rate):
    rep = _cpu(4, 30, rate).report()
    assert rep is not None and not rep.findings


def test_cpu_time_with_few_samples_makes_no_report():
    assert _cpu(4, PERSIST, lambda r, i: 1.0 if r == 2 else 0.5).report() is None


def test_the_watch_document_carries_the_straggler_report():
    rep = straggler_report(_book(4, 40, lambda r, s, rng: 0.3 * (1.3 if r == 3 else 1.0)))
    result = WatchResult("--pid 1", "/tmp/x", ("heartbeat",), 60.0, 1.0, 10, "job-ended", (), rep)
    doc = watch_document(result)
    assert not doc.found and doc.stragglers is rep
    assert [f.kind for f in doc.findings] == [Kind.STRAGGLER]
    assert "rank 3 is a straggler" in doc.headline


def test_the_new_watch_options_go_with_the_plan():
    plan = WatchPlan(target=TargetSpec(pids=(1,)), straggler_every=10, keep_last=3)
    assert plan.takes_samples and "--straggler-every" in plan.to_argv() and "--keep-last" in plan.to_argv()
    assert WatchPlan(target=TargetSpec(pids=(1,)), heartbeat="d", keep_last=2).takes_samples
    assert not WatchPlan(target=TargetSpec(pids=(1,)), heartbeat="d").takes_samples
    with pytest.raises(UsageError):
        WatchPlan(target=TargetSpec(pids=(1,)), straggler_every=0)
    with pytest.raises(UsageError):
        WatchPlan(target=TargetSpec(pids=(1,)), keep_last=-1)
    with pytest.raises(UsageError, match="--heartbeat DIR"):  # a log alone says nothing per rank
        WatchPlan(target=TargetSpec(pids=(1,)), logs=("train.log",), straggler_every=10)


def test_a_straggler_report_file_is_hangdbgs_own_output_not_evidence():
    from hangdbg.evidence.own_output import is_own_output

    assert is_own_output("OUT/straggler/step-00000010.json")
    assert not is_own_output("OUT/logs/step-00000010.json")


def test_a_compute_time_the_caller_measured_is_recorded(tmp_path, monkeypatch):
    hooks_heartbeat = importlib.import_module("hangdbg.hooks.heartbeat")
    for name, value in (("_last", {}), ("_ring", {}), ("_synced_at", [None])):
        monkeypatch.setattr(hooks_heartbeat, name, value)
    monkeypatch.setenv("RANK", "0")
    assert heartbeat(5, str(tmp_path), compute=0.25)
    marks = parse_heartbeat((tmp_path / "heartbeat.rank0").read_text())
    assert [(m.step, m.compute) for m in marks] == [(5, 0.25)]
