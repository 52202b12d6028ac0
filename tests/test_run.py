"""``hangdbg run``: the debug environment it gives the job (never the user's values overridden), the
automatic stall threshold, the exit status, and the command line on short real commands (a
``python -c`` child: no torch job)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import run_cli, validate

from hangdbg.cli.run_cmd import run_exit_status
from hangdbg.tools.fr_pipe import PIPE_VARS, PREFIX_VARS, dump_prefixes, pipe_path
from hangdbg.watch.auto_stall import BEFORE, FACTOR, FLOOR, AutoStall
from hangdbg.watch.run_env import debug_env, names_torchrun_logs, wanted
from hangdbg.watch.straggler import StepMark

OUT = Path("/scratch/run1")
TORCHRUN = ["torchrun", "--nproc-per-node", "4", "train.py"]


def test_every_variable_is_set_under_out_when_the_environment_has_none():
    env = debug_env({"PATH": "/bin"}, OUT, TORCHRUN)
    assert env.kept == {} and env.env["PATH"] == "/bin"
    assert env.set["TORCH_FR_BUFFER_SIZE"] == env.set["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    assert env.set["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and env.set["NCCL_RAS_ENABLE"] == "1"
    # the per-rank files: torch appends the rank to the prefix and the stem (fr_pipe reads them back)
    assert dump_prefixes(env.env) == [f"{OUT}/fr/rank_"]
    assert pipe_path(env.env, 3) == f"{OUT}/fr/pipe_3.pipe"
    assert set(PREFIX_VARS) | set(PIPE_VARS) <= set(env.set)
    # NCCL expands %h (host) and %p (pid): one file per process
    assert env.set["NCCL_DEBUG_FILE"] == f"{OUT}/nccl/%h.%p.log"
    assert "NCCL_DEBUG" not in env.set  # never raised unless asked
    assert env.set["HANGDBG_HEARTBEAT_DIR"] == f"{OUT}/heartbeat"
    assert env.set["PET_LOG_DIR"] == f"{OUT}/logs" and env.set["PET_TEE"] == "3"


@pytest.mark.parametrize("name", sorted(wanted(OUT, TORCHRUN, "INFO")))
def test_a_variable_the_user_set_is_never_overridden(name):
    user = {name: "users-own"}
    env = debug_env(user, OUT, TORCHRUN, nccl_debug="INFO")
    assert env.env[name] == "users-own" and name not in env.set and env.kept == {name: "users-own"}


@pytest.mark.parametrize("pair", [("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"), PREFIX_VARS, PIPE_VARS,
                                  ("PET_LOG_DIR", "PET_TEE")])
def test_one_name_of_a_pair_set_by_the_user_keeps_the_other_unset(pair):
    """torch reads the first name set: setting the other could override the user's choice."""
    for mine in pair:
        env = debug_env({mine: "0"}, OUT, TORCHRUN)
        assert not set(pair) & set(env.set)
        assert env.env[mine] == "0"


def test_an_empty_value_counts_as_set():
    env = debug_env({"NCCL_RAS_ENABLE": ""}, OUT, TORCHRUN)
    assert env.env["NCCL_RAS_ENABLE"] == "" and "NCCL_RAS_ENABLE" not in env.set


def test_nccl_debug_only_when_asked_and_never_over_the_users():
    assert debug_env({}, OUT, TORCHRUN, nccl_debug="WARN").set["NCCL_DEBUG"] == "WARN"
    assert debug_env({"NCCL_DEBUG": "INFO"}, OUT, TORCHRUN, nccl_debug="WARN").env["NCCL_DEBUG"] == "INFO"


@pytest.mark.parametrize("argv", [["torchrun", "--log-dir", "/x", "t.py"], ["torchrun", "--log_dir=/x", "t.py"],
                                  ["torchrun", "--tee", "3", "t.py"], ["torchrun", "-t", "1", "t.py"],
                                  ["torchrun", "-r3", "t.py"], ["torchrun", "--redirects=0:1", "t.py"]])
def test_torchruns_own_log_options_leave_pet_unset(argv):
    assert names_torchrun_logs(argv)
    env = debug_env({}, OUT, argv)
    assert "PET_LOG_DIR" not in env.set and "PET_TEE" not in env.set


def test_a_plain_command_does_not_name_torchrun_logs():
    assert not names_torchrun_logs(["srun", "-N", "2", "python", "train.py", "--lr", "3"])


def test_the_heartbeat_directory_given_is_used():
    assert debug_env({}, OUT, TORCHRUN, heartbeat="/shared/beats").set["HANGDBG_HEARTBEAT_DIR"] == "/shared/beats"


def _marks(*arrive: float) -> list[StepMark]:
    return [StepMark(i, t) for i, t in enumerate(arrive)]


def test_auto_stall_waits_for_a_step_time():
    auto = AutoStall()
    assert auto.update({}) == BEFORE
    assert auto.update({0: _marks(100.0)}) == BEFORE  # one step: no interval yet


def test_auto_stall_is_the_floor_for_fast_steps_and_grows_with_slow_ones():
    auto = AutoStall()
    assert auto.update({0: _marks(0.0, 0.01, 0.02), 1: _marks(0.0, 0.02)}) == FLOOR
    assert auto.update({1: _marks(10.0, 20.0)}) == FACTOR * 10.0
    assert auto.longest == 10.0


def test_auto_stall_never_shrinks_once_a_long_interval_was_seen():
    auto = AutoStall()
    auto.update({0: _marks(0.0, 60.0)})  # a checkpoint pause
    assert auto.update({0: _marks(61.0, 62.0, 63.0)}) == FACTOR * 60.0


def test_auto_stall_starts_from_the_given_threshold():
    assert AutoStall(before=120.0).update({}) == 120.0


@pytest.mark.parametrize("found, code, want", [(False, 0, 0), (True, 0, 3), (False, 5, 5), (True, 5, 3),
                                               (False, -9, 137), (False, -15, 143)])
def test_run_exit_status(found, code, want):
    assert run_exit_status(found, code) == want


@pytest.mark.parametrize("args", [(), ("--",), ("-o", "x", "--")])
def test_run_without_a_command_is_a_usage_error(args, tmp_path):
    res = run_cli("run", *args)
    assert res.returncode == 2 and "run what?" in res.stderr
    assert "Traceback" not in res.stderr


def test_then_requeue_needs_a_slurm_job(tmp_path):
    res = run_cli("run", "-o", tmp_path / "o", "--then", "requeue", "--", sys.executable, "-c", "pass")
    assert res.returncode == 2 and "--jobid" in res.stderr
    assert not (tmp_path / "o" / "report.json").exists()  # refused before the job started


def test_a_failing_command_gives_its_status_and_a_report(tmp_path):
    out = tmp_path / "o"
    res = run_cli("run", "-o", out, "--", sys.executable, "-c", "import sys; sys.exit(5)", timeout=60)
    assert res.returncode == 5, res.stderr
    assert "exited with status 5" in res.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["command"] == "report" and not doc["found"]
    assert json.loads((out / ".hangdbg-run.json").read_text())["command"] == "run"


def test_a_command_that_succeeds_exits_0_and_sees_the_users_values(tmp_path):
    out = tmp_path / "o"
    code = ("import os; print(os.environ['TORCH_FR_BUFFER_SIZE'], os.environ['NCCL_DEBUG_FILE'], "
            "os.environ.get('TORCH_NCCL_TRACE_BUFFER_SIZE'))")
    res = run_cli("run", "-o", out, "--", sys.executable, "-c", code, timeout=60,
                  env=dict(__import__("os").environ, TORCH_FR_BUFFER_SIZE="7"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == f"7 {out.resolve()}/nccl/%h.%p.log None"
    assert (out / "report.json").exists() and (out / "watch.json").exists()
    assert all((out / d).is_dir() for d in ("fr", "nccl", "heartbeat", "logs"))


def test_a_command_that_cannot_start_is_a_tool_error(tmp_path):
    res = run_cli("run", "-o", tmp_path / "o", "--", str(tmp_path / "no-such-program"), timeout=60)
    assert res.returncode == 1 and "cannot run" in res.stderr and "Traceback" not in res.stderr


def test_json_prints_the_report_document_only_and_the_jobs_output_goes_to_stderr(tmp_path):
    out = tmp_path / "o"
    res = run_cli("run", "--json", "-o", out, "--", sys.executable, "-c", "print('job says hello')", timeout=60)
    doc = validate(json.loads(res.stdout))  # the whole stdout is the document
    assert res.returncode == 0 and doc["command"] == "report" and not doc["found"]
    assert "job says hello" in res.stderr
    marker = json.loads((out / ".hangdbg-run.json").read_text())
    assert marker["argv"][0] == "run" and "--pid" not in marker["argv"]
    assert marker["argv"][marker["argv"].index("--") + 1:] == [sys.executable, "-c", "print('job says hello')"]


def test_runs_own_files_are_not_evidence(tmp_path):
    """``report`` over a ``run`` folder skips the heartbeats and the debug server's raw FR reply
    (its JSON twin under fr/ is read) instead of listing them as unrecognised."""
    from hangdbg.evidence.walk import NO_READER, classify

    (tmp_path / "heartbeat").mkdir()
    hb = tmp_path / "heartbeat" / "heartbeat.rank3"
    hb.write_text("1795894886.960 12 4242\n")
    (tmp_path / "debug_server").mkdir()
    raw_fr = tmp_path / "debug_server" / "rank-0003.fr_trace_json.txt"
    raw_fr.write_text('{"entries": []}\n')
    for p in (hb, raw_fr):
        got = classify(str(p))
        assert got.kinds == () and got.reason != NO_READER and "own output" in got.reason


def test_what_the_job_leaves_in_its_process_group_is_killed_when_it_ends(tmp_path, leftovers):
    """The command forks a child that outlives it (a rank's daemon child orphaned when the rank
    died: torch's debug-server frontend): run kills it when the command ends, and says so."""
    out = tmp_path / "o"
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
            "sys.exit(0)")
    res = run_cli("run", "-o", out, "--", sys.executable, "-c", code, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "killed 1 process(es) the job left in its process group" in res.stderr, res.stderr
    leftovers.assert_none(grace=1)
