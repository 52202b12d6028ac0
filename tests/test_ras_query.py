"""NCCL RAS: the JSON reader, the client (ncclras or the socket protocol) and the query of ``dump``.

Reports are written from NCCL's own format strings (``src/ras/client_support.cc``: the JSON ones
in tests/_ras_standin.py ``json_report``, the text ones in :func:`_text` below) and the sample of
``docs/userguide/source/troubleshooting/ras.rst``; the server is a stand-in on 127.0.0.1 speaking
the protocol of ``rasClientEventLoop`` (tests/_ras_standin.py). There is no NCCL here.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _ras_standin import Missing, Rank, RasStandIn, json_report

from hangdbg.collect.ras import query_job_ras, ras_enabled, ras_plan
from hangdbg.evidence.nccl_ras.analysis import analyze_ras
from hangdbg.evidence.nccl_ras.grammar import parse_lines
from hangdbg.evidence.nccl_ras.json_format import parse_json, sniff_json
from hangdbg.evidence.nccl_ras.reader import READER, read_one
from hangdbg.model import Kind, Severity, SourceKind
from hangdbg.outdir import OutDir
from hangdbg.tools.ras import NOT_LISTENING, RasAddress, parse_ras_addr, query_ras

ARTIFACTS = Path("/work/shared/real-artifacts/flight_recorder")
HASH = 0xAE94423CFBB2EF4A


def _ranks(n: int, counts: dict[int, int], coll: str = "AllReduce", pid0: int = 4000) -> list[Rank]:
    """``n`` ranks at ``counts.get(rank, max)`` operations of ``coll``."""
    top = max(counts.values(), default=0) + 1 if counts else 10
    return [Rank(i, pid=pid0 + i, cuda_dev=i % 8, counts={coll: counts.get(i, top)}) for i in range(n)]


def _text(behind: int, low: int, n: int) -> str:
    """A text report with the printf formats of ``rasClientRunInit``/``rasClientRunComms``: one
    communicator of ``n`` ranks, rank ``behind`` one AllReduce behind the others."""
    return ("NCCL version 2.26.2 compiled with CUDA 12.6\n" "CUDA runtime version %d, driver version %d\n\n" % (12060, 12060)
            + "Job summary\n===========\n\n"
            "  Nodes  Processes         GPUs  Processes     GPUs\n(total)   per node  per process    (total)  (total)\n"
            + "%7d  %9d  %11d  %9d  %7d\n" % (1, n, 1, n, n)
            + "\nCommunicators..." + " (%.3fs)\n=============\n\n" % 0.001
            + "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
            "    #  in group  per comm  per node  per comm  in group\n"
            + "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\n" % (0, 1, 1, str(n), n, n, "RUNNING", "MISMATCH")
            + "\nErrors\n======\n\n" + "Warnings\n========\n\n"
            + "#%d-%d (%016x) MISMATCH\n" % (0, 0, HASH)
            + "  Communicator ranks have different %s operation counts\n" % "AllReduce"
            + "  %d ranks have launched up to operation %d\n" % (n - 1, low + 1)
            + "  Rank %d has launched up to operation %d -- GPU %s managed by process %d on node %s\n"
            % (behind, low, behind, 4000 + behind, "10.0.0.1") + "\n")


# --- the JSON reader ------------------------------------------------------------------------------
def test_json_op_count_lag_names_the_rank_behind_and_never_the_ranks_ahead():
    js = json_report([(HASH, 1, 2, 8, _ranks(8, {3: 4411}), [])])
    t = parse_json(js, "r.json")
    (rep,) = t.reports
    assert rep.processes == 8 and rep.nccl_version == "2.29.1" and t.skipped == 0
    findings, rows, facts = analyze_ras([t])
    (s,) = [f for f in findings if f.is_suspect]
    assert s.kind is Kind.RAS_MISMATCH and s.ranks == (3,)
    assert "4411" in s.summary and "4412" in s.summary and "ae94423cfbb2ef4a" in s.summary
    assert "rank 3 is at AllReduce operation 4411" in s.summary
    ahead = [f for f in findings if not f.is_suspect]
    assert ahead and all(3 not in f.ranks and f.severity is Severity.INFO for f in ahead)
    assert {r.rank: r.state for r in rows}[3] == "behind (RAS)" and len(rows) == 8
    assert s.evidence[0].line > 0  # points into NCCL's pretty-printed JSON


def test_json_and_text_of_the_same_state_name_the_same_rank():
    js = parse_json(json_report([(HASH, 1, 2, 16, _ranks(16, {11: 90}), [])]), "a.json")
    tx = parse_lines(enumerate(_text(11, 90, 16).splitlines(), 1), "a.txt")
    sj = [f for f in analyze_ras([js])[0] if f.is_suspect]
    st = [f for f in analyze_ras([tx])[0] if f.is_suspect]
    assert [f.ranks for f in sj] == [f.ranks for f in st] == [(11,)]
    assert js.reports[0].issues[0].comm_hash == tx.reports[0].issues[0].comm_hash == f"{HASH:016x}"


def test_the_ras_rst_sample_missing_rank_is_unreachable_not_a_mismatch():
    # docs/userguide/source/troubleshooting/ras.rst "JSON Output": rank 1 unresponsive
    js = json_report([(HASH, 0xB7E7187447156001, 0xB8242ED28A71381E, 2, [Rank(0, "172.16.64.245", 1524344)],
                       [Missing(1, "172.16.64.245", 1524345, 1)])])
    findings = analyze_ras([parse_json(js, "s.json")])[0]
    (u,) = [f for f in findings if f.kind is Kind.RAS_UNREACHABLE]
    assert "1 rank" in u.summary and "1524345" in u.summary
    assert not [f for f in findings if f.kind is Kind.RAS_MISMATCH]


def test_json_status_errors_dead_and_timeouts():
    ranks = _ranks(4, {})
    ranks[1].async_error = 2  # ncclSystemError
    ranks[2].init_state = 7  # ncclInProgress: still initializing, no error
    dead = Missing(3, pid=4003, considered_dead=True)
    findings = analyze_ras([parse_json(json_report([(HASH, 1, 2, 4, ranks[:3], [dead])], timeouts=2), "e.json")])[0]
    kinds = {f.kind: f for f in findings}
    assert "System error" in kinds[Kind.RAS_ERROR].summary and kinds[Kind.RAS_ERROR].ranks == (1,)
    (dead_f,) = [f for f in findings if f.kind is Kind.RAS_UNREACHABLE and "considered dead" in f.summary]
    assert dead_f.ranks == (3,)
    (init,) = [f for f in findings if f.kind is Kind.RAS_MISMATCH]
    assert init.ranks == (2,) and "initializing" in init.summary
    assert any("2 communication timeouts" in f.summary for f in findings)


@pytest.mark.parametrize("text", ["", "{", "[]", '{"nccl_version": 3, "communicators": 7}', "\x00\xff" * 50,
                                  '{"communicators": [{"hash": "zz", "size": "x"}, 5, {"hash": "0x1", "size": 2, '
                                  '"ranks": [{"rank": "a"}, {"rank": 0, "collective_counts": {"AllReduce": "9"}}]}]}'])
def test_garbage_json_is_counted_never_raised(text):
    t = parse_json(text, "g.json")
    assert t.skipped >= 1 or (t.reports and t.reports[0].comm_groups)


def test_reader_takes_json_and_text_files_and_the_real_artifact(tmp_path):
    p = tmp_path / "ras.json"
    p.write_text(json_report([(HASH, 1, 2, 8, _ranks(8, {5: 3}), [])]))
    assert sniff_json(p.read_bytes()[:4096]) and READER.sniff(p.read_bytes()[:4096])
    rep = READER.read([str(p)])
    assert [f.ranks for f in rep.findings if f.is_suspect] == [(5,)]
    assert {f.source for f in rep.findings} == {SourceKind.NCCL_RAS}
    real = ARTIFACTS / "nccl-1911-ras-mismatch-allgather-opcount.txt"
    if real.exists():  # NVIDIA/nccl#1911: 30 ranks at 640 are behind, ranks 12, 13 ahead are not stragglers
        t = read_one(str(real))
        assert t.reports and t.reports[-1].processes == 32
        sus = [f for f in READER.read([str(real)]).findings if f.is_suspect]
        assert sus and all(12 not in f.ranks and 13 not in f.ranks for f in sus)


# --- the client -------------------------------------------------------------------------------
def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_client_speaks_the_protocol_and_asks_for_json():
    js = json_report([(HASH, 1, 2, 2, _ranks(2, {}), [])])
    with RasStandIn(json_text=js) as s:
        a = query_ras(RasAddress("127.0.0.1", s.port), 5, ncclras=None)
    assert (a.format, a.via, a.error, a.text) == ("json", "socket", "", js)
    assert s.commands == ["CLIENT PROTOCOL 2", "TIMEOUT 2", "SET FORMAT json", "STATUS"]


def test_client_falls_back_to_text_before_nccl_2_28_7():
    text = _text(1, 5, 4)
    with RasStandIn(text=text, mode="old") as s:
        a = query_ras(RasAddress("127.0.0.1", s.port), 5, verbose=True, ncclras=None)
    assert (a.format, a.text) == ("text", text)  # both pieces, joined
    assert s.commands[-1] == "VERBOSE STATUS"


def test_refused_connection_says_why_at_once():
    t = time.monotonic()
    a = query_ras(RasAddress("127.0.0.1", _free_port()), 10, ncclras=None)
    assert a.refused and "refused" in a.error and time.monotonic() - t < 1


@pytest.mark.parametrize("mode", ["silent", "garbage"])
def test_a_silent_or_foreign_server_is_bounded_and_explained(mode):
    with RasStandIn(mode=mode) as s:
        t = time.monotonic()
        a = query_ras(RasAddress("127.0.0.1", s.port), 2, ncclras=None)
    assert not a.text and a.error and time.monotonic() - t < 3
    assert ("did not answer" in a.error) if mode == "silent" else ("not a RAS server" in a.error)


def test_addresses_and_the_enable_switch():
    assert parse_ras_addr(None) == RasAddress("localhost", 28028)
    assert parse_ras_addr("[::1]:12345") == RasAddress("::1", 12345) and str(parse_ras_addr("[::1]:1")) == "[::1]:1"
    assert parse_ras_addr("node7:999") == RasAddress("node7", 999)
    assert [parse_ras_addr(v) for v in ("junk", "h:0", "h:70000", "[::1", ":5")] == [None] * 5
    assert [ras_enabled(v) for v in (None, "", "1", "0x1", " 1", "1abc")] == [True] * 6
    assert [ras_enabled(v) for v in ("0", "2", "no", "-1", "true")] == [False] * 5


def _fake_ncclras(tmp_path: Path, old: bool) -> Path:
    """An ``ncclras`` on PATH with client.cc's options: prints the stand-in's answer (through the
    socket client); ``old``: a client before 2.28.7, which rejects ``-f`` like getopt does."""
    exe = tmp_path / "bin" / "ncclras"
    exe.parent.mkdir()
    exe.write_text(f"""#!{sys.executable}
import sys, getopt
sys.path[:0] = {[str(Path(__file__).resolve().parents[1])]!r}
from hangdbg.tools.ras import RasAddress, query_ras
open({str(tmp_path / 'argv.txt')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')
try:
    opts, _ = getopt.getopt(sys.argv[1:], {"'h:p:t:v'" if old else "'f:h:p:t:v'"})
except getopt.GetoptError as e:
    print(sys.argv[0] + ': ' + str(e), file=sys.stderr); sys.exit(1)
o = dict(opts)
a = query_ras(RasAddress(o['-h'], int(o['-p'])), 5, o.get('-f', 'text'), ncclras=None)
sys.stdout.write(a.text)
""")
    exe.chmod(0o755)
    return exe.parent


@pytest.mark.parametrize("old", [False, True])
def test_the_ncclras_binary_is_preferred_with_an_argv_list(tmp_path, monkeypatch, old):
    js = json_report([(HASH, 1, 2, 2, _ranks(2, {}), [])])
    monkeypatch.setenv("PATH", f"{_fake_ncclras(tmp_path, old)}{os.pathsep}{os.environ['PATH']}")
    with RasStandIn(text=_text(0, 1, 2), json_text=js) as s:
        a = query_ras(RasAddress("127.0.0.1", s.port), 8)
    assert a.via == "ncclras" and a.argv[1:] == ("-h", "127.0.0.1", "-p", str(s.port), "-t", "4") + (() if old else ("-f", "json"))
    assert a.format == ("text" if old else "json") and a.text == (_text(0, 1, 2) if old else js)
    tries = (tmp_path / "argv.txt").read_text().splitlines()
    assert len(tries) == (2 if old else 1)


# --- the query of dump ----------------------------------------------------------------------------
@pytest.fixture
def rank_proc():
    """A real process standing for a rank (its start environment is what dump reads)."""
    procs = []

    def start(env: dict[str, str]) -> int:
        p = subprocess.Popen(["sleep", "60"], env={"PATH": os.environ["PATH"], **env})
        procs.append(p)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{p.pid}/cmdline").read_bytes() != b"sleep\x0060\x00":  # exec'd: its own environ
            assert time.monotonic() < deadline
            time.sleep(0.01)
        return p.pid

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_dump_query_writes_the_answer_and_names_the_rank_behind(rank_proc, tmp_path):
    with RasStandIn() as s:
        pid = rank_proc({"NCCL_RAS_ADDR": f"127.0.0.1:{s.port}", "RANK": "0"})
        s.json_texts = [json_report([(HASH, 1, 2, 4, _ranks(4, {2: 7}, pid0=pid), [])])]
        # ranks 0..3 have pids pid..pid+3: the first is the real process, a rank of this dump
        out = OutDir(tmp_path)
        q, findings = query_job_ras([pid], out, 10)
    assert q.state == "answered" and q.queries == 2 and q.files == ("ras/ras-1.json", "ras/ras-2.json")
    assert s.commands.count("STATUS") == 2  # the counts differ: asked again, they did not advance
    (sus,) = [f for f in findings if f.is_suspect]
    assert sus.ranks == (2,) and sus.source is SourceKind.NCCL_RAS and "rank 2" in q.line
    assert (tmp_path / "ras" / "ras-1.json").read_text() == s.json_texts[0]
    assert stat.S_ISREG((tmp_path / "ras" / "ras-1.json").stat().st_mode)


def test_counts_that_advance_between_the_two_queries_are_no_suspect(rank_proc, tmp_path):
    with RasStandIn() as s:
        pid = rank_proc({"NCCL_RAS_ADDR": f"127.0.0.1:{s.port}"})
        s.json_texts = [json_report([(HASH, 1, 2, 4, _ranks(4, {2: 7}, pid0=pid), [])]),
                        json_report([(HASH, 1, 2, 4, _ranks(4, {2: 9}, pid0=pid), [])])]
        q, findings = query_job_ras([pid], OutDir(tmp_path), 10)
    assert q.queries == 2 and not [f for f in findings if f.is_suspect]
    assert any(f.severity is Severity.WARNING and "advanced" in f.summary for f in findings)


def test_a_single_sample_cannot_decide(rank_proc, tmp_path):
    with RasStandIn() as s:
        pid = rank_proc({"NCCL_RAS_ADDR": f"127.0.0.1:{s.port}"})
        s.json_texts = [json_report([(HASH, 1, 2, 4, _ranks(4, {2: 7}, pid0=pid), [])])]
        q, findings = query_job_ras([pid], OutDir(tmp_path), 2)  # no time left for a second query
    assert q.queries == 1 and not [f for f in findings if f.is_suspect]
    assert any(f.kind is Kind.UNDECIDED for f in findings)


def test_not_an_nccl_job_or_ras_off_is_not_queried_and_costs_no_wait(rank_proc, tmp_path):
    with RasStandIn() as s:
        plain = rank_proc({"RANK": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})  # what torchrun sets for gloo too
        off = rank_proc({"NCCL_RAS_ENABLE": "0", "NCCL_RAS_ADDR": f"127.0.0.1:{s.port}"})
        t = time.monotonic()
        q1, f1 = query_job_ras([plain], OutDir(tmp_path), 10)
        q2, f2 = query_job_ras([off], OutDir(tmp_path), 10)
        assert time.monotonic() - t < 1
    assert q1.state == q2.state == "not-queried" and not f1 and not f2 and not s.commands
    assert "not an NCCL job" in q1.line and "NCCL_RAS_ENABLE" in q2.line
    assert not (tmp_path / "ras").exists()


def test_nothing_listening_is_one_line_with_the_remedy(rank_proc, tmp_path):
    pid = rank_proc({"NCCL_RAS_ADDR": f"127.0.0.1:{_free_port()}"})
    q, findings = query_job_ras([pid], OutDir(tmp_path), 10)
    assert q.state == "absent" and NOT_LISTENING in q.line and q.line.startswith("RAS: absent (") and not findings


def test_another_jobs_ras_and_garbage_are_not_judged(rank_proc, tmp_path):
    with RasStandIn() as s:
        pid = rank_proc({"NCCL_RAS_ADDR": f"127.0.0.1:{s.port}"})
        s.json_texts = [json_report([(HASH, 1, 2, 4, _ranks(4, {2: 7}, pid0=10), [])])]
        q, findings = query_job_ras([pid], OutDir(tmp_path / "a"), 10)
    assert q.state == "foreign" and not findings and "NCCL_RAS_ADDR" in q.line
    with RasStandIn(mode="status-garbage") as s:
        pid = rank_proc({"NCCL_RAS_ADDR": f"127.0.0.1:{s.port}"})
        q, findings = query_job_ras([pid], OutDir(tmp_path / "b"), 10)
    assert q.state == "unreadable" and q.garbled_lines >= 1 and not findings
    assert (tmp_path / "b" / "ras" / "ras-1.json").exists()  # the raw answer, as it came


def test_ras_plan_reads_libnccl_from_maps_of_this_process():
    addrs, why = ras_plan([os.getpid()])
    loaded = any("/libnccl" in ln for ln in open(f"/proc/{os.getpid()}/maps"))
    has_var = any(k.startswith("NCCL_") for k in os.environ)
    assert bool(addrs) == (loaded or has_var) and (why == "") == bool(addrs)


def test_the_answers_of_one_dump_are_read_back_as_one_series(tmp_path):
    """``report OUT`` reads ras-1/ras-2 the way the dump judged them: counts that advanced
    between the two queries blame nobody (each file alone would blame rank 2)."""
    (tmp_path / "ras").mkdir()
    for n, low in ((1, 7), (2, 9)):
        (tmp_path / "ras" / f"ras-{n}.json").write_text(json_report([(HASH, 1, 2, 4, _ranks(4, {2: low}), [])]))
    rep = READER.read(sorted(str(p) for p in (tmp_path / "ras").iterdir()))
    assert rep.records == 2 and not [f for f in rep.findings if f.is_suspect]
    assert any("advanced" in f.summary for f in rep.findings)
    alone = READER.read([str(tmp_path / "ras" / "ras-1.json")])
    assert [f.ranks for f in alone.findings if f.is_suspect] == [(2,)]


def test_the_headline_adds_ras_only_for_ranks_the_stacks_did_not_name():
    from hangdbg.collect.ras import with_ras_headline
    from hangdbg.model import Finding
    ras = [Finding(Kind.RAS_MISMATCH, "rank 3 behind", ranks=(3,), source=SourceKind.NCCL_RAS)]  # a suspect
    assert with_ras_headline("h", ras, [Finding(Kind.RAS_OK, "x", ranks=(3,), severity=Severity.INFO)]) == "h; NCCL RAS: rank 3 behind"
    assert with_ras_headline("h", ras, [Finding(Kind.RAS_OK, "x", ranks=(3,), severity=Severity.SUSPECT)]) == "h"
    assert with_ras_headline("h", [], []) == "h"


def test_cut_and_mangled_json_answers_never_raise():
    """An answer cut by the deadline (every 37th prefix) or with a field of the wrong type."""
    js = json_report([(HASH, 1, 2, 4, _ranks(4, {1: 3}), [Missing(3)])], timeouts=1)
    for cut in range(0, len(js), 37):
        t = parse_json(js[:cut], "cut.json")
        assert t.reports == () and t.skipped == t.lines_read
    for a, b in (('"rank": 1', '"rank": -1'), ('"size": 4', '"size": "4"'), ('"pid": 4001', '"pid": null'),
                 ('"AllReduce": 3', '"AllReduce": 1e99'), ('"status": {', '"status": [{'), ('"host": "10', '"host": 7, "x": "')):
        t = parse_json(js.replace(a, b, 1), "m.json")
        analyze_ras([t])  # judged, or counted as skipped: never a traceback
