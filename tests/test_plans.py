"""The typed plans under the command line (issue 25): the CLI builds a plan once, nothing below it
sees an ``argparse.Namespace``, and every plan's ``to_argv()`` parses back into the same plan
(``dump``, ``watch``, ``check``); the watcher hands its stall to the dump use case directly;
the dump's analysis runs once when no adaptive step changed the stacks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangdbg.check.node import CheckJob
from hangdbg.check.plan import CheckPlan
from hangdbg.cli.check_cmd import check_plan
from hangdbg.cli.dump_cmd import dump_plan
from hangdbg.cli.main import build_parser
from hangdbg.cli.watch_cmd import watch_plan
from hangdbg.collect.plan import DumpPlan
from hangdbg.errors import UsageError
from hangdbg.transport.targets import TargetSpec
from hangdbg.watch.plan import WatchPlan

WORDS = st.text(st.characters(min_codepoint=48, max_codepoint=122, whitelist_categories=("Ll", "Lu", "Nd")),
                min_size=1, max_size=8)
SECONDS = st.floats(min_value=0.001, max_value=1e6, allow_nan=False, allow_infinity=False)
PATHS = st.builds(lambda w: Path("/tmp") / w, WORDS)


@st.composite
def remote_targets(draw) -> TargetSpec:
    which = draw(st.sampled_from(["jobid", "hosts", "hostfile"]))
    ssh = which != "jobid"
    return TargetSpec(
        jobid=draw(st.integers(1, 10**6).map(str)) if which == "jobid" else None,
        nodes=draw(st.none() | WORDS) if which == "jobid" else None,
        hosts=draw(WORDS) if which == "hosts" else None, hostfile=draw(WORDS) if which == "hostfile" else None,
        # each transport's options only with its targets: the others are usage errors (REMOTE_ONLY)
        srun_args=tuple(draw(st.lists(WORDS.map(lambda w: f"--{w}"), max_size=2))) if which == "jobid" else (),
        launcher=draw(st.sampled_from(["auto", "ssh", "pdsh"])) if ssh else "auto",
        ssh_config=draw(st.none() | WORDS) if ssh else None,
        ssh_options=tuple(draw(st.lists(WORDS.map(lambda w: f"Port={w}"), max_size=2))) if ssh else (),
        connect_timeout=draw(st.integers(1, 100)) if ssh else 10,
        remote_python=draw(st.sampled_from([sys.executable, "/opt/py"])),
        remote_setup=draw(st.none() | st.just("source ~/venv/bin/activate")) if ssh else None,
        match_env=tuple(draw(st.lists(WORDS.map(lambda w: f"K={w}"), max_size=2))))


TARGETS = st.one_of(st.builds(TargetSpec), st.builds(lambda p: TargetSpec(pids=tuple(p)), st.lists(st.integers(1, 10**6), min_size=1, max_size=3)),
                    remote_targets())


def _parse(command: str, argv: list[str]):
    return build_parser([command]).parse_args([command, *argv])


@settings(max_examples=150, deadline=None)
@given(target=TARGETS, native=st.booleans(), locals_=st.booleans(), nonblocking=st.booleans(), timeout=SECONDS,
       samples=st.integers(1, 20), interval=SECONDS, jobs=st.none() | st.integers(1, 64), adapt=st.booleans(),
       out=st.none() | PATHS, node_timeout=st.none() | SECONDS, speedscope=st.none() | PATHS,
       by=st.sampled_from(["class", "rank"]), verbose=st.booleans(), core=st.booleans(), force=st.booleans(),
       min_window=st.sampled_from([0.0, 2.5, 10.0, 60.0]), observed=st.sampled_from([0.0, 42.0]), fetch_raw=st.booleans())
def test_a_dump_plan_parses_back_from_its_argv(target, native, locals_, nonblocking, timeout, samples, interval, jobs,
                                               adapt, out, node_timeout, speedscope, by, verbose, core, force,
                                               min_window, observed, fetch_raw):
    try:
        plan = DumpPlan(target=target, native=native, locals=locals_, nonblocking=nonblocking, timeout=timeout,
                        samples=samples, interval=interval, jobs=jobs, adapt=adapt, out=out, node_timeout=node_timeout,
                        speedscope=speedscope, speedscope_by=by, verbose=verbose, core=core and not target.remote,
                        force=force, min_window=min_window, observed=observed,
                        fetch_raw=fetch_raw and target.remote)
    except UsageError:
        return  # --pid with --jobid and the like: not a plan
    assert dump_plan(_parse("dump", plan.to_argv())) == plan


@settings(max_examples=100, deadline=None)
@given(target=TARGETS, logs=st.lists(WORDS, max_size=2), pattern=st.none() | st.just("step \\d+"),
       heartbeat=st.none() | WORDS, stacks=st.booleans(), stall=SECONDS, interval=SECONDS, grace=st.floats(0, 100),
       once=st.booleans(), on_hang=st.none() | st.just("echo $HANGDBG_HEADLINE"),
       then=st.sampled_from([None, "kill", "scancel", "requeue"]), timeout=SECONDS, out=st.none() | PATHS)
def test_a_watch_plan_parses_back_from_its_argv(target, logs, pattern, heartbeat, stacks, stall, interval, grace, once,
                                                on_hang, then, timeout, out):
    try:
        plan = WatchPlan(target=target, logs=tuple(logs), log_pattern=pattern if logs else None, heartbeat=heartbeat,
                         stacks=stacks, stall=stall, interval=interval, grace=grace, once=once, on_hang=on_hang,
                         then=then, timeout=timeout, out=out)
    except UsageError:
        return
    assert watch_plan(_parse("watch", plan.to_argv())) == plan


@settings(max_examples=100, deadline=None)
@given(target=TARGETS, backend=st.sampled_from(["auto", "gloo", "nccl"]), init=SECONDS, timeout=SECONDS,
       size=st.integers(4, 1 << 30), iters=st.integers(1, 50), alloc=st.integers(4, 1 << 30),
       nproc=st.none() | st.integers(1, 8), slow=st.floats(0.01, 1), ifname=st.none() | WORDS,
       port=st.none() | st.integers(1, 65535), bisect=st.booleans(), out=st.none() | PATHS)
def test_a_check_plan_parses_back_from_its_argv(target, backend, init, timeout, size, iters, alloc, nproc, slow, ifname,
                                                port, bisect, out):
    try:
        plan = CheckPlan(target, CheckJob(backend, init, timeout, size, iters, alloc), nproc, slow, ifname, port, bisect,
                         out=out)
    except UsageError:
        return
    assert check_plan(_parse("check", plan.to_argv())) == plan


@pytest.mark.parametrize("argv, error", [
    (["--pid", "1", "--jobid", "7"], "one target"),
    (["-w", "node1"], "-w/--nodelist needs --jobid"),
    (["--nodelist", "node1"], "-w/--nodelist needs --jobid"),
    (["--srun-arg=--mem=0", "--hosts", "n1"], "--srun-arg needs --jobid"),
    (["--ssh-option", "Port=2"], "--ssh-option needs --hosts or --hostfile or --ray"),
    (["--ssh-config", "f", "--jobid", "4"], "--ssh-config needs"),
    (["--launcher", "ssh", "--ray", "h:1"], "--launcher needs --hosts or --hostfile"),
    (["--connect-timeout", "3", "--pid", "5"], "--connect-timeout needs"),
    (["--remote-setup", "true"], "--remote-setup needs"),
    (["--remote-python", "/opt/py"], "--remote-python needs --jobid or --hosts"),
    (["--pid", "0"], "positive"),
])
def test_bad_targets_are_usage_errors(argv, error):
    with pytest.raises(UsageError, match=error):
        dump_plan(_parse("dump", argv))


@pytest.mark.parametrize("kw, error", [
    ({}, "watch what"),
    ({"target": TargetSpec(pids=(5,)), "then": "requeue"}, "needs --jobid"),
    ({"target": TargetSpec(hosts="n[1-2]"), "then": "kill"}, "--then kill needs"),
    ({"target": TargetSpec(pids=(5,)), "log_pattern": "x"}, "goes with --log"),
    ({"target": TargetSpec(pids=(5,)), "logs": ("a.log",), "log_pattern": "("}, "not a regular expression"),
])
def test_watch_plans_that_cannot_run_are_refused_when_made(kw, error):
    with pytest.raises(UsageError, match=error):
        WatchPlan(**kw)


def test_the_agent_gets_the_dump_options_and_the_target_but_not_the_transport():
    plan = DumpPlan(target=TargetSpec(jobid="42", nodes="node2", srun_args=("--mem=0",), match_env=("A=b",)),
                    native=True, samples=2, verbose=True)
    argv = plan.agent_argv(with_host=False)
    assert argv[:1] == ["--native"] and ["--samples", "2"] == argv[argv.index("--samples"):argv.index("--samples") + 2]
    assert "-v" in argv and ["--jobid", "42"] == argv[argv.index("--jobid"):argv.index("--jobid") + 2]
    assert "--match-env=A=b" in argv and "-w" not in argv and not any(a.startswith("--srun-arg") for a in argv)
    assert "--node-name" in DumpPlan(target=TargetSpec(hosts="n1")).agent_argv(with_host=True)
    # where the nodes keep their raw outputs; --fetch-raw when they are to be sent as well
    kept = plan.agent_argv(with_host=False, keep_raw=Path("/out/raw"))
    assert kept[kept.index("--keep-raw") + 1] == "/out/raw" and "--fetch-raw" not in kept
    assert "--fetch-raw" in DumpPlan(target=TargetSpec(hosts="n1"), fetch_raw=True).agent_argv(with_host=True)
    with pytest.raises(UsageError, match="--fetch-raw"):
        DumpPlan(fetch_raw=True)  # this node's ranks: nothing to fetch


def test_the_watcher_hands_the_stall_to_the_dump_use_case_directly(tmp_path, monkeypatch):
    """No command line is rebuilt and parsed again: the stall's dump gets the watch plan's
    ``dump_plan``, and the hook and the document get the dump's own result."""
    import hangdbg.api._watch as watch_api
    from hangdbg.collect.result import StacksResult
    from hangdbg.events import Events
    from hangdbg.model import Finding, Kind
    from hangdbg.stacks.analysis import analyze
    from hangdbg.watch.stall import Stall

    seen: list[DumpPlan] = []
    blame = Finding(Kind.DIFFERENT_COLLECTIVE, "rank 3 in broadcast", ranks=(3,))

    def fake_dump(plan: DumpPlan, events=None, *, command="dump") -> StacksResult:
        seen.append(plan)
        a = analyze([])
        return StacksResult("dump", a, "suspect rank 3", (blame,), out_dir=str(plan.out))

    monkeypatch.setattr(watch_api, "dump", fake_dump)
    plan = WatchPlan(target=TargetSpec(pids=(os.getpid(),)), native=True, timeout=7.0, out=tmp_path / "w",
                     on_hang="echo $HANGDBG_SUSPECTS > " + str(tmp_path / "hook.txt"))
    watcher = watch_api._Watcher(plan, Events())
    watcher.on_stall(Stall("log", 42.0, "the log did not grow for 42 s"))
    assert len(seen) == 1 and seen[0].native and seen[0].timeout == 7.0 and seen[0].target == plan.target
    assert seen[0].observed == 42.0  # the stall counts into the dump's window
    assert seen[0].out is not None and seen[0].out.parent == tmp_path / "w"
    record = watcher.stalls[0]
    assert record.suspects == (3,) and record.dump_exit == 3 and record.headline == "suspect rank 3"
    assert (tmp_path / "hook.txt").read_text().strip() == "3"


def test_adapt_analyzes_once_when_no_step_changes_the_stacks(monkeypatch):
    """The dump use case takes the analysis the adaptive steps made last: with nothing to add,
    the stacks are analyzed exactly once."""
    import hangdbg.collect.adaptive as adaptive
    from hangdbg.collect.local import CollectOptions
    from hangdbg.model import RankDump, Thread
    from hangdbg.frames import Frame

    calls = []
    real = adaptive.analyze

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(adaptive, "analyze", counting)
    monkeypatch.setattr(adaptive, "read_op_records", lambda pids: {})
    stack = (Frame("train", "train.py", 3), Frame("<module>", "train.py", 9))
    dumps = [RankDump(r, pid=1000 + r, threads=(Thread(1, "MainThread", "active", stack),),
                      samples=((Thread(1, "MainThread", "active", stack),),)) for r in range(2)]
    result = adaptive.adapt([], dumps, CollectOptions())
    assert len(calls) == 1 and [d.rank for d in result.analysis.ranks] == [0, 1]
