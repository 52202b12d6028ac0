"""Acting on a stall's verdict: the suspects' nodes into a SLURM job's ExcNodeList, and the webhook.

``exclude_nodes`` runs a stand-in ``scontrol`` (a real program on PATH that answers as SLURM 23's
``scontrol -o show job`` does and records its arguments); the real cluster's test is
tests/test_real_watch_exclude_slurm.py. The webhook is POSTed to a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from _watch import webhook_sink
from conftest import run_main
from hangdbg.model import Severity
from hangdbg.errors import HangdbgError, UsageError
from hangdbg.events import Events
from hangdbg.kinds import Kind
from hangdbg.model import Finding, RankDump
from hangdbg.transport.slurm_actions import exc_node_list, exclude_nodes, leave_out, merged_hostlist, requeue_excluding
from hangdbg.transport.targets import TargetSpec
from hangdbg.watch.notify import post_webhook, shown_url, suspect_hosts, suspect_places, webhook_payload
from hangdbg.watch.plan import WatchPlan

NASTY = 'suspect rank 3: in read: with open(path, "rb") as f:\\n \\\\ "quoted" \u00e9\nsecond line\t"},"x":1'


def test_exc_node_list_reads_scontrol_one_line():
    line = "JobId=7 JobName=x UserId=u(1) ReqNodeList=(null) ExcNodeList=node[3-4] NodeList=node[1-2]"
    assert exc_node_list(line) == "node[3-4]"
    assert exc_node_list(line.replace("node[3-4]", "(null)")) == ""
    assert exc_node_list("JobId=7 JobState=RUNNING") == ""


def test_merged_hostlist_keeps_the_old_and_says_what_is_new():
    assert merged_hostlist("node[3-4]", ["node2", "node4"]) == ("node[2-4]", ("node2",))
    assert merged_hostlist("", ["gpu7", "gpu5"]) == ("gpu[5,7]", ("gpu5", "gpu7"))
    assert merged_hostlist("node1", ["node1"]) == ("node1", ())
    with pytest.raises(HangdbgError):
        merged_hostlist("node[1-", ["node2"])


def _fake_scontrol(tmp_path: Path, exc: str, state: str = "RUNNING") -> dict[str, str]:
    """A ``scontrol`` on PATH that prints one ``show job`` line with ``ExcNodeList=exc`` and logs its argv."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv.log"
    script = bindir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\n'
                      f'[ "$1" = -o ] && echo "JobId=42 JobState={state} ExcNodeList={exc} NodeList=node[1-2]"\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", ARGV_LOG=str(log))


def test_exclude_nodes_adds_to_the_jobs_own_list(tmp_path):
    env = _fake_scontrol(tmp_path, "node5")
    done = exclude_nodes("42", ["node2"], env=env)
    assert (done.before, done.after, done.added) == ("node5", "node[2,5]", ("node2",))
    calls = Path(env["ARGV_LOG"]).read_text().splitlines()
    assert calls == ["-o show job 42", "update JobId=42 ExcNodeList=node[2,5]"]


def test_exclude_nodes_already_excluded_updates_nothing(tmp_path):
    env = _fake_scontrol(tmp_path, "node[1-2]")
    done = exclude_nodes("42", ["node2"], env=env)
    assert done.added == () and "already excludes" in done.describe()
    assert Path(env["ARGV_LOG"]).read_text().splitlines() == ["-o show job 42"]


def test_exclude_nodes_refuses_a_bad_job_id():
    for act in (exclude_nodes, requeue_excluding, leave_out):
        with pytest.raises(HangdbgError):
            act("42; rm -rf /", ["node2"])


def test_requeue_excluding_holds_updates_then_releases(tmp_path):
    env = _fake_scontrol(tmp_path, "(null)")
    done = requeue_excluding("42", ["node2"], env=env)
    assert done.after == "node2"
    assert Path(env["ARGV_LOG"]).read_text().splitlines() == [
        "requeuehold 42", "-o show job 42", "update JobId=42 ExcNodeList=node2", "release 42"]


@pytest.mark.parametrize(("state", "requeued"), [("PENDING", False), ("RUNNING", True)])
def test_leave_out_requeues_only_a_job_that_is_not_pending(tmp_path, state, requeued):
    env = _fake_scontrol(tmp_path, "(null)", state)
    done, was = leave_out("42", ["node2"], env=env)
    calls = Path(env["ARGV_LOG"]).read_text().splitlines()
    assert was is requeued and done.added == ("node2",)
    assert ("requeuehold 42" in calls) is requeued and calls[-1 if not requeued else -2].startswith("update JobId=42")


def test_check_exclude_bad_needs_a_job():
    res = run_main("check", "--nproc-per-node", "2", "--exclude-bad")
    assert res.returncode == 2 and "--exclude-bad goes with --jobid" in res.stderr


def test_only_suspects_places_count_never_a_waiting_rank():
    ranks = [RankDump(0, host="node1"), RankDump(1, host="node1"), RankDump(2, host="node2"), RankDump(3, host="node2")]
    findings = [Finding(Kind.DIFFERENT_COLLECTIVE, "rank 3 differs", ranks=(3,), hosts=("node2",)),
                Finding(Kind.WAITING, "ranks 0-2 wait for 3", ranks=(0, 1, 2), severity=Severity.WAITING, waits_for=(3,))]
    assert suspect_places(findings, ranks) == [{"rank": 3, "host": "node2"}]
    assert suspect_hosts(findings, ranks) == ("node2",)
    undecided = [Finding(Kind.UNDECIDED, "cannot tell", ranks=(0, 1, 2, 3), severity=Severity.WARNING)]
    assert suspect_hosts(undecided, ranks) == ()


def test_exclude_suspects_needs_requeue_and_a_job():
    with pytest.raises(UsageError, match="--exclude-suspects goes with --then requeue"):
        WatchPlan(target=TargetSpec(jobid="42"), then="scancel", exclude_suspects=True)
    with pytest.raises(UsageError):
        WatchPlan(target=TargetSpec(pids=(1,)), exclude_suspects=True)
    assert WatchPlan(target=TargetSpec(jobid="42"), then="requeue", exclude_suspects=True).exclude_suspects


def test_exclude_suspects_without_requeue_is_a_usage_error_on_the_command_line():
    res = run_main("watch", "--pid", str(os.getpid()), "--exclude-suspects")
    assert res.returncode == 2 and "--exclude-suspects goes with --then requeue" in res.stderr


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://h/x", "localhost:8000/hook", "http://"])
def test_webhook_takes_only_http_urls(url):
    with pytest.raises(UsageError, match="http:// or https://"):
        WatchPlan(target=TargetSpec(pids=(1,)), notify_webhook=url)


def test_payload_is_plain_data():
    p = webhook_payload(headline=NASTY, suspects=[{"rank": 3, "host": "node2"}], dump_dir="/o/stall-1", exit=3,
                        kind="different-collective", command="watch", time="2026-01-01T00:00:00+00:00")
    assert set(p) >= {"headline", "suspects", "dump_dir", "exit", "kind", "command", "time"}
    assert json.loads(json.dumps(p)) == p and p["headline"] == NASTY


@pytest.fixture
def sink():
    with webhook_sink() as server:
        yield server


def test_webhook_body_decodes_to_the_same_headline(sink):
    payload = webhook_payload(headline=NASTY, suspects=[{"rank": 3, "host": "node2"}], dump_dir="/o/s", exit=3,
                              kind="different-collective", command="watch", time="t")
    assert post_webhook(sink.url, payload) is None
    [(ctype, body)] = sink.got
    assert ctype.startswith("application/json")
    got = json.loads(body)
    assert got["headline"] == NASTY and got == payload and "x" not in got


def test_webhook_failure_is_a_message_not_an_exception(sink):
    sink.status = 500
    assert "HTTP 500" in (post_webhook(sink.url, {"headline": "h"}) or "")
    port = sink.server.server_address[1]
    sink.close()
    assert "could not be reached" in (post_webhook(f"http://127.0.0.1:{port}/", {"a": 1}, timeout=2) or "")


def test_the_webhooks_secret_path_is_never_written_down():
    url = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
    assert shown_url(url) == "https://hooks.slack.com/[Filtered]"
    plan = WatchPlan(target=TargetSpec(jobid="42"), then="requeue", exclude_suspects=True, notify_webhook=url)
    argv = plan.to_argv()
    assert "--exclude-suspects" in argv and "XXXXSECRET" not in " ".join(argv)
    assert shown_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"


class _Said(Events):
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn(self, text: str) -> None:
        self.warnings.append(text)


@pytest.mark.parametrize(("hosts", "calls"), [
    ([], ["requeue 42"]),  # undecided: no suspect, a plain requeue and a warning
    (["node2"], ["requeuehold 42", "-o show job 42", "update JobId=42 ExcNodeList=node2", "release 42"]),
])
def test_then_requeue_excludes_only_named_suspects(tmp_path, monkeypatch, hosts, calls):
    from hangdbg.api._watch import _Watcher

    env = _fake_scontrol(tmp_path, "(null)")
    monkeypatch.setenv("PATH", env["PATH"])
    said = _Said()
    w = _Watcher(WatchPlan(target=TargetSpec(jobid="42"), then="requeue", exclude_suspects=True, out=tmp_path / "o"), said)
    then = w._then(hosts)
    assert Path(env["ARGV_LOG"]).read_text().splitlines() == calls
    if hosts:
        assert then.startswith("excluded node2 (ExcNodeList=node2)") and not said.warnings
    else:
        assert then.startswith("no suspect named: nothing excluded; requeue: scontrol requeue 42 exited 0")
        assert said.warnings == ["no suspect named: nothing excluded"]
