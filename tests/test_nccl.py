"""NCCL_DEBUG logs: parser units, suspects on fixtures written from the documented formats, the
fast chunked scan against the per-line parser, a fuzz test, and ``hangdbg nccl`` through the CLI.

Fixtures: tests/fixtures/nccl/*.log (regenerate with make_fixtures.py; formats in nccl_gen.py and
hand_formats.log).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdbg.evidence.nccl.grammar import RECORD, _SHAPE, record_starts, sniff
from hangdbg.evidence.nccl.scan import scan
from hangdbg.report.schema import to_jsonable
from hangdbg.evidence.nccl.reader import NcclReader
from hangdbg.text.lines import strip_prefix

from conftest import check_golden, read_json, run_main, main_json

FIX = Path(__file__).parent / "fixtures" / "nccl"
sys.path.insert(0, str(FIX))
import nccl_gen  # noqa: E402


def read(paths, **kw):
    """The NCCL reader (``split_on``, ``workers`` as ``nccl summary`` passes them)."""
    return NcclReader().read_split(paths, **kw)


def facts(rep) -> dict:
    """The reader's typed facts as their JSON twin."""
    return to_jsonable(rep.facts)

LOGS = sorted(str(p) for p in FIX.glob("*.log"))


def scan_text(text: str, **kw):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.log"
        path.write_text(text)
        return scan([str(path)], **kw)


def fx(name: str) -> str:
    return str(FIX / name)


def suspects(rep, kind=None):
    return [f for f in rep.findings if f.severity == "suspect" and (kind is None or f.kind == kind)]


def signature(log):
    """What the scan found, independent of how it was scanned."""
    out = []
    for key, p in sorted(log.procs.items()):
        comms = tuple((c.key, c.rank, c.nranks, c.state, tuple(sorted(c.counts.items())), c.last_op, c.last_where)
                      for c in p.all_comms)
        out.append((key, p.rank, p.version, p.plugin, tuple(sorted(p.ifaces)), tuple(sorted(p.transports)),
                    p.nwarns, p.nchains, len(p.connects), comms))
    return out, log.lines_read, log.lines_skipped, log.records


# --- parser units -------------------------------------------------------------------------------
def test_record_header_forms():
    m = RECORD.match("node-1:4242:4300 [3] NCCL INFO AllReduce: opCount 1f")
    assert (m.group("host"), m.group("pid"), m.group("tid"), m.group("dev"), m.group("level")) == (
        "node-1", "4242", "4300", "3", "INFO")
    w = RECORD.match("10.0.3.7:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to")
    assert (w.group("host"), w.group("src"), w.group("srcline"), w.group("level")) == ("10.0.3.7", "misc/socket.cc", "484", "WARN")
    old = RECORD.match("h:1:2 [0] include/socket.h:390 WARN Connect to 10.0.0.6<53121> failed")
    assert old.group("old") == "WARN" and old.group("level") is None
    assert RECORD.match("h:1:2 NCCL CALL ncclGroupEnd()").group("level") == "CALL"
    assert RECORD.match("h:1:2 [3] 1234.567890 enqueue.cc:1520 NCCL TRACE launch").group("ts") == "1234.567890"
    assert RECORD.match("Epoch 0: loss=2.345 lr=0.001") is None


def test_spliced_line_has_two_record_starts():
    a = "node-1:10:11 [0] NCCL INFO AllReduce: opCount 5 sendbuff 0x1 recvbuff 0x1 count 1 datatype 7 op 0 root 0 comm 0xa [nranks=2] stream 0x1"
    b = "node-2:20:21 [1] NCCL INFO AllReduce: opCount 5 sendbuff 0x1 recvbuff 0x1 count 1 datatype 7 op 0 root 0 comm 0xb [nranks=2] stream 0x1"
    starts = record_starts(a + b)
    assert len(starts) == 2 and starts[1].group("host").endswith("node-2")  # "0x1node-2": cut mid-token
    log = scan_text(a + "\n" + b + "\n" + a + b + "\n")
    assert sorted(log.procs) == [("node-1", 10), ("node-2", 20)]  # the known host name is recovered
    assert [sum(c.counts.values()) for p in log.procs.values() for c in p.all_comms] == [2, 2]
    # a new host whose name ends like a known one is not merged into it ("210.0.0.5" vs "10.0.0.5")
    c = a.replace("node-1:10:11", "10.0.0.5:10:11")
    log = scan_text(c + "\n" + c.replace("10.0.0.5:10:11", "210.0.0.5:30:31") + "\n")
    assert sorted(log.procs) == [("10.0.0.5", 10), ("210.0.0.5", 30)]


def test_hand_written_formats():
    rep = read([fx("hand_formats.log")])
    procs = {p["host"]: p for p in facts(rep)["processes"]}
    assert set(procs) == {"trainer-pod-7f9c-0", "3f2a9c1b7d4e", "10.0.3.7", "node-9"}
    pod = procs["trainer-pod-7f9c-0"]
    assert pod["version"] == "2.18.1+cuda12.1"  # from the line without host prefix
    assert pod["interfaces"] == ["eth0", "net1"] and "fd00:10:244::12" in pod["ips"]
    assert pod["plugin"] == "none" and pod["transports"] == ["SHM"]
    assert pod["comms"][0]["last_op"] == 0xD60
    assert procs["10.0.3.7"]["plugin"] == "loaded: AWS Libfabric"
    assert procs["3f2a9c1b7d4e"]["interfaces"] == ["eth0", "mlx5_0:1/RoCE"]
    split = procs["3f2a9c1b7d4e"]["comms"][1]
    assert split["parent"] == "0x7700b0" and split["state"] == "start"
    assert procs["3f2a9c1b7d4e"]["comms"][0]["state"] == "aborted"
    # the IB completion error names the peer by IP; the logs' own NET/Socket line says whose it is
    cf = suspects(rep, "nccl-connect-failed")
    assert len(cf) == 1 and cf[0].hosts == ("trainer-pod-7f9c-0",) and "172.36.143.58<44206>" in cf[0].summary
    assert {f.kind for f in rep.findings if f.severity == "warning"} >= {"nccl-warn", "nccl-aborted"}
    # "[x]" device and "opCount zz": the record shape, unparsable -> skipped and counted
    assert rep.lines_skipped == 2
    assert {r.rank: r.state for r in rep.ranks}[1] == "init incomplete"


# --- suspects on fixtures -----------------------------------------------------------------------
def test_clean_run_has_no_suspect():
    rep = read([fx("clean.log")])
    assert not suspects(rep) and rep.lines_skipped == 0
    assert [r.rank for r in rep.ranks] == list(range(16))
    assert {r.state for r in rep.ranks} == {"ok"} and len({r.seq for r in rep.ranks}) == 1
    counts = {json.dumps(p["collectives"], sort_keys=True) for p in facts(rep)["processes"]}
    assert len(counts) == 1


def test_init_never_completed():
    rep = read([fx("init_stuck.log")])
    f = suspects(rep, "nccl-init-incomplete")
    assert [x.ranks for x in f] == [(9,)] and f[0].hosts == ("node-02",)
    assert "Init START" in f[0].evidence[0].text and f[0].evidence[0].line
    # rank 9 is not blamed twice (as lagging too)
    assert not any(9 in x.ranks for x in suspects(rep, "nccl-lagging"))


def test_connection_refused_names_the_peer_host():
    rep = read([fx("refused.log")])
    f = suspects(rep, "nccl-connect-failed")
    assert len(f) == 1 and f[0].hosts == ("node-02",)
    assert "Connection refused" in f[0].summary and "10.0.0.7<43521>" in f[0].summary
    assert "Connect to 10.0.0.7<43521> failed" in f[0].evidence[0].text


def test_lagging_rank():
    rep = read([fx("lagging.log")])
    f = suspects(rep, "nccl-lagging")
    assert len(f) == 1 and f[0].ranks == (5,) and f[0].hosts == ("node-01",)
    assert "opCount 0xa" in f[0].summary and "behind the other 15 ranks" in f[0].summary
    assert any("opCount a " in e.text for e in f[0].evidence)  # the raw last line of rank 5


def test_few_ahead_many_behind():
    rep = read([fx("few_ahead.log")])
    f = suspects(rep, "nccl-lagging")
    assert len(f) == 1 and f[0].ranks == tuple(range(2, 16))
    assert "stragglers are the many" in f[0].summary and "only ranks {0-1} went on" in f[0].summary


def test_plugin_on_one_host():
    rep = read([fx("plugin_one_host.log")])
    f = suspects(rep, "nccl-setup-differs")
    assert len(f) == 1 and f[0].hosts == ("node-01",) and f[0].ranks == (4, 5, 6, 7)
    assert "net plugin" in f[0].summary and "known cause" in f[0].summary


def test_split_communicator_is_a_group_of_its_own():
    rep = read([fx("subcomm.log")])
    assert not suspects(rep)
    comms = facts(rep)["communicators"]
    assert sorted(v["nranks"] for v in comms.values()) == [4, 4, 8]
    p0 = facts(rep)["processes"][0]
    assert [c["nranks"] for c in p0["comms"]] == [8, 4] and p0["comms"][1]["parent"] == p0["comms"][0]["comm"]


@pytest.mark.parametrize("name", ["prefixed_timestamps.log", "mpirun.log", "ray.log"])
def test_launcher_prefixes(name):
    rep = read([fx(name)])
    assert rep.lines_skipped == 0 and [r.rank for r in rep.ranks] == list(range(8))
    assert [f.ranks for f in suspects(rep)] == [(2,)]


def test_old_nccl_2_2_format():
    rep = read([fx("old_2_2.log")])
    assert rep.lines_skipped == 0
    assert facts(rep)["processes"][0]["version"] == "2.2.13+cuda9.0"
    kinds = {f.kind: f for f in suspects(rep)}
    assert kinds["nccl-lagging"].ranks == (7,)
    assert kinds["nccl-connect-failed"].hosts == ("node-01",)


def test_messy_file():
    """Spliced records, hard wraps, CRLF, bad bytes, escape codes and a truncated last line."""
    log = scan([fx("messy.log")])
    raw = Path(fx("messy.log")).read_bytes()
    last = raw.rsplit(b"\n", 1)[-1]
    total = sum(sum(c.counts.values()) for p in log.procs.values() for c in p.all_comms)
    job = nccl_gen.Job(hosts=2, per_host=4, ops=14, stop_at={4: 10})
    issued = sum(job.stop_at.get(r, job.ops) for r in range(8))
    cut = b": opCount " in last and b" comm 0x" not in last
    assert total == issued - cut
    assert log.lines_skipped == int(cut)
    assert len(log.procs) == 8
    rep = read([fx("messy.log")])
    assert [f.ranks for f in suspects(rep)] == [(4,)]


def test_per_process_files():
    files = sorted(str(p) for p in (FIX / "perproc").iterdir())
    rep = read(files)
    assert [r.rank for r in rep.ranks] == list(range(8))
    assert [f.ranks for f in suspects(rep, "nccl-init-incomplete")] == [(6,)]


# --- the fast scan against the per-line parser -----------------------------------------------------
@pytest.mark.parametrize("path", LOGS, ids=[Path(p).name for p in LOGS])
def test_fast_scan_equals_line_parser(path):
    fast = signature(scan([path], workers=1, chunk=4096))
    whole = signature(scan([path], workers=1))
    lines = signature(scan([path], split_on=re.compile(r"(?!x)x")))  # per-line path, never matches
    assert fast == whole == lines


@pytest.mark.parametrize("lead", ["\u00a0", "\u0085", "\x1c", "\u2003"])
def test_fast_scan_leaves_unicode_space_before_a_host_to_the_line_parser(lead):
    """Str regexes take these for whitespace (the record starts after them); the bytes scan must too."""
    line = (lead + "node-1:2001:2101 [0] NCCL INFO AllReduce: opCount d5f sendbuff 0x7f0000 recvbuff 0x7f0000 "
            "count 4 datatype 7 op 0 root 0 comm 0x5611a0 [nranks=4] stream 0x1\n")
    fast = scan_text(line, workers=1)
    assert fast.records == 1 and ("node-1", 2001) in fast.procs
    assert signature(fast) == signature(scan_text(line, split_on=re.compile(r"(?!x)x")))


def test_last_opcount_window_widens(monkeypatch):
    """The last opCount of a rank that stopped early lies before the end window of its chunk."""
    import hangdbg.evidence.nccl.scan as mod

    paths = [fx("lagging.log"), fx("subcomm.log"), fx("messy.log")]
    want = signature(scan(paths, workers=1))
    monkeypatch.setattr(mod, "TAIL_WINDOW", 300)
    assert signature(scan(paths, workers=1, chunk=30000)) == want


def test_worker_processes_give_the_same_result():
    paths = [fx("clean.log"), fx("lagging.log")]
    assert signature(scan(paths, workers=2, chunk=8192)) == signature(scan(paths, workers=1))


def test_unreadable_and_empty_files(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    rep = read([str(tmp_path / "gone.log"), str(empty), fx("lagging.log")])
    assert [e.file for e in rep.errors] == [str(tmp_path / "gone.log")]
    assert [f.ranks for f in suspects(rep)] == [(5,)]  # the rest is still read


def test_sniff():
    for p in LOGS:
        assert sniff(Path(p).read_bytes()[:65536]), p
    others = list((Path(__file__).parent / "fixtures" / "pyspy").glob("*.txt"))
    assert others and not any(sniff(p.read_bytes()[:65536]) for p in others)
    assert not sniff(b"[rank3]:[E ProcessGroupNCCL.cpp:563] Watchdog caught collective operation timeout\n")
    assert sniff(b"node-0:1:2 [0] INFO Bootstrap : Using eth0:10.0.0.1<0>\nNCCL version 2.2.13\n")  # NCCL 2.2
    assert not sniff(b"node-0:1:2 [0] INFO Bootstrap : Using eth0:10.0.0.1<0>\n")  # no NCCL anywhere
    assert sniff(b"NCCL version 2.18.1+cuda12.1\nnode-0:1:2 [0] NCCL INFO x\n")
    assert not sniff(b"node-0:1:2 NCCL CALL ncclAllReduce(0x1)\n")  # levels INFO/WARN/TRACE only


# --- fuzz -----------------------------------------------------------------------------------------
_SAMPLE = [ln for ln in Path(fx("hand_formats.log")).read_text().splitlines() if ln.strip()]


def _mutate(draw_line: str, cut: int, junk: str, where: int) -> str:
    where = where % (len(draw_line) + 1)
    return (draw_line[:where] + junk + draw_line[where + cut:])


nccl_lines = st.builds(_mutate, st.sampled_from(_SAMPLE), st.integers(0, 20), st.text(max_size=12), st.integers(0, 300))
any_lines = st.one_of(nccl_lines, st.text(max_size=120), st.sampled_from(_SAMPLE))


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(any_lines, min_size=1, max_size=12))
def test_fuzz_never_raises_and_counts_rejects(tmp_path, lines):
    path = tmp_path / "fuzz.log"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    log = scan([str(path)], workers=1, chunk=64)
    rep = read([str(path)], workers=1)
    assert 0 <= log.lines_skipped <= log.lines_read + 1  # a record and its wrap continuation
    assert rep.lines_skipped == log.lines_skipped
    # fast scan and per-line parser agree
    assert signature(log) == signature(scan([str(path)], split_on=re.compile(r"(?!x)x")))


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nccl_lines)
def test_fuzz_one_line_is_parsed_or_counted(tmp_path, line):
    line = line.replace("\n", " ").replace("\r", " ")
    path = tmp_path / "one.log"
    path.write_text(line + "\n", encoding="utf-8", errors="surrogatepass")
    log = scan([str(path)], workers=1)
    text = strip_prefix(line).text
    if RECORD.search(text) or _SHAPE.search(text):
        assert log.records + log.lines_skipped >= 1
    else:
        assert log.lines_skipped == 0


# --- the command line -------------------------------------------------------------------------------
def test_cli_summary_clean_and_suspects():
    ok = run_main("nccl", "summary", fx("clean.log"))
    assert ok.returncode == 0, ok.stderr
    assert "no suspect" in ok.stdout and "AllReduce" in ok.stdout
    bad = run_main("nccl", "summary", fx("init_stuck.log"))
    assert bad.returncode == 3
    assert "rank 9 never completed init" in bad.stdout and "init incomplete" in bad.stdout


def test_cli_summary_json():
    code, doc = main_json("nccl", "summary", fx("refused.log"), fx("plugin_one_host.log"))
    assert code == 3 and doc["command"] == "nccl summary" and doc["schema_version"] == 4
    kinds = {f["kind"]: f for f in doc["findings"]}
    assert kinds["nccl-connect-failed"]["hosts"] == ["node-02"]
    check_golden(doc, "nccl-summary")
    assert doc["source"]["facts"]["ip_hosts"]["10.0.0.7"] == "node-02"


def test_cli_summary_split_on(tmp_path):
    code, doc = main_json("nccl", "summary", fx("iterations.log"), "--split-on", r"iteration \d+", "-o", tmp_path)
    assert code == 3
    assert read_json(tmp_path / "nccl.json")["source"]["facts"]["slices"] == doc["source"]["facts"]["slices"]
    slices = doc["source"]["facts"]["slices"]
    assert len(slices["rank 0"]) == 5  # before the first print + 4 iterations
    differ = [f for f in doc["findings"] if f["kind"] == "nccl-slice-differs"]
    assert [f["ranks"] for f in differ] == [[6]] and "slice 4" in differ[0]["summary"]
    assert sum(slices["rank 6"][4].values()) < sum(slices["rank 0"][4].values())
    table = run_main("nccl", "summary", fx("iterations.log"), "--split-on", r"iteration \d+")
    assert "Collectives per slice" in table.stdout


def test_slice_table_keeps_two_processes_of_one_rank(tmp_path):
    # two processes with rank 0 (two jobs' logs): one row each, not the second overwriting the first
    coll = ("{h}:{pid}:1 [0] NCCL INFO {name}: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1 datatype 7 op 0 root 0 "
            "comm {c} [nranks=1] stream 0x3\n")
    init = "{h}:{pid}:1 [0] NCCL INFO ncclCommInitRank comm {c} rank 0 nranks 1 cudaDev 0 busId 1000 - Init COMPLETE\n"
    log = tmp_path / "two.log"
    log.write_text(init.format(h="node-00", pid=100, c="0x1") + coll.format(h="node-00", pid=100, c="0x1", name="AllReduce")
                   + "iteration 1\n"
                   + init.format(h="node-01", pid=200, c="0x2") + coll.format(h="node-01", pid=200, c="0x2", name="Broadcast"))
    rep = read([str(log)], split_on=re.compile("iteration"))
    assert facts(rep)["slices"] == {"rank 0 (node-00.100)": [{"AllReduce": 1}, {}],
                                   "rank 0 (node-01.200)": [{"Broadcast": 1}, {}]}  # not seen yet at the mark
    assert [p["label"] for p in facts(rep)["processes"]] == list(facts(rep)["slices"])


@pytest.mark.parametrize("name", ["AllReduce", "Broadcast", "AllGather", "ReduceScatter", "Reduce"])
def test_slice_table_marks_the_rank_the_finding_names(tmp_path, name):
    # a tie (one rank did a collective in slice 1, the other did not): the table marks the rank the
    # finding names, not whichever the hash order of a set picked
    import io

    from rich.console import Console

    from hangdbg.report.kind_views import nccl_slices_table

    log = tmp_path / "tie.log"
    log.write_text(
        "node-00:100:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "node-01:200:1 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "iteration 1\n"
        f"node-00:100:1 [0] NCCL INFO {name}: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1 datatype 7 op 0 root 0 "
        "comm 0x1 [nranks=2] stream 0x3\n")
    rep = read([str(log)], split_on=re.compile("iteration"))
    assert [f.ranks for f in rep.findings if f.kind == "nccl-slice-differs"] == [(1,)]
    assert facts(rep)["slice_majority"] == [{}, {name: 1}]
    out = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=200)
    out.print(nccl_slices_table(rep.facts))
    red = [re.sub(r"\x1b\[[0-9;]*m", "", ln).split("\u2502")[1].strip()
           for ln in out.file.getvalue().splitlines() if "\x1b[31m" in ln]
    assert red == ["rank 1"]


def test_cli_split_interleaved(tmp_path):
    code, doc = main_json("nccl", "split", fx("lagging.log"), "-o", tmp_path)
    assert code == 0 and read_json(tmp_path / "split.json")["files"] == doc["files"]
    check_golden(doc, "nccl-split")
    assert [r["rank"] for r in doc["files"]] == list(range(16))
    for r in doc["files"]:
        text = (tmp_path / r["files"][0]).read_text()
        pids = set(re.findall(r"^[\w.-]+:(\d+):", text, re.M))
        assert pids == {str(r["pid"])}
    # the split files read back give the same suspects
    again = read(sorted(str(p) for p in tmp_path.glob("rank*.log")))
    assert [f.ranks for f in suspects(again)] == [(5,)]


def test_cli_split_per_process_files_and_slices(tmp_path):
    res = run_main("nccl", "split", FIX / "perproc", "-o", tmp_path / "a")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted([f"rank{r}.log" for r in range(8)] + ["split.json"])
    res = run_main("nccl", "split", fx("iterations.log"), "-o", tmp_path / "b", "--split-on", r"iteration \d+")
    assert res.returncode == 0, res.stderr
    names = {p.name for p in (tmp_path / "b").iterdir()}
    assert {"rank0.slice0000.log", "rank0.slice0004.log", "rank7.slice0004.log"} <= names


def test_split_keeps_old_style_trace_records(tmp_path):
    # NCCL <= 2.2 TRACE records have no NCCL token: they belong to their rank, not to unattributed.log
    from hangdbg.evidence.nccl.split import split_logs
    from hangdbg.outdir import OutDir

    log = tmp_path / "old.log"
    log.write_text("node-00:100:101 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START\n"
                   "node-00:100:101 [0] 12.5 enqueue.cc:10 TRACE launch kernel\n"
                   "node-01:200:201 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1000 - Init START\n")
    res = split_logs([str(log)], OutDir(tmp_path / "out"))
    assert res.written == {"rank0.log": 2, "rank1.log": 1}


def test_cli_errors(tmp_path):
    other = tmp_path / "app.log"
    other.write_text("Epoch 0: loss=2.3\n")
    res = run_main("nccl", "summary", other)
    assert res.returncode == 1 and "nothing could be read" in res.stderr and "NCCL_DEBUG=INFO" in res.stderr
    assert run_main("nccl", "summary", tmp_path / "missing.log").returncode == 2
    assert run_main("nccl", "summary", fx("clean.log"), "--split-on", "(").returncode == 2


def test_rows_limit_shows_rows_when_nothing_is_blamed():
    res = run_main("nccl", "summary", fx("clean.log"), "--rows", "2")
    assert res.returncode == 0 and "Ranks (2 of 16 shown)" in res.stdout
    res = run_main("nccl", "summary", fx("lagging.log"), "--rows", "3")  # the blamed rank first, then others
    assert res.returncode == 3 and "Ranks (3 of 16 shown)" in res.stdout
