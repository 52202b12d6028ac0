"""The joint verdict of stacks and flight recorder (hangdbg/evidence/fr_join.py, flight_recorder/waits.py):
hand-built dumps for each rule, and the real H200 dumps."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdbg.evidence.flight_recorder.analysis import analyze
from hangdbg.evidence.flight_recorder.grammar import FrDump, FrEntry, load_dump
from hangdbg.evidence.flight_recorder.waits import fr_blame, fr_waits, settle_lagging
from hangdbg.evidence.fr_join import fr_join, joined_analysis, settle_fr_source
from hangdbg.frames import Frame
from hangdbg.enums import PlaceKind
from hangdbg.model import Analysis, EquivalenceClass, Finding, Kind, Place, Severity, TreeNode

H200 = Path(__file__).parent / "fixtures" / "gpu_h200"


def _dump(rank: int, ops: list[tuple[str, int, bool]], backend: str = "gloo") -> FrDump:
    """Rank ``rank``'s dump: ``ops`` in issue order, each (group, seq, done); gloo done = retired, NCCL done =
    ``completed`` (and retired)."""
    entries = tuple(
        FrEntry(index=i, record_id=i, pg_id=int(pg), pg_name=pg, pg_desc="", collective_seq_id=seq, p2p_seq_id=0,
                op_id=seq, profiling_name=f"{backend}:all_reduce", backend=backend, op="all_reduce",
                input_sizes=((16,),), state="completed" if done and backend == "nccl" else "scheduled", retired=done)
        for i, (pg, seq, done) in enumerate(ops))
    return FrDump(path=f"fr/rank_{rank}.json", rank=rank, fmt="json", entries=entries)


def _steps(groups: list[str], steps: int) -> list[tuple[str, int, bool]]:
    return [(g, s, True) for s in range(1, steps + 1) for g in groups]


def _swap(world: int = 4) -> list[FrDump]:
    """Every rank all_reduces on pg 1 then pg 2 each step; at step 3 the last rank takes pg 2 first."""
    out = []
    for r in range(world):
        last = ("2", 3, False) if r == world - 1 else ("1", 3, False)
        out.append(_dump(r, _steps(["1", "2"], 2) + [last]))
    return out


def _lagging(world: int = 4, late: int = 2, backend: str = "gloo") -> list[FrDump]:
    """Every rank but ``late`` is blocked in seq 5 of pg 0; ``late`` completed seq 4 and went no further."""
    return [_dump(r, _steps(["0"], 4) + ([] if r == late else [("0", 5, False)]), backend) for r in range(world)]


IN_ALL_REDUCE = Place(PlaceKind.COLLECTIVE, "all_reduce", Frame("train", "train.py", 12))
IN_STEP = Place(PlaceKind.OUTSIDE, None, Frame("train_step", "train.py", 30))
"""Every rank in one compiled ``train_step`` (the GPU work runs; the Python stack is outside torch.distributed)."""


def _stacks(world: int = 4, findings: tuple[Finding, ...] = (), places: dict | None = None,
            progressing: tuple[int, ...] = ()) -> Analysis:
    """Every rank in the same all_reduce line unless ``places`` says otherwise; one equivalence class per place."""
    places = places or {r: IN_ALL_REDUCE for r in range(world)}
    by_place: dict = {}
    for r, p in sorted(places.items()):
        by_place.setdefault(p, []).append(r)
    cls = tuple(EquivalenceClass(tuple(rs), (p.call_site,), p) for p, rs in by_place.items())
    return Analysis(ranks=(), classes=cls, tree=TreeNode(None, frozenset()), findings=findings, missing_ranks=(),
                    headline="all ranks are in the same place; no single rank stands out", places=places,
                    progressing=progressing)


def _suspects(findings) -> set[int]:
    return {r for f in findings if f.severity == Severity.SUSPECT for r in f.ranks}


def test_a_rank_behind_is_named_and_the_others_wait_for_it():
    """The public 128-rank case (NCCL): every rank in the same compiled step, one rank a collective behind."""
    found = fr_join(_stacks(places={r: IN_STEP for r in range(4)}), _lagging(backend="nccl"))
    assert _suspects(found) == {2}
    lead = next(f for f in found if f.severity == Severity.SUSPECT)
    assert lead.kind == Kind.FR_MISSING_RANK and lead.source == "flight-recorder"
    assert "rank 2: FR seq 4 on pg 0, ranks {0-1, 3} at 5" in lead.summary
    assert "its stack is the same as theirs (in train_step (train.py:30))" in lead.summary
    assert "the flight recorder decided" in lead.summary
    waiting = [f for f in found if f.kind == Kind.WAITING]
    assert [(f.ranks, f.waits_for) for f in waiting] == [((0, 1, 3), (2,))]


def test_a_rank_that_took_the_groups_in_another_order_is_the_only_one_named():
    w = fr_waits(_swap())
    assert {r: (b.group, b.seq) for r, b in w.blocked.items()} == {0: ("1", 3), 1: ("1", 3), 2: ("1", 3), 3: ("2", 3)}
    assert w.waits_for == {0: (3,), 1: (3,), 2: (3,), 3: (0, 1, 2)}
    blame = fr_blame(w)
    assert (blame.how, blame.ranks, blame.others) == ("order", (3,), (0, 1, 2))
    found = fr_join(_stacks(), _swap())
    assert _suspects(found) == {3}
    lead = next(f for f in found if f.severity == Severity.SUSPECT)
    assert lead.kind == Kind.FR_MISMATCH
    assert "another order than ranks {0-2}" in lead.summary and "its stack is the same as theirs" in lead.summary


@pytest.mark.parametrize("world,odd", [(4, 0), (8, 5), (3, 1)])
def test_the_order_rule_names_the_minority_wherever_it_is(world, odd):
    dumps = [_dump(r, _steps(["1", "2"], 1) + [("2" if r == odd else "1", 2, False)]) for r in range(world)]
    assert _suspects(fr_join(_stacks(world), dumps)) == {odd}


def test_two_ranks_in_opposite_orders_are_undecided():
    dumps = [_dump(0, _steps(["1", "2"], 1) + [("1", 2, False)]), _dump(1, _steps(["1", "2"], 1) + [("2", 2, False)])]
    found = fr_join(_stacks(2), dumps)
    assert not _suspects(found)
    assert [f.kind for f in found] == [Kind.UNDECIDED] and "no order is the majority's" in found[0].summary


def test_every_rank_at_the_same_seq_names_nobody():
    dumps = [_dump(r, _steps(["0"], 4) + [("0", 5, False)]) for r in range(4)]
    assert fr_blame(fr_waits(dumps)).how == ""
    base = _stacks()
    assert fr_join(base, dumps) == base.findings == ()
    assert joined_analysis(base, dumps) is base


def test_every_rank_done_names_nobody():
    dumps = [_dump(r, _steps(["0"], 4)) for r in range(4)]
    assert fr_waits(dumps).blocked == {} and fr_join(_stacks(), dumps) == ()


def test_a_rank_the_stacks_show_waiting_is_not_blamed():
    waits = Finding(Kind.WAITING, "rank 2 waits on the store for rank 0", ranks=(2,), severity=Severity.WAITING,
                    waits_for=(0,))
    found = fr_join(_stacks(findings=(waits,), places={r: IN_STEP for r in range(4)}), _lagging(backend="nccl"))
    assert not _suspects(found)
    und = [f for f in found if f.kind == Kind.UNDECIDED]
    assert len(und) == 1 and und[0].severity == Severity.WARNING
    assert "not blamed: the stacks show rank 2 waiting for rank 0" in und[0].summary


def test_a_rank_whose_stack_is_outside_a_collective_unlike_theirs_is_not_blamed():
    places = {r: IN_ALL_REDUCE for r in (0, 1, 3)}
    places[2] = Place(PlaceKind.OUTSIDE, None, Frame("compute", "train.py", 40))
    found = fr_join(_stacks(places=places), _lagging())
    assert not _suspects(found) and [f.kind for f in found] == [Kind.UNDECIDED]
    assert "not blocked in a collective like theirs" in found[0].summary


def test_a_snapshot_of_a_healthy_gloo_job_with_every_rank_computing_blames_nobody():
    """CI's healthy-midstep: every stack in ``compute``, the flight recorder fetched a moment later
    shows ranks 0, 1, 3 pending in the next all_reduce and rank 2 not yet there. A gloo call does not
    return while it is pending: the records and the stacks are of different moments."""
    computing = Place(PlaceKind.OUTSIDE, None, Frame("compute", "demo/topology.py", 89))
    found = fr_join(_stacks(places={r: computing for r in range(4)}), _lagging())
    assert not _suspects(found) and [f.kind for f in found] == [Kind.UNDECIDED]
    assert "blocked in a gloo collective" in found[0].summary and "ranks {0-1, 3}" in found[0].summary
    assert "different moments" in found[0].summary
    assert _suspects(fr_join(_stacks(places={r: computing for r in range(4)}), _lagging(backend="nccl"))) == {2}


def test_a_rank_behind_with_nothing_pending_while_its_stack_is_in_a_collective_is_a_stale_snapshot():
    found = fr_join(_stacks(), _lagging())  # gloo records a collective when it is called: the two disagree
    assert not _suspects(found) and [f.kind for f in found] == [Kind.UNDECIDED]
    assert "of different moments" in found[0].summary


def test_a_rank_pending_in_a_collective_its_peers_went_past_is_a_stale_snapshot():
    """Rank 2's record, fetched first, still has seq 5 pending; the others', fetched later, are blocked in seq 6."""
    dumps = [_dump(r, _steps(["0"], 5) + [("0", 6, False)]) for r in (0, 1, 3)]
    dumps.append(_dump(2, _steps(["0"], 4) + [("0", 5, False)]))
    found = fr_join(_stacks(places={r: IN_STEP for r in range(4)}), dumps)
    assert not _suspects(found) and "went past it" in found[-1].summary


def test_a_rank_that_moved_between_samples_is_not_blamed():
    a = _stacks(places={r: IN_STEP for r in range(4)}, progressing=(2,))
    assert not _suspects(fr_join(a, _lagging()))


def test_the_flight_recorder_confirms_the_stack_suspect():
    sus = Finding(Kind.OUTSIDE_COLLECTIVE, "rank 2 is outside any collective", ranks=(2,))
    found = fr_join(_stacks(findings=(sus,)), _lagging())
    assert _suspects(found) == {2} and found[0] is sus
    assert [f.kind for f in found[1:]] == [Kind.FR_AGREES]


def test_the_flight_recorder_confirms_a_stack_suspect_that_its_rank_behind_waits_for():
    sus = Finding(Kind.OUTSIDE_COLLECTIVE, "rank 3 never set its key", ranks=(3,))
    waits = Finding(Kind.WAITING, "rank 2 waits on the store for rank 3", ranks=(2,), severity=Severity.WAITING,
                    waits_for=(3,))
    found = fr_join(_stacks(findings=(sus, waits)), _lagging())
    assert _suspects(found) == {3} and found[-1].kind == Kind.FR_AGREES


def test_a_contradiction_is_undecided_and_blames_nobody():
    sus = Finding(Kind.DIFFERENT_COLLECTIVE, "rank 0 is in another collective", ranks=(0,))
    found = fr_join(_stacks(findings=(sus,)), _lagging())
    assert not _suspects(found)
    assert found[0].severity == Severity.WARNING and found[0].summary.startswith("contradicted by the flight recorder")
    assert found[-1].kind == Kind.UNDECIDED and "the stacks name rank 0, but the flight recorder names rank 2" in found[-1].summary


def test_without_stacks_the_flight_recorder_decides_alone():
    found = fr_join(None, _swap())
    assert _suspects(found) == {3} and "no stack was read for it" in found[0].summary


def test_joined_analysis_remakes_the_headline():
    a = joined_analysis(_stacks(), _swap())
    assert a.headline.startswith("suspect rank 3: rank 3 called the collectives of pg 2 and pg 1 in another order")


def test_the_flight_recorders_own_lagging_finding_of_the_waiting_ranks_is_waiting():
    dumps = _swap()
    findings, _, _ = analyze(dumps)
    lag = {f.ranks: f for f in findings if f.kind == Kind.FR_MISSING_RANK}
    assert lag[(0, 1, 2)].severity == Severity.SUSPECT  # group 2 alone: "the stragglers are the many"
    settled = {f.ranks: f for f in settle_lagging(findings, fr_waits(dumps)) if f.kind == Kind.FR_MISSING_RANK}
    assert settled[(3,)].severity == Severity.SUSPECT
    assert settled[(0, 1, 2)].severity == Severity.WAITING and settled[(0, 1, 2)].waits_for == (3,)
    assert settle_lagging(analyze(_lagging())[0], fr_waits(_lagging())) == tuple(analyze(_lagging())[0])


def test_h200_healthy_nccl_dump_names_nobody():
    d = load_dump(str(H200 / "nccl_1rank_ok" / "fr_rank_0"))
    w = fr_waits([d])
    assert w.blocked == {} and fr_blame(w).how == "" and fr_join(None, [d]) == ()


def test_h200_watchdog_timeout_single_rank_is_blocked_but_waits_for_nobody():
    d = load_dump(str(H200 / "watchdog_timeout_behind_kernel" / "fr_rank_0"))
    w = fr_waits([d])
    assert {r: b.seq for r, b in w.blocked.items()} == {0: 6} and w.waits_for == {0: ()}
    assert fr_blame(w).how == "" and fr_join(None, [d]) == ()  # its GPU: analysis' gpu-blocked, not a peer


def test_h200_dump_copied_to_four_ranks_one_cut_short_names_that_rank():
    d = load_dump(str(H200 / "nccl_1rank_ok" / "fr_rank_0"))
    top = max(e.collective_seq_id or 0 for e in d.entries)
    pending = tuple(e if e.collective_seq_id != top else
                    FrEntry(**{**{k: getattr(e, k) for k in FrEntry.__slots__}, "state": "scheduled"})
                    for e in d.entries)
    cfg = {"0": ("default_pg", (0, 1, 2, 3))}  # the real file's group, widened to four ranks
    others = [FrDump(f"fr_rank_{r}", r, d.fmt, d.version, cfg, {}, pending) for r in (0, 1, 3)]
    short = FrDump("fr_rank_2", 2, d.fmt, d.version, cfg, {},
                   tuple(e for e in d.entries if (e.collective_seq_id or 0) < top))
    blame = fr_blame(fr_waits(others + [short]))
    assert (blame.how, blame.ranks, blame.others) == ("behind", (2,), (0, 1, 3))


def test_a_job_whose_every_rank_moved_is_not_judged_by_its_flight_recorder():
    a = _stacks(places={r: IN_STEP for r in range(4)}, progressing=(0, 1, 2, 3))
    assert fr_join(a, _lagging()) == ()
    own = tuple(analyze(_lagging())[0])
    assert any(f.severity == Severity.SUSPECT for f in own)
    settled = settle_fr_source(own, a)
    assert not any(f.severity == Severity.SUSPECT and f.kind in (Kind.FR_MISSING_RANK, Kind.FR_STUCK) for f in settled)
    assert settle_fr_source(own, _stacks()) == own
