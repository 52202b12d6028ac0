"""Issue 14's promises under injected faults, through the real command line (``tests/faults.py``):
a py-spy, ssh, pdsh or scontrol that hangs, prints junk, lies or fails; a full disk and a
read-only ``-o``; FIFOs, symlink loops and symlinks pointing out of ``-o``.

Every run is a :func:`faults.guarded_run` (memory limit, timeout) checked by
:func:`faults.assert_clean`: no traceback, an exit status in {0,1,2,3}, nothing written outside
``-o`` in the test's directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import faults as F
from faults import ROOT_ONLY

FIXTURES = Path(__file__).resolve().parent / "fixtures"
pytestmark = pytest.mark.real  # every test runs the command line as a child process (guarded_run), seconds each
TIMEOUT = 2
MARGIN = 20  # seconds over --timeout a run may take (interpreter start-up, analysis) on a busy 2-core box


@pytest.fixture
def job(tmp_path):
    """The watched directory (``-o`` goes inside it); fake tools live next to it, in ``tmp_path/bin``."""
    d = tmp_path / "job"
    d.mkdir()
    return d


def _doc(res: subprocess.CompletedProcess) -> dict:
    return json.loads(res.stdout)


# --- a fake py-spy: dump --pid ----------------------------------------------------------------

STACK = ("Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
         'Thread {pid} (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2050)\n'
         "    <module> (train.py:20)\n")

PYSPY_FAULTS = {
    "hangs": (F.hang(b"Process {pid}: python train.py\n"), "timed out"),
    "junk": (F.junk(seed=14), "py-spy printed"),
    "junk-fails": (F.junk(seed=7, code=1), ""),
    "other-pid": (F.lie(STACK.replace("{pid}", "1")), "pid 1"),
    "header-only": (F.lie("Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"), "no stack"),
    "fails": (F.fail("Error: [/yellow] \x1b]0;pwned\x07\x1b[2J failed to attach\n", 1), "failed to attach"),
}


@pytest.mark.parametrize("fault", list(PYSPY_FAULTS))
def test_dump_pid_with_a_hostile_pyspy_reports_the_rank_unread(tmp_path, job, rank_process, fault):
    behaviour, reason = PYSPY_FAULTS[fault]
    exe = F.fake_tool(tmp_path / "bin", "py-spy", behaviour)
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--pid", rank_process, "--py-spy", exe, "--timeout", TIMEOUT, "--no-adapt",
                         "-o", out, "--json"], timeout=TIMEOUT + MARGIN + 30, env=F.env_with_path(tmp_path / "bin"))
    F.assert_clean(res, out, job, before)
    assert res.seconds < TIMEOUT + MARGIN, res.seconds  # bounded: a hanging py-spy is killed (SIGTERM ignored)
    assert F.calls(tmp_path / "bin", "py-spy"), "the fake py-spy was not run"
    doc = _doc(res)
    # never "healthy" when no stack of the rank was read
    assert res.returncode == 1, (res.returncode, doc["headline"])
    assert doc["stacks"]["unreadable_ranks"] == [0]
    unread = [f for f in doc["findings"] if f["kind"] == "unreadable"]
    assert unread and reason in unread[0]["summary"], unread
    raw = (out / "raw" / "rank-0000.txt").read_bytes()  # what py-spy printed is kept
    if behaviour.stdout and not behaviour.stdout.startswith(b"\x00"):
        first = behaviour.stdout.replace(b"{pid}", str(rank_process).encode()).split(b"\n")[0]
        assert first.decode("utf-8", "replace").encode() in raw
    assert F.parts(out) == []


@pytest.mark.parametrize("fault", ["hangs", "fails"])
def test_dump_pid_console_never_passes_escapes_or_markup(tmp_path, job, rank_process, fault):
    behaviour, _ = PYSPY_FAULTS[fault]
    exe = F.fake_tool(tmp_path / "bin", "py-spy", behaviour)
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--pid", rank_process, "--py-spy", exe, "--timeout", TIMEOUT, "--no-adapt", "-o", out],
                        timeout=TIMEOUT + MARGIN + 30)
    F.assert_clean(res, out, job, before)
    F.assert_no_raw_escapes(res)
    assert res.returncode == 1 and b"rank 0" in res.stdout + res.stderr


# --- a fake ssh / pdsh: dump --hosts ----------------------------------------------------------

HOSTS = ["nodea", "nodeb"]
NODE_TIMEOUT = 4
NASTY_ERROR = b"ssh: connect to host [/yellow] port 22: \x1b]0;pwned\x07\x1b[2J\x1b]52;c;cGF5bG9hZA==\x07Connection refused [bold]\n"


def _frames(host: str, rank: int, name: str | None = None, status: str = "ok") -> bytes:
    """Agent output of ``host`` claiming ``rank`` (a rank dump and a done message), as lines."""
    from hangdbg.transport.wire import encode_message

    text = (f"# hangdbg rank={rank} pid={100 + rank} host={host} world_size=2 rank_source=RANK sample=1 "
            f"time=2026-01-01T00:00:00Z\n" + STACK.replace("{pid}", str(100 + rank)))
    msgs = [{"type": "rank", "host": host, "rank": rank, "sample": 1, "name": name or f"rank-{rank:04d}.txt",
             "text": text, "error": None},
            {"type": "done", "host": host, "status": status, "error": None,
             "processes": [{"rank": rank, "pid": 100 + rank, "host": host}], "seconds": 0.1}]
    return "".join(line + "\n" for i, m in enumerate(msgs, 1) for line in encode_message(host, i, m)).encode()


def _dump_hosts(job: Path, launcher: str, extra: list[str] | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--hosts", ",".join(HOSTS), "--launcher", launcher, "--timeout", TIMEOUT,
                         "--node-timeout", NODE_TIMEOUT, "-o", out, *(extra or [])],
                        timeout=NODE_TIMEOUT + MARGIN + 30, env=F.env_with_path(job.parent / "bin"))
    F.assert_clean(res, out, job, before)
    F.assert_no_raw_escapes(res)
    assert res.seconds < NODE_TIMEOUT + 10 + MARGIN, res.seconds  # pdsh gets 10 s more than the nodes
    return res, out


def _nodes(out: Path) -> dict[str, dict]:
    docs = [json.loads(p.read_text()) for p in (out / "nodes").glob("*.json")]
    return {n["host"]: n for d in docs for n in d.get("nodes", [d.get("node", d)])}


SSH_FAULTS = {
    # one node's ssh hangs (SIGTERM ignored), the other answers junk
    "hang-and-junk": ({"nodea": F.hang(b"Last login: yesterday\n"), "nodeb": F.junk(seed=3)},
                      {"nodea": "timeout", "nodeb": "no-answer"}),
    # nodea's ssh answers nodeb's frames and frames of a host `..` and of a host never asked;
    # nodeb's ssh fails with markup and terminal escapes in its error
    "lies": ({"nodea": F.lie(_frames("nodeb", 1) + _frames("..", 2) + _frames("evil", 3)),
              "nodeb": F.fail(NASTY_ERROR, 255)},
             {"nodea": "no-answer", "nodeb": "unreachable"}),
    # nodea answers for itself, with a rank file named ../../../victim
    "traversal": ({"nodea": F.lie(_frames("nodea", 0, name="../../../victim")), "nodeb": F.fail(NASTY_ERROR, 255)},
                  {"nodea": "ok", "nodeb": "unreachable"}),
}


@pytest.mark.parametrize("fault", list(SSH_FAULTS))
def test_dump_hosts_with_a_hostile_ssh(tmp_path, job, fault):
    by_host, expect = SSH_FAULTS[fault]
    F.fake_tool(tmp_path / "bin", "ssh", F.fail("unexpected host", 255), by_key=by_host)
    # the remote stop of a node given up on is bounded by --connect-timeout + 7 s: its ssh (the hang) is killed then
    res, out = _dump_hosts(job, "ssh", ["--connect-timeout", "2"])
    calls = F.calls(tmp_path / "bin", "ssh")
    stops = [c for c in calls if any("--stop-run" in a for a in c)]  # the remote stop of a node given up on
    assert sorted(c[c.index("--") + 1] for c in calls if c not in stops) == HOSTS
    nodes = _nodes(out)
    assert {c[c.index("--") + 1] for c in stops} <= {h for h, n in nodes.items() if n["status"] == "timeout"}, stops
    assert set(nodes) == set(HOSTS), nodes  # a node status for each host asked, none for others
    assert {h: n["status"] for h, n in nodes.items()} == expect
    read = [h for h, st in expect.items() if st == "ok"]
    # never an all-clear with a node not read; 3 only when a rank's stack was read and names a suspect
    assert res.returncode in ((1, 3) if read else (1,)), res.stderr.decode(errors="replace")
    got = sorted(str(p.relative_to(out)) for p in (out / "raw").rglob("*") if p.is_file()) if (out / "raw").exists() else []
    assert all(g.startswith(tuple(f"raw/{h}/" for h in read)) for g in got) and len(got) == len(read), got
    text = F.text_of(res)
    for host in HOSTS:
        if expect[host] != "ok":
            assert host in text  # each failed node is named
    assert F.parts(out) == []


@pytest.mark.parametrize("fault", ["junk", "lies", "fails"])
def test_dump_hosts_with_a_hostile_pdsh(tmp_path, job, fault):
    behaviour = {
        "junk": F.junk(seed=5, code=1),
        "lies": F.lie(b"".join(b"nodea: " + ln + b"\n" for ln in (_frames("..", 2) + _frames("evil", 3)).splitlines())
                      + b"".join(b"nodeb: " + ln + b"\n" for ln in _frames("nodea", 0).splitlines()), code=0),
        "fails": F.fail(b"pdsh@login: nodea: " + NASTY_ERROR + b"pdsh@login: nodeb: ssh exited with exit code 255\n", 1),
    }[fault]
    F.fake_tool(tmp_path / "bin", "pdsh", behaviour)
    res, out = _dump_hosts(job, "pdsh")
    assert F.calls(tmp_path / "bin", "pdsh")
    assert res.returncode == 1, res.stderr.decode(errors="replace")
    nodes = _nodes(out)
    assert set(nodes) == set(HOSTS) and all(n["status"] != "ok" for n in nodes.values()), nodes
    assert not (out / "raw").exists() or not any((out / "raw").rglob("rank-*"))


# --- a fake scontrol: dump --jobid / collect --jobid --------------------------------------------

def _show_job(nodelist: str, state: str = "RUNNING", numnodes: str = "2") -> str:
    return (f"JobId=1 JobName=train\n   UserId=alice(1000) GroupId=alice(1000)\n   JobState={state} Reason=None\n"
            f"   NumNodes={numnodes} NumCPUs=8\n   NodeList={nodelist}\n   BatchHost=node1\n")


SCONTROL_FAULTS = {
    "junk": (F.junk(seed=11), "not RUNNING"),
    "junk-fails": (F.junk(seed=12, code=1), "failed"),
    "option-host": (F.lie(_show_job("node1,-oProxyCommand=touch${IFS}/tmp/pwned")), "bad host"),
    "dotdot-host": (F.lie(_show_job("node1,..")), "bad host"),
    "markup-host": (F.lie(_show_job("node[1-2],x[/bold]")), "bad host"),
    "not-running": (F.lie(_show_job("node[1-2]", state="COMPLETING")), "not RUNNING"),
    "garbage-numnodes": (F.lie(_show_job("(null)", numnodes="99999999999999999999999")), "not RUNNING"),
    "huge-range": (F.lie(_show_job("node[1-999999999]")), "bad host list"),
    "fails-with-escapes": (F.fail(b"scontrol: error: \x1b]0;pwned\x07\x1b[2J[/yellow] slurm_load_jobs error\n", 1), "failed"),
}


@pytest.mark.parametrize("fault,command", [(f, "dump") for f in SCONTROL_FAULTS]
                         + [(f, "collect") for f in ("junk", "option-host", "dotdot-host", "fails-with-escapes")])
def test_jobid_with_a_hostile_scontrol_stops_before_any_transport(tmp_path, job, fault, command):
    behaviour, reason = SCONTROL_FAULTS[fault]
    bin_dir = tmp_path / "bin"
    F.fake_tool(bin_dir, "scontrol", behaviour)
    for tool in ("srun", "ssh", "pdsh"):  # a transport started would leave a .calls file
        F.fake_tool(bin_dir, tool, F.fail("must not run", 1))
    out = job / "out"
    before = F.snapshot(job)
    what = ["--timeout", TIMEOUT] if command == "dump" else ["--logs", "/var/log/train-*.log"]
    res = F.guarded_run([command, "--jobid", "1", *what, "-o", out], timeout=60 + MARGIN,
                        env=F.env_with_path(bin_dir))
    F.assert_clean(res, out, job, before)
    F.assert_no_raw_escapes(res)
    assert F.calls(bin_dir, "scontrol")
    assert not F.calls(bin_dir, "srun") and not F.calls(bin_dir, "ssh") and not F.calls(bin_dir, "pdsh")
    assert res.returncode in (1, 2), F.text_of(res)
    assert reason in res.stderr.decode(errors="replace"), F.text_of(res)
    assert not out.exists() or not any(out.rglob("raw"))


def test_jobid_with_a_hanging_scontrol_is_bounded(tmp_path, job):
    bin_dir = tmp_path / "bin"
    F.fake_tool(bin_dir, "scontrol", F.hang(b"JobId=1 "))
    F.fake_tool(bin_dir, "srun", F.fail("must not run", 1))
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--jobid", "1", "--timeout", TIMEOUT, "-o", out], timeout=30 + MARGIN + 30,
                        env=F.env_with_path(bin_dir))
    F.assert_clean(res, out, job, before)
    assert res.returncode == 1 and b"timed out" in res.stderr, F.text_of(res)
    assert res.seconds < 30 + MARGIN and not F.calls(bin_dir, "srun")


# --- symlinks in -o pointing outside, symlink loops and FIFOs in inputs -------------------------

STACKS = FIXTURES / "pyspy_few"


@pytest.mark.parametrize("link", ["hangdbg.json", "hangdbg.json.part", "rank00.log"])
def test_a_symlink_in_out_pointing_outside_is_never_written_through(tmp_path, job, link):
    victim = job / "victim"
    victim.write_text("precious\n")
    out = job / "out"
    out.mkdir()
    os.symlink(os.path.join("..", "victim"), out / link)
    before = F.snapshot(job)
    if link.startswith("hangdbg"):
        res = F.guarded_run(["analyze", STACKS, "-o", out], timeout=120)
    else:
        res = F.guarded_run(["nccl", "split", FIXTURES / "nccl", "-o", out], timeout=120)
    F.assert_clean(res, out, job, before)
    assert victim.read_text() == "precious\n"
    assert res.returncode in (0, 1, 2, 3)
    assert F.parts(out) == [] or all(p.is_symlink() for p in F.parts(out))


SPECIALS = {
    "loop": lambda d: F.symlink_loop(d),
    "fifo": lambda d: F.fifo(d / "rank-0009.txt"),
    "fifo-log": lambda d: F.fifo(d / "nccl.log"),
}


@pytest.mark.parametrize("special", list(SPECIALS))
@pytest.mark.parametrize("argv", [["analyze"], ["report"], ["logs"], ["nccl", "summary"], ["gpu"]], ids=lambda a: "-".join(a))
def test_a_fifo_or_symlink_loop_inside_an_input_dir_neither_blocks_nor_crashes(tmp_path, job, special, argv):
    import shutil

    d = job / "in"
    shutil.copytree(STACKS, d)
    shutil.copy(FIXTURES / "nccl" / "clean.log", d / "clean.log")
    SPECIALS[special](d)
    before = F.snapshot(job)
    res = F.guarded_run([*argv, d], timeout=60)
    F.assert_clean(res, None, job, before)
    F.assert_no_raw_escapes(res)


# --- a full disk and a read-only -o -------------------------------------------------------------

def _node_logs(tmp_path: Path, job: Path) -> Path:
    """A node's NCCL log under ``job/logs`` and an honest fake ssh (the agent runs here)."""
    logs = job / "logs"
    logs.mkdir(exist_ok=True)
    (logs / "nccl.log").write_text((FIXTURES / "nccl" / "clean.log").read_text())
    F.fake_tool(tmp_path / "bin", "ssh", F.local())
    return logs


def _argv(command: str, logs: Path, pid: int) -> list:
    return {"collect": ["collect", "--hosts", "localhost", "--launcher", "ssh", "--nccl-logs", f"{logs}/*.log",
                        "--logs", f"{logs}/*.log", "--node-timeout", "60", "--report"],
            "report": ["report", STACKS], "analyze": ["analyze", STACKS],
            "nccl-split": ["nccl", "split", FIXTURES / "nccl"],
            "dump": ["dump", "--pid", pid, "--timeout", 20, "--no-adapt"]}[command]


@ROOT_ONLY
@pytest.mark.parametrize("command", ["collect", "report", "analyze", "nccl-split", "dump"])
def test_full_disk_out_prints_the_answer_and_names_what_was_not_saved(tmp_path, job, command, rank_process):
    logs = _node_logs(tmp_path, job)
    with F.tmpfs(job / "full", "256k") as mnt:
        F.fill(mnt, 4096)  # room for the run marker, not for the documents
        before = F.snapshot(job)
        res = F.guarded_run([*_argv(command, logs, rank_process), "-o", mnt], timeout=120 + MARGIN,
                            env=F.env_with_path(tmp_path / "bin"))
        F.assert_clean(res, mnt, job, before)
        err = res.stderr.decode(errors="replace")
        assert "not saved" in err, F.text_of(res)[-3000:]
        assert res.stdout.strip(), err  # the answer is printed
        assert F.parts(mnt) == []
        # nothing claimed written that was not: no "HTML report: FILE", no unqualified "written to"
        html = [ln for ln in err.splitlines() if ln.startswith("HTML report:")]
        assert all(Path(ln.split(": ", 1)[1]).is_file() for ln in html), html
        assert all("not saved" in ln for ln in err.splitlines() if ln.startswith("written to")), err
        if command == "dump":  # the real py-spy's stack is analysed and printed though not saved
            assert res.returncode in (0, 3) and "rank-0000.txt" in err and b"<module>" in res.stdout, err


@ROOT_ONLY
@pytest.mark.parametrize("command", ["collect", "report", "analyze", "nccl-split", "dump"])
def test_read_only_out_is_exit_2_before_any_work(tmp_path, job, command, rank_process):
    logs = _node_logs(tmp_path, job)
    with F.read_only(tmp_path / "src", job / "ro") as ro:
        out = ro / "out"
        before = F.snapshot(job)
        res = F.guarded_run([*_argv(command, logs, rank_process), "-o", out], timeout=120 + MARGIN,
                            env=F.env_with_path(tmp_path / "bin"))
        F.assert_clean(res, None, job, before)
        assert res.returncode == 2, F.text_of(res)[-3000:]
        assert b"-o DIR" in res.stderr and b"Read-only" in res.stderr, res.stderr
        assert not F.calls(tmp_path / "bin", "ssh")  # collect: refused before any transport


# --- a fake srun behind an honest scontrol: dump --jobid ----------------------------------------

SRUN_FAULTS = {
    "hangs": (F.hang(b"srun: job step 1.2 started\n"), {"node1": "timeout", "node2": "timeout"}),
    "junk": (F.junk(seed=21, code=0), {"node1": "no-answer", "node2": "no-answer"}),
    # frames of a host not in the job, of `..`, and node2 answering with node1's name in a file name
    "lies": (F.lie(_frames("evil", 3) + _frames("..", 2)), {"node1": "no-answer", "node2": "no-answer"}),
    "fails": (F.fail(b"srun: error: node1: task 0: Exited with exit code 1 [/yellow]\x1b]0;pwned\x07\n"
                     b"srun: error: \x1b[2J[bold]Unable to create step\n", 1), {"node1": "error", "node2": "no-answer"}),
}


@pytest.mark.parametrize("fault", list(SRUN_FAULTS))
def test_dump_jobid_with_a_hostile_srun(tmp_path, job, fault):
    behaviour, expect = SRUN_FAULTS[fault]
    bin_dir = tmp_path / "bin"
    F.fake_tool(bin_dir, "scontrol", F.lie(_show_job("node[1-2]")))
    F.fake_tool(bin_dir, "srun", behaviour)
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--jobid", "1", "--timeout", TIMEOUT, "--node-timeout", NODE_TIMEOUT, "-o", out],
                        timeout=NODE_TIMEOUT + MARGIN + 30, env=F.env_with_path(bin_dir))
    F.assert_clean(res, out, job, before)
    F.assert_no_raw_escapes(res)
    assert res.seconds < NODE_TIMEOUT + MARGIN
    assert len(F.calls(bin_dir, "srun")) == 1
    assert res.returncode == 1, F.text_of(res)
    assert {h: n["status"] for h, n in _nodes(out).items()} == expect
    assert not (out / "raw").exists() or not any(p.is_file() for p in (out / "raw").rglob("*"))


# --- another user ------------------------------------------------------------------------------

@pytest.fixture
def nobody():
    """``(argv prefix, python, env)`` to run hangdbg as the user nobody; skips when it cannot."""
    prefix = F.as_user("nobody")
    python = F.system_python("nobody")
    site = next((p for p in sys.path if p.endswith("site-packages") and Path(p, "rich").is_dir()), None)
    if python is None or site is None:
        pytest.skip("no Python the user nobody may run")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{F.ROOT}:{site}", "HOME": "/tmp", "NO_COLOR": "1", "COLUMNS": "160"}
    probe = subprocess.run([*prefix, python, "-c", "import hangdbg.cli.main, rich, psutil"], env=env, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"the user nobody cannot import hangdbg here: {probe.stderr[-300:]!r}")
    return prefix, python, env


@pytest.fixture
def shared_job():
    """A watched directory the user nobody may write (pytest's tmp_path is root's only)."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="hangdbg-faults-"))
    try:
        top.chmod(0o755)
        d = top / "job"
        d.mkdir()
        d.chmod(0o777)
        yield d
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_dump_as_another_user_says_permission_denied_and_names_sudo(nobody, shared_job, rank_process):
    prefix, python, env = nobody
    out = shared_job / "out"
    before = F.snapshot(shared_job)
    res = F.guarded_run(["dump", "--pid", rank_process, "--timeout", TIMEOUT, "-o", out], timeout=60 + MARGIN,
                        env=env, prefix=prefix, python=python, cwd=Path("/tmp"))
    F.assert_clean(res, out, shared_job, before)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 1, F.text_of(res)
    assert "permission denied" in err and "sudo" in err, err
    assert "no training process found" not in err


@pytest.mark.parametrize("command", [["analyze", STACKS], ["dump", "--pid", "1"]], ids=["analyze", "dump"])
def test_out_under_a_dir_the_user_cannot_enter_is_exit_2_not_a_traceback(tmp_path, job, nobody, command):
    prefix, python, env = nobody
    job.chmod(0o700)  # root's: nobody may not even look inside
    before = F.snapshot(job)
    res = F.guarded_run([*command, "-o", job / "out"], timeout=60 + MARGIN, env=env, prefix=prefix, python=python,
                        cwd=Path("/tmp"))
    F.assert_clean(res, None, job, before)
    assert res.returncode == 2, F.text_of(res)
    assert b"Permission denied" in res.stderr and b"-o DIR" in res.stderr, res.stderr


def test_dump_pid_with_a_hanging_pyspy_stays_bounded_with_adaptive_retries(tmp_path, job, rank_process):
    exe = F.fake_tool(tmp_path / "bin", "py-spy", F.hang())
    out = job / "out"
    before = F.snapshot(job)
    res = F.guarded_run(["dump", "--pid", rank_process, "--py-spy", exe, "--timeout", TIMEOUT, "-o", out],
                        timeout=6 * TIMEOUT + MARGIN + 30)
    F.assert_clean(res, out, job, before)
    assert res.seconds < 6 * TIMEOUT + MARGIN  # the --node-timeout default budget of one node
    assert res.returncode in (0, 1, 3), F.text_of(res)  # pystack may still read the real stack
    assert len(F.calls(tmp_path / "bin", "py-spy")) >= 1


@pytest.mark.parametrize("flag", ["--logs", "--nccl-logs", "--traces", "--cores"])
def test_collect_globs_matching_a_fifo_and_a_symlink_loop_neither_block_nor_crash(tmp_path, job, flag):
    logs = _node_logs(tmp_path, job)
    F.fifo(logs / "stuck.log")
    F.symlink_loop(logs)
    out = job / "out"
    before = F.snapshot(job)
    pattern = f"{logs}/[ls][to]*" if flag == "--cores" else f"{logs}/*"  # cores: only stuck.log, loop-a, loop-b
    res = F.guarded_run(["collect", "--hosts", "localhost", "--launcher", "ssh", flag, pattern,
                         "--node-timeout", "40", "-o", out], timeout=40 + MARGIN + 30, env=F.env_with_path(tmp_path / "bin"))
    F.assert_clean(res, out, job, before)
    F.assert_no_raw_escapes(res)
    assert res.seconds < 40, F.text_of(res)  # the agent skipped the FIFO instead of waiting for a writer
    node = _nodes(out)["localhost"]
    assert node["status"] in ("ok", "nothing"), node
    copied = [p.name for p in out.rglob("*") if p.is_fifo() or p.name.startswith(("stuck", "loop-"))]
    assert copied == [], copied
