"""Issue 14's mutation fuzzer: seeded mutations of every fixture and of every file of the
real-artifacts corpus (when it is present), each read by ``report DIR -o OUT`` and by the command a
user runs on that kind of file (see ``tests/fuzz_mutate.py``).

Every case must end without an exception, a traceback or a swallowed reader error, with an exit
status in {0, 1, 2, 3}, with nothing written outside its ``-o`` directory, within a hang guard of
``HANGDBG_FUZZ_TIMEOUT`` seconds (default 60) per case, under an address-space limit of
``HANGDBG_FUZZ_MEM_MB`` MiB (default 3072). CI runs ``HANGDBG_FUZZ_CASES`` cases (default 300),
in batches; ``HANGDBG_FUZZ_SEED`` changes the seeds. A failure names its seed: replay it with
``python tests/fuzz_mutate.py --replay SEED``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import fuzz_mutate as fm
import pytest

CASES = int(os.environ.get("HANGDBG_FUZZ_CASES", "300"))
BASE = os.environ.get("HANGDBG_FUZZ_SEED", "14")
BATCH = 50
BATCHES = [list(range(i, min(CASES, i + BATCH))) for i in range(0, CASES, BATCH)]


@pytest.mark.parametrize("batch", BATCHES, ids=[f"cases{b[0]}-{b[-1]}" for b in BATCHES])
def test_mutated_inputs_read_without_a_traceback(batch: list[int]) -> None:
    failures = fm.run_batch([f"{BASE}:{i}" for i in batch],
                            case_timeout=float(os.environ.get("HANGDBG_FUZZ_TIMEOUT", "60")),
                            mem_mb=int(os.environ.get("HANGDBG_FUZZ_MEM_MB", "3072")))
    assert not failures, f"{len(failures)} of {len(batch)} cases failed (replay: python tests/fuzz_mutate.py " \
                         "--replay SEED):\n\n" + "\n\n".join(failures)


# --- the fuzzer itself: deterministic, covers every seed file and mutation, and catches what it must


def test_a_seed_names_one_case() -> None:
    a, b = fm.make_case("x:1"), fm.make_case("x:1")
    assert (a.path, a.ops, a.data, a.commands) == (b.path, b.ops, b.data, b.commands)
    assert any(fm.make_case(f"x:{i}").data != a.data for i in range(2, 6))


def test_every_fixture_folder_has_a_command_and_every_mutation_changes_text() -> None:
    files = fm.seed_files()
    assert {fm.kind_of(p) for p in files} <= set(fm.COMMANDS)
    data = (fm.FIXTURES / "nccl" / "clean.log").read_bytes()
    for name, mutate in fm.MUTATIONS.items():
        changed = [mutate(data, random.Random(i), b"other\nfile\n") != data for i in range(5)]
        assert any(changed), name


def test_run_case_reports_writes_outside_out_and_exceptions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = fm.make_case("x:1")
    case.commands = [["report", "DIR"]]

    def bad_main(argv, out, err):
        Path("stray.txt").write_text("x")  # cwd: outside -o
        raise ValueError("boom")

    import importlib

    monkeypatch.setattr(importlib.import_module("hangdbg.cli.main"), "main", bad_main)
    work = tmp_path / "case"
    work.mkdir()
    problems = fm.run_case(case, work)
    assert any("raised ValueError('boom')" in p for p in problems), problems
    assert any("written outside -o" in p and "stray.txt" in p for p in problems), problems


def test_run_batch_reports_a_hang_or_a_memory_blowup_by_seed_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANGDBG_FUZZ_SELFTEST", "hang:x:2")
    failures = fm.run_batch(["x:1", "x:2", "x:3"], case_timeout=15)
    assert len(failures) == 1 and failures[0].startswith("seed x:2: no answer within 15 s"), failures
    monkeypatch.setenv("HANGDBG_FUZZ_SELFTEST", "memory:x:1")
    failures = fm.run_batch(["x:1", "x:3"], case_timeout=60, mem_mb=1024)
    assert len(failures) == 1 and failures[0].startswith("seed x:1\n  MemoryError"), failures
