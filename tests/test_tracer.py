"""tracer/: the NicerTrace-style per-rank call tracer (standard library only), in real processes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures" / "tracer"
HOST = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())
HEADER_RE = re.compile(r"^# tracer v1 host=(\S+) rank=(\S+) pid=(\d+) "
                       r"start=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) argv=(.*)$")
CALL_RE = re.compile(r"^( {0,5}\d+\.\d{6}| {11}-) > (\S+):(\d+) (\S+)$")
LINE_RE = re.compile(r"^( {0,5}\d+\.\d{6}| {11}-) ([^:\s]+):(\d+) \| (.*)$")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _interpreters() -> list:
    """This interpreter (sys.settrace path), plus python3.12+/3.13 if present (sys.monitoring)."""
    out = [pytest.param(sys.executable, id=f"py{sys.version_info[0]}.{sys.version_info[1]}")]
    pyenv_versions = Path(sys.base_prefix).parent
    for name in ("python3.12", "python3.13"):
        found = sorted(pyenv_versions.glob(f"{name[6:]}*/bin/{name}"))
        exe = str(found[-1]) if found else shutil.which(name)
        ok = False
        if exe:
            try:
                ok = subprocess.run([exe, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                                    capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        out.append(pytest.param(exe, id=name.replace("python", "py"),
                                marks=pytest.mark.skipif(not ok, reason=f"{name} not available")))
    return out


INTERPRETERS = _interpreters()


# Every test runs under both 3.11 paths: "default" (the C trace function tracer._ctrace when it
# is built, see tests/test_tracer_ctrace.py) and "pure" (TRACER_PURE=1: the pure-Python
# sys.settrace path). The python3.12+/3.13 runs use sys.monitoring either way: once.
def pytest_generate_tests(metafunc):
    if "tracer_backend" not in metafunc.fixturenames:
        return
    if "python" not in metafunc.fixturenames:
        metafunc.parametrize("tracer_backend", ["default", "pure"], indirect=True)
        return
    combos = []
    for p in INTERPRETERS:
        if p.values[0] == sys.executable:
            combos += [pytest.param(p.values[0], b, id=f"{p.id}-{b}", marks=p.marks) for b in ("default", "pure")]
        else:
            combos.append(pytest.param(p.values[0], "default", id=p.id, marks=p.marks))
    metafunc.parametrize(("python", "tracer_backend"), combos, indirect=["tracer_backend"])


@pytest.fixture(autouse=True)
def tracer_backend(request, monkeypatch):
    """TRACER_PURE in this process's environment (``_env()`` passes it to the traced process)."""
    if request.param == "pure":
        monkeypatch.setenv("TRACER_PURE", "1")
    else:
        monkeypatch.delenv("TRACER_PURE", raising=False)
    return request.param


def _mask(text: str) -> str:
    lines = text.splitlines(keepends=True)
    m = HEADER_RE.match(lines[0].rstrip("\n"))
    assert m, lines[0]
    lines[0] = f"# tracer v1 host=HOST rank={m.group(2)} pid=PID start=START argv=ARGV\n"
    assert re.fullmatch(r"# tracer end elapsed=\d+\.\d{6}\n", lines[-1]), lines[-1]
    lines[-1] = "# tracer end elapsed=ELAPSED\n"
    return "".join(lines)


def _at(script: str, marker: str) -> str:
    """``"script.py:N | source"`` for the fixture line containing ``marker`` (as traced)."""
    for n, line in enumerate((FIX / script).read_text().splitlines(), 1):
        if marker in line:
            return f"{script}:{n} | {line.strip()}"
    raise AssertionError(f"{marker} not in {script}")


def _read_live(f: Path) -> str:
    """A trace file read while its process is alive, stopped or killed: the file is pre-sized
    (mmap), so it ends with NUL padding up to the next chunk. Only the tail may be NULs."""
    text = f.read_text()
    stripped = text.rstrip("\0")
    assert "\0" not in stripped, "NUL bytes inside the trace"
    return stripped


def _only_file(d: Path) -> Path:
    files = sorted(d.glob("trace-*.txt")) + sorted(d.glob("*.txt"))
    assert files, f"no trace file in {d}"
    return files[0]


# ---------------------------------------------------------------------------------------- format
def test_golden_cli_no_timing(tmp_path, python):
    """``python -m tracer --no-timing script.py`` writes exactly the golden file."""
    res = subprocess.run([python, "-m", "tracer", "--no-timing", "--outdir", str(tmp_path),
                          str(FIX / "golden_script.py"), "x", "y z"],
                         capture_output=True, text=True, timeout=60, env=_env(RANK="3"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "5\nhello rank\n"
    files = list(tmp_path.glob("trace-*.txt"))
    assert len(files) == 1
    m = re.fullmatch(rf"trace-{re.escape(HOST)}-3-(\d+)\.txt", files[0].name)
    assert m, files[0].name
    text = files[0].read_text()
    header = HEADER_RE.match(text.splitlines()[0])
    assert header and header.group(1) == HOST and header.group(3) == m.group(1)
    assert header.group(5) == f"{FIX / 'golden_script.py'} x 'y z'"
    assert _mask(text) == (FIX / "golden_script.trace").read_text()


def test_format_line_docstring_examples():
    from tracer import format_header, format_line

    assert format_line(0.000123, "call", "train", 30, "compute") == "    0.000123 > train:30 compute\n"
    assert format_line(0.00015, "line", "train.py", 31, "acc = 0") == "    0.000150 train.py:31 | acc = 0\n"
    assert format_line(None, "line", "train.py", 31, "acc = 0") == "           - train.py:31 | acc = 0\n"
    assert format_line(None, "call", "__main__", 5, "G.greet") == "           - > __main__:5 G.greet\n"
    assert (format_header("h", "0", 12, "2026-11-22T03:20:00Z", "a.py --x 'y z'")
            == "# tracer v1 host=h rank=0 pid=12 start=2026-11-22T03:20:00Z argv=a.py --x 'y z'\n")
    for doc_line in format_line.__doc__.splitlines():  # the docstring shows the format
        if "0.000123 > train:30 compute" in doc_line or "0.000150 train.py:31 | acc = 0" in doc_line:
            break
    else:
        pytest.fail("format_line docstring lost its examples")


def test_timing_lines_match_format_line(tmp_path, python):
    """With timing on, every line is format_line(elapsed, ...) with increasing elapsed."""
    res = subprocess.run([python, "-m", "tracer", "--outdir", str(tmp_path), str(FIX / "golden_script.py")],
                         capture_output=True, text=True, timeout=60, env=_env(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    f = _only_file(tmp_path)
    assert f.name == f"trace-{HOST}-na-{f.name.split('-')[-1]}"
    lines = f.read_text().splitlines()
    body = lines[1:-1]
    golden_body = (FIX / "golden_script.trace").read_text().splitlines()[1:-1]
    assert len(body) == len(golden_body)
    from tracer import format_line

    last = 0.0
    for got, want in zip(body, golden_body):
        assert got[12:] == want[12:]
        elapsed = float(got[:12])
        assert elapsed >= last
        last = elapsed
        m = CALL_RE.match(got) or LINE_RE.match(got)
        assert m, got
        kind = "call" if " > " in got[12:15] else "line"
        assert format_line(elapsed, kind, m.group(2), int(m.group(3)), m.group(4)) == got + "\n"


# ----------------------------------------------------------------------------- include / exclude
@pytest.fixture()
def fake_tree(tmp_path):
    site = tmp_path / "site-packages"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text(textwrap.dedent("""\
        VERSION = "1.0"


        def helper(x):
            y = x + 1
            return y
        """))
    user = tmp_path / "user"
    user.mkdir()
    (user / "usermod.py").write_text(textwrap.dedent("""\
        import json

        import fakepkg


        def work(n):
            out = []
            for i in range(n):
                out.append(fakepkg.helper(i))
            return json.dumps(out)
        """))
    out = tmp_path / "out"
    return site, user, out


def _run_include(python, mode, fake_tree) -> str:
    site, user, out = fake_tree
    res = subprocess.run([python, str(FIX / "include_script.py"), mode, str(out), str(site), str(user)],
                         capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout == "[1, 2, 3]\n"
    return (out / f"{mode}.txt").read_text()


def test_include_exclude(python, fake_tree):
    default = _run_include(python, "default", fake_tree)
    assert "> usermod:6 work\n" in default
    assert "usermod.py:9 | out.append(fakepkg.helper(i))\n" in default
    assert "include_script.py:25 | result = usermod.work(3)\n" in default     # the with-block
    assert "fakepkg" not in default.replace("fakepkg.helper", "").replace("fakepkg.VERSION", "")
    assert "> json" not in default and "encoder.py" not in default           # stdlib never
    assert "> tracer" not in default and "core.py" not in default            # nor itself

    included = _run_include(python, "include", fake_tree)
    assert included.count("> fakepkg:4 helper\n") == 3
    assert included.count("__init__.py:5 | y = x + 1\n") == 3
    assert "> usermod:6 work\n" in included
    assert "> json" not in included and "encoder.py" not in included

    for mode in ("ignoremods", "ignoredirs"):
        text = _run_include(python, mode, fake_tree)
        assert "> usermod" not in text and "usermod.py" not in text, mode
        assert "include_script.py:25 | result = usermod.work(3)\n" in text, mode
        assert "fakepkg:" not in text and "json" not in text.split("\n", 1)[1], mode


def test_count_mode(fake_tree):
    text = _run_include(sys.executable, "count", fake_tree)
    counts = dict(re.findall(r"^#count (\S+) (\d+)$", text, re.MULTILINE))
    user = fake_tree[1] / "usermod.py"
    assert counts[f"{user}:9"] == "3"          # the loop body
    assert counts[f"{user}:8"] == "4"          # the for line: 3 iterations + exit
    assert text.splitlines()[-1].startswith("# tracer end elapsed=")
    assert all(not ln.startswith("#count") for ln in text.splitlines()[:-len(counts) - 1])


# ---------------------------------------------------------------------------- API and threads
def test_api_run_context_manager_threads(tmp_path):
    script = tmp_path / "api.py"
    script.write_text(textwrap.dedent(f"""\
        import threading
        import tracer

        def add(a, b=0):
            return a + b

        def in_thread():
            z = 41 + 1
            return z

        assert tracer.Tracer is tracer.NicerTrace
        assert tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="run.txt").run(add, 2, b=3) == 5
        with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="with.txt") as tr:
            t = threading.Thread(target=in_thread)
            t.start()
            t.join()
        assert not tr.active
        print(tracer.__all__)
        """))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=_env(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    run_txt = (tmp_path / "run.txt").read_text()
    assert "> __main__:4 add\n" in run_txt and "api.py:5 | return a + b\n" in run_txt
    with_txt = (tmp_path / "with.txt").read_text()
    assert "> __main__:7 in_thread\n" in with_txt and "api.py:8 | z = 41 + 1\n" in with_txt
    assert "api.py:14 | t = threading.Thread(target=in_thread)\n" in with_txt
    assert "threading.py" not in with_txt


def test_threads_growth_and_fork_whole_lines(tmp_path, python):
    """A tiny mmap chunk (many grows) with 4 threads writing at once: every line is whole, none
    is lost, no NUL padding is left after stop(); a forked child writes its own file."""
    script = tmp_path / "thr.py"
    script.write_text(textwrap.dedent(f"""\
        import os
        import threading
        import tracer
        import tracer.core

        tracer.core._CHUNK = 4096

        def work(k):
            total = 0
            for i in range(3000):
                total += i * k
            return total

        with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="thr.txt") as tr:
            ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            pid = os.fork()
            if pid == 0:
                work(1)
                tr.stop()
                os._exit(0)
            os.waitpid(pid, 0)
            work(2)
        print("child", pid)
        """))
    res = subprocess.run([python, str(script)], capture_output=True, text=True, timeout=120,
                         env=_env(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    child = int(res.stdout.split()[1])
    body = "thr.py:11 | total += i * k\n"
    for f, n_work in ((tmp_path / "thr.txt", 5), (tmp_path / f"thr-{child}.txt", 1)):
        text = f.read_text()
        assert "\0" not in text, f
        lines = text.splitlines()
        assert HEADER_RE.match(lines[0]) and lines[-1].startswith("# tracer end elapsed=")
        for ln in lines[1:-1]:
            assert CALL_RE.match(ln) or LINE_RE.match(ln), ln
        assert text.count(body) == 3000 * n_work, f
        assert text.count("> __main__:8 work\n") == n_work, f
    assert HEADER_RE.match((tmp_path / f"thr-{child}.txt").read_text().splitlines()[0]).group(3) == str(child)


@pytest.mark.parametrize("mode", ["nommap", "nogrow"])
def test_fallback_to_os_write(tmp_path, mode):
    """No shared mapping possible, or growing it fails (disk full): lines go out with os.write,
    none is lost, and the file is left without NUL padding."""
    script = tmp_path / "fb.py"
    script.write_text(textwrap.dedent(f"""\
        import errno
        import tracer
        import tracer.core as core

        core._CHUNK = 4096
        if {mode!r} == "nommap":
            def _nomap(*a, **k):
                raise OSError(errno.ENODEV, "no mmap here")
            core.mmap.mmap = _nomap
        else:
            _orig = core._reserve
            def _reserve(fd, off, n):
                if off:
                    raise OSError(errno.ENOSPC, "full")
                _orig(fd, off, n)
            core._reserve = _reserve

        def work():
            total = 0
            for i in range(2000):
                total += i
            return total

        with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="fb.txt") as tr:
            assert (tr._mm is None) == ({mode!r} == "nommap"), tr._mm
            work()
            work()
            assert tr._mm is None
        """))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env=_env(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "fb.txt").read_text()
    assert "\0" not in text
    lines = text.splitlines()
    assert HEADER_RE.match(lines[0]) and lines[-1].startswith("# tracer end elapsed=")
    for ln in lines[1:-1]:
        assert CALL_RE.match(ln) or LINE_RE.match(ln), ln
    assert text.count("fb.py:21 | total += i\n") == 4000


def test_fsync_mode_same_file(tmp_path):
    """``--fsync`` (msync of the mapping per line) writes the same golden file."""
    res = subprocess.run([sys.executable, "-m", "tracer", "--no-timing", "--fsync", "--outdir", str(tmp_path),
                          str(FIX / "golden_script.py"), "x", "y z"],
                         capture_output=True, text=True, timeout=60, env=_env(RANK="3"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _mask(_only_file(tmp_path).read_text()) == (FIX / "golden_script.trace").read_text()


def test_never_imports_hangdbg_stdlib_only():
    code = ("import sys; before = set(sys.modules); import tracer, tracer.__main__; "
            "new = set(sys.modules) - before; "
            "bad = sorted(m for m in new if m.split('.')[0] not in sys.stdlib_module_names "
            "and m.split('.')[0] != 'tracer'); "
            "print('BAD', bad, sorted(m for m in sys.modules if m.split('.')[0] == 'hangdbg'))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "BAD [] []"
    for f in (ROOT / "tracer").glob("*.py"):
        assert not re.search(r"^\s*(from|import)\s+hangdbg", f.read_text(), re.MULTILINE), f


# ------------------------------------------------------------------------- the last line is on disk
def _start_kill_script(mode, tmp_path):
    return subprocess.Popen([sys.executable, str(FIX / "kill_script.py"), mode, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, env=_env(), start_new_session=True)


def test_self_sigkill_leaves_last_line(tmp_path):
    p = _start_kill_script("self-kill", tmp_path)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert out == "DYING\n"
    text = _read_live(tmp_path / "kill.txt")
    assert text.endswith(_at("kill_script.py", "# SELF-KILL") + "\n")


def test_external_sigkill_in_loop_leaves_whole_lines(tmp_path):
    p = _start_kill_script("loop", tmp_path)
    try:
        assert p.stdout.readline() == "LOOPING\n"
        time.sleep(0.3)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        p.kill()
    text = _read_live(tmp_path / "kill.txt")
    if not text.endswith("\n"):
        # SIGKILL can land while a line is being copied into the mapping (the copy stops at a page
        # boundary): that one line is cut, every line before it is whole, and readers drop it
        assert len(text) - len(text[:text.rfind("\n") + 1]) < 200
        text = text[:text.rfind("\n") + 1]
    last = text.splitlines()[-1]
    loop_lines = {_at("kill_script.py", m) for m in ("while True:", "n += 1", "if n == 2000:", '"LOOPING"')}
    assert last[13:] in loop_lines, last
    from hangdbg.evidence.traces.grammar import read_trace
    t = read_trace(tmp_path / "kill.txt", last=1)
    assert t.last_lines == (last,) and not t.ended
    assert text.count(_at("kill_script.py", "n += 1") + "\n") > 2000


def test_sigstop_file_ends_at_last_line_executed(tmp_path):
    p = _start_kill_script("sleep", tmp_path)
    try:
        assert p.stdout.readline() == "SLEEPING\n"
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(0.2)
        with open(f"/proc/{p.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "T"     # still stopped while we read
        text = _read_live(tmp_path / "kill.txt")
        assert text.endswith(_at("kill_script.py", "# FROZEN") + "\n"), text[-300:]
        assert _at("kill_script.py", "x = sum(range(10))") + "\n" in text
    finally:
        p.kill()
        p.wait(timeout=30)


# ------------------------------------------------------------------------------ real 4-rank job
@pytest.mark.real
def test_torchrun_four_ranks_one_file_each(tmp_path):
    pytest.importorskip("torch")
    env = _env(TRACER_TEST_DIR=str(tmp_path), OMP_NUM_THREADS="1")
    log = open(tmp_path / "torchrun.log", "w")
    p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
                          "--monitor-interval", "0.5", str(FIX / "torch_job.py")],
                         stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not (tmp_path / "rank2.frozen").exists():
            assert p.poll() is None, (tmp_path / "torchrun.log").read_text()
            assert time.monotonic() < deadline, "rank 2 never reached its hang"
            time.sleep(0.05)
        files = {}
        for f in tmp_path.glob("trace-*.txt"):
            m = re.fullmatch(rf"trace-{re.escape(HOST)}-(\d+)-(\d+)\.txt", f.name)
            assert m, f.name
            files[int(m.group(1))] = (int(m.group(2)), f)
        assert sorted(files) == [0, 1, 2, 3]
        for rank, (pid, f) in files.items():
            h = HEADER_RE.match(_read_live(f).splitlines()[0])
            assert h and h.groups()[1:3] == (str(rank), str(pid)) and h.group(1) == HOST

        pid2, f2 = files[2]
        os.kill(pid2, signal.SIGSTOP)
        time.sleep(0.2)
        text2 = _read_live(f2)
        assert text2.endswith(_at("torch_job.py", "# RANK2-FREEZES") + "\n"), text2[-300:]
        assert text2.count(_at("torch_job.py", "dist.all_reduce(t)") + "\n") == 3

        pid1, f1 = files[1]
        (tmp_path / "go").touch()
        deadline = time.monotonic() + 30
        while os.path.exists(f"/proc/{pid1}") and _state(pid1) not in ("Z", "X", None):
            assert time.monotonic() < deadline, "rank 1 did not die"
            time.sleep(0.05)
        text1 = _read_live(f1)
        assert text1.endswith(_at("torch_job.py", "# RANK1-DIES") + "\n"), text1[-300:]
        for rank in (0, 3):
            assert _at("torch_job.py", "dist.all_reduce(t)") + "\n" in _read_live(files[rank][1])
    finally:
        # torchrun puts its workers in their own sessions: kill them by pid (from the trace file
        # names), then torchrun's whole process group.
        for f in tmp_path.glob("trace-*.txt"):
            try:
                os.kill(int(f.stem.rsplit("-", 1)[1]), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)
        log.close()


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
