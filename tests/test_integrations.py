"""``hangdbg.integrations``: the Lightning and transformers callbacks write the heartbeat of the
step their trainer reports (fakes stand in for the trainers: neither library is a dependency), and
importing the package imports neither torch nor the libraries."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from conftest import ROOT

from hangdbg.integrations import HeartbeatCallback, HeartbeatTrainerCallback
from hangdbg.watch.straggler import parse_heartbeat


def _steps(directory) -> list[int]:
    files = list(directory.iterdir())
    assert [f.name for f in files] == ["heartbeat.rank5"], files
    return [m.step for m in parse_heartbeat(files[0].read_text())]


def test_lightning_callback_beats_the_trainers_global_step(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "5")
    cb = HeartbeatCallback(directory=str(tmp_path), min_interval=0.0)
    for step in (1, 2, 3):
        cb.on_train_batch_end(SimpleNamespace(global_step=step), object(), None, None, step - 1)
    assert _steps(tmp_path) == [1, 2, 3]


def test_lightning_callback_falls_back_to_the_batch_index(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "5")
    cb = HeartbeatCallback(directory=str(tmp_path), min_interval=0.0)
    cb.on_train_batch_end(object(), object(), None, None, 7)
    assert _steps(tmp_path) == [7]


def test_hf_callback_beats_the_states_global_step_and_leaves_control(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "5")
    cb = HeartbeatTrainerCallback(directory=str(tmp_path), min_interval=0.0)
    control = SimpleNamespace(should_stop=False)
    for step in (10, 11):
        assert cb.on_step_end(SimpleNamespace(), SimpleNamespace(global_step=step), control) is None
    assert _steps(tmp_path) == [10, 11] and control.should_stop is False


def test_the_environment_directory_is_used_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("HANGDBG_HEARTBEAT_DIR", str(tmp_path))
    HeartbeatTrainerCallback(min_interval=0.0).on_step_end(None, SimpleNamespace(global_step=4), None)
    assert _steps(tmp_path) == [4]


def test_a_callback_never_raises_when_the_directory_cannot_be_written(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "5")
    blocker = tmp_path / "file"
    blocker.write_text("")
    HeartbeatCallback(directory=str(blocker / "sub"), min_interval=0.0).on_train_batch_end(
        SimpleNamespace(global_step=1), None, None, None, 0)


def test_importing_the_package_and_its_classes_imports_no_torch():
    code = ("import sys, hangdbg.integrations as i; assert 'torch' not in sys.modules; "
            "i.HeartbeatCallback, i.HeartbeatTrainerCallback; "
            "print(sorted(m for m in ('torch', 'lightning', 'pytorch_lightning', 'transformers') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr
    installed = [m for m in ("lightning", "pytorch_lightning", "transformers") if _installed(m)]
    if not installed:  # neither trainer installed (this venv): nothing heavy was imported at all
        assert res.stdout.strip() == "[]"


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
