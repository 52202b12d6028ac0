"""hangdbg on the shared corpus of real-world artifacts (``../shared/real-artifacts``): the logs,
dumps and backtraces people pasted into public issue threads, with their ground truth.

The corpus is not part of the project (never copy it in): these tests run only where it sits next
to the checkout, or where ``HANGDBG_REAL_ARTIFACTS`` names it, and are skipped elsewhere (a user's
clone, CI on a fresh machine).

- Every machine-checkable ground-truth case of the corpus's own ``check_ground_truth.py`` (loaded
  from the corpus, so the bar is the corpus's, not ours) must be RIGHT: the culprit or cause named
  by a suspect, no innocent rank blamed.
- Every file, through the command a user would run on its kind and through ``hangdbg report`` on
  a directory holding only it, ends with an exit status of 0-3 and never a traceback.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console

from hangdbg.cli.main import main

CORPUS = Path(os.environ.get("HANGDBG_REAL_ARTIFACTS") or Path(__file__).resolve().parents[2] / "shared" / "real-artifacts")
CHECK = CORPUS / "check_ground_truth.py"

pytestmark = pytest.mark.skipif(not CHECK.is_file(), reason=f"the real-artifacts corpus is not at {CORPUS}")


def _load_check() -> ModuleType | None:
    if not CHECK.is_file():
        return None
    spec = importlib.util.spec_from_file_location("check_ground_truth", CHECK)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GT = _load_check()
CASES = GT.case_table() if GT is not None else []

# The command a user runs on each folder's kind of file (as GRADES.md graded them).
COMMANDS: dict[str, list[list[str]]] = {
    "nccl_log": [["nccl", "summary"]],
    "pyspy": [["analyze"]],
    "gdb": [],
    "faulthandler": [],
    "watchdog": [["logs"]],
    "torchrun": [["logs"]],
    "flight_recorder": [["fr"], ["logs"], ["nccl", "summary"]],
    "xid": [["gpu"]],
}
FILES = sorted(p for p in CORPUS.glob("*/*") if p.is_file()) if CHECK.is_file() else []


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_ground_truth_case_is_right(case: dict) -> None:
    assert GT is not None
    verdict, note, rc, items = GT.run_case(case)
    shown = "\n".join(f"  [{i['severity']}] {i['kind']} ranks={sorted(i['ranks'])}: {i['text'][:200]}" for i in items)
    assert verdict == "RIGHT", f"{case['id']}: {verdict} (rc {rc}) {note}\nGT: {case['gt']}\n{shown}"


def _run(argv: list[str]) -> int:
    out, err = io.StringIO(), io.StringIO()
    try:
        return main(argv + ["--json"], out=Console(file=out, width=200), err=Console(file=err, width=200))
    except SystemExit as exc:  # argparse usage errors
        return int(exc.code or 0)


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_every_file_reads_without_a_traceback(path: Path, tmp_path: Path) -> None:
    for argv in COMMANDS.get(path.parent.name, []):
        assert _run(argv + [str(path)]) in (0, 1, 2, 3), argv
    only = tmp_path / "in"
    only.mkdir()
    shutil.copy(path, only / path.name)
    assert _run(["report", str(only)]) in (0, 1, 3)


FOLDERS = sorted({p.parent for p in FILES})


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_report_over_a_folder_of_unrelated_jobs_reads_without_a_traceback(folder: Path) -> None:
    assert _run(["report", str(folder)]) in (0, 1, 3)
