"""Bounds (issue 31): a ``--on-hang`` hook that prints without end costs neither memory nor a flooded
console: its first MiB is kept in ``STALL_DIR/on-hang.log`` (0600), its last lines shown, the rest
dropped and said so. The hook is a real ``sh -c`` child; the stall's dump is a stand-in."""

from __future__ import annotations

import os
import stat

from hangdbg.collect.plan import DumpPlan
from hangdbg.events import Events
from hangdbg.transport.targets import TargetSpec
from hangdbg.watch.plan import WatchPlan
from hangdbg.watch.stall import Stall


class _Recorder(Events):
    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[str] = []
        self.warnings: list[str] = []

    def output(self, text: str) -> None:
        self.outputs.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def _stall_with_hook(tmp_path, monkeypatch, hook: str):
    import hangdbg.api._watch as watch_api
    from hangdbg.collect.result import StacksResult
    from hangdbg.stacks.analysis import analyze

    def fake_dump(plan: DumpPlan, events=None, *, command="dump") -> StacksResult:
        return StacksResult("dump", analyze([]), "nothing", (), out_dir=str(plan.out))

    monkeypatch.setattr(watch_api, "dump", fake_dump)
    events = _Recorder()
    plan = WatchPlan(target=TargetSpec(pids=(os.getpid(),)), out=tmp_path / "w", on_hang=hook)
    watcher = watch_api._Watcher(plan, events)
    watcher.on_stall(Stall("log", 42.0, "the log did not grow for 42 s"))
    stall_dir = next((tmp_path / "w").glob("stall-*"))
    return events, stall_dir, watcher.stalls[-1]


def test_a_flooding_hook_is_capped_to_a_file(tmp_path, monkeypatch):
    from hangdbg.api._watch import ON_HANG_OUTPUT_CAP, ON_HANG_SHOWN

    events, stall_dir, record = _stall_with_hook(tmp_path, monkeypatch, "yes 'hook line' | head -c 8000000; echo done")
    log = stall_dir / "on-hang.log"
    size = log.stat().st_size
    assert ON_HANG_OUTPUT_CAP <= size < ON_HANG_OUTPUT_CAP + 200
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "bytes of output dropped" in log.read_text()[-200:]
    shown = "\n".join(events.outputs)
    assert len(shown.splitlines()) <= ON_HANG_SHOWN + 1 and "all in" in shown
    assert any("more than 1 MiB" in w for w in events.warnings)
    assert record.on_hang_exit == 0


def test_a_short_hook_is_shown_whole(tmp_path, monkeypatch):
    events, stall_dir, record = _stall_with_hook(tmp_path, monkeypatch, 'echo "suspects: $HANGDBG_SUSPECTS"; exit 4')
    assert events.outputs == ["suspects:"]  # rstrip, as before
    assert (stall_dir / "on-hang.log").read_text() == "suspects: \n"
    assert record.on_hang_exit == 4


def test_check_refuses_more_ranks_than_a_node_can_hold(tmp_path):
    from conftest import run_main

    res = run_main("check", "--nproc-per-node", "100000", "-o", tmp_path / "c", "--json")
    assert res.returncode == 2 and "would starve it" in res.stderr and not (tmp_path / "c").exists()
    hostfile = tmp_path / "hosts"
    hostfile.write_text("127.0.0.1 slots=99999999999\n")
    res = run_main("check", "--hostfile", hostfile, "-o", tmp_path / "c")
    assert res.returncode == 2 and "more than 1024 ranks per node" in res.stderr  # no MemoryError traceback
