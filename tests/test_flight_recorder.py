"""Flight-recorder dumps: real ones from a hung gloo job, hand-written older layouts, hostile files."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, check_golden, read_json, run_main, main_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdbg.model import FileError
from hangdbg.report.schema import to_jsonable
from hangdbg.evidence.flight_recorder.reader import READER
from hangdbg.evidence.crosscheck import cross_check
from hangdbg.model import Analysis, Place, TreeNode
from hangdbg.evidence.flight_recorder.grammar import FrDumpError, load_dump, restricted_loads, sniff

JOB = FIXTURES / "flight_recorder" / "hung_gloo_job.py"
WORLD = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job_line(text: str) -> int:
    """The line of the job script that holds ``text`` (where the recorder's stack must point)."""
    return next(i for i, line in enumerate(JOB.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def real_dumps(tmp_path_factory) -> Path:
    """OUT/pickle/nccl_trace_rank_R and OUT/json/nccl_trace_rank_R.json from a real hung gloo job."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("fr")
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="2000")
    res = subprocess.run([sys.executable, str(JOB), str(out), str(_free_port())], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    for r in range(WORLD):
        assert (out / "pickle" / f"nccl_trace_rank_{r}").stat().st_size > 0
        assert (out / "json" / f"nccl_trace_rank_{r}.json").stat().st_size > 0
    return out


def _files(d: Path) -> list[str]:
    return sorted(str(p) for p in d.iterdir())


def _one(rep, kind: str, **match):
    found = [f for f in rep.findings if f.kind == kind and all(getattr(f, k) == v for k, v in match.items())]
    assert len(found) == 1, [(f.kind, f.ranks, f.summary) for f in rep.findings]
    return found[0]


# --- real dumps ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "pickle"])
def test_real_dumps_name_the_mismatch_and_the_rank_that_stopped(real_dumps, fmt):
    rep = READER.read(_files(real_dumps / fmt))
    assert rep == READER.read(_files(real_dumps / fmt))  # the same reader object hangdbg report calls
    assert rep.kind == "flight-recorder" and not rep.errors
    assert rep.facts.formats == {fmt: WORLD} and rep.facts.versions == ("2.10",)
    assert rep.facts.backends == ("gloo",)
    mm = _one(rep, "fr-mismatch")
    assert mm.ranks == (3,) and mm.severity == "suspect"
    assert "0:default_pg collective seq 4" in mm.summary
    assert "ranks {0-2} all_reduce in [[1024]] Float" in mm.summary and "rank 3 broadcast in [[1024]] Float" in mm.summary
    assert "collective type differs" in mm.summary
    lag = _one(rep, "fr-missing-rank")
    assert lag.ranks == (3,)
    assert "pg 1:side: rank 3 stops at collective seq 1 (all_reduce) while ranks {0-2} went on to seq 2" in lag.summary
    # per-rank rows: last collective per group, completed ones counted from pg_status
    side = {r.rank: r for r in rep.ranks if r.group == "1:side"}
    assert {r: side[r].seq for r in side} == {0: 2, 1: 2, 2: 2, 3: 1}
    assert side[3].state == "completed"  # gloo leaves state "scheduled": pg_status says it completed
    default = {r.rank: r.last_collective for r in rep.ranks if r.group == "0:default_pg"}
    assert default == {0: "all_reduce", 1: "all_reduce", 2: "all_reduce", 3: "broadcast"}
    # whether gloo finished parts of the hung collectives on some ranks is timing: only check that
    # a stuck collective never names a rank that did not record it
    for f in rep.findings:
        if f.kind == "fr-stuck" and "1:side" in f.summary:
            assert 3 not in f.ranks
    if fmt == "pickle":  # stacks are in the pickle form only: the user call sites are evidence
        texts = [e.text for e in mm.evidence]
        assert f"rank 3 called from worker ({JOB}:{_job_line('dist.broadcast(t')})" in texts
        assert f"rank 0 called from worker ({JOB}:{_job_line('dist.all_reduce(t, async_op=True)')})" in texts
        assert not any("distributed_c10d.py" in t for t in texts)


def test_real_dump_layout_is_what_the_project_checked(real_dumps):
    """torch 2.13 records gloo collectives; version 2.10; pg_config keyed by '' while entries name
    their group ("0", "default_pg"); the pickle needs no global (the restricted unpickler builds it)."""
    doc = restricted_loads((real_dumps / "pickle" / "nccl_trace_rank_0").read_bytes())
    assert doc["version"] == "2.10" and list(doc["pg_config"]) == [""]
    assert doc["entries"][0]["process_group"] == ("0", "default_pg")
    assert doc["entries"][0]["profiling_name"] == "gloo:all_reduce"
    js = json.loads((real_dumps / "json" / "nccl_trace_rank_0.json").read_text())
    assert js["version"] == "2.10" and list(js["pg_config"]) == [""] and js["entries"][0]["process_group"] == ["0", "default_pg"]
    d = load_dump(str(real_dumps / "json" / "nccl_trace_rank_2.json"))
    # JSON pg_status values are strings, read as numbers; how far gloo got before the dump is timing
    # (seq 3 completed on a quiet machine, only seq 2 under load): the seqs before it always completed
    assert d.rank == 2 and d.fmt == "json" and isinstance(d.pg_status[0][2], int) and d.pg_status[0][2] >= 2


def test_torchfrtrace_fails_where_hangdbg_reads(real_dumps, tmp_path):
    """torch's own analyzer crashes on these dumps (KeyError: ('0', 0)); hangdbg reads them."""
    res = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(real_dumps / "pickle")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert res.returncode != 0 and "KeyError: ('0', 0)" in res.stderr
    assert not READER.read(_files(real_dumps / "pickle")).errors


def test_a_second_dump_of_a_rank_is_ignored_with_a_reason(real_dumps):
    files = _files(real_dumps / "json") + [str(real_dumps / "pickle" / "nccl_trace_rank_3")]
    rep = READER.read(files)
    assert rep.facts.dumps == WORLD and rep.facts.formats == {"json": WORLD}
    assert rep.errors == (FileError(files[-1], f"a second dump of rank 3 (the first read was {files[3]}): ignored"),)


def test_a_rank_without_dump_is_named(real_dumps, tmp_path):
    for p in (real_dumps / "json").iterdir():
        if p.name != "nccl_trace_rank_2.json":
            shutil.copy(p, tmp_path / p.name)
    rep = READER.read(_files(tmp_path))
    miss = _one(rep, "fr-missing-rank", ranks=(2,))
    assert "rank 2 left no flight-recorder dump" in miss.summary and "3 of 4 dumps read" in miss.summary
    assert any(r.rank == 2 and r.state == "no dump" for r in rep.ranks)
    assert _one(rep, "fr-mismatch").ranks == (3,)  # the rest is still analyzed
    table = run_main("fr", tmp_path).stdout  # the rank without a dump keeps its row in the table
    assert any(line.split()[:4] == ["│", "2", "│", "│"] and "no dump" in line for line in table.splitlines()), table


def test_cli_on_real_dumps(real_dumps):
    res = run_main("fr", real_dumps / "pickle")
    assert res.returncode == 3, res.stderr
    out = res.stdout
    assert "Ranks (last collective per process group)" in out
    assert "fr-mismatch" in out and "rank 3 broadcast in [[1024]] Float" in out
    assert "1:side" in out and "4 dumps (4 pickle), version 2.10" in out
    code, doc = main_json("fr", real_dumps / "json", "-o", real_dumps / "report")
    assert read_json(real_dumps / "report" / "fr.json")["findings"] == doc["findings"]
    assert code == 3 and doc["command"] == "fr" and doc["schema_version"] == 4 and doc["found"]
    assert doc["source"]["kind"] == "flight-recorder" and doc["findings"][0]["kind"] == "fr-mismatch"
    check_golden(doc, "fr")
    rows = {(r["rank"], r["group"]): r for r in doc["source"]["facts"]["table"]}
    assert rows[(3, "1:side")]["last"]["seq"] == 1 and rows[(3, "1:side")]["last_completed"] == {"seq": 1, "op": "all_reduce", "state": None}
    assert rows[(3, "1:side")]["last_started"] == {"seq": 1, "op": "all_reduce", "state": None}
    assert rows[(0, "1:side")]["last"]["seq"] == 2 and rows[(0, "1:side")]["last"]["desc"] == "all_reduce in [[8]] Long"


# --- hostile and broken files --------------------------------------------------------------------


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_restricted_unpickler_refuses_a_malicious_pickle(real_dumps, tmp_path):
    marker = tmp_path / "pwned"
    evil = {"version": "2.10", "pg_config": {}, "entries": [_Evil(marker)]}
    data = pickle.dumps(evil, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="refused.*system"):
        restricted_loads(data)
    d = tmp_path / "dumps"
    d.mkdir()
    (d / "nccl_trace_rank_1").write_bytes(data)
    shutil.copy(real_dumps / "pickle" / "nccl_trace_rank_0", d / "nccl_trace_rank_0")
    rep = READER.read(_files(d))
    assert rep.errors and rep.errors[0].file.endswith("nccl_trace_rank_1") and "refused" in rep.errors[0].reason
    assert "system" in rep.errors[0].reason
    assert rep.facts.dumps == 1 and any(r.rank == 1 and r.state == "dump unreadable" for r in rep.ranks)
    assert not marker.exists(), "the pickle's code ran"
    res = run_main("fr", d)
    assert "unreadable" in res.stdout and "refused" in res.stdout and not marker.exists()


def test_truncated_and_garbled_files_are_reported_and_the_rest_is_read(real_dumps, tmp_path):
    for r in range(WORLD):
        shutil.copy(real_dumps / "pickle" / f"nccl_trace_rank_{r}", tmp_path / f"nccl_trace_rank_{r}")
    full = (tmp_path / "nccl_trace_rank_1").read_bytes()
    (tmp_path / "nccl_trace_rank_1").write_bytes(full[: len(full) // 2])          # truncated pickle
    (tmp_path / "nccl_trace_rank_2").write_bytes(b"\x80\x02" + os.urandom(300))   # garbled pickle
    js = (real_dumps / "json" / "nccl_trace_rank_3.json").read_bytes()
    (tmp_path / "nccl_trace_rank_3").write_bytes(js[: len(js) - 40])             # truncated JSON
    (tmp_path / "nccl_trace_rank_4").write_bytes(b"")                              # empty
    assert sniff(full[: len(full) // 2]) and sniff(js[: len(js) - 40])
    rep = READER.read(_files(tmp_path))
    bad = {Path(e.file).name: e.reason for e in rep.errors}
    assert set(bad) == {"nccl_trace_rank_1", "nccl_trace_rank_2", "nccl_trace_rank_3", "nccl_trace_rank_4"}
    assert "truncated or garbled" in bad["nccl_trace_rank_1"] and "JSON" in bad["nccl_trace_rank_3"]
    assert bad["nccl_trace_rank_4"] == "empty file"
    assert rep.facts.dumps == 1 and rep.lines_read > 0
    miss = _one(rep, "fr-missing-rank", ranks=(1, 2, 3, 4))
    assert "could not be read" in miss.summary
    res = run_main("fr", tmp_path)  # the CLI walks the directory, lists the bad files, exits 3
    assert res.returncode == 3 and sum(line.startswith("could not read ") for line in res.stdout.splitlines()) == 4


def test_no_readable_dump_is_a_clear_error(tmp_path):
    (tmp_path / "nccl_trace_rank_0").write_bytes(b"{\"entries\": [")
    res = run_main("fr", tmp_path / "nccl_trace_rank_0")
    assert res.returncode == 1 and "nothing could be read" in res.stderr and "Traceback" not in res.stderr
    res = run_main("fr", tmp_path / "nowhere")
    assert res.returncode == 2 and "no such file or directory" in res.stderr


def test_sniff_accepts_dumps_only(real_dumps):
    assert sniff((real_dumps / "pickle" / "nccl_trace_rank_0").read_bytes()[:65536])
    assert sniff((real_dumps / "json" / "nccl_trace_rank_0.json").read_bytes()[:65536])
    for f in sorted((FIXTURES / "pyspy").iterdir())[:5]:
        assert not sniff(f.read_bytes()[:65536]), f
    for head in (b"", b'{"a": 1}', b'{"entries": [1, 2]}', pickle.dumps(["entries", "x"]),
                 b"node1:123:456 [0] NCCL INFO AllReduce: opCount 3", b"\x7fELF\x02\x01"):
        assert not sniff(head), head


# --- older layouts, written by hand from FlightRecorder.hpp of their torch versions ---------------


def _entry(record_id, seq, op, *, pg=("0", "default_pg"), sizes=((1024,),), dtypes=("Float",), state="completed",
           version="2.4", frames=None):
    e = {"record_id": record_id, "pg_id": int(pg[0]) if pg[0].isdigit() else 1, "process_group": list(pg),
         "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "profiling_name": f"nccl:{op}",
         "time_created_ns": 1_700_000_000_000_000_000 + record_id, "input_sizes": [list(s) for s in sizes],
         "output_sizes": [list(s) for s in sizes], "state": state,
         "time_discovered_started_ns": 1 if state != "scheduled" else None,
         "time_discovered_completed_ns": 2 if state == "completed" else None,
         "retired": state == "completed", "timeout_ms": 600000}
    if version != "2.2":  # dtypes came with 2.3 (NCCLUtils.hpp of torch 2.4 carries input_dtypes)
        e["input_dtypes"] = list(dtypes)
        e["output_dtypes"] = list(dtypes)
        e["is_p2p"] = False
    if frames:
        e["frames"] = frames
    return e


def _write(dirpath: Path, version: str, per_rank: dict[int, list[dict]], fmt: str, ranks="[0, 1, 2, 3]"):
    dirpath.mkdir(parents=True, exist_ok=True)
    for r, entries in per_rank.items():
        doc = {"version": version, "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
               "entries": entries}
        path = dirpath / f"nccl_trace_rank_{r}"
        path.write_bytes(pickle.dumps(doc, protocol=2) if fmt == "pickle" else json.dumps(doc).encode())


@pytest.mark.parametrize("fmt", ["json", "pickle"])
def test_older_layout_22_many_behind_are_the_stragglers(tmp_path, fmt):
    """v2.2: no dtypes, no pg_status, no is_p2p; pg_config keyed by the group name. Rank 0 ran
    ahead to seq 6 while ranks {1-3} stop at 5: the stragglers are the many."""
    per_rank = {0: [_entry(i, i + 1, "all_reduce", version="2.2") for i in range(5)]
                + [_entry(5, 6, "all_gather", state="started", version="2.2")]}
    for r in (1, 2, 3):
        per_rank[r] = [_entry(i, i + 1, "all_reduce", version="2.2") for i in range(5)]
    _write(tmp_path, "2.2", per_rank, fmt)
    rep = READER.read(_files(tmp_path))
    assert not rep.errors and rep.facts.versions == ("2.2",)
    lag = _one(rep, "fr-missing-rank")
    assert lag.ranks == (1, 2, 3)
    assert "ranks {1-3} stop at collective seq 5 (all_reduce) while rank 0 went on to seq 6 (all_gather)" in lag.summary
    assert "stragglers are the many (ranks {1-3}), not the 1 that ran ahead" in lag.summary
    assert not [f for f in rep.findings if f.kind == "fr-mismatch"]
    assert (rep.facts.groups["0:default_pg"].members, rep.facts.groups["0:default_pg"].members_from) == ((0, 1, 2, 3), "pg_config")


def test_entries_without_retired_follow_the_schema(tmp_path):
    """Older dumps have no `retired` key: the table says null (unknown), and the document is valid."""
    per_rank = {r: [_entry(0, 1, "all_reduce", state="started")] for r in range(2)}
    for entries in per_rank.values():
        for e in entries:
            del e["retired"]
    _write(tmp_path, "2.4", per_rank, "json")
    code, doc = main_json("fr", tmp_path)
    assert [row["last"]["retired"] for row in doc["source"]["facts"]["table"]] == [None, None]


def test_older_layout_24_size_mismatch_and_partial_completion(tmp_path):
    """v2.4: rank 2 passes a [512] tensor at seq 3 (size mismatch); seq 4 completed on ranks {0-1}
    only; rank 3's dump is missing (pg_config lists it)."""
    frames = [{"name": "all_reduce", "filename": "/x/site-packages/torch/distributed/distributed_c10d.py", "line": 2700},
              {"name": "train_step", "filename": "/job/train.py", "line": 42},
              {"name": "main", "filename": "/job/train.py", "line": 90}]
    per_rank = {}
    for r in (0, 1, 2):
        ents = [_entry(0, 1, "broadcast"), _entry(1, 2, "all_reduce"),
                _entry(2, 3, "all_reduce", sizes=((512,),) if r == 2 else ((1024,),), frames=frames),
                _entry(3, 4, "all_reduce", state="completed" if r < 2 else "started")]
        per_rank[r] = ents
    _write(tmp_path, "2.4", per_rank, "pickle")
    rep = READER.read(_files(tmp_path))
    mm = _one(rep, "fr-mismatch")
    assert mm.ranks == (2,)
    assert "seq 3: ranks {0-1} all_reduce in [[1024]] Float (completed) vs rank 2 all_reduce in [[512]] Float" in mm.summary
    assert "input sizes and output sizes differ" in mm.summary
    assert "rank 2 called from train_step (/job/train.py:42)" in [e.text for e in mm.evidence]
    stuck = _one(rep, "fr-stuck")
    assert stuck.ranks == (2,) and "seq 4 (all_reduce) completed on ranks {0-1} but not on rank 2 (started on rank 2)" in stuck.summary
    row2 = next(t for t in rep.facts.table if t.rank == 2)
    assert row2.last.state == "started" and row2.last_started.seq == 4 and row2.last_completed.seq == 3
    miss = _one(rep, "fr-missing-rank")
    assert miss.ranks == (3,) and "from the member ranks in pg_config" in miss.summary
    assert any("pg_config '0' desc='default_pg' ranks=[0, 1, 2, 3]" in e.text for e in miss.evidence)


def test_dump_without_rank_in_name_and_oversized(tmp_path):
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"version": "2.10", "entries": []}))
    with pytest.raises(FrDumpError, match="cannot tell the rank"):
        load_dump(str(p))
    q = tmp_path / "fr_7.json"
    q.write_text(json.dumps({"version": "2.10", "pg_config": {}, "entries": [_entry(0, 1, "barrier")]}))
    assert load_dump(str(q)).rank == 7
    with pytest.raises(FrDumpError, match="more than the 10 bytes"):
        load_dump(str(q), max_bytes=10)


# --- cross-check with the stacks ----------------------------------------------------------------


def test_cross_check_with_stack_places(tmp_path):
    per_rank = {r: [_entry(0, 1, "all_reduce"), _entry(1, 2, "broadcast" if r == 3 else "all_reduce", state="started")]
                for r in range(4)}
    _write(tmp_path, "2.4", per_rank, "json")
    fr = READER.read(_files(tmp_path))
    places = {0: Place("collective", "all_reduce"), 1: Place("collective", "all_reduce"),
              2: Place("collective", "barrier"), 3: Place("outside", None)}
    a = Analysis(ranks=(), classes=(), tree=TreeNode(None, frozenset()), findings=(), missing_ranks=(),
                 headline="", places=places)
    found = cross_check(fr, a)
    agree = [f for f in found if f.kind == "fr-agrees"]
    assert len(agree) == 1 and agree[0].ranks == (0, 1) and agree[0].severity == "info"
    contra = {f.ranks: f for f in found if f.kind == "fr-contradicts"}
    assert set(contra) == {(2,), (3,)} and all(f.severity == "warning" for f in contra.values())
    assert "in barrier" in contra[(2,)].summary and "all_reduce seq 2" in contra[(2,)].summary
    assert "broadcast seq 2" in contra[(3,)].summary and "outside any collective" in contra[(3,)].summary


def _p2p(record_id, p2p_seq, name, size=16, state="completed"):
    e = _entry(record_id, 0, name, sizes=((size,),), state=state)
    e.update(collective_seq_id=0, p2p_seq_id=p2p_seq, is_p2p=True)
    return e


def test_p2p_matched_per_pair_in_order(tmp_path):
    """NCCL send/recv (gloo records none in torch 2.13): rank 0 sends twice to rank 1, rank 1
    posts one recv; ranks 2 and 3 both send to each other (neither receives)."""
    per_rank = {
        0: [_p2p(0, 1, "send 0->1"), _p2p(1, 2, "send 0->1", state="started")],
        1: [_p2p(0, 1, "recv 1<-0")],
        2: [_p2p(0, 1, "send 2->3", state="started")],
        3: [_p2p(0, 1, "send 3->2", state="started")],
    }
    _write(tmp_path, "2.10", per_rank, "json")
    rep = READER.read(_files(tmp_path))
    miss = _one(rep, "fr-missing-rank")
    assert miss.ranks == (1,) and "rank 0's send #2 with rank 1 (p2p seq 2" in miss.summary
    assert "no matching recv on rank 1, which recorded 1 p2p op(s) with rank 0" in miss.summary
    mm = _one(rep, "fr-mismatch")
    assert mm.ranks == (2, 3) and "both ranks send (neither receives)" in mm.summary
    rows = {r.rank: r for r in rep.ranks}
    assert rows[0].group == "0:default_pg (p2p)" and rows[0].seq == 2 and rows[0].last_collective == "send"


def test_pg_status_stands_in_for_entries_left_out(tmp_path):
    """A dump of active entries only (torch's onlyActive) has no entry for completed collectives:
    pg_status still tells how far the rank got (JSON form: numbers as strings)."""
    per_rank = {r: [_entry(i, i + 1, "all_reduce") for i in range(4)] + [_entry(4, 5, "all_reduce", state="started")]
                for r in (0, 2)}
    per_rank[1] = []
    _write(tmp_path, "2.10", per_rank, "json", ranks="[0, 1, 2]")
    doc = json.loads((tmp_path / "nccl_trace_rank_1").read_text())
    doc["pg_status"] = {"0": {"last_enqueued_collective": "5", "last_started_collective": "5",
                              "last_completed_collective": "5"}}
    (tmp_path / "nccl_trace_rank_1").write_text(json.dumps(doc))
    rep = READER.read(_files(tmp_path))
    assert not [f for f in rep.findings if f.kind == "fr-missing-rank"]
    doc["pg_status"]["0"]["last_enqueued_collective"] = "3"
    (tmp_path / "nccl_trace_rank_1").write_text(json.dumps(doc))
    lag = _one(READER.read(_files(tmp_path)), "fr-missing-rank")
    assert lag.ranks == (1,) and "rank 1 stops at collective seq 3 (pg_status; no entry in the dump)" in lag.summary


# --- fuzz: any structure, any bytes: errors are reported, never raised --------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers(-5, 2**40) | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                     max_leaves=20)
_keys = st.sampled_from(["record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "profiling_name",
                         "input_sizes", "output_sizes", "input_dtypes", "state", "retired", "is_p2p", "frames",
                         "time_discovered_completed_ns", "duration_ms", "timeout_ms", "seq_id"])
_entry_st = st.dictionaries(_keys, _json, max_size=10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.fixed_dictionaries({"version": _json, "pg_config": _json, "pg_status": _json,
                                            "entries": st.lists(_entry_st, max_size=6) | _json}), min_size=1, max_size=3),
       as_pickle=st.booleans())
def test_fuzz_structures_never_raise(tmp_path, docs, as_pickle):
    paths = []
    for r, doc in enumerate(docs):
        p = tmp_path / f"fuzz_rank_{r}"
        p.write_bytes(pickle.dumps(doc, protocol=2) if as_pickle else json.dumps(doc).encode())
        paths.append(str(p))
    rep = READER.read(paths)
    assert rep.facts.dumps + len(rep.errors) == len(docs)
    json.dumps(to_jsonable(rep.facts))  # the JSON twin can always be written


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), prefix=st.sampled_from([b"", b"\x80\x02", b"{", b"\x80\x04\x95"]))
def test_fuzz_bytes_never_raise(tmp_path, data, prefix):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(prefix + data)
    sniff(prefix + data)
    try:
        load_dump(str(p))
    except FrDumpError:
        pass
