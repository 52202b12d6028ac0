"""The test SLURM cluster (tests/infra/slurm.py) really works: 2 emulated nodes, real hung jobs.

Skipped (with the reason) where munge/SLURM cannot run. Runtime: ~20 s.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from infra.slurm import (
    MARKER_VAR,
    LocalSlurm,
    srun_job_script,
    torchrun_job_script,
    wait_ready,
)

psutil = pytest.importorskip("psutil")


LAUNCHERS = {"srun": srun_job_script, "torchrun": torchrun_job_script}


@pytest.fixture(scope="module")
def hung_jobs(cluster, tmp_path_factory):
    """Both launchers' hung gloo jobs, submitted together (they start in parallel): {launcher:
    (jobid, ready_dir)}."""
    pytest.importorskip("torch")
    jobs = {}
    try:
        for name, build in LAUNCHERS.items():
            ready = tmp_path_factory.mktemp(f"ready-{name}")
            jobs[name] = (cluster.sbatch(build(ready)), ready)
        yield jobs
    finally:
        for jobid, _ in jobs.values():
            cluster.run(["scancel", str(jobid)])


def _procs_with_env(**want: str) -> list[tuple[psutil.Process, dict[str, str], list[str]]]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if all(env.get(k) == v for k, v in want.items()):
            out.append((p, env, p.info["cmdline"] or []))
    return out


def _rank_procs(jobid: int):
    """The job's rank processes: python running job.py with RANK set (not the torchrun agent)."""
    return [
        (p, env) for p, env, cmd in _procs_with_env(SLURM_JOB_ID=str(jobid))
        if "RANK" in env and any(a.endswith("job.py") for a in cmd)
        and "torch.distributed.run" not in cmd
    ]


def _wait_gone(pred, timeout: float = 20) -> list:
    """Poll ``pred()`` (a list of what is still there) until it is empty; what is left."""
    deadline = time.monotonic() + timeout
    while (left := pred()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _wait_for(pred, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while not (got := pred()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_nodes_idle(cluster):
    assert cluster.start_seconds < 15
    res = cluster.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=True)
    states = dict(line.split() for line in res.stdout.splitlines())
    assert states == {"node1": "idle", "node2": "idle"}
    assert cluster.node_addr("node1") == cluster.node_addr("node2") == "127.0.0.1"


def test_srun_spans_both_nodes(cluster):
    res = cluster.run(["srun", "-N", "2", "--ntasks-per-node=1", "bash", "-c",
                       'echo "$SLURM_PROCID $SLURMD_NODENAME $SLURM_NODEID"'], check=True, timeout=60)
    lines = sorted(res.stdout.split("\n")[:-1])
    assert lines == ["0 node1 0", "1 node2 1"], res.stdout + res.stderr


@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_real_hung_job_on_two_nodes(cluster, hung_jobs, launcher):
    jobid, ready = hung_jobs[launcher]
    wait_ready(ready, 4, timeout=120, cluster=cluster, jobid=jobid)
    assert cluster.job_state(jobid) == "RUNNING"

    ranks = _rank_procs(jobid)
    by_rank = {int(env["RANK"]): env for _, env in ranks}
    assert sorted(by_rank) == [0, 1, 2, 3], [(p.pid, env.get("RANK")) for p, env in ranks]
    assert [by_rank[r]["SLURMD_NODENAME"] for r in range(4)] == ["node1", "node1", "node2", "node2"]
    for r, env in by_rank.items():
        assert env["WORLD_SIZE"] == "4"
        assert env["LOCAL_RANK"] == str(r % 2)
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["GLOO_SOCKET_IFNAME"] == "lo"
        assert env["SLURM_CONF"] == str(cluster.conf_path)
    assert len({env["MASTER_PORT"] for env in by_rank.values()}) == 1
    # Still hung (not exited) a moment later: the last rank broadcasts, the others all_reduce.
    time.sleep(0.5)
    assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p, _ in ranks)

    cluster.scancel(jobid)
    left = _wait_gone(lambda: _procs_with_env(SLURM_JOB_ID=str(jobid)))
    assert not left, [(p.pid, cmd) for p, _, cmd in left]


def test_two_clusters_at_once(cluster, tmp_path):
    with LocalSlurm(nodes=1) as other:
        assert other.ctld_port != cluster.ctld_port
        assert not set(other.node_ports.values()) & set(cluster.node_ports.values())
        assert other.munge_socket != cluster.munge_socket
        assert other.node_states() == {"node1": "idle"}

        out = tmp_path / "hello.out"
        jobid = other.sbatch("#!/bin/bash\necho hello from $SLURMD_NODENAME\n", "-o", str(out))
        other.wait_state(jobid, "COMPLETED", timeout=30)
        assert out.read_text().strip() == "hello from node1"
        assert jobid not in cluster.job_ids()

        # A job still running when the cluster stops is killed with it.
        sleeper = other.sbatch("#!/bin/bash\nsrun sleep 300\n", "-o", str(tmp_path / "s.out"))
        other.wait_state(sleeper, "RUNNING", timeout=30)
        marker = str(other.tmpdir)
        sleeps = _wait_for(lambda: [p for p, _, cmd in _procs_with_env(SLURM_JOB_ID=str(sleeper))
                                    if cmd[:1] in (["sleep"], ["/usr/bin/sleep"])], timeout=15)
        assert sleeps, "the srun step of the sleeper job did not start"
        daemons = other.daemon_pids()
        assert set(daemons) == {"munged", "slurmctld", "slurmd-node1"}

    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in daemons.values())
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in sleeps)
    assert not _procs_with_env(**{MARKER_VAR: marker})
    assert not Path(marker).exists()
    # The first cluster did not notice.
    assert set(cluster.node_states()) == {"node1", "node2"}
    assert not any("*" in st or "down" in st for st in cluster.node_states().values())
    assert os.environ.get("SLURM_CONF") != str(cluster.conf_path)  # nothing leaked globally
