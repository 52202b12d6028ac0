"""The block parser of py-spy text (each distinct thread body parsed once, issue 16) gives exactly
what the line parser gives, on every fixture, on the real artifacts, and on cut and mixed texts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hangdbg.stacks import pyspy_text
from hangdbg.stacks.pyspy_text import _by_lines, parse_pyspy_dump

HERE = Path(__file__).parent
ARTIFACTS = HERE.parent.parent / "shared" / "real-artifacts"


def _texts() -> list[tuple[str, str]]:
    out = []
    for root in (HERE / "fixtures", ARTIFACTS):
        if not root.is_dir():
            continue
        for f in sorted(root.rglob("*")):
            if f.is_file() and f.stat().st_size < 4 << 20:
                data = f.read_bytes()
                if b"\x00" not in data:
                    out.append((str(f.relative_to(root.parent)), data.decode("utf-8", errors="replace")))
    return out


TEXTS = _texts()


def test_every_input_parses_the_same_by_blocks_and_by_lines():
    threads = 0
    for name, text in TEXTS:
        assert parse_pyspy_dump(text) == _by_lines(text), name
        threads += sum(len(p.threads) for p in _by_lines(text)[0])
    assert threads > 100  # the fixtures hold real py-spy dumps


SAMPLE = '''Process 7: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 7 (idle): "MainThread"
    all_reduce (/t/distributed_c10d.py:2806)
    step (/w/train.py:40)
    <module> (/w/train.py:90)

Thread 0x7F1A2B3C4700 (active+gil): "pin (memory)"
    wait (threading.py:320)
      not a frame
    run (threading.py:975)
'''


@pytest.mark.parametrize("seed", range(300))
def test_cut_and_mixed_texts_parse_the_same(seed):
    rnd = random.Random(seed)
    pieces = [SAMPLE, "Thread 9 (idle)\n", "Thread x (busy)\n    f (a.py:1)\n", "Error: Failed to suspend process\n",
              "Caused by:\n    0: ptrace failed\n", "garbage at column 0\n", "    f (a.py:1)\n", "\n", "\r\n",
              "Thread 11 (active): \"w\"\n    g (b.py:2)\n      Locals:\n        x: 1\n", "Process 8:\n",
              "Thread 12 (gil)\n" + "    h (c.py:3)\n" * 5]
    text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 12)))
    if rnd.random() < 0.5:
        text = text[:rnd.randint(0, len(text))]
    assert parse_pyspy_dump(text) == _by_lines(text), repr(text)


def test_identical_bodies_share_one_frames_tuple():
    a, _ = parse_pyspy_dump(SAMPLE)
    b, _ = parse_pyspy_dump(SAMPLE.replace("Process 7", "Process 8").replace("Thread 7", "Thread 8"))
    assert a[0].threads[0].frames is b[0].threads[0].frames
    assert a[0].pid == 7 and b[0].pid == 8 and b[0].threads[0].thread_id == 8


def test_the_body_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(pyspy_text, "_BODIES_LIMIT", 1000)
    pyspy_text._BODIES.clear()
    for i in range(200):
        parse_pyspy_dump(f"Thread 1 (idle)\n    f{i} (a.py:{i})\n")
    assert sum(map(len, pyspy_text._BODIES)) <= 1000


def test_a_rank_read_once_is_built_as_the_merge_would_build_it():
    from hangdbg.stacks import saved

    seen = 0
    for name, text in TEXTS:
        entries: list = []
        saved._add_text(entries, text, Path(name).name)
        for e in entries:
            rank = e.rank if e.rank is not None else 0
            assert saved._one(rank, e) == saved._merged(rank, [e]), name
            seen += 1
    header = "# hangdbg rank=3 host=n1 local_rank=1 world_size=8 local_world_size=4 steps=native,retried pid=9\n"
    for text in (header + SAMPLE, "Process 5: python t.py --local_rank=2\n" + SAMPLE.split("\n", 1)[1],
                 header + "Error: Failed to suspend process\nCaused by:\n    0: gone\n"):
        entries = []
        saved._add_text(entries, text, "rank-0003.txt")
        assert saved._one(3, entries[0]) == saved._merged(3, entries[:1])
    assert seen > 50
