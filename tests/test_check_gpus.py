"""`hangdbg check` on GPU nodes: the ranks must fit the visible GPUs, one backend per run, and a
node is blamed only when it fails with a set-up that passes elsewhere (issue 27).

The recorded run (tests/fixtures/gpu_h200/check_2ranks_1gpu, `hangdbg check --nproc-per-node 2`
on one H200 by hangdbg 0.2.0) is read back from its messages.jsonl: that version blamed the node.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from hangdbg.check.bisection import Isolation
from hangdbg.check.blame import Trial, check_node, rank_result
from hangdbg.check.gpus import gpu_fit, resolve_backend, uuid_of, visible_gpus
from hangdbg.check.mismatch import mismatch
from hangdbg.check.run import read_trial
from hangdbg.check.verdict import check_verdict
from hangdbg.enums import NodeStatus
from hangdbg.model import Severity

H200 = Path(__file__).resolve().parent / "fixtures" / "gpu_h200" / "check_2ranks_1gpu"
SMI_L = (Path(__file__).resolve().parent / "fixtures" / "gpu_failures_h200" / "nvidia-smi-L.txt").read_text().strip()
EIGHT = [f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i}aaa{i}bbb-0000-1111-2222-33334444555{i})" for i in range(8)]


# --- CUDA_VISIBLE_DEVICES -------------------------------------------------------------------------

def test_visible_gpus_follow_cudas_rules():
    assert visible_gpus(EIGHT, None) == EIGHT
    assert visible_gpus(EIGHT, "") == []  # an empty list hides every GPU
    assert visible_gpus(EIGHT, "-1") == []
    assert visible_gpus(EIGHT, "3,1") == [EIGHT[3], EIGHT[1]]  # the order given is CUDA's device order
    assert visible_gpus(EIGHT, "0,9,1") == [EIGHT[0]]  # the list ends at the first invalid entry
    assert visible_gpus(EIGHT, "2,2") == [EIGHT[2]]  # a repeat is invalid
    assert visible_gpus(EIGHT, "GPU-5aaa5bbb") == [EIGHT[5]]  # a unique UUID prefix
    assert visible_gpus(EIGHT, "GPU-") == []  # ambiguous
    assert visible_gpus([SMI_L], "0") == [SMI_L] and visible_gpus([SMI_L], "1") == []
    # in a SLURM job with cgroup-constrained devices nvidia-smi lists the job's GPUs only, renumbered from 0,
    # while the variable may keep the node's numbers: as many GPUs as entries, not an invalid list
    assert visible_gpus(EIGHT[:2], "4,5", in_job=True) == EIGHT[:2]
    assert visible_gpus(EIGHT[:2], "4,5,6", in_job=True) == []  # more entries than GPUs listed: CUDA's rule
    assert visible_gpus(EIGHT[:2], "4,5") == []
    assert uuid_of(SMI_L) == "GPU-0fe54f32-310f-ce28-ad19-5483b6c92573"


def test_the_backend_is_resolved_once_and_nccl_needs_a_gpu_per_rank():
    assert resolve_backend("auto", 1) == "nccl" and resolve_backend("auto", 0) == "gloo"
    assert resolve_backend("gloo", 8) == "gloo"
    assert gpu_fit("nccl", [0], 1, 1, None) is None
    assert gpu_fit("gloo", [0, 1, 2], 0, 0, None) is None
    fit = gpu_fit("nccl", [0, 1], 1, 1, None)
    assert fit is not None and not fit.hidden
    assert fit.message("vm") == "2 ranks with nccl need 2 GPUs (one each), and vm shows its ranks 1 GPU"
    assert "--nproc-per-node 1" in fit.remedy() and "--backend gloo" in fit.remedy()
    hidden = gpu_fit("nccl", range(8), 8, 2, "0,1")
    assert hidden is not None and hidden.hidden and "hides 6 of the 8" in hidden.message("n1")
    assert "unset CUDA_VISIBLE_DEVICES" in hidden.remedy()
    assert gpu_fit("nccl", [3], 4, 4, None) is None  # bisection: one rank on GPU 3
    assert gpu_fit("nccl", [3], 2, 2, None) is not None  # GPU 3 does not exist


# --- the recorded H200 run ------------------------------------------------------------------------

def test_recorded_h200_run_is_a_set_up_error_not_a_bad_node():
    """hangdbg 0.2.0 let each rank choose its backend: rank 0 nccl on cuda:0, rank 1 gloo on the
    CPU (CUDA_VISIBLE_DEVICES=1 on a one-GPU node); both timed out at init and the node was
    blamed ("vm fails the check by itself"). Read back, the run is a set-up error."""
    trials = [read_trial((H200 / "trials" / d / "messages.jsonl").read_text().splitlines())
              for d in sorted(os.listdir(H200 / "trials"))]
    first = trials[0]
    assert [(r.rank, r.backend, r.device) for r in first.ranks] == [(0, "nccl", "cuda:0"), (1, "gloo", "cpu")]
    mm = mismatch(first)
    assert mm is not None and mm.everywhere and not mm.lost
    assert "different backends" in mm.summary and "rank 1 saw no GPU" in mm.summary
    v = check_verdict(trials, trials[1], None, {}, "auto")
    assert v.bad_nodes == () and v.bad_gpus == () and v.exclude is None
    assert not any(f.severity is Severity.SUSPECT for f in v.findings)
    assert v.headline.startswith("set-up error, no node is at fault")
    assert "drain" not in json.dumps([f.action for f in v.findings])
    old = json.loads((H200 / "check.json").read_text())
    assert old["bad_nodes"] == ["vm"]  # what 0.2.0 said: the record of the defect


# --- nodes that differ ------------------------------------------------------------------------------

def _node(host: str, status: str, gpus: int, visible: int, backend: str | None, cvd: str | None = None,
          error: str | None = None) -> dict:
    return {"host": host, "status": status, "facts": {
        "hostname": host, "gpus": EIGHT[:gpus], "visible_gpus": visible, "backend": backend, "CUDA_VISIBLE_DEVICES": cvd,
        "setup_error": error, "setup_remedy": "run at most N rank(s) per node" if error else None}}


def _trial(nodes: list[dict], per_node: int = 8) -> Trial:
    layout = tuple((n["host"], tuple(range(per_node))) for n in nodes)
    ranks, out, base = [], [], 0
    for n in nodes:
        for local in range(per_node):
            if n["status"] != "setup":
                steps = [{"step": "facts", "ok": True, "seconds": 1.0, "backend": n["facts"]["backend"], "device": "cuda:0"},
                         {"step": "init", "ok": False, "seconds": 30.0, "timeout": True, "error": "wait timeout"}]
                ranks.append(rank_result(base + local, n["host"], local, local, steps, {"state": "exited", "exit": 1}))
            else:
                ranks.append(rank_result(base + local, n["host"], local, local, [], None))
        base += per_node
        out.append(check_node(n["host"], tuple(range(per_node)), n["facts"], NodeStatus(n["status"]), None, "auto"))
    return Trial(1, "all", layout, None, "127.0.0.1:29500", tuple(out), tuple(ranks), 30.0)


def test_every_node_unfit_is_a_launch_error():
    t = _trial([_node(f"n{i}", "setup", 4, 4, "nccl", error="8 ranks with nccl need 8 GPUs") for i in range(3)])
    mm = mismatch(t)
    assert mm is not None and mm.everywhere and "8 ranks with nccl need 8 GPUs" in mm.summary
    v = check_verdict([t], None, None, {}, "auto")
    assert v.bad_nodes == () and v.exclude is None and all(f.severity is not Severity.SUSPECT for f in v.findings)


def test_a_node_that_lost_a_gpu_is_left_out():
    t = _trial([_node("n1", "failed", 8, 8, "nccl"), _node("n2", "setup", 7, 7, "nccl", error="8 ranks need 8 GPUs"),
                _node("n3", "failed", 8, 8, "nccl")])
    mm = mismatch(t)
    assert mm is not None and not mm.everywhere and mm.lost == ("n2",) and mm.others == 8
    v = check_verdict([t], None, None, {}, "auto")
    assert v.bad_nodes == ("n2",) and v.exclude == "n2"
    [f] = v.findings
    assert f.severity is Severity.SUSPECT and f.hosts == ("n2",) and "n2: 7; the others 8" in f.summary
    assert f.ranks == ()  # the ranks of n1 and n3 only waited: none is named


def test_a_node_whose_environment_hides_gpus_is_fixed_not_drained():
    t = _trial([_node("n1", "failed", 8, 8, "nccl"), _node("n2", "setup", 8, 2, "nccl", cvd="0,1",
                                                          error="8 ranks with nccl need 8 GPUs (one each), and n2 shows "
                                                                "its ranks 2 GPUs (CUDA_VISIBLE_DEVICES='0,1' hides 6 of "
                                                                "the 8 that nvidia-smi lists)")])
    v = check_verdict([t], None, None, {}, "auto")
    assert v.bad_nodes == () and v.exclude is None
    [f] = v.findings
    assert f.hosts == ("n2",) and "unset CUDA_VISIBLE_DEVICES on n2" in f.action and "drain" not in f.action


def test_a_gpu_less_node_among_gpu_nodes_is_named_and_a_gpu_less_majority_is_not():
    t = _trial([_node("n1", "failed", 8, 8, "nccl"), _node("n2", "failed", 8, 8, "nccl"), _node("n3", "failed", 0, 0, "gloo")])
    mm = mismatch(t)
    assert mm is not None and mm.lost == ("n3",)
    t2 = _trial([_node("n1", "failed", 8, 8, "nccl"), _node("n2", "failed", 0, 0, "gloo"), _node("n3", "failed", 0, 0, "gloo")])
    mm2 = mismatch(t2)
    assert mm2 is not None and mm2.everywhere and not mm2.lost


# --- blame only where the same set-up passes elsewhere ------------------------------------------------

def _one_node_trial(slots: tuple[int, ...], passed: bool, host: str = "vm", number: int = 1) -> Trial:
    steps_ok = [{"step": s, "ok": True, "seconds": 0.1, "backend": "gloo", "device": "cpu"} for s in
                ("facts", "alloc", "interface", "rendezvous", "init", "barrier", "all_reduce", "all_gather", "broadcast",
                 "send_recv", "bandwidth")]
    steps_bad = steps_ok[:4] + [{"step": "init", "ok": False, "seconds": 30, "timeout": True, "error": "wait timeout"}]
    ranks = tuple(rank_result(i, host, s, i, steps_ok if passed else steps_bad, {"state": "exited", "exit": 0 if passed else 1})
                  for i, s in enumerate(slots))
    node = check_node(host, slots, {"hostname": host, "backend": "gloo"}, NodeStatus.OK if passed else NodeStatus.RANK_FAILED,
                      None, "gloo")
    return Trial(number, "all", ((host, slots),), None, "127.0.0.1:1", (node,), ranks, 1.0)


def test_gpus_that_pass_alone_and_fail_together_blame_no_node():
    first = _one_node_trial((0, 1), False)
    halves = [_one_node_trial((0,), True, number=2), _one_node_trial((1,), True, number=3)]
    iso: Isolation[int] = Isolation(together=[(0, 1)], runs=[((0,), True), ((1,), True)])
    v = check_verdict([first, *halves], None, None, {"vm": iso}, "gloo")
    assert v.bad_nodes == () and v.bad_gpus == () and v.exclude is None
    assert not any(f.severity is Severity.SUSPECT for f in v.findings)
    assert "pass alone and fail only together" in v.findings[0].summary


def test_a_lone_node_that_fails_with_nothing_to_compare_is_undecided():
    first = _one_node_trial((0,), False)
    v = check_verdict([first], None, None, {}, "gloo")
    assert v.bad_nodes == () and v.exclude is None
    [f] = [f for f in v.findings if f.kind.value == "check-failed"]
    assert f.severity is Severity.WARNING and "undecided" in f.summary and f.hosts == ("vm",)


def test_every_node_failing_alone_blames_none():
    layout = (("n1", (0,)), ("n2", (0,)))
    first = _one_node_trial((0,), False, "n1")
    first = Trial(1, "all", layout, None, "x:1", first.nodes + _one_node_trial((0,), False, "n2").nodes,
                  first.ranks + tuple(rank_result(1, "n2", 0, 0, [], None) for _ in [0]), 1.0)
    iso: Isolation[str] = Isolation(alone=["n1", "n2"], runs=[(("n1",), False), (("n2",), False)])
    v = check_verdict([first], None, iso, {}, "gloo")
    assert v.bad_nodes == () and v.exclude is None


# --- the command line ------------------------------------------------------------------------------

def _fake_smi(bin_dir: Path, lines: list[str]) -> dict[str, str]:
    """An ``nvidia-smi`` that prints ``lines`` for ``-L`` (the real H200's line, recorded): this
    machine has no GPU; the test is of hangdbg's arithmetic, not of the GPU."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"#!{sys.executable}\nimport sys\nprint({chr(10).join(lines)!r})\n")
    exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.mark.real
def test_two_ranks_on_a_one_gpu_node_exit_1_before_any_run(tmp_path):
    """The H200 case, on the command line: `check --nproc-per-node 2` on a node whose
    nvidia-smi lists one GPU exits 1 with the numbers, starts nothing, blames no node."""
    env = _fake_smi(tmp_path / "bin", [SMI_L])
    res = run_cli("check", "--nproc-per-node", "2", "-o", tmp_path / "o", env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert "2 ranks with nccl need 2 GPUs (one each)" in err and "1 GPU" in err
    assert "--nproc-per-node 1" in err and "--backend gloo" in err
    assert "drain" not in res.stdout + err and "exclude" not in res.stdout + err
    assert not (tmp_path / "o").exists()


@pytest.mark.real
def test_a_variable_that_hides_every_gpu_is_refused(tmp_path):
    env = _fake_smi(tmp_path / "bin", EIGHT[:2])
    env["CUDA_VISIBLE_DEVICES"] = ""
    res = run_cli("check", "-o", tmp_path / "o", env=env)
    assert res.returncode == 1
    assert "hides all 2 GPUs" in " ".join(res.stderr.split())


@pytest.mark.real
def test_check_node_refuses_ranks_that_do_not_fit_and_starts_none(tmp_path):
    """The node launcher (what srun/ssh run on every node) checks the fit itself: status
    ``setup``, its facts say why, no rank started."""
    env = _fake_smi(tmp_path / "bin", EIGHT[:4])
    env["CUDA_VISIBLE_DEVICES"] = "0,1"
    res = run_cli("check-node", "--node-name", "n1", "--layout", "n1=0-3", "--master-addr", "127.0.0.1",
                  "--master-port", "1", env=env)
    from hangdbg.transport.wire import FrameDecoder
    dec = FrameDecoder()
    msgs = [m for line in res.stdout.splitlines() for _, m in dec.feed(line)]
    facts = next(m["facts"] for m in msgs if m["type"] == "node")
    assert facts["backend"] == "nccl" and facts["visible_gpus"] == 2 and len(facts["gpus"]) == 4
    assert "4 ranks with nccl need 4 GPUs" in facts["setup_error"] and "hides 2 of the 4" in facts["setup_error"]
    assert [m["status"] for m in msgs if m["type"] == "done"] == ["setup"]
    assert not any(m["type"] in ("step", "rank-end") for m in msgs)
