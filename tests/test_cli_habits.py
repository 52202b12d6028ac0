"""The command line as people's fingers expect it (issue 30, item 4): py-spy's short flags, srun's
``-w/--nodelist``, remote-only options refused without a remote target, a JSON error under
``--json``, the run marker's argv, ``hangdbg.toml`` defaults, shell completion."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from dataclasses import replace

import pytest

from conftest import run_cli, run_main, validate
from hangdbg.cli import config as config_mod
from hangdbg.cli.config import Applied, apply_config, config_files
from hangdbg.cli.dump_cmd import dump_plan
from hangdbg.cli.main import _all_options, build_parser, wants_json
from hangdbg.cli.targets import target_spec
from hangdbg.errors import UsageError
from hangdbg.report.schema import json_schema


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser(list(argv)).parse_args(list(argv))


def _sub(command: str) -> argparse.ArgumentParser:
    parser = build_parser([command])
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]


# --- short flags, --nodelist -----------------------------------------------------------------------
@pytest.mark.parametrize("command", ["dump", "watch"])
def test_pyspy_short_flags_mean_what_they_mean_in_pyspy(command):
    args = _parse(command, "-p", "12", "13", "-n", "-l")
    assert (args.pid, args.native, args.locals) == ([12, 13], True, True)
    assert _parse(command, "--pid", "12").pid == [12]


def test_nodelist_is_srun_s_name_and_nodes_still_works_with_a_warning(capsys):
    assert _parse("dump", "--jobid", "7", "-w", "n[1-2]").nodes == "n[1-2]"
    assert _parse("dump", "--jobid", "7", "--nodelist", "n1").nodes == "n1"
    assert "deprecated" not in capsys.readouterr().err
    args = _parse("dump", "--jobid", "7", "--nodes", "n3")
    err = capsys.readouterr().err
    assert args.nodes == "n3" and target_spec(args).nodes == "n3"
    assert err.count("\n") == 1 and "--nodes is deprecated" in err and "--nodelist" in err


@pytest.mark.parametrize("argv, needs", [
    (["-w", "node1"], "-w/--nodelist needs --jobid"),
    (["--srun-arg=--overlap", "--hostfile", "hf"], "--srun-arg needs --jobid"),
    (["--ssh-option", "Port=2222", "--pid", "5"], "--ssh-option needs --hosts or --hostfile or --ray"),
    (["--remote-setup", "source x", "--jobid", "4"], "--remote-setup needs --hosts or --hostfile or --ray"),
    (["--launcher", "pdsh"], "--launcher needs --hosts or --hostfile"),
])
def test_remote_only_options_without_their_target_are_usage_errors(argv, needs):
    res = run_main("dump", *argv)
    assert res.returncode == 2 and needs in res.stderr, res.stderr
    assert "it says how to reach other nodes" in res.stderr


def test_remote_options_with_their_target_are_taken():
    spec = target_spec(_parse("dump", "--hosts", "n[1-2]", "--ssh-option", "Port=2", "--launcher", "ssh",
                              "--remote-setup", "true", "--connect-timeout", "3"))
    assert (spec.ssh_options, spec.launcher, spec.remote_setup, spec.connect_timeout) == (("Port=2",), "ssh", "true", 3)
    spec = target_spec(_parse("dump", "--ray", "h:6379", "--ssh-config", "cfg"))  # ray's other nodes: over ssh
    assert spec.ssh_config == "cfg"


# --- JSON errors -----------------------------------------------------------------------------------
def _json_error(res: subprocess.CompletedProcess, stderr: bool = True) -> dict:
    doc = validate(json.loads(res.stdout))  # one JSON object on stdout, in the schema
    assert set(doc) >= {"error", "help", "exit"} and doc["exit"] == res.returncode, doc
    if stderr:
        assert "hangdbg: error:" in res.stderr or "interrupted" in res.stderr  # the text still on stderr
        assert doc["help"] is None or doc["help"] in res.stderr
    return doc


@pytest.mark.parametrize("argv, status, says", [
    (["dump", "--samples", "0"], 2, "--samples"),  # argparse
    (["frobnicate"], 2, "invalid choice"),  # argparse, before a command
    (["dump", "-w", "node1"], 2, "-w/--nodelist needs --jobid"),  # the target's rule
    (["analyze", "/nonexistent/dir"], 2, "/nonexistent/dir"),  # a UsageError of the command
    (["dump", "--pid", "999999999"], 2, "no process with pid"),
])
def test_every_json_failure_prints_a_json_error(argv, status, says):
    res = run_main(*argv, "--json")
    assert res.returncode == status
    doc = _json_error(res)
    assert says in doc["error"] and says in res.stderr


def test_json_error_of_a_tool_error(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n")
    (fake / "scontrol").chmod(0o755)
    res = run_main("collect", "--jobid", "42", "--dmesg", "-o", tmp_path / "o", "--json",
                   env={"PATH": f"{fake}:{os.environ['PATH']}"})
    doc = _json_error(res)
    assert res.returncode == 1 and doc["command"] == "collect" and "Unable to contact" in doc["error"]


def test_json_error_of_an_interrupt_and_of_a_command_that_fails_without_a_document(monkeypatch, tmp_path):
    from hangdbg.cli.logs_cmd import LogsCommand

    log = tmp_path / "x.log"
    log.write_text("nothing\n")

    def interrupted(self, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(LogsCommand, "run", interrupted)
    res = run_main("logs", log, "--json")
    assert res.returncode == 1 and "interrupted" in _json_error(res)["error"]
    monkeypatch.setattr(LogsCommand, "run", lambda self, args: 1)  # says nothing on stdout
    res = run_main("logs", log, "--json")
    assert res.returncode == 1 and _json_error(res, stderr=False)["command"] == "logs"
    res = run_main("logs", log)  # without --json: nothing on stdout
    assert res.returncode == 1 and res.stdout == ""


def test_a_command_that_printed_its_document_gets_no_second_json(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("no nccl here\n")
    res = run_main("nccl", "summary", empty, "--json")
    assert res.returncode == 1
    doc = validate(json.loads(res.stdout))  # exactly one document: json.loads would fail on two
    assert doc["command"] == "nccl summary" and "error" not in doc


def test_wants_json_stops_at_the_double_dash():
    assert wants_json(["dump", "--json"]) and wants_json(["dump", "--js"])
    assert not wants_json(["run", "--", "python", "--json"]) and not wants_json(["dump", "--jobid", "1"])


def test_the_error_document_is_in_the_schema():
    error = json_schema()["$defs"]["ErrorDocument"]
    assert set(error["required"]) >= {"error", "help", "exit", "command"}


# --- the run marker's argv -------------------------------------------------------------------------
def test_real_dump_dash_p_dumps_the_process_and_marks_its_command_line(rank_process, tmp_path):
    out = tmp_path / "o"
    res = run_cli("dump", "-p", rank_process, "-o", out, "--json", "--no-adapt")
    assert res.returncode == 0, res.stderr
    (rank,) = validate(json.loads(res.stdout))["stacks"]["ranks"]
    assert rank["pid"] == rank_process and rank["error"] is None
    marker = json.loads((out / ".hangdbg-run.json").read_text())
    assert marker["argv"] == ["dump", "-p", str(rank_process), "-o", str(out), "--json", "--no-adapt"]


def test_the_marker_holds_the_command_line_with_its_secrets_masked(tmp_path):
    from hangdbg.outdir import claim

    args = _parse("dump", "--jobid", "4", "--remote-python", "/opt/py")
    args._argv = ["dump", "--jobid", "4", "--remote-python", "/opt/py"]  # what main sets
    plan = dump_plan(args)
    assert plan.argv == ("dump", "--jobid", "4", "--remote-python", "/opt/py") and plan == replace(plan, argv=())
    secret = ["dump", "--hosts", "n1", "--remote-setup", "export HF_TOKEN=hf_abc123"]
    claim(tmp_path / "o", "dump", secret)
    marker = json.loads((tmp_path / "o" / ".hangdbg-run.json").read_text())
    assert marker["argv"][:4] == secret[:4] and "hf_abc123" not in json.dumps(marker)


# --- hangdbg.toml ----------------------------------------------------------------------------------
def _warnings() -> tuple[list[str], "callable"]:
    said: list[str] = []
    return said, said.append


def test_config_files_are_the_site_the_user_s_and_the_project_s_in_that_order(tmp_path, monkeypatch):
    site, xdg, cwd = tmp_path / "etc" / "hangdbg.toml", tmp_path / "xdg", tmp_path / "proj"
    for d in (site.parent, xdg, cwd):
        d.mkdir()
    monkeypatch.setattr(config_mod, "SITE_CONFIG", site)
    assert config_files({"XDG_CONFIG_HOME": str(xdg)}, cwd) == []
    for p in (site, xdg / "hangdbg.toml", cwd / "hangdbg.toml"):
        p.write_text("")
    assert config_files({"XDG_CONFIG_HOME": str(xdg)}, cwd) == [site, xdg / "hangdbg.toml", cwd / "hangdbg.toml"]
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".config" / "hangdbg.toml").write_text("")
    monkeypatch.setenv("HOME", str(home))
    assert config_files({}, cwd)[1] == home / ".config" / "hangdbg.toml"  # XDG's default
    assert config_files({"HANGDBG_CONFIG": str(site), "XDG_CONFIG_HOME": str(xdg)}, cwd) == [site]
    with pytest.raises(UsageError, match="HANGDBG_CONFIG"):
        config_files({"HANGDBG_CONFIG": str(tmp_path / "nope.toml")}, cwd)


def test_config_values_become_defaults_the_command_line_overrides(tmp_path):
    site, mine = tmp_path / "site.toml", tmp_path / "mine.toml"
    site.write_text('remote-setup = "source /etc/profile"\nstall = 60\ntimeout = 9\n'
                    '[dump]\nsrun_arg = ["--overlap"]\nnative = true\nno-adapt = true\ntimeout = 7\n')
    mine.write_text("[dump]\ntimeout = 5\n")
    parser = build_parser(["dump"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["dump"]
    said, warn = _warnings()
    applied = apply_config(sub, "dump", warn, [site, mine], known=_all_options)
    args = parser.parse_args(["dump"])
    assert (args.remote_setup, args.srun_arg, args.native, args.adapt, args.timeout) == (
        "source /etc/profile", ["--overlap"], True, False, 5.0)  # the later file wins, its table over the top
    assert applied.dests["timeout"] == (str(mine), 5.0) and said == []  # stall: watch's option, not unknown
    assert "config " + str(site) + " set --remote-setup" in applied.lines()
    args = parser.parse_args(["dump", "--timeout", "3", "--srun-arg=--mem=0"])
    assert args.timeout == 3.0 and args.srun_arg == ["--overlap", "--mem=0"]  # the command line wins (adds)


def test_config_unknown_keys_warn_and_bad_values_are_usage_errors(tmp_path):
    f = tmp_path / "hangdbg.toml"
    f.write_text("frobnicate = 1\n[dump]\nstall = 5\n[nosuch]\nx = 1\n")
    said, warn = _warnings()
    apply_config(_sub("dump"), "dump", warn, [f], known=lambda: {"dump": {"timeout"}, "watch": {"stall"}})
    assert len(said) == 3 and all(str(f) in s for s in said)
    assert any("'frobnicate'" in s for s in said) and any("[dump] stall" in s for s in said)
    assert any("[nosuch]" in s for s in said)
    for text, key in [("[dump]\nsamples = 0\n", "samples"), ("[dump]\ntimeout = 'soon'\n", "timeout"),
                      ("launcher = 'telnet'\n", "launcher"), ("native = 'yes'\n", "native")]:
        f.write_text(text)
        with pytest.raises(UsageError, match=f"{f}.*{key}"):
            apply_config(_sub("dump"), "dump", warn, [f])
    f.write_text("[dump]\ntimeout = = 3\n")
    with pytest.raises(UsageError, match=r"line 2"):
        apply_config(_sub("dump"), "dump", warn, [f])


def test_config_through_main_shows_what_set_what_and_stays_out_of_local_targets(tmp_path):
    f = tmp_path / "hangdbg.toml"
    f.write_text('remote-setup = "source /etc/profile"\n[analyze]\nno-tree = true\n')
    stacks = tmp_path / "rank0.txt"
    stacks.write_text("Thread 1 (idle): \"MainThread\"\n    wait (<string>:3)\n")
    res = run_main("-v", "analyze", stacks, env={"HANGDBG_CONFIG": str(f)})
    assert f"config {f} set --no-tree" in res.stderr and res.returncode in (0, 1, 3)
    # a site's remote-setup does not make a local dump a usage error; on the command line it does
    args = _parse("dump", "--pid", "5")
    args._config_set = {"remote_setup": (str(f), "source /etc/profile")}
    args.remote_setup = "source /etc/profile"
    assert target_spec(args).remote_setup is None
    res = run_main("dump", "--remote-setup", "x", env={"HANGDBG_CONFIG": str(f)})
    assert res.returncode == 2 and "--remote-setup needs" in res.stderr
    f.write_text("[dump]\nsamples = 0\n")
    res = run_main("dump", "--json", env={"HANGDBG_CONFIG": str(f)})
    assert res.returncode == 2 and "samples" in _json_error(res)["error"]


# --- completion ------------------------------------------------------------------------------------
def test_completion_scripts_know_every_command_and_option(tmp_path):
    res = run_main("completion", "bash")
    assert res.returncode == 0
    for word in ("dump", "watch", "report", "--nodelist", "--json", "--remote-setup"):
        assert word in res.stdout, word
    if shutil.which("bash"):
        script = tmp_path / "hangdbg.bash"
        script.write_text(res.stdout)
        check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    for shell in ("zsh", "tcsh"):
        res = run_main("completion", shell)
        assert res.returncode == 0 and "dump" in res.stdout
    assert run_main("completion", "cmd.exe").returncode == 2
