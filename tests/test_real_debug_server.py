"""Real torchrun/gloo jobs that run torch's debug server (``HANGDBG_DEMO_DEBUG_SERVER=1``: every rank
calls ``torch.distributed.debug.start_debug_server``) with the flight recorder on (``TORCH_FR_BUFFER_SIZE``),
hung in the default scenario (``mismatch``: rank 3 calls ``broadcast``, the others ``all_reduce``), dumped
by the real command line: the stacks and the flight recorder come from the debug server, with py-spy
allowed and with py-spy denied (the no-ptrace path)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from conftest import run_cli, run_json, suspects

pytest.importorskip("tabulate")  # rank 0's debug-server frontend imports it

ENV = {"HANGDBG_DEMO_DEBUG_SERVER": "1", "TORCH_FR_BUFFER_SIZE": "200"}

DENIED = """#!/bin/sh
# py-spy without CAP_SYS_PTRACE: py-spy's main.rs prints this (as root in a container) and exits 1
echo "Permission Denied" >&2
echo "" >&2
echo "It looks like you are running in a docker container. Please make sure you started your container with the SYS_PTRACE capability. See https://github.com/benfred/py-spy#how-do-i-run-py-spy-in-docker for more details" >&2
exit 1
"""


@pytest.fixture(scope="module")
def server_job():
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    job = DemoJob("mismatch", 4, env=ENV).start()
    try:
        job.wait_ready()
        yield job
    finally:
        job.stop()


def _denied_path(tmp_path: Path) -> dict[str, str]:
    """PATH with a ``py-spy`` (and ``pystack``: the fallback also attaches with ptrace) that fail as
    they do without ``SYS_PTRACE``, first."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name in ("py-spy", "pystack"):
        f = bin_ / name
        f.write_text(DENIED)
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return dict(os.environ, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")


def _sources(doc: dict, source: str) -> dict[int, dict]:
    return {s["rank"]: s for s in doc["sources"] if s["source"] == source}


def test_plain_dump_keeps_every_ranks_fr_and_stacks_from_the_debug_server(server_job, tmp_path):
    out = tmp_path / "out"
    rc, doc = run_json("dump", "--pid", server_job.pid, "-o", out)
    assert rc == 3 and [s["ranks"] for s in suspects(doc)] == [[3]]  # one suspect: stacks and FR agree
    fr = sorted(p.name for p in (out / "fr").iterdir())
    assert fr == [f"debug_server_fr_rank_{r}.json" for r in range(4)]
    for r in range(4):
        assert json.loads((out / "fr" / fr[r]).read_text())["entries"]  # gloo's FR, via fr_trace_json
        assert (out / "fr" / fr[r]).stat().st_mode == (out / "hangdbg.json").stat().st_mode  # as the rest of OUT
    assert {r: s["status"] for r, s in _sources(doc, "debug-server-fr").items()} == {r: "ok" for r in range(4)}
    stacks = _sources(doc, "debug-server-stacks")
    assert {r: s["status"] for r, s in stacks.items()} == {r: "ok" for r in range(4)}
    assert not any(s["used"] for s in stacks.values())  # py-spy read every rank
    assert all(s["used"] for s in _sources(doc, "py-spy").values())
    text = (out / "debug_server" / "rank-0003.dump_traceback.txt").read_text()
    assert text.startswith("=== Rank 3: http://") and "in broadcast" in text
    # the FR reader takes OUT/fr with the right ranks
    rc2, fr_doc = run_json("fr", out / "fr")
    assert sorted(fr_doc["source"]["facts"]["world"]) == [0, 1, 2, 3]


def test_ptrace_denied_the_debug_server_names_rank_3(server_job, tmp_path):
    env = _denied_path(tmp_path)
    out = tmp_path / "out"
    rc, doc = run_json("dump", "--pid", server_job.pid, "-o", out, "--timeout", "10", env=env)
    assert rc == 3
    assert [s["ranks"] for s in suspects(doc)] == [[3]]
    pyspy = _sources(doc, "py-spy")
    assert {r: s["status"] for r, s in pyspy.items()} == {r: "denied" for r in range(4)}
    stacks = _sources(doc, "debug-server-stacks")
    assert {r: (s["status"], s["used"]) for r, s in stacks.items()} == {r: ("ok", True) for r in range(4)}
    ranks = {r["rank"]: r for r in doc["stacks"]["ranks"]}
    assert all("debug-server" in ranks[r]["steps"] for r in range(4))
    res = run_cli("dump", "--pid", server_job.pid, "-o", tmp_path / "out2", "--timeout", "10", env=env)
    assert "debug server stacks: ok {0-3}; gave the stacks of rank(s) {0-3}" in res.stdout
    assert "py-spy stacks: denied {0-3}" in res.stdout


def test_job_without_a_store_is_dumped_without_waiting_for_the_sources(tmp_path):
    """No ``MASTER_ADDR``/``MASTER_PORT`` (a lone Python process): no child, no wait, each source
    said absent per rank."""
    import subprocess
    import sys

    from hangdbg.collect.live_sources import collect_live
    from hangdbg.collect.procs import find_ranks

    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    env["RANK"], env["WORLD_SIZE"] = "0", "1"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        time.sleep(0.5)
        ranks = find_ranks([proc.pid])
        t = time.monotonic()
        got = collect_live(ranks, None, 20.0)
        took = time.monotonic() - t
    finally:
        proc.kill()
        proc.wait()
    assert took < 0.5
    assert {(s.source, s.status) for s in got.sources} == {("debug-server-stacks", "no-server"), ("debug-server-fr", "no-server")}
    assert not got.stacks and not got.fr_files


def test_watch_stall_dump_takes_the_debug_server_too(server_job, tmp_path):
    """``watch``'s stall dump is ``dump``: its folder holds the debug server's answers and FR files."""
    from _watch import finish, watcher

    w = watcher("--pid", server_job.pid, "--stall", 3, "--interval", 1, "--once", "-o", tmp_path / "out", "--json",
                cwd=tmp_path)
    rc, out, err = finish(w, timeout=150)
    assert rc == 3, err[-2000:]
    [stall] = json.loads(out)["stalls"]
    dump_dir = Path(stall["dump_dir"])
    assert sorted(p.name for p in (dump_dir / "fr").iterdir()) == [f"debug_server_fr_rank_{r}.json" for r in range(4)]
    doc = json.loads((dump_dir / "hangdbg.json").read_text())
    assert {s["rank"] for s in doc["sources"] if s["source"] == "debug-server-stacks" and s["status"] == "ok"} == {0, 1, 2, 3}


def test_job_with_a_store_but_no_debug_server_costs_no_wait(hung_plain):
    """A store without ``debug_server/rank*`` keys: told in milliseconds (the wire client, no torch child)."""
    from hangdbg.collect.live_sources import collect_live
    from hangdbg.collect.procs import find_ranks

    ranks = find_ranks([hung_plain.pid])
    t = time.monotonic()
    got = collect_live(ranks, None, 20.0)
    assert time.monotonic() - t < 0.5
    assert {s.status for s in got.sources} == {"no-server"} and len(got.sources) == 8


@pytest.fixture
def hung_plain():
    from hangdbg.demo.launch import DemoJob

    job = DemoJob("mismatch", 4).start()
    try:
        job.wait_ready()
        yield job
    finally:
        job.stop()
