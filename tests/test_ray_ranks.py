"""Which Ray actors are ranks (hangdbg/collect/ray_ranks.py) and what Ray's answers hold
(hangdbg/transport/ray_state.py), on records shaped as Ray's state API and Train's schema give them
(``ray/util/state/common.py``, ``ray/train/v2/_internal/state/schema.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hangdbg.cli.targets import target_spec
from hangdbg.collect.ray_ranks import ray_ranks
from hangdbg.errors import HangdbgError, NoRanksFound, UsageError
from hangdbg.transport.ray_state import RayActor, RayCluster, parse_train_runs, runtime_env_vars
from hangdbg.transport.targets import TargetSpec

HERE, THERE = "10.0.0.1", "10.0.0.2"


def _actor(i: int, ip: str = HERE, env: dict[str, str] | None = None, pid: int = 0) -> RayActor:
    return RayActor(f"a{i}", "Worker", pid or 10_000_000 + i, f"n-{ip}", ip, env or {})


def test_runtime_env_vars_reads_the_env_vars_of_a_serialized_runtime_env():
    assert runtime_env_vars(json.dumps({"env_vars": {"RANK": "2", "WORLD_SIZE": 4}, "pip": ["x"]})) == \
        {"RANK": "2", "WORLD_SIZE": "4"}
    assert runtime_env_vars(None) == {} and runtime_env_vars("{") == {} and runtime_env_vars('"x"') == {}


def test_runtime_env_ranks_split_by_node_and_actors_without_rank_are_not_ranks():
    actors = [_actor(0, HERE, {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}),
              _actor(1, THERE, {"RANK": "3", "WORLD_SIZE": "4"}),
              _actor(2, HERE, {"RANK": "0", "WORLD_SIZE": "4"}),
              _actor(3, HERE),  # a Ray Train controller, an idle pool worker: no rank anywhere
              _actor(4, THERE, {"RANK": "2", "WORLD_SIZE": "4"})]
    found = ray_ranks(RayCluster(tuple(actors)), mine={HERE})
    assert [(r.rank, r.local_rank, r.world_size, r.rank_source) for r in found.here] == \
        [(0, None, 4, "ray-runtime_env:RANK"), (1, 1, 4, "ray-runtime_env:RANK")]
    assert [r.rank for r in found.elsewhere[THERE]] == [2, 3] and found.elsewhere[THERE][0].host == THERE
    assert found.nodes == [HERE, THERE] and found.actors == 5


def test_train_metadata_wins_over_the_environment():
    doc = {"train_runs": [{"name": "run", "attempts": [{"workers": [
        {"world_rank": r, "local_rank": r, "node_rank": 0, "actor_id": f"a{r}", "node_id": "n", "node_ip": HERE,
         "pid": 10_000_000 + r, "gpu_ids": []} for r in range(3)]}]}]}
    workers = parse_train_runs(doc)
    assert [(w.world_rank, w.world_size) for w in workers] == [(0, 3), (1, 3), (2, 3)]
    actors = [_actor(r, HERE, {"RANK": "9"}) for r in range(3)] + [_actor(7, HERE)]
    found = ray_ranks(RayCluster(tuple(actors), tuple(workers)), mine={HERE})
    assert [(r.rank, r.rank_source) for r in found.here] == [(0, "ray-train"), (1, "ray-train"), (2, "ray-train")]


def test_parse_train_runs_skips_malformed_workers():
    assert parse_train_runs({"train_runs": [{"workers": [{"world_rank": "x", "pid": 1, "actor_id": "a"}]}]}) == []
    assert parse_train_runs([1, "a", None]) == []


def test_start_environment_of_a_local_actor_gives_its_rank():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    with_rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=dict(env, RANK="5", WORLD_SIZE="8"))
    without = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        actors = (_actor(0, HERE, pid=with_rank.pid), _actor(1, HERE, pid=without.pid), _actor(2, THERE, pid=with_rank.pid))
        found = ray_ranks(RayCluster(actors), mine={HERE})
        assert [(r.pid, r.rank, r.world_size, r.rank_source) for r in found.here] == [(with_rank.pid, 5, 8, "ray-environ:RANK")]
        assert not found.elsewhere  # another node's environment is not read here
    finally:
        for p in (with_rank, without):
            p.kill()
            p.wait()


def test_a_cluster_without_ranks_says_no_training_process_found():
    with pytest.raises(NoRanksFound, match="no training process found among the 2 alive actors"):
        ray_ranks(RayCluster((_actor(0), _actor(1))), mine={HERE})


def test_ray_is_one_target_among_others_and_round_trips():
    with pytest.raises(UsageError, match="--jobid and --ray"):
        TargetSpec(jobid="4", ray="127.0.0.1:6379")
    spec = TargetSpec(ray="127.0.0.1:6379")
    assert spec.describe() == "--ray 127.0.0.1:6379" and not spec.remote
    assert spec.to_argv() == ["--ray", "127.0.0.1:6379"] and spec.to_argv(agent=True) == ["--ray", "127.0.0.1:6379"]


def test_check_ray_is_a_clear_usage_error():
    from conftest import run_main

    res = run_main("check", "--ray", "127.0.0.1:6379")
    assert res.returncode == 2
    assert "check --ray is not supported yet" in res.stderr


def test_without_ray_installed_only_ray_fails(monkeypatch):
    from hangdbg.transport import ray_state

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    monkeypatch.setitem(sys.modules, "ray.util", None)
    with pytest.raises(HangdbgError, match="--ray needs the ray package") as info:
        ray_state.read_cluster("127.0.0.1:1")
    assert "pip install" in info.value.help
