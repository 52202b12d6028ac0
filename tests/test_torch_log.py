"""PyTorch / torchrun log reader: real torchrun failures made here, watchdog fixtures from the
documented formats (NCCL cannot run on this machine), the CLI, and a fuzz test."""

from __future__ import annotations

import io
import json
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from infra.fuzz import mutated_lines
from conftest import FIXTURES, check_golden, run_main, main_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdbg.evidence.torch_log.analysis import analyze_events
from hangdbg.evidence.torch_log import grammar as torch_log
from hangdbg.text.lines import iter_lines_from
from hangdbg.report.schema import to_jsonable
from hangdbg.evidence.torch_log.reader import READER

FX = FIXTURES / "torchlog"

JOB = textwrap.dedent("""
    import os, signal, time
    import torch, torch.distributed as dist
    from torch.distributed.elastic.multiprocessing.errors import record

    @record
    def main():
        dist.init_process_group("gloo")
        t = torch.ones(4)
        for _ in range(3):
            dist.all_reduce(t)
        if dist.get_rank() == 1:
            if os.environ["FAIL_MODE"] == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            raise RuntimeError("rank 1 failed on purpose")
        dist.barrier()
        time.sleep(60)

    if __name__ == "__main__":
        main()
""")


@pytest.fixture(scope="module")
def torchrun_runs(tmp_path_factory):
    """Two real 2-rank gloo jobs under torchrun: rank 1 segfaults in one, raises in the other.

    Returns {mode: (log path, log dir)}; both run at the same time (about 5 s)."""
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("torchrun")
    (d / "job.py").write_text(JOB)
    procs = {}
    for mode in ("segv", "raise"):
        logdir = d / f"logs-{mode}"
        out = open(d / f"{mode}.log", "wb")  # noqa: SIM115 - closed after the process ends
        procs[mode] = (subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
             "--log-dir", str(logdir), str(d / "job.py")],
            stdout=out, stderr=subprocess.STDOUT, cwd=d, env={**os.environ, "FAIL_MODE": mode}), out, logdir)
    result = {}
    for mode, (p, out, logdir) in procs.items():
        try:
            p.wait(timeout=90)
        finally:
            if p.poll() is None:
                p.kill()
            out.close()
        assert p.returncode != 0, f"torchrun {mode} job did not fail"
        result[mode] = (d / f"{mode}.log", logdir)
    return result


# --- real torchrun output ---------------------------------------------------------------------

def test_real_segfault_root_cause(torchrun_runs):
    log, _ = torchrun_runs["segv"]
    text = log.read_text(errors="replace")
    assert "ChildFailedError" in text
    pid = int(re.search(r"Signal 11 \(SIGSEGV\) received by PID (\d+)", text).group(1))
    rep = READER.read([str(log)])
    assert rep.kind == "torch-log" and not rep.errors
    first = rep.findings[0]
    assert (first.kind, first.severity, first.ranks) == ("child-failed", "suspect", (1,))
    assert "SIGSEGV" in first.summary and f"pid {pid}" in first.summary and "failed first" in first.summary
    assert first.hosts and first.hosts[0]
    row1 = next(r for r in rep.ranks if r.rank == 1)
    assert row1.pid == pid and "exit -11 (SIGSEGV)" in row1.state
    # torchrun's own "Root Cause" can be rank 0 under load (it lost its peer in the same second):
    # hangdbg names rank 1 first either way (see test_root_cause_race below)
    # rank 0 was stopped by the agent afterwards (SIGTERM) or failed on the lost peer: never a suspect
    r0 = [f for f in rep.findings if f.kind == "child-failed" and f.ranks == (0,)]
    assert r0 and all(f.severity in ("info", "warning") for f in r0)
    assert [f.ranks for f in rep.findings if f.severity == "suspect"] == [(1,)]


def test_real_error_json_joined_to_the_summary(torchrun_runs):
    log, logdir = torchrun_runs["raise"]
    files = sorted(str(p) for p in logdir.rglob("error.json"))
    assert any(f.endswith("/1/error.json") for f in files), files  # rank 0's exists unless SIGTERM came first
    rep = READER.read([str(log), *files])
    first = rep.findings[0]
    assert first.ranks == (1,) and "exit " in first.summary  # exit 1, or -6 when gloo aborts during teardown
    assert "RuntimeError: rank 1 failed on purpose" in first.summary
    assert any(e.source.endswith("/1/error.json") for e in first.evidence)
    assert not [f for f in rep.findings if f.kind == "child-error"]  # both files belong to a failure
    assert rep.facts.error_files == len(files)


def test_real_error_json_alone_and_its_layout(torchrun_runs):
    _, logdir = torchrun_runs["raise"]
    path = next(p for p in logdir.rglob("error.json") if p.parent.name == "1")
    data = json.loads(path.read_text())
    assert set(data["message"]) >= {"message", "extraInfo"} and "py_callstack" in data["message"]["extraInfo"]
    ef = torch_log.parse_error_json(data, str(path))
    assert ef.local_rank == 1 and ef.message == "RuntimeError: rank 1 failed on purpose" and ef.timestamp
    rep = READER.read(sorted(str(p) for p in logdir.rglob("error.json")))
    sus = [f for f in rep.findings if f.severity == "suspect"]
    assert len(sus) == 1 and "local_rank 1" in sus[0].summary and "failed on purpose" in sus[0].summary


def test_error_files_tie_prefers_the_rank_that_did_not_lose_its_peer(tmp_path):
    for lr, msg in ((0, "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:29070"),
                    (1, "RuntimeError: CUDA error: an illegal memory access was encountered")):
        d = tmp_path / "attempt_0" / str(lr)
        d.mkdir(parents=True)
        (d / "error.json").write_text(json.dumps({"message": {"message": msg, "extraInfo": {
            "py_callstack": "Traceback ...", "timestamp": "1795321458"}}}))
    rep = READER.read(sorted(str(p) for p in tmp_path.rglob("error.json")))
    assert "local_rank 1" in rep.findings[0].summary and rep.findings[0].severity == "suspect"
    assert rep.findings[1].severity == "warning"


def test_real_cli_on_the_log_directory(torchrun_runs, tmp_path):
    log, logdir = torchrun_runs["raise"]
    code, doc = main_json("logs", str(log), str(logdir))
    assert code == 3
    assert doc["schema_version"] == 4 and doc["command"] == "logs" and doc["source"]["kind"] == "torch-log"
    check_golden(doc, "logs")
    assert doc["found"] and "rank 1" in doc["headline"]
    assert sum(f.endswith("error.json") for f in doc["source"]["files"]) == len(list(logdir.rglob("error.json"))) >= 1


# --- watchdog fixtures (documented formats, several PyTorch eras) -------------------------------

def _sus(rep):
    return [f for f in rep.findings if f.severity == "suspect"]


def test_v24_lagging_rank_per_group():
    rep = READER.read([str(FX / "watchdog_pg_v24.log")])
    first = rep.findings[0]
    assert (first.kind, first.ranks) == ("seq-lagging", (5,))
    assert "SeqNum 1233" in first.summary and "1234" in first.summary and "0 (default_pg)" in first.summary
    # the SIGABRT of rank 0 came from its own watchdog: demoted to a warning
    cf = next(f for f in rep.findings if f.kind == "child-failed")
    assert cf.severity == "warning" and "consequence" in cf.summary
    assert {x.rank: x.seq for x in rep.facts.seqs["1 (tp)"]} == {4: 88, 5: 88, 6: 88, 7: 88}  # global ranks, compared apart
    rows = {(r.rank, r.group): r for r in rep.ranks}
    assert rows[(3, "0 (default_pg)")].last_collective == "ALLREDUCE" and rows[(3, "0 (default_pg)")].seq == 1234
    assert "timed out" in rows[(3, "0 (default_pg)")].state and "aborted" in rows[(3, "0 (default_pg)")].state
    assert rows[(5, "0 (default_pg)")].seq == 1233
    assert rows[(0, "0 (default_pg)")].host == "gpu-node1" and rows[(0, "0 (default_pg)")].pid == 4240
    wt = next(f for f in rep.findings if f.kind == "watchdog-timeout")
    assert wt.ranks == (0, 1, 2, 3, 4, 6, 7) and wt.severity == "warning"
    assert "checkTimeout" in " ".join(next(c.frames for c in rep.facts.cpp_frames if c.rank == 0))
    assert rep.lines_skipped == 0


def test_ahead_minority_reports_the_many_as_behind():
    rep = READER.read([str(FX / "watchdog_ahead_v23_crlf.log")])
    f = _sus(rep)[0]
    assert f.kind == "seq-lagging" and f.ranks == tuple(range(1, 8))
    assert "most ranks (7 of 8" in f.summary and "rank 0 is ahead at SeqNum 11" in f.summary


def test_old_eras_tensorshape_and_no_seqnum():
    rep = READER.read([str(FX / "watchdog_v111_tensorshape.log")])
    assert [(f.kind, f.ranks) for f in _sus(rep)] == [("seq-lagging", (2,))]
    assert {r.rank: (r.last_collective, r.seq) for r in rep.ranks} == {
        0: ("ALLREDUCE", 57), 1: ("ALLREDUCE", 57), 2: ("BROADCAST", 56), 3: ("ALLREDUCE", 57)}
    rep = READER.read([str(FX / "watchdog_v18_noseq.log")])
    assert not _sus(rep) and [r.seq for r in rep.ranks] == [None, None]
    assert "no SeqNum" in rep.findings[0].summary


def test_desync_reports():
    rep = READER.read([str(FX / "desync_lagging.log")])
    d = _sus(rep)[0]
    assert d.kind == "desync-report" and d.ranks == (2,) and "finished collective #19 but did not join #20" in d.summary
    assert len([f for f in rep.findings if f.kind == "desync-report"]) == 1  # three ranks printed the same report
    rep = READER.read([str(FX / "desync_missing.log")])
    assert _sus(rep)[0].ranks == (6, 7) and "never joined" in _sus(rep)[0].summary


VARIANTS = {
    "no-launcher-prefix": lambda ls: [re.sub(r"^\[rank\d+\]:", "", x) for x in ls],
    "iso-timestamps": lambda ls: [f"2026-11-22T10:07:{i % 60:02d}.123+00:00 {x}" for i, x in enumerate(ls)],
    "interleaved": lambda ls: random.Random(7).sample(ls, len(ls)),
    "terminal-border": lambda ls: [f"│ {x}" for x in ls],
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_v24_variants_same_verdict(tmp_path, variant):
    lines = (FX / "watchdog_pg_v24.log").read_text().splitlines()
    body = VARIANTS[variant](lines[:20])  # the watchdog and status lines of all ranks
    p = tmp_path / "v.log"
    p.write_text("\n".join(body) + "\n")
    rep = READER.read([str(p)])
    assert (rep.findings[0].kind, rep.findings[0].ranks) == ("seq-lagging", (5,))


def test_crlf_non_utf8_truncated(tmp_path):
    lines = (FX / "watchdog_pg_v24.log").read_bytes().splitlines()[:20]
    lines.insert(3, b"[rank2]:caf\xe9 \xff\xfe loss=nan")
    data = b"\r\n".join(lines)
    p = tmp_path / "v.log"
    p.write_bytes(data[:-40])  # the last line (a rank-7 status line) is cut in the middle
    rep = READER.read([str(p)])
    assert rep.lines_read == 21
    assert (rep.findings[0].kind, rep.findings[0].ranks) == ("seq-lagging", (5,))


def test_silent_rank_named(tmp_path):
    lines = [x for x in (FX / "watchdog_pg_v24.log").read_text().splitlines()[:20] if not x.startswith("[rank5]")]
    lines.insert(2, "[rank5]:step 4100 loss 2.31")
    p = tmp_path / "silent.log"
    p.write_text("\n".join(lines) + "\n")
    rep = READER.read([str(p)])
    f = next(f for f in rep.findings if f.kind == "no-timeout")
    assert f.severity == "suspect" and f.ranks == (5,) and "ALLREDUCE SeqNum 1234" in f.summary


MULTI = """\
[default0]:step 10
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-22_10:07:45
  host      : node2
  rank      : 4 (local_rank: 0)
  exitcode  : -15 (pid: 5100)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 5100
[2]:
  time      : 2026-11-22_10:07:44
  host      : node3
  rank      : 6 (local_rank: 2)
  exitcode  : 1 (pid: 4250)
  error_file: /tmp/torchelastic_x/attempt_0/2/error.json
  traceback : Traceback (most recent call last):
    File "train.py", line 9, in main
      dist.all_reduce(t)
  RuntimeError: Connection closed by peer
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_10:07:41
  host      : node3
  rank      : 5 (local_rank: 1)
  exitcode  : -11 (pid: 4242)  (SIGSEGV)
  error_file: <N/A>
  traceback : Signal 11 (SIGSEGV) received by PID 4242
============================================================
"""


def test_multinode_child_failed_summary(tmp_path):
    p = tmp_path / "torchrun.log"
    p.write_text(MULTI)
    rep = READER.read([str(p)])
    root = rep.findings[0]
    assert (root.kind, root.severity, root.ranks, root.hosts) == ("child-failed", "suspect", (5,), ("node3",))
    assert "exit -11 (SIGSEGV), pid 4242" in root.summary
    other = next(f for f in rep.findings if f.ranks == (6,))
    assert other.severity == "warning" and "Connection closed by peer" in other.summary
    victim = next(f for f in rep.findings if f.ranks == (4,))
    assert victim.severity == "info"
    assert {r.rank: r.host for r in rep.ranks} == {4: "node2", 5: "node3", 6: "node3"}


RACE = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
job.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-22_04:40:02
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -11 (pid: 7702)  (SIGSEGV)
  error_file: <N/A>
  traceback : Signal 11 (SIGSEGV) received by PID 7702
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_04:40:02
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 7701)
  error_file: /tmp/torchelastic_q/none_x/attempt_0/0/error.json
  traceback : Traceback (most recent call last):
    File "/tmp/job.py", line 18, in main
      dist.barrier()
  RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:29070.
  
============================================================
"""


def test_root_cause_race(tmp_path):
    """torchelastic orders failures by whole-second timestamps: the rank that lost its peer can be
    printed as the root cause (seen with the real SIGSEGV job under load). hangdbg names the crash."""
    p = tmp_path / "race.log"
    p.write_text(RACE)
    rep = READER.read([str(p)])
    first, second = rep.findings[0], rep.findings[1]
    assert first.ranks == (1,) and first.severity == "suspect" and "SIGSEGV" in first.summary
    assert "torchrun named rank 0" in first.summary
    assert second.ranks == (0,) and second.severity == "warning" and "only lost its peer" in second.summary


def test_old_error_json_invalid_and_missing_files(tmp_path):
    old = tmp_path / "error.json"
    old.write_text('{"message": "ValueError: bad batch", "timestamp": "1700000000"}')
    bad = tmp_path / "bad.json"
    bad.write_text('{"message": ')
    rep = READER.read([str(old), str(bad), str(tmp_path / "missing.log")])
    assert [f.kind for f in rep.findings] == ["child-error"] and "ValueError: bad batch" in rep.findings[0].summary
    assert {Path(e.file).name for e in rep.errors} == {"bad.json", "missing.log"}


def test_garbled_watchdog_lines_counted():
    lines = ["[rank1]:[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALL",
             "frame #3: garbage without an address",
             "[rank0]: hello"]
    ev = torch_log.scan(enumerate(lines, 1), "x.log")
    assert ev.lines_read == 3 and ev.lines_skipped == 2


def test_sniff():
    for name in ("watchdog_pg_v24.log", "watchdog_v18_noseq.log", "desync_missing.log", "watchdog_ahead_v23_crlf.log"):
        assert torch_log.sniff((FX / name).read_bytes()[:65536]), name
    assert torch_log.sniff(b'{"message": {"message": "x", "extraInfo": {"timestamp": "1"}}}')
    assert torch_log.sniff(MULTI.encode())
    for other in (b"node1:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n",
                  b"Jan  5 10:00:00 n kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=p, GPU has fallen off the bus.\n",
                  b"Process 4242: python train.py\nPython v3.11.7\n\nThread 4242 (idle): \"MainThread\"\n",
                  b'{"entries": [], "version": "2.10"}'):
        assert not torch_log.sniff(other)


def test_cli_text_and_exit_codes():
    res = run_main("logs", FX / "watchdog_pg_v24.log")
    assert res.returncode == 3, res.stderr
    assert "rank 5 lags in process group 0 (default_pg)" in res.stdout and "Ranks" in res.stdout
    res = run_main("logs", FX / "watchdog_v18_noseq.log", "--no-evidence")
    assert res.returncode == 0 and "watchdog-timeout" in res.stdout
    res = run_main("logs", FX / "nope.log")
    assert res.returncode == 2 and "no such file" in res.stderr


# --- fuzz ------------------------------------------------------------------------------------

_SAMPLES = [ln for name in ("watchdog_pg_v24.log", "desync_lagging.log", "watchdog_v111_tensorshape.log")
            for ln in (FX / name).read_text().splitlines()] + MULTI.splitlines()




@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated_lines(_SAMPLES, max_int=10**20, min_int=-5), max_size=40))
def test_fuzz_no_exception_escapes(lines):
    data = "\n".join(lines).encode("utf-8", "replace")
    ev = torch_log.scan(iter_lines_from(io.BytesIO(data)), "fuzz.log")
    assert 0 <= ev.lines_skipped <= ev.lines_read
    findings, _, facts = analyze_events(ev)
    json.dumps(to_jsonable(facts))
    assert all(f.severity in ("suspect", "warning", "info") for f in findings)


_MARKER = re.compile(r"collective operation timeout|WorkNCCL\(|frame #|ChildFailedError|NCCL work|Timeout at|lagging|joined"
                     r"|finished|operations have failed|entire process|exitcode|dump signal")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=60).filter(lambda s: not _MARKER.search(s) and "\n" not in s and "\r" not in s), max_size=20),
       st.lists(st.sampled_from(["WorkNCCL(SeqNum=", "Watchdog caught collective operation timeout: WorkNCCL(OpType=X",
                                 "frame #1: f (0x1 in"]), max_size=5), st.randoms())
def test_fuzz_rejected_lines_counted(noise, garbled, rnd):
    lines = noise + garbled
    rnd.shuffle(lines)
    ev = torch_log.scan(enumerate(lines, 1), "fuzz.log")
    assert ev.lines_read == len(lines) and ev.lines_skipped == len(garbled)


def test_committed_real_output_with_collected_error_files():
    """Real torch 2.13 torchrun output kept as a fixture; its error.json copies live elsewhere than
    the paths the summary prints and are matched by their attempt_N/<local_rank>/error.json tail."""
    d = FX / "real_torchrun213_raise"
    rep = READER.read([str(d / "torchrun.log"), *sorted(str(p) for p in d.rglob("error.json"))])
    assert rep.findings[0].ranks == (1,) and "failed on purpose" in rep.findings[0].summary
    assert any(e.source.endswith("attempt_0/1/error.json") for e in rep.findings[0].evidence)
    assert not [f for f in rep.findings if f.kind == "child-error"]
    rep = READER.read([str(FX / "real_torchrun213_segv.log")])
    assert "SIGSEGV" in rep.findings[0].summary and rep.findings[0].ranks == (1,)


def test_skipping_reader_equals_line_reader(tmp_path):
    """scan_file skips 1 MiB runs without a keyword; findings and evidence line numbers must be those
    of the plain line-by-line scan, also with a ChildFailedError block across a run boundary."""
    noise = b"[rank3]:step 100 loss 2.31 lr 1e-4 tokens/s 12345\n" * 30000  # ~1.5 MiB
    fx = (FX / "watchdog_pg_v24.log").read_bytes()
    cut = MULTI.encode().index(b"Root Cause")
    pad = b"x" * ((1 << 20) - (len(noise) + len(fx) + cut) % (1 << 20) - 20) + b"\n"
    data = noise + fx + pad + MULTI.encode()[:cut] + MULTI.encode()[cut:] + noise
    p = tmp_path / "big.log"
    p.write_bytes(data)
    fast = analyze_events(torch_log.scan_file(str(p), "big.log"))
    with open(p, "rb") as f:
        slow = analyze_events(torch_log.scan(iter_lines_from(f), "big.log"))
    assert fast[0] == slow[0] and fast[1] == slow[1]
    assert fast[0][0].ranks == (5,) and any(f.hosts == ("node3",) for f in fast[0])


def test_srun_labels_and_one_summary_per_node(tmp_path):
    """`srun --label` puts "N: " before every line; each node's agent prints its own summary."""
    node1 = MULTI.replace("node3", "node1").replace("2026-11-22_10:07:41", "2026-11-22_10:07:50")
    node1 = node1.replace("rank      : 5 (local_rank: 1)", "rank      : 1 (local_rank: 1)")
    text = "\n".join(f"0: {x}" for x in node1.splitlines()) + "\n" + "\n".join(f"1: {x}" for x in MULTI.splitlines())
    lines = (FX / "watchdog_pg_v24.log").read_text().splitlines()[:20]
    text += "\n" + "\n".join(f"{i % 2}: {x}" for i, x in enumerate(lines)) + "\n"
    p = tmp_path / "srun.log"
    p.write_text(text)
    rep = READER.read([str(p)])
    sus = [f for f in rep.findings if f.severity == "suspect"]
    assert sus[0].ranks == (5,) and sus[0].kind == "child-failed" and sus[0].hosts == ("node3",)  # the earlier root
    assert any(f.kind == "seq-lagging" and f.ranks == (5,) for f in sus)
    assert any(f.ranks == (1,) and f.severity == "warning" for f in rep.findings)  # node1's later root


def test_ranks_text_and_victims_without_a_rank():
    """One ranks_text for every summary; SIGTERM victims whose entries name no rank read "unnamed ranks",
    not "ranks  stopped by the agent"."""
    from hangdbg.rankset import ranks_text
    from hangdbg.evidence.torch_log.analysis import analyze_events
    from hangdbg.model import Evidence
    from hangdbg.evidence.torch_log.grammar import ChildFailure, TorchLogEvents

    assert [ranks_text(r) for r in ([3], [3, 3], [2, 0, 1, 5], ())] == ["rank 3", "rank 3", "ranks {0-2, 5}", "unnamed ranks"]
    e = Evidence("log", 1, "x")
    ev = TorchLogEvents(failures=[ChildFailure(0, 0, "h", -11, 10, "", "", "t", "", True, (e,)),
                                  ChildFailure(None, 1, "h", -15, 11, "", "", "t", "", False, (e,))])
    victims = [f for f in analyze_events(ev)[0] if "SIGTERM" in f.summary]
    assert victims[0].summary.startswith("unnamed ranks stopped by the agent")


def test_real_uncaught_exception_is_read_by_the_error_lines_with_its_frame(torchrun_runs):
    """The traceback a real rank prints (torchrun's output): its last line is an error line even
    without an error word in the message, quoted with its class and the frame that raised it."""
    from hangdbg.evidence.error_lines.reader import READER as LINES
    log, _ = torchrun_runs["raise"]
    rep = LINES.read([str(log)])
    raised = [f for f in rep.findings if f.kind == "rank-error" and "rank 1 failed on purpose" in f.summary]
    assert raised and "RuntimeError" in raised[0].summary and "job.py:" in raised[0].summary
