"""`watch --jobid ID --then requeue --exclude-suspects` on a real hung job of the local SLURM cluster
(2 nodes x 2 ranks, the culprit rank 3 on node2): the job is requeued with node2 in its ExcNodeList."""

from __future__ import annotations

import hostlist
import pytest

from conftest import run_json
from infra.check_faults import node_python
from infra.slurm import srun_job_script, wait_ready

pytest.importorskip("torch")


def test_requeue_leaves_the_suspects_node_out(cluster, tmp_path):
    ready = tmp_path / "ready"
    job = cluster.sbatch(srun_job_script(ready, "mismatch"), "--requeue")
    wait_ready(ready, 4, timeout=60, cluster=cluster, jobid=job)
    rc, doc = run_json("watch", "--jobid", str(job), "--stall", "2", "--interval", "1", "--once", "--then", "requeue",
                       "--exclude-suspects", "-o", tmp_path / "o", env=cluster.env, timeout=120)
    assert rc == 3, doc["headline"]
    [stall] = doc["stalls"]
    assert stall["suspects"] == [3]
    assert "excluded node2" in stall["then"] and "exited 0" in stall["then"], stall["then"]
    info = cluster.job_info(job)
    assert info is not None
    # node2 (rank 3's node) is left out, node1 (ranks that only wait) is not
    assert sorted(hostlist.expand_hostlist(info["ExcNodeList"])) == ["node2"], info
    assert int(info["Restarts"]) >= 1 and info["JobState"] in ("PENDING", "REQUEUED", "CONFIGURING", "COMPLETING"), info


def test_check_exclude_bad_requeues_the_allocation_without_the_bad_node(cluster, tmp_path):
    """node2's ranks fail their interface step (GLOO_SOCKET_IFNAME=bogus0): check names node2, and
    --exclude-bad puts it in the running job's ExcNodeList (through a held requeue, as SLURM requires)."""
    job = cluster.sbatch("#!/bin/sh\nsleep 900\n", "-N", "2", "--ntasks-per-node=1", "--output=/dev/null", "--requeue")
    cluster.wait_state(job, "RUNNING", timeout=60)
    wrapper = node_python(tmp_path / "python", "node2", env={"GLOO_SOCKET_IFNAME": "bogus0"})
    rc, doc = run_json("check", "--jobid", str(job), "--nproc-per-node", "1", "--timeout", "5", "--init-timeout", "15",
                       "--size", "1M", "--iters", "2", "--no-health", "--remote-python", wrapper, "--exclude-bad",
                       "-o", tmp_path / "o", env=cluster.env, timeout=150)
    assert rc == 3 and doc["bad_nodes"] == ["node2"], doc["headline"]
    info = cluster.job_info(job)
    assert info is not None and hostlist.expand_hostlist(info["ExcNodeList"]) == ["node2"], info
    assert int(info["Restarts"]) >= 1, info
