"""Flight recorder: a collective ``scheduled`` and never ``started`` on one rank points at that rank's GPU
(its stream has not reached the collective), from the real H200 dump of
tests/fixtures/gpu_h200/watchdog_timeout_behind_kernel (rank 0's all_reduce seq 6 queued behind a
kernel that never ends) and 4-rank variants of it whose peers started or completed seq 6."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
from conftest import main_json

from hangdbg.evidence.flight_recorder.reader import READER
from hangdbg.model import Kind, Severity

H200 = Path(__file__).parent / "fixtures" / "gpu_h200" / "watchdog_timeout_behind_kernel"


def _real() -> dict:
    return pickle.loads((H200 / "fr_rank_0").read_bytes())


def _as_rank(doc: dict, world: int, state: str, timing: bool = True) -> dict:
    """The real dump as one rank of a ``world``-rank group whose seq 6 is in ``state``; with
    ``timing`` (TORCH_NCCL_ENABLE_TIMING=1) the watchdog records starts: ``pg_status`` has the last
    started collective (the recorded dump, timing off, keeps -1)."""
    d = copy.deepcopy(doc)
    d["pg_config"]["0"]["ranks"] = str(list(range(world)))
    last = d["entries"][-1]
    assert last["collective_seq_id"] == 6 and last["state"] == "scheduled"  # as recorded
    last["state"] = state
    last["time_discovered_started_ns"] = None if state == "scheduled" else last["time_created_ns"] + 1000
    last["time_discovered_completed_ns"] = last["time_created_ns"] + 2000 if state == "completed" else None
    last["retired"] = state == "completed"
    st = d["pg_status"]["0"]
    if timing:
        st["last_started_collective"] = 6 if state != "scheduled" else 5
    st["last_completed_collective"] = 6 if state == "completed" else 5
    return d


def _read(tmp_path: Path, states: dict[int, str], timing: bool = True):
    doc = _real()
    for r, state in states.items():
        (tmp_path / f"fr_rank_{r}").write_bytes(pickle.dumps(_as_rank(doc, len(states), state, timing)))
    return READER.read(sorted(str(p) for p in tmp_path.iterdir()))


def _blocked(rep) -> list:
    return [f for f in rep.findings if f.kind is Kind.GPU_BLOCKED]


def test_the_recorded_single_rank_dump_points_at_its_gpu():
    rc, doc = main_json("fr", str(H200 / "fr_rank_0"))
    (f,) = [f for f in doc["findings"] if f["kind"] == "gpu-blocked"]
    assert f["severity"] == "suspect" and f["ranks"] == [0]
    # the dump records no starts (pg_status last_started_collective -1, timing off): "scheduled" only says
    # that seq 6 did not complete; alone in its group, the rank's own stream is what does not end
    assert "rank 0's GPU has not finished it (scheduled; this dump records no start events" in f["summary"]
    assert "its last completed collective is seq 5" in f["summary"] and "no peer is involved" in f["summary"]
    assert "never started" not in f["summary"]
    assert "py-spy dump --native" in f["action"] and "cuda-gdb" in f["action"]
    assert "TORCH_NCCL_ENABLE_TIMING=1" in f["action"]


@pytest.mark.parametrize("peer_state", ["started", "completed"])
def test_one_rank_scheduled_while_its_peers_started_it_is_the_suspect(tmp_path, peer_state):
    rep = _read(tmp_path, {0: peer_state, 1: "scheduled", 2: peer_state, 3: peer_state})
    (f,) = _blocked(rep)
    assert f.severity is Severity.SUSPECT and f.ranks == (1,)
    assert "rank 1 never started it on the GPU (scheduled) while ranks {0, 2-3} started it" in f.summary
    assert "earlier work on its own CUDA stream blocks it (its last completed collective is seq 5" in f.summary
    # the ranks that started it only wait: never suspects
    assert {r for g in rep.findings if g.severity is Severity.SUSPECT for r in g.ranks} == {1}


def test_every_rank_scheduled_is_no_single_suspect(tmp_path):
    rep = _read(tmp_path, {r: "scheduled" for r in range(4)})
    (f,) = _blocked(rep)
    assert f.severity is Severity.WARNING and "undecided" in f.summary
    assert not [g for g in rep.findings if g.severity is Severity.SUSPECT]


@pytest.mark.parametrize("others", ["completed", "scheduled"])
def test_without_start_events_scheduled_names_no_gpu_in_a_group_of_several(tmp_path, others):
    """Timing off (as recorded): every entry is ``scheduled`` until it completes, so a rank's
    ``scheduled`` does not say its GPU never started it."""
    rep = _read(tmp_path, {0: others, 1: "scheduled", 2: others, 3: others}, timing=False)
    assert not _blocked(rep)
    (stuck,) = [f for f in rep.findings if f.kind is Kind.FR_STUCK]
    assert stuck.severity is Severity.WARNING and "seq 6" in stuck.summary


def test_a_rank_stuck_earlier_is_not_blamed_for_the_later_scheduled_entry(tmp_path):
    """Rank 1 never completed seq 5 (started): seq 6 queued behind it is a consequence, not a GPU
    busy with work of its own."""
    doc = _real()
    for r in range(4):
        d = _as_rank(doc, 4, "scheduled" if r == 1 else "completed")
        if r == 1:
            prev = d["entries"][-2]
            assert prev["collective_seq_id"] == 5
            prev.update(state="started", time_discovered_completed_ns=None, retired=False)
            d["pg_status"]["0"].update(last_started_collective=5, last_completed_collective=4)
        (tmp_path / f"fr_rank_{r}").write_bytes(pickle.dumps(d))
    rep = READER.read(sorted(str(p) for p in tmp_path.iterdir()))
    assert not _blocked(rep)
    stuck = [f for f in rep.findings if f.kind is Kind.FR_STUCK]
    assert stuck and "seq 5" in stuck[0].summary and stuck[0].ranks == (1,)
