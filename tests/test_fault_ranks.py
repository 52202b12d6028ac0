"""Issue 14, dying ranks and unlucky users: a non-root user dumping another user's job, a rank
that dies between samples, an interrupted dump re-analysed, a huge py-spy output, and
``--remote-setup`` text ending in ``;``, ``&`` or a comment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hangdbg.outdir import OutDir

from faults import RUNUSER, system_python

ROOT = Path(__file__).resolve().parent.parent
SITE = next((p for p in sys.path if p.endswith("site-packages") and Path(p, "psutil").is_dir()), None)

_system_python = system_python


@pytest.mark.skipif(os.geteuid() != 0 or RUNUSER is None, reason="needs root and runuser")
def test_other_users_rank_is_permission_denied_not_no_rank(rank_process):
    python = _system_python()
    if python is None or SITE is None:
        pytest.skip("no Python the user nobody may run")
    script = (
        "import sys\n"
        "from hangdbg.collect.procs import find_ranks\n"
        "from hangdbg.errors import HangdbgError\n"
        "for pids in (None, [int(sys.argv[1])]):\n"
        "    try:\n"
        "        find_ranks(pids)\n"
        "        print('FOUND')\n"
        "    except HangdbgError as exc:\n"
        "        print('MSG', exc)\n"
        "        print('HELP', exc.help)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{SITE}", "HOME": "/tmp"}
    res = subprocess.run([RUNUSER, "-u", "nobody", "--", python, "-c", script, str(rank_process)],
                         capture_output=True, text=True, timeout=120, env=env, cwd="/tmp")
    assert res.returncode == 0, res.stderr
    msgs = [ln for ln in res.stdout.splitlines() if ln.startswith("MSG")]
    helps = [ln for ln in res.stdout.splitlines() if ln.startswith("HELP")]
    assert len(msgs) == 2, res.stdout
    for msg, help_ in zip(msgs, helps):
        assert "permission denied" in msg and "root" in msg, msg  # how many, whose user
        assert "no training process found" not in msg
        assert "sudo" in help_ and "CAP_SYS_PTRACE" in help_, help_
    assert str(rank_process) in msgs[1]


# --- --remote-setup ending in ';', '&' or a comment -------------------------------------------

@pytest.mark.parametrize("setup", [
    "export HANGDBG_T=1;",
    "export HANGDBG_T=1 ;  ",
    "export HANGDBG_T=1 &",
    "export HANGDBG_T=1 # activate the venv",
    "export HANGDBG_T=1\n",
    "export HANGDBG_T=1; # done;",
])
def test_remote_setup_ending_in_separator_or_comment_still_runs_the_agent(setup, tmp_path):
    from hangdbg.transport.runners import remote_command

    marker = tmp_path / "agent ran"
    cmd = remote_command(["touch", str(marker)], setup)
    res = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, (cmd, res.stderr)
    assert marker.exists(), cmd


def test_remote_setup_is_run_in_the_agents_shell(tmp_path):
    from hangdbg.transport.runners import remote_command

    out = tmp_path / "env"
    cmd = remote_command(["sh", "-c", f'echo "$HANGDBG_T" > {out}'], "export HANGDBG_T=seen # venv")
    subprocess.run(["sh", "-c", cmd], check=True, timeout=30)
    assert out.read_text().strip() == "seen"


def test_failing_remote_setup_keeps_the_agent_from_running(tmp_path):
    from hangdbg.transport.runners import remote_command

    marker = tmp_path / "agent ran"
    res = subprocess.run(["sh", "-c", remote_command(["touch", str(marker)], "false;")], timeout=30)
    assert res.returncode != 0 and not marker.exists()


@pytest.mark.parametrize("setup", ["source ~/.venv/bin/activate &&", "true ||", "cat |", "true \\"])
def test_remote_setup_with_a_dangling_operator_is_a_usage_error(setup):
    from hangdbg.transport.runners import SshRunner, remote_command
    from hangdbg.errors import UsageError

    with pytest.raises(UsageError, match="--remote-setup"):
        remote_command(["true"], setup)
    with pytest.raises(UsageError, match="--remote-setup"):
        SshRunner(["n1"], setup=setup)


# --- a rank that dies between samples -------------------------------------------------------

FAKE_STACK = """Process {pid}: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread {pid} (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2050)
    train (train.py:10)
    <module> (train.py:20)
"""

ZOMBIE_ERROR = """Error: Failed to get process executable name. Check that the process is running.

Caused by:
    0: No such file or directory (os error 2)
"""


def _fake_pyspy(tmp_path: Path, script: str) -> Path:
    exe = tmp_path / "py-spy"
    exe.write_text(f"#!{sys.executable}\n{script}")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def zombie_and_live():
    """Two ranks: a zombie (killed, not reaped: its launcher did not look yet) and a live one."""
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield dead, live
    finally:
        for p in (dead, live):
            p.kill()
            p.wait()


def test_rank_dead_in_a_later_sample_is_gone_not_hung(tmp_path, zombie_and_live):
    from hangdbg.stacks.analysis import analyze
    from hangdbg.collect.local import CollectOptions, collect
    from hangdbg.model import Kind, RankProcess
    from hangdbg.enums import DumpState
    from hangdbg.stacks.saved import load_dumps
    from hangdbg.tools.pyspy import PySpyOptions

    dead, live = zombie_and_live
    flag = tmp_path / "killed"
    # the fake py-spy kills the dead rank (without reaping it) once it dumped it a first time
    exe = _fake_pyspy(tmp_path, f"""
import os, signal, sys, time
pid = int(sys.argv[sys.argv.index("--pid") + 1])
if pid == {dead.pid} and os.path.exists({str(flag)!r}):
    sys.stderr.write({ZOMBIE_ERROR!r}); sys.exit(1)
sys.stdout.write({FAKE_STACK!r}.format(pid=pid))
if pid == {dead.pid}:
    os.kill(pid, signal.SIGKILL); time.sleep(0.3); open({str(flag)!r}, "w").close()
""")
    ranks = [RankProcess(p.pid, r, "n1", r, 2, 2, "RANK", "python train.py", ("j",)) for r, p in enumerate((dead, live))]
    out = tmp_path / "out"
    opts = CollectOptions(pyspy=PySpyOptions(timeout=30, executable=str(exe)), samples=3, interval=0.2, out=OutDir(out))
    dumps = collect(ranks, opts)
    assert open(f"/proc/{dead.pid}/stat").read().split()[2] == "Z"
    by_rank = {d.rank: d for d in dumps}
    assert by_rank[0].error and "is gone" in by_rank[0].error, by_rank[0].error
    assert (by_rank[0].state, by_rank[1].state) == (DumpState.GONE, DumpState.OK)
    assert "state=gone" in (out / "raw" / "rank-0000.sample-2.txt").read_text().splitlines()[0]  # the header says so
    assert [d.state for d in load_dumps([out])[0]] == [DumpState.GONE, DumpState.OK]
    for a in (analyze(dumps), analyze(load_dumps([out])[0])):  # live, and re-analysed from OUT
        assert 0 in a.missing_ranks
        gone = [f for f in a.findings if f.kind is Kind.MISSING]
        assert gone and gone[0].ranks == (0,), a.findings
        assert "dying" in gone[0].summary and "exited while hangdbg" in gone[0].summary, gone[0].summary
        assert "dying" in a.headline, a.headline


# --- re-analysing an interrupted dump -------------------------------------------------------

def _interrupted_out(tmp_path: Path) -> Path:
    """An ``-o OUT`` dir of a 4-rank dump interrupted after ranks 0 and 1 were written."""
    import json

    out = tmp_path / "out"
    (out / "raw").mkdir(parents=True)
    procs = [{"pid": 1000 + r, "rank": r, "host": "n1", "local_rank": r, "world_size": 4, "local_world_size": 4,
              "rank_source": "RANK", "cmdline": "python train.py", "job": ["j"]} for r in range(4)]
    (out / "processes.json").write_text(json.dumps({"command": "dump", "collector_host": "n1", "processes": procs}))
    for r in (0, 1):
        header = f"# hangdbg rank={r} pid={1000 + r} host=n1 local_rank={r} world_size=4 local_world_size=4 sample=1"
        (out / "raw" / f"rank-{r:04d}.txt").write_text(header + "\n" + FAKE_STACK.format(pid=1000 + r))
    return out


def test_interrupted_dump_reanalysed_calls_unread_ranks_not_dumped_not_missing(tmp_path):
    from hangdbg.stacks.analysis import analyze
    from hangdbg.model import Kind
    from hangdbg.stacks.saved import load_dumps

    dumps, stats = load_dumps([_interrupted_out(tmp_path)])
    assert [d.rank for d in dumps] == [0, 1, 2, 3] and not stats.unreadable
    a = analyze(dumps)
    assert a.missing_ranks == ()
    assert not [f for f in a.findings if f.kind is Kind.MISSING]
    assert set(a.unreadable) == {2, 3}
    named = [f for f in a.findings if set(f.ranks) & {2, 3}]
    assert named and all("not dumped" in f.summary and "interrupted" in f.summary for f in named), a.findings


def test_interrupted_dump_cli(tmp_path):
    from conftest import frames_of, main_json

    out = _interrupted_out(tmp_path)
    rc, doc = main_json("analyze", out)
    assert doc["stacks"]["missing_ranks"] == []
    assert sorted(doc["stacks"]["unreadable_ranks"]) == [2, 3]
    assert "interrupted" in doc["headline"] or any("interrupted" in f["summary"] for f in doc["findings"])


@pytest.mark.parametrize("content", ["{", "[]", '{"processes": [{"rank": "x"}, 3, {"rank": true}]}', "\x00" * 100])
def test_broken_processes_json_is_skipped_not_a_traceback(tmp_path, content):
    from hangdbg.stacks.saved import load_dumps

    out = _interrupted_out(tmp_path)
    (out / "processes.json").write_text(content)
    dumps, _stats = load_dumps([out])
    assert [d.rank for d in dumps] == [0, 1]


# --- a huge py-spy output -------------------------------------------------------------------

HUGE_PYSPY = r"""
import sys
pid = sys.argv[sys.argv.index("--pid") + 1]
w = sys.stdout.write
w(f"Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n")
w(f'Thread {pid} (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2050)\n')
block = "".join(f"    recurse (/job/deep.py:{i})\n" for i in range(1, 20001))
for _ in range(MEGABYTES * 1_000_000 // len(block)):
    w(block)
w("    <module> (/job/train.py:20)\n")
"""


def test_huge_pyspy_output_is_capped_bounded_and_parsed_in_time(tmp_path, rank_process):
    import json
    import resource

    from hangdbg.tools.pyspy import OUTPUT_CAP as cap
    exe = _fake_pyspy(tmp_path, HUGE_PYSPY.replace("MEGABYTES", "150"))
    out = tmp_path / "out"
    limit = 2 << 30

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, NO_COLOR="1", COLUMNS="160")
    res = subprocess.run([sys.executable, "-m", "hangdbg", "dump", "--pid", str(rank_process), "--py-spy", str(exe),
                          "--timeout", "60", "-o", str(out), "--json"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=ROOT, preexec_fn=bounded)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.returncode in (0, 3), res.stderr[-3000:]
    doc = json.loads(res.stdout)
    rank = doc["stacks"]["ranks"][0]
    frames = doc["stacks"]["stack_table"][rank["threads"][0]["stack"]]
    assert frames[0]["function"] == "all_reduce" and frames[-1]["function"] == "<module>" or \
        frames[-1]["function"] == "recurse"  # the outermost frames may be past the cap
    raw = out / "raw" / "rank-0000.txt"
    assert raw.stat().st_size < cap + (1 << 20)
    assert "truncated by hangdbg" in raw.read_text()[-1000:]
    assert "bytes dropped" in res.stderr


def test_deep_thread_keeps_innermost_and_outermost_frames():
    from hangdbg.stacks.pyspy_text import INNER_FRAMES, MAX_FRAMES, OUTER_FRAMES, parse_pyspy_dump

    n = 50_000
    text = 'Thread 1 (idle): "MainThread"\n' + "".join(f"    f{i} (/a.py:{i})\n" for i in range(n))
    procs, garbled = parse_pyspy_dump(text)
    frames = procs[0].threads[0].frames
    assert len(frames) == MAX_FRAMES and garbled == n - MAX_FRAMES
    assert [f.function for f in frames[:2]] == ["f0", "f1"] and frames[INNER_FRAMES - 1].function == f"f{INNER_FRAMES - 1}"
    assert frames[-1].function == f"f{n - 1}" and frames[-OUTER_FRAMES].function == f"f{n - OUTER_FRAMES}"


def test_parse_stops_at_its_deadline():
    from hangdbg.stacks.pyspy_text import parse_pyspy_dump

    text = 'Thread 1 (idle): "MainThread"\n' + "    f (/a.py:1)\n" * 100_000
    procs, garbled = parse_pyspy_dump(text, deadline=time.monotonic() - 1)
    assert garbled == 100_001 and not procs


@pytest.mark.real
@pytest.mark.skipif(os.geteuid() != 0 or RUNUSER is None, reason="needs root and runuser")
def test_unreadable_processes_next_to_found_ranks_are_named(tmp_path):
    """A launcher whose children are ranks of two users, dumped as one of them: the readable rank is
    found, and the other user's processes are named with the fix, not silently dropped."""
    python = _system_python()
    if python is None or SITE is None:
        pytest.skip("no Python the user nobody may run")
    sleep = "import time; time.sleep(120)"
    launcher = subprocess.Popen(
        ["sh", "-c", f'RANK=0 WORLD_SIZE=2 {RUNUSER} -u nobody -- {python} -c "{sleep}" & '
                     f'RANK=1 WORLD_SIZE=2 {python} -c "{sleep}" & wait'], start_new_session=True)
    try:
        time.sleep(1.0)
        script = (
            "import sys\n"
            "from hangdbg.collect.procs import find_ranks, denied_note\n"
            "denied = []\n"
            "ranks = find_ranks([int(sys.argv[1])], denied=denied)\n"
            "print('RANKS', sorted(r.rank for r in ranks))\n"
            "print('NOTE', denied_note(denied, len(ranks)) if denied else '')\n"
        )
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{SITE}", "HOME": "/tmp"}
        res = subprocess.run([RUNUSER, "-u", "nobody", "--", python, "-c", script, str(launcher.pid)],
                             capture_output=True, text=True, timeout=120, env=env, cwd="/tmp")
        assert res.returncode == 0, res.stderr
        assert "RANKS [0]" in res.stdout, res.stdout
        note = next(ln for ln in res.stdout.splitlines() if ln.startswith("NOTE"))
        assert "1 rank(s) found" in note and "root" in note and "sudo" in note, note
    finally:
        os.killpg(launcher.pid, 9)
        launcher.wait()
