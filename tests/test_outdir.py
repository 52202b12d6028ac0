"""Issue 14, items 4 and 5: every write of an output dir goes through hangdbg.outdir (disk full,
read-only, impossible -o: recorded as not saved, the analysis still printed; an -o that cannot be
written at all is exit 2 before any work) and output dirs are owned per run (a second run into
the same dir never reports the first run's stacks as current).

Disk full is a real tmpfs, read-only a real read-only bind mount (root only; skipped otherwise).
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import pytest

import sys

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from fanout_scale import recorded_outputs  # noqa: E402

from conftest import FIXTURES, run_main  # noqa: E402
from faults import ROOT_ONLY, fill, mounted, tmpfs  # noqa: E402
from hangdbg import outdir  # noqa: E402
from hangdbg.cli.common import out_dir  # noqa: E402
from hangdbg.collect.fanout import fan_out  # noqa: E402
from hangdbg.transport.runners import FakeRunner  # noqa: E402
from hangdbg.errors import UsageError  # noqa: E402

STACKS = FIXTURES / "pyspy_few"


_mounted, _tmpfs, _fill = mounted, tmpfs, fill


def _no_traceback(res: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in res.stderr + res.stdout, res.stderr


def _parts(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if p.name.endswith(".part")]


# --- item 4: disk full, read-only, impossible -o ----------------------------------------------

@ROOT_ONLY
def test_disk_full_fanout_keeps_the_analysis_and_leaves_no_part_files(tmp_path):
    outputs = recorded_outputs(3, 2)
    lines = [x for out in outputs.values() for x in out]
    with _tmpfs(tmp_path / "full", "64k") as mnt:
        _fill(mnt, 4096)
        out = outdir.OutDir(mnt)
        result = fan_out(FakeRunner({"all": lines}), list(outputs), ["agent"], out, timeout=10)
        # the stacks taken are analysed though the disk could not keep them
        assert sorted(d.rank for d in result.dumps) == [0, 1, 2, 3, 4, 5]
        assert [n.status for n in result.nodes] == ["ok"] * 3
        lost = out.not_saved
        assert lost and all(n.reason == os.strerror(28) for n in lost)  # ENOSPC
        assert _parts(mnt) == []


@ROOT_ONLY
def test_disk_full_analyze_prints_the_answer_and_says_what_was_not_saved(tmp_path):
    with _tmpfs(tmp_path / "full", "64k") as mnt:
        _fill(mnt, 4096)  # room for the probe, not for hangdbg.json
        res = run_main("analyze", STACKS, "-o", mnt)
        _no_traceback(res)
        assert res.returncode in (0, 3), res.stderr
        assert "not saved" in res.stderr and "hangdbg.json" in res.stderr
        assert res.stdout.strip()  # the report was printed
        assert not (mnt / "hangdbg.json").exists() and _parts(mnt) == []
        res = run_main("analyze", STACKS, "-o", mnt, "--json")
        _no_traceback(res)
        import json

        doc = json.loads(res.stdout)
        assert any(f["kind"] == "not-saved" for f in doc["findings"]) and "not saved" in doc["headline"]


@ROOT_ONLY
def test_read_only_out_is_a_usage_error_before_any_work(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with _mounted(["mount", "--bind", "-o", "ro", str(src)], tmp_path / "ro") as ro:
        if os.access(ro, os.W_OK) and subprocess.run(["touch", str(ro / "x")]).returncode == 0:
            pytest.skip("the bind mount is writable here")
        for argv in (["analyze", STACKS], ["report", STACKS], ["nccl", "split", FIXTURES / "nccl"]):
            res = run_main(*argv, "-o", ro / "out")
            _no_traceback(res)
            assert res.returncode == 2, (argv, res.stderr)
            assert "output directory" in res.stderr and "-o DIR" in res.stderr


def test_out_under_a_regular_file_is_a_usage_error(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    for target in (f / "out", f):
        res = run_main("analyze", STACKS, "-o", target)
        _no_traceback(res)
        assert res.returncode == 2, res.stderr
        assert "choose another output directory" in res.stderr
    assert f.read_text() == "x"


def test_save_text_never_raises_and_removes_the_part(tmp_path):
    (tmp_path / "afile").write_text("x")
    out = outdir.OutDir(tmp_path)
    assert out.save_text(tmp_path / "ok" / "a.json", "{}") and (tmp_path / "ok" / "a.json").read_text() == "{}"
    assert not out.save_text("afile/b.json", "{}")  # relative to the directory
    assert [n.path for n in out.not_saved] == [str(tmp_path / "afile" / "b.json")]
    assert _parts(tmp_path) == []


def test_each_run_keeps_its_own_not_saved_list(tmp_path):
    """Two runs in one process (watch dumps a stall while it watches) never see each other's
    failures: the not-saved list belongs to the output directory of a run, not to the process."""
    (tmp_path / "afile").write_text("x")
    first, second = outdir.OutDir(tmp_path / "one"), outdir.OutDir(tmp_path / "two")
    assert not first.save_text(tmp_path / "afile" / "b.json", "{}")
    assert second.save_text("c.json", "{}")
    assert len(first.not_saved) == 1 and second.not_saved == ()


# --- item 5: a reused -o dir ------------------------------------------------------------------

def test_second_fanout_into_the_same_dir_never_reports_stale_stacks_of_a_failed_node(tmp_path):
    outputs = recorded_outputs(3, 2)
    hosts = list(outputs)
    first = fan_out(FakeRunner(dict(outputs)), hosts, ["agent"], outdir.OutDir(tmp_path), timeout=10)
    assert sorted(d.rank for d in first.dumps) == [0, 1, 2, 3, 4, 5]
    assert (tmp_path / "raw" / hosts[1]).is_dir()
    # this time node 2 is unreachable: its old raw files are still in the dir
    second = fan_out(FakeRunner({h: outputs[h] for h in hosts if h != hosts[1]},
                                failures={hosts[1]: ("unreachable", "ssh: No route to host")}),
                     hosts, ["agent"], outdir.OutDir(tmp_path), timeout=10)
    assert {n.host: n.status for n in second.nodes}[hosts[1]] == "unreachable"
    assert sorted(d.rank for d in second.dumps) == [0, 1, 4, 5]


def _args(out: Path, force: bool = False) -> argparse.Namespace:
    return argparse.Namespace(out=out, force=force, command="dump")


def test_dump_refuses_a_dir_holding_another_run_and_force_removes_only_its_files(tmp_path):
    out = tmp_path / "o"
    out_dir(_args(out))  # the first run claims it
    assert (out / outdir.RUN_MARKER).is_file()
    (out / "raw" / "node2").mkdir(parents=True)
    (out / "raw" / "node2" / "rank-0002.txt").write_text("# hangdbg rank=2\n")
    (out / "hangdbg.json").write_text("{}")
    (out / "notes.txt").write_text("the user's own file")
    with pytest.raises(UsageError) as exc:
        out_dir(_args(out))
    assert "--force" in exc.value.help and "another hangdbg run" in str(exc.value)
    assert (out / "raw" / "node2" / "rank-0002.txt").exists()
    out_dir(_args(out, force=True))
    assert not (out / "raw").exists() and not (out / "hangdbg.json").exists()
    assert (out / "notes.txt").read_text() == "the user's own file" and (out / outdir.RUN_MARKER).is_file()


def test_a_dir_of_a_legacy_run_without_marker_is_refused_too(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "rank-0001.txt").write_text("# hangdbg rank=1\n")
    (tmp_path / "processes.json").write_text("{}")
    with pytest.raises(UsageError):
        out_dir(_args(tmp_path))
    out_dir(_args(tmp_path / "fresh"))  # an empty or new dir is fine
    other = tmp_path / "other"
    other.mkdir()
    (other / "unrelated.txt").write_text("x")
    out_dir(_args(other))  # a dir with only the user's files is fine
