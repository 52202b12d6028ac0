"""The sources ``dump`` takes besides py-spy: the FR dump pipe, the debug server client's per-rank
statuses, and the FR findings joined with the stacks' (no double blame, a waiting rank never a suspect)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hangdbg.collect.live_sources import LiveSources, collect_live, load_fr
from hangdbg.collect.procs import find_ranks
from hangdbg.evidence.flight_recorder.grammar import FrDump, load_dump
from hangdbg.evidence.fr_live import fr_findings
from hangdbg.model import Analysis, Finding, Kind, Severity, SourceKind, TreeNode
from hangdbg.outdir import OutDir
from hangdbg.tools.debug_server import fetch, fetch_all
from hangdbg.tools.fr_pipe import trigger

H200_FR = Path("/work/shared/gpu-h200/watchdog_timeout_behind_kernel/fr_rank_0")
if not H200_FR.exists():
    H200_FR = Path(__file__).parent / "fixtures" / "flight_recorder" / "nccl_trace_rank_0"

# torch's side of the FIFO, as ProcessGroupNCCL.hpp's DumpPipe and the heartbeat monitor do it:
# unlink + mkfifo(stem<rank>.pipe, 0666), open O_RDONLY|O_NONBLOCK, poll read(fd, 128) > 0, then
# DebugInfoWriter::write(<prefix><rank>) with the flight recorder's dump
TORCH_SIDE = r"""
import os, sys, time
stem, prefix, rank, content = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
name = f"{stem}{rank}.pipe"
try:
    os.unlink(name)
except FileNotFoundError:
    pass
os.mkfifo(name, 0o666)
fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
open(prefix + "ready", "w").close()
while True:
    try:
        got = os.read(fd, 128)
    except BlockingIOError:
        got = b""
    if got:
        data = open(content, "rb").read()
        with open(f"{prefix}{rank}", "wb") as f:
            f.write(data)
        break
    time.sleep(0.05)
time.sleep(60)
"""


@pytest.fixture
def pipe_rank(tmp_path):
    """A real process that plays torch's side of the FR pipe for rank 2 (it stands in for the
    NCCL-only path: the CPU build's gloo groups have no DumpPipe)."""
    if not H200_FR.exists():
        pytest.skip("no flight-recorder dump to serve")
    stem, prefix = str(tmp_path / "fr_pipe_"), str(tmp_path / "trace_rank_")
    env = dict(os.environ, RANK="2", WORLD_SIZE="4", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=stem,
               TORCH_NCCL_DEBUG_INFO_TEMP_FILE=prefix, TORCH_NCCL_TRACE_BUFFER_SIZE="2000")
    env.pop("MASTER_ADDR", None)
    env.pop("MASTER_PORT", None)
    proc = subprocess.Popen([sys.executable, "-c", TORCH_SIDE, stem, prefix, "2", str(H200_FR)], env=env)
    deadline = time.monotonic() + 20
    while not os.path.exists(prefix + "ready") and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield proc, env
    finally:
        proc.kill()
        proc.wait()


def test_real_fr_pipe_is_written_and_the_dump_torch_writes_lands_in_out_fr(pipe_rank, tmp_path):
    """Stands in for the NCCL-only path: a real process plays torch's ``DumpPipe`` exactly."""
    proc, _env = pipe_rank
    ranks = find_ranks([proc.pid])
    assert [r.rank for r in ranks] == [2]
    out = OutDir(tmp_path / "out")
    got = collect_live(ranks, out, 10.0)
    pipe = [s for s in got.sources if s.source == "fr-pipe"]
    assert [(s.rank, s.status) for s in pipe] == [(2, "ok")]
    assert (tmp_path / "out" / "fr" / "pipe_trace_rank_2").read_bytes() == H200_FR.read_bytes()
    dumps, bad = load_fr(got)
    assert [d.rank for d in dumps] == [2] and not bad and dumps[0].entries


def test_fr_pipe_without_reader_is_reported_at_once(tmp_path):
    stem = str(tmp_path / "p_")
    os.mkfifo(stem + "1.pipe")
    t = time.monotonic()
    res = trigger({"TORCH_NCCL_DEBUG_INFO_PIPE_FILE": stem}, 1, 10.0)
    assert res is not None and res.status == "no-reader" and time.monotonic() - t < 1
    assert trigger({}, 1, 10.0) is None  # no pipe variable: nothing to do
    missing = trigger({"TORCH_FR_DEBUG_INFO_PIPE_FILE": str(tmp_path / "none_")}, 1, 10.0)
    assert missing is not None and missing.status == "no-pipe"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        if self.path.endswith("/slow"):
            time.sleep(2)
        code = 200 if self.path.endswith("/dump_traceback") else 500
        body = b"Thread 0x1 (most recent call first):\n  File \"t.py\", line 3 in f\n" if code == 200 else b"handler failed"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_a):
        pass


@pytest.fixture
def worker():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_debug_server_client_says_per_rank_what_became_of_each_request(worker):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    got = fetch_all({0: worker, 1: closed, 2: "http://no-such-host.invalid:1"}, ("dump_traceback", "fr_trace_json"), 1.0)
    st = {(a.rank, a.handler): (a.status, a.code) for a in got}
    assert st[(0, "dump_traceback")] == ("answered", 200)
    assert st[(0, "fr_trace_json")] == ("http-error", 500)
    assert st[(1, "dump_traceback")][0] == "refused"
    assert st[(2, "dump_traceback")][0] == "unresolved"
    slow = fetch(3, worker, "slow", 0.5)
    assert slow.status == "timeout"
    assert fetch(4, "not a url", "x", 0.5).status == "error"


def _dump(tmp: Path, rank: int, seqs: int) -> FrDump:
    """A JSON dump as ``_dump_fr_trace_json`` writes it: ``seqs`` completed all_reduces on the default group."""
    entries = [{"record_id": i, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": i + 1,
                "p2p_seq_id": 0, "op_id": i + 1, "profiling_name": "gloo:all_reduce", "input_sizes": [[16]],
                "input_dtypes": ["Float"], "output_sizes": [[16]], "output_dtypes": ["Float"],
                "state": "completed", "retired": True, "is_p2p": False} for i in range(seqs)]
    doc = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
           "entries": entries}
    path = tmp / f"fr_{rank}.json"
    path.write_text(json.dumps(doc))
    return load_dump(str(path))


def _stacks(*findings: Finding) -> Analysis:
    """A stack analysis that only carries ``findings`` (what :func:`fr_findings` reads of it)."""
    return Analysis(ranks=(), classes=(), tree=TreeNode(None, frozenset()), findings=findings,
                    missing_ranks=(), headline="")


def test_fr_findings_blame_once_and_never_a_waiting_rank(tmp_path):
    dumps = [_dump(tmp_path, 0, 5), _dump(tmp_path, 1, 5), _dump(tmp_path, 2, 5), _dump(tmp_path, 3, 4)]
    alone = fr_findings(dumps, _stacks())
    assert alone and all(f.source is SourceKind.FLIGHT_RECORDER for f in alone)
    # the recorder's own lag finding names rank 3, but who is behind is the joint verdict's (fr_join) to say
    lag = [f for f in alone if f.kind in (Kind.FR_MISSING_RANK, Kind.FR_STUCK) and 3 in f.ranks]
    assert lag and not [f for f in alone if f.severity is Severity.SUSPECT]
    assert any("joint verdict" in f.summary for f in lag)
    same = Finding(Kind.DIFFERENT_COLLECTIVE, "rank 3 differs", (3,))
    assert not [f for f in fr_findings(dumps, _stacks(same)) if f.severity is Severity.SUSPECT]
    waits = Finding(Kind.WAITING, "rank 3 waits for 0", (3,), severity=Severity.WAITING, waits_for=(0,))
    held = fr_findings(dumps, _stacks(waits))
    assert not [f for f in held if f.severity is Severity.SUSPECT]
    assert any("not a suspect" in f.summary for f in held)
    assert fr_findings([], _stacks(same)) == []


def test_load_fr_reports_an_answer_that_is_no_dump(tmp_path):
    bad = tmp_path / "debug_server_fr_rank_5.json"
    bad.write_text('{"nothing": 1}')
    dumps, unparsed = load_fr(LiveSources(fr_files=[str(bad)]))
    assert not dumps and [(s.rank, s.source, s.status) for s in unparsed] == [(5, "debug-server-fr", "unparsed")]


def test_wire_client_reads_what_torch_set_in_a_real_tcpstore():
    """The stdlib client against torch's own TCPStore server (the libuv backend of torch 2.13), keys
    set through a ``PrefixStore("debug_server", ...)`` as ``start_debug_server`` sets them."""
    torch_dist = pytest.importorskip("torch.distributed")
    from datetime import timedelta

    from hangdbg.tools.tcpstore_wire import read_keys

    master = torch_dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))
    torch_dist.PrefixStore("debug_server", master).set("rank1", "http://node-7:4242")
    got = read_keys("127.0.0.1", master.port, ["debug_server/rank0", "debug_server/rank1"], 2.0)
    assert got == {"debug_server/rank1": "http://node-7:4242"}
    with pytest.raises(OSError):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        read_keys("127.0.0.1", port, ["x"], 1.0)
