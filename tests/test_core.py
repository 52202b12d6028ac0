"""Core files from real processes (a SIGSEGV, kill -ABRT, gcore, a segfaulted torch/gloo rank), read
back by `hangdbg core` with their rank, host and Python frames; `hangdbg dump --core`; and the
text backtrace formats (gdb, py-bt, lldb, eu-stack, faulthandler, PyTorch C++ frames)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import FIXTURES, check_golden, main_json, read_json, run_cli, run_main
from infra.cores import SEGV, SEGV_LINE, SETENV, SETENV_LINE, TORCH, TORCH_LINE, WAIT, WAIT_LINE, core_of as _core_of, core_pattern as _core_pattern, env as _env, start as _start, unlimited_cores as _unlimited_cores

from hangdbg.model import FileError
from hangdbg.evidence.core.reader import CoreOptions, read_core
from hangdbg.collect.gcore import plan_cores, write_core
from hangdbg.collect.procs import RankProcess
from hangdbg.stacks import native_text as native_stacks
from hangdbg.evidence.core.elf import is_core, read_core_info
from hangdbg.text.lines import read_head
from hangdbg.evidence.stacks import text_reader as stack_text
from hangdbg.evidence.core.json_reader import read_documents

STACKS = FIXTURES / "stacks"

def _rank_process(pid: int, rank: int) -> RankProcess:
    return RankProcess(pid=pid, rank=rank, host="", local_rank=None, world_size=None, local_world_size=None,
                       rank_source="RANK", cmdline="")


@pytest.fixture(scope="module")
def cores(tmp_path_factory):
    """Real core files: a SIGSEGV (RANK=3), a kill -ABRT from this test (SLURM_PROCID=6) and a gcore
    of a live process (RANK=0) that keeps running."""
    pattern = _core_pattern()
    if pattern.startswith("|") or "/" in pattern:
        pytest.skip(f"cores are not written to the process's cwd here (core_pattern {pattern!r})")
    if shutil.which("gdb") is None or shutil.which("gcore") is None:
        pytest.skip("gdb/gcore not installed")
    base = tmp_path_factory.mktemp("cores")
    segv = _start(SEGV, base / "segv", _env(RANK="3", LOCAL_RANK="1", WORLD_SIZE="4", HOSTNAME="node-a"))
    abrt = _start(WAIT, base / "abrt", _env(SLURM_PROCID="6", SLURMD_NODENAME="node-b"))
    live = _start(WAIT, base / "live", _env(RANK="0", WORLD_SIZE="4", HOSTNAME="node-c"))
    late = _start(SETENV, base / "late", _env())
    try:
        assert abrt.stdout.readline().strip() == "ready"
        time.sleep(0.3)  # into the wait loop
        os.kill(abrt.pid, signal.SIGABRT)
        assert live.stdout.readline().strip() == "ready"
        rank0 = _rank_process(live.pid, 0)
        got = write_core(rank0, base / "live")
        assert got.error is None, got.error
        yield {"segv": _core_of(segv, base / "segv"), "segv_pid": segv.pid,
               "abrt": _core_of(abrt, base / "abrt"), "abrt_pid": abrt.pid,
               "gcore": Path(got.path), "live": live, "dir": base, "late": _core_of(late, base / "late")}
    finally:
        for p in (segv, abrt, live, late):
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def torch_core(tmp_path_factory):
    """The core of a torch process with a gloo process group (world size 1) that segfaults in train_step()."""
    pytest.importorskip("torch")
    if _core_pattern().startswith("|"):
        pytest.skip("cores are piped to a handler here")
    d = tmp_path_factory.mktemp("torchcore")
    proc = _start(TORCH, d, _env(RANK="5", LOCAL_RANK="1", WORLD_SIZE="8", SLURMD_NODENAME="gpu-node-07"), str(d / "store"))
    return _core_of(proc, d), proc.pid


# --- core files ---------------------------------------------------------------------------------

def test_segv_core_rank_host_signal_and_python_frame(cores):
    rc, doc = main_json("core", cores["segv"])
    assert rc == 3
    assert doc["command"] == "core" and doc["schema_version"] == 4
    c = doc["cores"][0]
    assert (c["rank"], c["rank_source"], c["host"], c["local_rank"], c["world_size"]) == (3, "RANK", "node-a", 1, 4)
    assert (c["signal"], c["how"], c["pid"]) == ("SIGSEGV", "crash", cores["segv_pid"])
    assert c["crashing_tid"] == c["pid"] and c["diagnoses"] == []
    crashed = next(t for t in c["threads"] if t["thread_id"] == c["crashing_tid"])
    assert crashed["name"] == "MainThread"
    frames = crashed["frames"]
    assert frames[0].get("native")  # the fault is in C (strlen), under ctypes
    py = [f for f in frames if not f.get("native")]
    assert [(f["function"], f["line"]) for f in py][:3] == [("string_at", py[0]["line"]), ("step", SEGV_LINE), ("<module>", SEGV_LINE + 1)]
    assert frames.index(py[0]) > 0 and frames[-1].get("native")  # Python frames sit inside the native stack
    loader = next(t for t in c["threads"] if t["thread_id"] != c["crashing_tid"])
    assert [f["function"] for f in loader["frames"] if not f.get("native")][0] == "worker" and loader["status"] == "idle"
    (finding,) = doc["findings"]
    assert finding["kind"] == "core-crash" and finding["severity"] == "suspect" and finding["ranks"] == [3]
    check_golden(doc, "core")
    assert finding["summary"].startswith("rank 3 on node-a crashed with SIGSEGV in ctypes/__init__.py:")
    assert f"prog.py:{SEGV_LINE} step()" in finding["summary"]


def test_abort_from_another_process_and_slurm_rank(cores):
    rc, doc = main_json("core", cores["abrt"])
    c = doc["cores"][0]
    assert (c["rank"], c["rank_source"], c["host"], c["signal"], c["how"]) == (6, "SLURM_PROCID", "node-b", "SIGABRT", "killed")
    (finding,) = doc["findings"]
    assert finding["severity"] == "warning" and f"sent by pid {os.getpid()}" in finding["summary"]
    assert f"prog.py:{WAIT_LINE} wait_for_peers()" in finding["summary"]
    assert rc == 0  # killed from outside is not a crash of the rank


def test_gcore_of_a_live_process(cores):
    live = cores["live"]
    assert live.poll() is None and psutil.Process(live.pid).status() != psutil.STATUS_STOPPED  # gcore detached
    info = read_core_info(str(cores["gcore"]))
    assert info.on_demand and info.crashing_tid is None and info.pid == live.pid
    rc, doc = main_json("core", cores["gcore"])
    c = doc["cores"][0]
    assert (c["rank"], c["host"], c["signal"], c["how"]) == (0, "node-c", None, "on demand")
    assert doc["findings"][0]["severity"] == "info"
    # ranks 1-3 (WORLD_SIZE=4) left no core: not "missing", and the headline does not say they are
    assert doc["stacks"]["missing_ranks"] == [] and "no process" not in doc["headline"] and not doc["found"]
    main = next(t for t in c["threads"] if t["name"] == "MainThread")
    assert [f["function"] for f in main["frames"] if not f.get("native")] == ["wait_for_peers", "<module>"]
    assert rc == 0


def test_rank_set_at_run_time_comes_from_gdb_environ(cores):
    """os.environ[...] = ... (putenv) is not in the initial environment block on the stack; gdb's view
    of ``environ`` has it. A SIGSEGV the process sent itself is a crash too."""
    info = read_core_info(str(cores["late"]))
    assert "RANK" not in info.environ and info.signal == signal.SIGSEGV and info.si_code <= 0
    c = read_core(str(cores["late"]), CoreOptions(timeout=60))
    assert (c.dump.rank, c.dump.rank_source, c.dump.host, c.how) == (7, "RANK", "node-late", "self")
    from hangdbg.evidence.core.reader import finding_of

    f = finding_of(c)
    assert f.severity == "suspect" and f.summary.startswith("rank 7 on node-late crashed with SIGSEGV in ")
    assert f.summary.endswith(f"prog.py:{SETENV_LINE} crash()")


def test_several_cores_are_clustered_and_rendered(cores):
    res = run_main("core", cores["segv"], cores["abrt"], cores["gcore"])
    assert res.returncode == 3, res.stderr
    text = " ".join(res.stdout.split())
    assert "rank 3 on node-a crashed with SIGSEGV" in text and "was killed with SIGABRT" in text
    assert "core taken on demand (gcore)" in text
    assert "Equivalence classes" in text  # the analyzer's report of the three ranks
    rc, doc = main_json("core", cores["segv"], cores["abrt"], cores["gcore"])
    assert sorted(r["rank"] for r in doc["stacks"]["ranks"]) == [0, 3, 6]
    assert sorted(r for g in doc["stacks"]["classes"] for r in g["ranks"]) == [0, 3, 6]
    assert [f["severity"] for f in doc["findings"]] == ["suspect", "warning", "info"]


def test_torch_gloo_core_rank_and_crash_frame(torch_core, tmp_path):
    core, pid = torch_core
    rc, doc = main_json("core", core, "-o", tmp_path)
    assert rc == 3
    c = doc["cores"][0]
    assert (c["rank"], c["local_rank"], c["world_size"], c["host"], c["pid"]) == (5, 1, 8, "gpu-node-07", pid)
    assert c["signal"] == "SIGSEGV" and len(c["threads"]) > 1  # gloo and torch threads too
    summary = doc["findings"][0]["summary"]
    assert summary.startswith("rank 5 on gpu-node-07 crashed with SIGSEGV")
    assert f"prog.py:{TORCH_LINE} train_step()" in summary
    assert json.loads((tmp_path / "hangdbg.json").read_text())["cores"][0]["rank"] == 5
    assert any(p.name.endswith(".gdb.txt") for p in tmp_path.iterdir())


def test_bad_cores_are_diagnosed(cores, tmp_path):
    data = cores["segv"].read_bytes()
    half = tmp_path / "core.half"
    half.write_bytes(data[: len(data) // 2])
    c = read_core(str(half), CoreOptions(timeout=60))
    assert c.info.truncated and any("truncated" in d and "ulimit -c" in d for d in c.diagnoses)
    assert c.dump.pid == cores["segv_pid"] and c.dump.rank_source == ""  # the stack (environment) was cut off
    stub = tmp_path / "core.stub"
    stub.write_bytes(data[:100])
    res = run_main("core", stub)
    assert res.returncode == 1 and "unreadable ELF core headers" in res.stderr and "Traceback" not in res.stderr
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    res = run_main("core", script)
    assert res.returncode == 1 and "not an ELF core file" in res.stderr
    res = run_main("core", tmp_path / "nope")
    assert res.returncode == 2


def test_wrong_exe_and_missing_gdb(cores):
    c = read_core(str(cores["segv"]), CoreOptions(exe="/bin/ls", timeout=60))
    assert any("not made by /bin/ls" in d for d in c.diagnoses)
    assert any("pystack" in d for d in c.diagnoses)
    c = read_core(str(cores["segv"]), CoreOptions(gdb="/nonexistent/gdb", timeout=60))
    assert any(d.startswith("gdb not found") for d in c.diagnoses)
    main = next(t for t in c.dump.threads if t.name == "MainThread")
    assert [f.function for f in main.python_frames][:2] == ["string_at", "step"]  # pystack alone still gives Python frames


def _core_document_file(paths: list[str], out: Path):
    from hangdbg.stacks.analysis import analyze
    from hangdbg.report.build import core_document
    from hangdbg.report.schema import to_json
    from hangdbg.evidence.core.reader import load

    report, dumps, readings = load(paths, CoreOptions(timeout=60))
    out.write_text(to_json(core_document(readings, report, analyze(dumps), paths)))
    return report, dumps


def test_core_document_reads_back_without_inventing_ranks(tmp_path):
    """An unreadable core is an error of the document, not a rank ('core on demand') read back."""
    bad = tmp_path / "notacore.bin"
    bad.write_bytes(b"\x00" * 300)
    report, _ = _core_document_file([str(bad)], tmp_path / "core.json")
    assert report.ranks == () and report.errors == (FileError(str(bad), "not an ELF core file"),)
    back, dumps = read_documents([str(tmp_path / "core.json")])
    assert (back.ranks, back.errors, dumps) == ((), report.errors, [])


def test_core_document_of_a_crash_and_a_bad_core_reads_back(cores, tmp_path):
    bad = tmp_path / "notacore.bin"
    bad.write_bytes(b"\x00" * 300)
    report, dumps = _core_document_file([str(cores["segv"]), str(bad)], tmp_path / "core.json")
    doc = read_json(tmp_path / "core.json")  # what collect brings back follows the schema too
    assert doc["cores"][1]["diagnoses"] == ["not an ELF core file"] and doc["findings"][0]["kind"] == "core-crash"
    back, back_dumps = read_documents([str(tmp_path / "core.json")])
    assert back.ranks == report.ranks and [s.rank for s in back.ranks] == [3]
    assert back.errors == report.errors == (FileError(str(bad), "not an ELF core file"),)
    assert [(f.kind, f.source, f.ranks) for f in back.findings] == [("core-crash", "core", (3,))]
    assert [d.rank for d in back_dumps] == [d.rank for d in dumps] == [3]


def test_report_of_core_documents_counts_each_stack_finding_once(cores, tmp_path):
    """A core document carries its own stack analysis; `report` redoes it jointly, so only the core
    reader's findings come back from the document (they were counted twice, corroborating themselves)."""
    d = tmp_path / "collected"
    d.mkdir()
    _core_document_file([str(cores["segv"]), str(cores["abrt"]), str(cores["gcore"])], d / "cores.json")
    rc, doc = main_json("report", d)
    keys = [(f["kind"], tuple(f["ranks"]), f["summary"]) for f in doc["findings"]]
    assert len(keys) == len(set(keys)), keys
    assert [f["ranks"] for f in doc["findings"] if f["kind"] == "core-crash"] == [[3]]
    assert "also pointed at by" not in doc["headline"]


def test_garbled_core_documents_are_errors_of_their_own_file(tmp_path):
    """A document with wrong types or nesting too deep for json is one file's error; the batch goes on."""
    head = '{"schema_version": 2, "tool": "hangdbg", "command": "core", '
    good = {"schema_version": 2, "tool": "hangdbg", "command": "core", "source": {"ranks": [{"rank": 1, "state": "SIGSEGV"}]},
            "cores": [{"rank": 1, "threads": [{"thread_id": 7, "frames": [{"function": "step", "file": "t.py", "line": 3}]}]}]}
    bad = {"findings.json": head + '"findings": 5}', "ranks.json": head + '"source": {"ranks": 5}}',
           "v1.json": '{"schema_version": 1, "tool": "hangdbg", "command": "core", "cores": []}',
           "cores.json": head + '"cores": 5}', "frames.json": head + '"cores": [{"rank": 0, "threads": [{"frames": 5}]}]}',
           "deep.json": head + '"x": ' + "[" * 100_000 + "]" * 100_000 + "}"}
    paths = []
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    (tmp_path / "good.json").write_text(json.dumps(good))
    rep, dumps = read_documents([*paths, str(tmp_path / "good.json")])
    assert [e.file for e in rep.errors] == paths and all("cannot read the core document" in e.reason for e in rep.errors)
    assert any("schema_version 1" in e.reason for e in rep.errors) and rep.records == 1
    assert [(s.rank, s.state) for s in rep.ranks] == [(1, "SIGSEGV")]
    assert [(d.rank, d.threads[0].frames[0].function) for d in dumps] == [(1, "step")]


def test_elf_sniffing(cores):
    assert is_core(read_head(str(cores["segv"])))
    assert not is_core(read_head(sys.executable)) and not is_core(b"\x7fELF") and not is_core(b"Fatal Python error")
    assert not native_stacks.sniff(read_head(str(cores["segv"])))


# --- hangdbg dump --core ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hung_ranks(tmp_path_factory):
    """Two plain Python ranks stuck in a wait loop."""
    d = tmp_path_factory.mktemp("hung")
    procs = [_start(WAIT, d, _env(RANK=str(r), WORLD_SIZE="2", HOSTNAME="node-h")) for r in (0, 1)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_dump_core_writes_cores_that_read_back(hung_ranks, tmp_path):
    pids = [str(p.pid) for p in hung_ranks]
    res = run_cli("dump", "--pid", *pids, "--core", "--json", "-o", tmp_path)
    doc = json.loads(res.stdout)
    stderr = " ".join(res.stderr.split())  # rich wraps long lines
    assert "writing 2 core files of about" in stderr and "iB free" in stderr
    written = sorted(doc["cores"], key=lambda c: c["rank"])
    assert [(c["rank"], c["error"]) for c in written] == [(0, None), (1, None)]
    for c, p in zip(written, hung_ranks, strict=True):
        assert Path(c["path"]).name == f"core.rank{c['rank']}.{p.pid}" and Path(c["path"]).stat().st_size == c["size"] > 0
        assert p.poll() is None and psutil.Process(p.pid).status() != psutil.STATUS_STOPPED
    rc, back = main_json("core", *(c["path"] for c in written))
    assert [(c["rank"], c["host"], c["how"]) for c in back["cores"]] == [(0, "node-h", "on demand"), (1, "node-h", "on demand")]
    assert [g["ranks"] for g in back["stacks"]["classes"]] == [[0, 1]]  # same stack: one class, as the live dump
    assert back["stacks"]["classes"][0]["frames"][0]["function"] == "wait_for_peers"


def test_dump_core_refuses_when_the_cores_do_not_fit(hung_ranks, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        plan = plan_cores([_rank_process(p.pid, i) for i, p in enumerate(hung_ranks)], mnt)
        assert not plan.fits and plan.needed > 4 << 20 and plan.free <= 2 << 20
        res = run_cli("dump", "--pid", str(hung_ranks[0].pid), "--core", "-o", mnt)
        assert res.returncode == 1 and "would not fit" in res.stderr and "--force" in res.stderr
        assert not list(mnt.glob("core.rank*"))
        assert not (mnt / "raw").exists()  # refused before py-spy ran: no stacks taken and then lost
        res = run_cli("dump", "--pid", str(hung_ranks[0].pid), "--core", "--force", "--json", "-o", mnt)
        doc = json.loads(res.stdout)
        assert "no space left" in doc["cores"][0]["error"] and "no core of rank 0" in res.stderr
        assert not list(mnt.glob("core.rank*"))  # the partial core was removed: the report still fits
        assert hung_ranks[0].poll() is None and psutil.Process(hung_ranks[0].pid).status() != psutil.STATUS_STOPPED
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# --- text backtraces ------------------------------------------------------------------------------

def _load(*names: str):
    return stack_text.load([str(STACKS / n) for n in names])


def test_every_fixture_is_sniffed_and_pyspy_is_not():
    for p in STACKS.iterdir():
        assert native_stacks.sniff(read_head(str(p))), p.name
    for p in (FIXTURES / "pyspy").iterdir():
        assert not native_stacks.sniff(read_head(str(p))), p.name
    assert not native_stacks.sniff(b"NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\nepoch 1 loss 0.3\n")


def test_gdb_thread_apply_all_bt():
    rep, (d,) = _load("gdb_threads.txt")
    assert rep.kind == "stack-text" and rep.lines_skipped == 0 and rep.lines_read == 29
    assert d.cmdline == "/usr/bin/python3 train.py --epochs 3"
    main, other = d.threads
    assert (main.thread_id, main.status) == (4242, "active")  # [Current thread is 1 (... (LWP 4242))]
    assert main.frames[0] == native_stacks.Frame("__pthread_kill_implementation", "./nptl/pthread_kill.c", 44, native=True)
    assert main.frames[4].function == "??" and main.frames[4].file == "/lib/x86_64-linux-gnu/libstdc++.so.6"
    assert main.frames[5].function.startswith("c10d::ProcessGroupGloo::AsyncWork::execute(c10::intrusive_ptr<")
    assert (other.thread_id, other.name, other.status) == (4250, "pt_autograd_0", "idle")
    # no rank in the text or the file name: the finding names the file and claims no rank
    assert rep.findings[0].kind == "crash" and rep.findings[0].summary == (
        "gdb_threads.txt crashed with SIGABRT in c10d::ProcessGroupGloo::AsyncWork::execute")  # past raise/abort
    assert rep.findings[0].ranks == ()


def test_gdb_bt_and_py_bt_merge_per_thread(tmp_path):
    both = tmp_path / "rank2.gdb.txt"
    both.write_text((STACKS / "gdb_threads.txt").read_text() + (STACKS / "pybt.txt").read_text())
    rep, (d,) = stack_text.load([str(both)])
    assert d.rank == 2 and d.rank_source == "file name"
    main = next(t for t in d.threads if t.thread_id == 4242)
    fns = [f.function for f in main.frames]
    # the Python frames take the place of the interpreter loop's frame
    assert fns.index("all_reduce") == fns.index("c10d::ProcessGroupGloo::AsyncWork::execute(c10::intrusive_ptr<c10d::ProcessGroupGloo::AsyncWork, c10::detail::intrusive_target_default_null_type<c10d::ProcessGroupGloo::AsyncWork> > const&)") + 1
    assert [f.function for f in main.python_frames] == ["all_reduce", "step", "<module>"]
    assert "_PyEval_EvalFrameDefault" not in fns[:fns.index("<module>")]
    assert rep.findings[0].summary == ("rank 2 crashed with SIGABRT in torch/distributed/distributed_c10d.py:2501 all_reduce() "
                                       "called from job/train.py:42 step()")


def test_py_bt_alone():
    _rep, (d,) = _load("pybt.txt")
    loader = next(t for t in d.threads if t.thread_id == 4250)
    assert [(f.function, f.line) for f in loader.python_frames] == [("_prefetch", 12), ("run", 975)]
    assert loader.frames[0].native and loader.frames[0].function == "sleep" and loader.status == "idle"


def test_faulthandler_with_rank_prefixes():
    rep, dumps = _load("faulthandler_ranks.txt")
    (d,) = dumps
    assert (d.rank, d.rank_source) == (1, "prefix")
    current = d.threads[0]
    assert current.thread_id == 0x00007F2B70E34B80 and current.status == "active"
    assert [(f.function, f.file, f.line) for f in current.frames][1:3] == [("forward", "/srv/job/model.py", 88), ("step", "/srv/job/train.py", 42)]
    (f,) = rep.findings
    assert f.kind == "fatal-error" and f.ranks == (1,) and f.evidence[0].line == 2
    assert f.summary == ("rank 1: Fatal Python error: Segmentation fault in torch/nn/functional.py:2264 embedding() "
                         "called from job/model.py:88 forward()")
    assert rep.ranks[0].state == "Segmentation fault" and rep.lines_skipped == 0


def test_real_faulthandler_dump(tmp_path):
    script = tmp_path / "fh.py"
    script.write_text("import faulthandler, os, signal\nfaulthandler.enable()\ndef step():\n    os.kill(os.getpid(), signal.SIGSEGV)\nstep()\n")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    log = tmp_path / "rank4.log"
    log.write_text(res.stderr)
    assert native_stacks.sniff(read_head(str(log)))
    rep, (d,) = stack_text.load([str(log)])
    assert d.rank == 4 and [f.function for f in d.threads[0].frames] == ["step", "<module>"]
    assert rep.findings[0].summary == "rank 4: Fatal Python error: Segmentation fault in fh.py:4 step()".replace(
        "fh.py", f"{tmp_path.name}/fh.py")


def test_torch_cpp_frames_crlf_and_garbage():
    rep, (d,) = _load("torch_cpp.txt")
    (t,) = d.threads
    assert d.rank == 0 and [f.function for f in t.frames][:3] == [
        "c10::Error::Error(c10::SourceLocation, std::string)", "<unknown function>",
        "c10d::TCPStore::doWait(c10::ArrayRef<std::string>, std::chrono::duration<long, std::ratio<1l, 1000l> >)"]
    assert t.frames[0].file == "/usr/lib/python3/dist-packages/torch/lib/libc10.so"
    assert t.frames[4] == native_stacks.Frame("??", "/usr/bin/python3", None, native=True)
    (f,) = rep.findings
    assert f.kind == "cpp-exception" and f.severity == "warning"
    assert f.summary == "rank 0: C++ Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:670"


def test_lldb_and_eu_stack():
    rep, (d,) = _load("lldb_bt.txt")
    crashed, second = d.threads
    assert crashed.name == "python3" and crashed.status == "active"
    assert [f.function for f in crashed.frames] == ["__strlen_avx2", "string_at", "_PyEval_EvalFrameDefault", "_start"]
    assert crashed.frames[1].file == "_ctypes.c" and crashed.frames[1].line == 5564
    assert (second.thread_id, second.name, second.status) == (2, "pt_elastic", "idle")
    assert rep.findings[0].summary == "lldb_bt.txt crashed with SIGSEGV in __strlen_avx2" and rep.findings[0].ranks == ()  # no rank printed
    _rep, (e,) = _load("eu_stack.txt")
    assert [(t.thread_id, t.status) for t in e.threads] == [(5120, "idle"), (5131, "idle")]
    assert e.threads[0].frames[1].function == "gloo::transport::tcp::Loop::run()"


def test_stack_texts_go_through_the_analyzer():
    from hangdbg.stacks.analysis import analyze

    _rep, dumps = _load("faulthandler_ranks.txt", "torch_cpp.txt")
    a = analyze(dumps)
    assert [d.rank for d in a.ranks] == [0, 1]
    assert any(g.frames and g.frames[0].function == "embedding" for g in a.classes)


def test_unreadable_file_is_reported(tmp_path):
    rep = stack_text.READER.read([str(tmp_path / "missing.txt")])
    assert rep.errors and rep.errors[0].file.endswith("missing.txt")


def test_fuzzed_stack_lines_never_raise():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    seeds = [ln for p in sorted(STACKS.iterdir()) for ln in p.read_text(errors="replace").splitlines()]

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.one_of(st.text(max_size=80), st.sampled_from(seeds),
                              st.tuples(st.sampled_from(seeds), st.integers(0, 200), st.text(max_size=5))
                              .map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1]:])), max_size=40))
    def check(lines):
        blocks, skipped, facts = native_stacks.parse_stacks(enumerate(lines, 1), "fuzz")
        assert skipped <= len(lines)
        assert all(b.frames and all(isinstance(f, native_stacks.Frame) for f in b.frames) for b in blocks)

    check()


def test_two_ranks_fatal_errors_in_one_log():
    rep, dumps = _load("faulthandler_two_ranks.txt")
    assert [(d.rank, d.rank_source) for d in dumps] == [(0, "prefix"), (2, "prefix")]
    assert [f.summary for f in rep.findings] == [
        "rank 0: Fatal Python error: Aborted in job/train.py:42 step()",
        "rank 2: Fatal Python error: Segmentation fault in job/model.py:88 forward()"]
    assert [f.evidence[0].line for f in rep.findings] == [1, 6]


def test_a_gcore_that_times_out_leaves_no_partial_core(tmp_path):
    """Issue 14: a gcore stopped at its timeout has written part of the core: the part is removed
    (it would fill the disk for the ranks after it) and the error says so; the rank is resumed."""
    fake = tmp_path / "gcore"
    fake.write_text('#!/bin/sh\n# gcore -o PREFIX PID: write part of PREFIX.PID, then hang\n'
                    'head -c 65536 /dev/zero > "$2.$3"\nexec sleep 60\n')
    fake.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        got = write_core(_rank_process(proc.pid, 0), tmp_path, timeout=1.5, gcore=str(fake))
        assert got.path is None and "longer than 1.5 s" in (got.error or "")
        assert "partial core was removed" in (got.error or "")
        assert not list(tmp_path.glob("core.rank0.*")), list(tmp_path.iterdir())
        assert proc.poll() is None  # still running
    finally:
        proc.kill()
        proc.wait()
