"""The command line on real processes that are not training jobs, and its conventions."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from rich.console import Console

from conftest import frames_of, FIXTURES, check_golden, read_json, run_cli, run_json, run_main, suspects, validate
from hangdbg.cli.main import main


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=100, no_color=True, force_terminal=False), buf


def test_usage_errors_exit_2():
    assert run_main("dump", "--samples", "0").returncode == 2
    assert run_main("frobnicate").returncode == 2
    res = run_main("dump", "--pid", "999999999")
    assert res.returncode == 2 and "no process with pid 999999999" in res.stderr
    res = run_main("analyze", "/nonexistent/dir")
    assert res.returncode == 2 and "/nonexistent/dir" in res.stderr


def test_version():
    res = run_main("--version")
    assert res.returncode == 0 and res.stdout.startswith("hangdbg ")


def test_the_entry_points_exit_with_the_status_through_a_process(tmp_path):
    """What a shell sees: ``python -m hangdbg`` and the ``hangdbg`` console script exit with the
    command's status (0, 2 usage, 3 found), printing to the process's own stdout and stderr."""
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("hangdbg ")
    res = run_cli("analyze", FIXTURES / "pyspy" / "torch_rank0.txt", FIXTURES / "pyspy" / "torch_rank1.txt")
    assert res.returncode == 3 and "merged call tree" in res.stdout, res.stderr
    script = Path(sys.executable).with_name("hangdbg")  # what `pip install` put next to the interpreter
    assert script.is_file(), f"no console script {script}"
    res = subprocess.run([str(script), "frobnicate"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "invalid choice: 'frobnicate'" in res.stderr and not res.stdout
    res = subprocess.run([str(script), "logs", str(tmp_path / "nope.log")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr


@pytest.fixture
def not_a_rank():
    """A process that is not a rank (not Python, no rank variable)."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def test_no_ranks_is_a_tool_error_with_help(not_a_rank):
    res = run_main("dump", "--pid", not_a_rank.pid)
    assert res.returncode == 1
    assert "no training process found" in res.stderr and "--pid" in res.stderr


@pytest.fixture
def fake_rank(tmp_path):
    """A real Python process with rank variables, blocked in time.sleep."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    proc = subprocess.Popen([sys.executable, "-c", "import time\ndef wait():\n    time.sleep(300)\nwait()"], env=env)
    time.sleep(0.5)
    yield proc
    proc.kill()
    proc.wait()


def test_hung_pyspy_is_abandoned_after_timeout(fake_rank, tmp_path):
    slow = tmp_path / "slow-py-spy"
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    t0 = time.monotonic()
    rc, doc = run_json("dump", "--pid", fake_rank.pid, "--py-spy", slow, "--timeout", "1", "-o", tmp_path / "o",
                       "--no-adapt")
    assert time.monotonic() - t0 < 30
    assert rc == 1
    err = doc["stacks"]["ranks"][0]["error"]
    assert "timed out after 1 s" in err and "--nonblocking" in err
    raw = (tmp_path / "o" / "raw" / "rank-0000.txt").read_text()
    assert raw.startswith("# hangdbg rank=0") and "timed out" in raw
    # the default dump retries, then reads the rank with pystack remote
    rc, doc = run_json("dump", "--pid", fake_rank.pid, "--py-spy", slow, "--timeout", "1", "-o", tmp_path / "p")
    (r,) = doc["stacks"]["ranks"]
    assert r["steps"] == ["retried", "pystack"] and r["error"] is None and rc == 0
    assert [f["function"] for f in frames_of(doc, r["threads"][0])] == ["wait", "<module>"]
    assert (tmp_path / "p" / "raw" / "rank-0000.pystack.json").is_file()


def test_missing_pyspy_names_the_fix(fake_rank, tmp_path):
    res = run_cli("dump", "--pid", fake_rank.pid, "--py-spy", tmp_path / "nope")
    assert res.returncode == 1 and "pip install py-spy" in res.stderr


def test_single_process_dump_and_json_schema(fake_rank, tmp_path):
    rc, doc = run_json("dump", "--pid", fake_rank.pid, "-o", tmp_path)
    assert rc == 0
    assert doc["schema_version"] == 4 and doc["command"] == "dump"
    (r,) = doc["stacks"]["ranks"]
    assert (r["rank"], r["pid"], r["world_size"], r["error"]) == (0, fake_rank.pid, 1, None)
    assert [f["function"] for f in frames_of(doc, r["threads"][0])] == ["wait", "<module>"]
    assert frames_of(doc, r["threads"][0])[0]["file"] == "<string>"
    assert suspects(doc) == [] and doc["stacks"]["missing_ranks"] == []
    assert set(doc) >= {"schema_version", "tool", "version", "created", "command", "found", "headline", "findings", "stacks"}
    assert not doc["found"] and doc["headline"] == doc["stacks"]["headline"]
    assert set(doc["stacks"]) >= {"ranks", "classes", "missing_ranks", "tree"} and "suspects" not in doc
    procs = read_json(tmp_path / "processes.json")  # written before the stacks, with the same header
    check_golden(procs, "processes")
    assert (procs["tool"], procs["command"], [p["pid"] for p in procs["processes"]]) == ("hangdbg", "dump", [fake_rank.pid])
    assert read_json(tmp_path / "hangdbg.json")["stacks"]["ranks"][0]["pid"] == fake_rank.pid


def test_gone_process_is_reported_not_raised(tmp_path):
    from hangdbg.tools.pyspy import PySpyOptions, run_pyspy

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    res = run_pyspy(proc.pid, PySpyOptions(timeout=10))
    assert res.error and f"process {proc.pid} is gone" in res.error


def test_analyze_saved_fixture_files_in_process():
    out, buf = _console()
    err, _ = _console()
    rc = main(["analyze", str(FIXTURES / "pyspy" / "torch_rank0.txt"), str(FIXTURES / "pyspy" / "torch_rank1.txt"), "--json"], out, err)
    doc = validate(json.loads(buf.getvalue()))
    assert rc == 3
    assert doc["command"] == "analyze"
    assert len(suspects(doc)) == 2  # two ranks, two collectives: no majority
    check_golden(doc, "analyze")


def test_report_renders_in_fixed_width_console_without_color():
    out, buf = _console()
    err, _ = _console()
    rc = main(["analyze", str(FIXTURES / "pyspy" / "torch_xargs.txt")], out, err)
    text = buf.getvalue()
    assert rc in (0, 3)
    assert "\x1b[" not in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert "merged call tree" in text


def test_html_like_names_are_not_markup(tmp_path):
    """Frame names with [brackets] must print literally (rich markup escaped)."""
    dump = textwrap.dedent("""\
        Process 7: python x.py
        Python v3.11.7 (/usr/bin/python3.11)

        Thread 7 (idle): "MainThread"
            [bold]evil[/bold] (x.py:1)
            <module> (x.py:2)
        """)
    (tmp_path / "rank-0.txt").write_text(dump)
    out, buf = _console()
    err, _ = _console()
    main(["analyze", str(tmp_path)], out, err)
    assert "[bold]evil[/bold]" in buf.getvalue()


def test_node_scan_with_two_jobs_asks_for_pid(tmp_path):
    procs = []
    try:
        for port in ("29911", "29912"):
            env = dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env))
        time.sleep(0.5)
        res = run_main("dump", "-o", tmp_path)
        assert res.returncode == 2
        assert "jobs; choose one with --pid" in " ".join(res.stderr.split())
        assert str(procs[0].pid) in res.stderr and str(procs[1].pid) in res.stderr
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.real
def test_ctrl_c_keeps_what_arrived_in_a_real_terminal(tmp_path):
    """Driven through a pty with pexpect: progress bar on the terminal, Ctrl-C, raw files kept."""
    import pexpect
    import shutil

    real = shutil.which("py-spy") or str(__import__("pathlib").Path(sys.executable).parent / "py-spy")
    ranks = []
    for r in range(3):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="3", MASTER_PORT="29921")
        ranks.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env))
    stuck = ranks[2].pid
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" {stuck} "*) sleep 120;; esac\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "out"
    try:
        time.sleep(0.5)
        child = pexpect.spawn(
            sys.executable, ["-m", "hangdbg", "dump", "--pid", *[str(p.pid) for p in ranks],
                             "--py-spy", str(wrapper), "--timeout", "100", "-o", str(out)],
            env=dict(os.environ, COLUMNS="120", LINES="40"), encoding="utf-8", timeout=60,
        )
        child.expect("py-spy")  # the progress bar is drawn on the terminal
        end = time.monotonic() + 30
        while len(list((out / "raw").glob("rank-*.txt"))) < 2 and time.monotonic() < end:
            time.sleep(0.2)
        child.sendintr()
        child.expect("interrupted")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 1
        assert sorted(p.name for p in (out / "raw").glob("rank-*.txt")) == ["rank-0000.txt", "rank-0001.txt"]
        assert (out / "processes.json").exists()
        rc, doc = run_json("analyze", out)
        # rank 2 was never reached, but processes.json lists it alive: not dumped, not missing (issue 14)
        assert sorted(r["rank"] for r in doc["stacks"]["ranks"]) == [0, 1, 2]
        assert doc["stacks"]["missing_ranks"] == []
        assert doc["stacks"]["unreadable_ranks"] == [2]
        assert any("interrupted" in f["summary"] for f in doc["findings"] if 2 in f["ranks"])
    finally:
        for p in ranks:
            p.kill()
            p.wait()


def test_cli_and_collectors_never_import_torch():
    code = (
        "import sys, hangdbg, hangdbg.cli.main, hangdbg.demo.launch, hangdbg.stacks.saved\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "print('ok')"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.strip() == "ok", res.stderr


def test_every_subpackage_is_packaged_and_not_shadowed():
    """A regular install (not editable) must carry every subpackage; `import a.b as x` must work."""
    from pathlib import Path

    from setuptools import find_packages

    root = Path(__file__).resolve().parent.parent
    found = set(find_packages(str(root), include=["hangdbg*", "tracer*"]))
    dirs = {".".join(p.parent.relative_to(root).parts) for p in root.glob("hangdbg/**/*.py")}
    assert dirs <= found, dirs - found
    import hangdbg.rankset as rankset
    import hangdbg.collect.procs as procs

    assert rankset.compress([1, 2]) == "1-2" and procs.find_ranks
