"""Issue 31, items 5 and 6: no planted link is followed, and default output folders never collide.

A second user (``nobody``, through ``runuser``: :func:`faults.as_user`) plants real links (to
``/etc/shadow`` for what is read, to a file of the test for what would be written) and real files in
a shared sticky directory under ``/tmp``; hangdbg runs as root, as ``collect`` often does. The
in-model helpers (printflock, heartbeat, recorder, overflow) are run inside a real child process,
as they run inside the training. Six dumps are started at once for the output names.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

import faults as F

pytestmark = pytest.mark.real  # real processes: the command line, children as another user
NOBODY = "nobody"
TIMEOUT = 120


@pytest.fixture
def shared(leftovers) -> Iterator[Path]:
    """A world-writable sticky directory under /tmp (as /tmp itself, a shared scratch), where
    ``nobody`` can plant things; removed after the test."""
    F.as_user(NOBODY)  # skips without root and runuser
    d = Path(tempfile.mkdtemp(prefix="hangdbg-harm-", dir="/tmp"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def as_nobody(script: str) -> None:
    """Run ``sh -c SCRIPT`` as ``nobody`` (umask 077: its files are its own, 0600)."""
    res = subprocess.run([*F.as_user(NOBODY), "sh", "-c", "umask 077; " + script], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr


def child(code: str, env: dict[str, str] | None = None, stdin: str = "", prefix: list[str] | None = None,
          timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run ``code`` in a real child Python (this repository first on its path)."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(F.ROOT), e.get("PYTHONPATH")]))
    return subprocess.run([*(prefix or []), sys.executable, "-c", textwrap.dedent(code)], input=stdin,
                          capture_output=True, text=True, env=e, timeout=timeout, cwd=F.ROOT)


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


# --- collect ----------------------------------------------------------------------------------

def _collect(tmp_path: Path, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    F.fake_tool(tmp_path / "bin", "ssh", F.local())  # an honest ssh to this machine: the agent runs here
    res = F.guarded_run(["collect", "--hosts", "localhost", "--launcher", "ssh", "--node-timeout", "60", *args,
                         "-o", out, "--json"], timeout=TIMEOUT, env=F.env_with_path(tmp_path / "bin"))
    assert res.returncode in (0, 1), F.text_of(res)[-3000:]
    return res, json.loads(res.stdout)


def _node(doc: dict) -> dict:
    (node,) = doc["nodes"]
    return node


def test_collect_follows_no_planted_link_and_takes_no_other_users_file(tmp_path, shared, leftovers):
    shadow = Path("/etc/shadow").read_bytes()
    as_nobody(f"ln -s /etc/shadow {shared}/nccl.planted.log && mkdir {shared}/job && ln -s /etc {shared}/etcdir "
              f"&& echo 'their secret' > {shared}/theirs.log")
    mine = shared / "mine.log"
    mine.write_text("epoch 1\n")
    mine.chmod(0o400)  # the copy keeps it (never wider)
    out = tmp_path / "out"
    res, doc = _collect(tmp_path, out, "--logs", f"{shared}/*.log", "--logs", f"{shared}/*/shadow")
    copies = [p for p in out.rglob("*") if p.is_file()]
    assert not [p for p in copies if p.read_bytes() == shadow], "a planted link was followed"
    assert not [p for p in copies if b"their secret" in p.read_bytes()], "another user's file was taken unasked"
    node = _node(doc)
    assert node["status"] == "ok" and node["files"] == ["logs/mine.log"], node
    got = out / "localhost" / "logs" / "mine.log"
    assert got.read_text() == "epoch 1\n" and mode(got) == 0o400
    reason = node["reason"] or ""
    assert f"{shared}/nccl.planted.log: skipped: a symbolic link to /etc/shadow" in reason, reason
    assert f"{shared}/etcdir is a symbolic link to /etc" in reason, reason
    assert f"{shared}/theirs.log: skipped: another user's file" in reason and "--all-users" in reason, reason

    out2 = tmp_path / "out2"  # asked for: another user's 0600 log is taken, and stays 0600; links still never
    res, doc = _collect(tmp_path, out2, "--logs", f"{shared}/*.log", "--all-users")
    theirs = out2 / "localhost" / "logs" / "theirs.log"
    assert theirs.read_text() == "their secret\n" and mode(theirs) == 0o600
    assert not [p for p in out2.rglob("*") if p.is_file() and p.read_bytes() == shadow]
    assert "a symbolic link to /etc/shadow" in (_node(doc)["reason"] or "")


def test_collect_nccl_logs_and_cores_follow_no_planted_link(tmp_path, shared, leftovers):
    shadow = Path("/etc/shadow").read_bytes()
    as_nobody(f"ln -s /etc/shadow {shared}/nccl.node.1.log && ln -s /etc/shadow {shared}/core.1")
    out = tmp_path / "out"
    res, doc = _collect(tmp_path, out, "--nccl-logs", f"{shared}/nccl.*.log", "--cores", f"{shared}/core.*")
    assert not [p for p in out.rglob("*") if p.is_file() and shadow in p.read_bytes()]
    node = _node(doc)
    assert node["status"] == "nothing", node  # skipping is no failure of the node
    assert "nccl.node.1.log: skipped: a symbolic link" in node["reason"], node
    assert "core.1: skipped: a symbolic link" in node["reason"], node


# --- printflock -------------------------------------------------------------------------------

PRINT = """
    from hangdbg.hooks.printflock import printflock
    printflock("line", "whole")
"""


def test_printflock_neither_follows_nor_chmods_a_planted_lock(tmp_path, shared, leftovers):
    victim = shared / "victim"
    victim.write_text("root's\n")
    victim.chmod(0o600)
    theirs = shared / "theirs"
    # the old default lock name, and the directory of the new one, both planted by nobody
    as_nobody(f"ln -s {victim} {shared}/hangdbg-printflock-0.lock && mkdir {theirs} && chmod 755 {theirs} "
              f"&& ln -s {victim} {theirs}/printflock.lock && ln -s {theirs} {shared}/hangdbg-0")
    env = dict(os.environ, TMPDIR=str(shared))
    env.pop("XDG_RUNTIME_DIR", None)
    res = child(PRINT, env)
    assert res.returncode == 0 and res.stdout == "line whole\n", res.stderr
    assert mode(victim) == 0o600 and victim.read_text() == "root's\n"
    assert "without its lock" in res.stderr and "a symbolic link" in res.stderr, res.stderr

    os.unlink(shared / "hangdbg-0")  # a private directory of this user: the lock is made there, 0600
    res = child(PRINT, env)
    assert res.returncode == 0 and res.stdout == "line whole\n" and res.stderr == "", res.stderr
    lock = shared / "hangdbg-0" / "printflock.lock"
    assert mode(lock) == 0o600 and os.lstat(lock).st_uid == 0 and mode(shared / "hangdbg-0") == 0o700
    assert mode(victim) == 0o600


# --- heartbeat --------------------------------------------------------------------------------

BEAT = """
    import os, sys
    from hangdbg.hooks.heartbeat import heartbeat
    print(os.getpid(), flush=True)
    sys.stdin.readline()  # the test plants now
    print(heartbeat(7, directory=sys.argv[1] if len(sys.argv) > 1 else os.environ["HB"]), flush=True)
"""


def _beat(directory: Path, plant) -> tuple[str, str]:
    """Start a rank that beats into ``directory``; ``plant(pid)`` runs before it writes."""
    env = dict(os.environ, HB=str(directory), RANK="0", WORLD_SIZE="1", PYTHONPATH=str(F.ROOT))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(BEAT)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=F.ROOT)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        pid = int(proc.stdout.readline())
        plant(pid)
        out, err = proc.communicate("go\n", timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return out.strip(), err


def test_heartbeat_writes_through_no_planted_temporary_file(shared, leftovers):
    hb = shared / "hb"  # a shared heartbeat directory the job's user owns, others may write (sticky)
    hb.mkdir()
    hb.chmod(0o1777)
    victim = shared / "victim"
    victim.write_text("root's\n")
    victim.chmod(0o600)

    def plant(pid: int) -> None:  # what the temporary name was: a file of nobody's, a link to root's file
        as_nobody(f"echo planted > {hb}/heartbeat.rank0.{pid}.tmp && ln -s {victim} {hb}/heartbeat.rank0.{pid}.x.tmp")

    out, err = _beat(hb, plant)
    assert out == "True", err
    beat = hb / "heartbeat.rank0"
    st = os.lstat(beat)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == 0 and " 7 " in beat.read_text(), "the heartbeat is nobody's file"
    assert victim.read_text() == "root's\n"
    planted = [p for p in hb.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]
    assert [p.read_text() for p in planted] == ["planted\n"]  # left alone, never written into


def test_heartbeat_writes_into_no_directory_link_of_another_user(shared, leftovers):
    theirs = shared / "theirs"
    as_nobody(f"mkdir {theirs} && chmod 777 {theirs} && ln -s {theirs} {shared}/hb")
    out, err = _beat(shared / "hb", lambda pid: None)
    assert out == "False" and list(theirs.iterdir()) == [], err  # training goes on, nothing written there
    assert "heartbeat not written" in err and "uid" in err, err


# --- the op recorder ----------------------------------------------------------------------------

RECORD = """
    import os, tempfile
    import torch, torch.distributed as dist
    from hangdbg.hooks import record_collectives
    from hangdbg.collect.op_records import read_op_records
    path = record_collectives()
    store = dist.FileStore(os.path.join(os.environ["STORE"], "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    dist.all_reduce(torch.ones(1))
    st = os.lstat(path.parent)
    rec = read_op_records([os.getpid()])
    print(path.parent.name, oct(st.st_mode & 0o777), st.st_uid, rec[os.getpid()].op.op, flush=True)
    dist.destroy_process_group()
"""


def test_recorder_starts_when_another_user_took_its_directory(shared, leftovers):
    """``/dev/shm/hangdbg-rec-0`` made by nobody first (in a private mount namespace: a tmpfs of the
    test's own on /dev/shm, the machine's /dev/shm is never touched)."""
    store = shared / "store"
    store.mkdir()
    script = (f"mount -t tmpfs -o mode=1777 hangdbg-harm /dev/shm && {F.RUNUSER} -u {NOBODY} -- sh -c "
              f"'mkdir -m 755 /dev/shm/hangdbg-rec-0' && exec \"$0\" -c \"$1\"")
    env = dict(os.environ, STORE=str(store), PYTHONPATH=str(F.ROOT))
    env.pop("HANGDBG_RECORD_DIR", None)
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, sys.executable,
                          textwrap.dedent(RECORD)], capture_output=True, text=True, env=env, timeout=300, cwd=F.ROOT)
    if res.returncode != 0 and "mount" in res.stderr and "hangdbg" not in res.stderr:
        pytest.skip(f"no private mount namespace here: {res.stderr[-300:]}")
    assert res.returncode == 0, res.stderr[-3000:]
    name, dmode, uid, op = res.stdout.split()
    assert name.startswith("hangdbg-rec-0-") and dmode == "0o700" and uid == "0", res.stdout
    assert op == "all_reduce", res.stdout  # the readers find the fallback directory
    assert "recording into" in res.stderr, res.stderr


# --- overflow ---------------------------------------------------------------------------------

OVERFLOW = """
    import sys, torch
    from hangdbg.hooks.overflow import DebugUnderflowOverflow, OverflowDetected
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    DebugUnderflowOverflow(model, report_dir=sys.argv[1])
    try:
        model(torch.tensor([[float("inf"), 1.0]]))
    except OverflowDetected as exc:
        print("detected", exc.report_path, flush=True)
"""


def test_overflow_detection_survives_an_unwritable_report_dir(tmp_path, leftovers):
    blocked = tmp_path / "file-in-the-way"
    blocked.write_text("x")
    e = dict(os.environ, PYTHONPATH=str(F.ROOT))
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(OVERFLOW), str(blocked / "reports")],
                         capture_output=True, text=True, env=e, timeout=TIMEOUT, cwd=F.ROOT)
    assert res.returncode == 0 and res.stdout.strip().endswith("detected None"), res.stderr[-3000:]
    assert "could not be written" in res.stderr and "First inf/nan" in res.stderr, res.stderr


# --- item 6: unique default output folders ------------------------------------------------------

STACK = ('Process {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n'
         'Thread {pid} (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2050)\n'
         '    <module> (train.py:20)\n')


def test_six_dumps_started_together_get_six_folders(tmp_path, leftovers, rank_process):
    pyspy = F.fake_tool(tmp_path / "bin", "py-spy", F.lie(STACK))
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = F.env_with_path(tmp_path / "bin", PYTHONPATH=str(F.ROOT))
    argv = [sys.executable, "-m", "hangdbg", "dump", "--pid", str(rank_process), "--py-spy", str(pyspy),
            "--timeout", "20", "--no-adapt", "--json"]
    procs = [subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)]
    results = [(p.communicate(timeout=TIMEOUT), p.returncode) for p in procs]
    for (out, err), rc in results:
        assert rc in (0, 3), err.decode(errors="replace")[-2000:]
    dirs = sorted(p.name for p in cwd.iterdir())
    assert len(dirs) == 6, dirs
    for d in dirs:
        assert d.startswith("hangdbg-dump-") and len(d.rsplit("-", 1)[1]) == 6, d  # DATE-HHMMSS-XXXXXX
        assert (cwd / d / "raw" / "rank-0000.txt").is_file()


# --- tracer -----------------------------------------------------------------------------------

TRACE = """
    import sys
    sys.path.insert(0, sys.argv[1])
    import tracer
    with tracer.NicerTrace(outdir=sys.argv[2], filename="trace-rank0.txt") as tr:
        sum(range(3))
    print(tr.path)
"""


def test_tracer_writes_through_no_link_planted_at_its_file_name(shared, leftovers):
    """A shared trace folder: ``nobody`` plants ``trace-rank0.txt`` -> root's file. The tracer neither
    truncates nor writes the target; it traces into a new owner-only file next to the link and says so."""
    victim = shared / "victim"
    victim.write_text("root's\n")
    victim.chmod(0o600)
    traces = shared / "traces"
    traces.mkdir()
    traces.chmod(0o1777)
    as_nobody(f"ln -s {victim} {traces}/trace-rank0.txt")
    res = child(TRACE.replace("sys.argv[1]", repr(str(F.ROOT))).replace("sys.argv[2]", repr(str(traces))))
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "root's\n" and mode(victim) == 0o600
    written = Path(res.stdout.strip())
    assert written.parent == traces and written.name.startswith("trace-rank0.txt.") and not written.is_symlink()
    assert mode(written) == 0o600 and written.stat().st_size > 0
    assert "is a link, not followed" in res.stderr, res.stderr
