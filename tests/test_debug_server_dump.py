"""PyTorch's debug server dumps (``torch.distributed.debug``: ``stacks_*.txt`` / ``pyspy_dump_*.txt``,
one ``=== Rank N: addr ===`` block per rank with faulthandler or py-spy text, or ``Error: status``).
Fixtures: tests/fixtures/debug_server, written by hand from ``_debug_handlers.py`` and the
``dump_traceback`` / ``pyspy_dump`` control-plane handlers."""

from __future__ import annotations

import shutil
from pathlib import Path

from hangdbg.stacks.analysis import analyze
from hangdbg.model import Kind, Severity, SourceKind
from hangdbg.stacks.debug_server import is_debug_server_dump, parse_debug_server_dump
from hangdbg.stacks.saved import load_dumps
from hangdbg.stacks.thread_dump_text import parse_thread_dump
from hangdbg.evidence.read import read_sources
from hangdbg.evidence.stacks.reader import READER
from hangdbg.evidence.stacks.text_reader import READER as STACK_TEXT

FIX = Path(__file__).parent / "fixtures" / "debug_server"
STACKS = FIX / "stacks_20250330_192000.txt"
PYSPY = FIX / "pyspy_dump_20250330_192000.txt"


def suspects(a) -> set[int]:
    return {r for f in a.findings if f.severity is Severity.SUSPECT for r in f.ranks}


def test_faulthandler_blocks_are_one_dump_per_rank_with_host_and_world_size():
    dumps, stats = load_dumps([STACKS])
    assert [d.rank for d in dumps] == [0, 1, 2, 3]
    assert {d.rank_source for d in dumps} == {"debug server"}
    assert [d.host for d in dumps] == ["gpu-node-a", "gpu-node-a", "gpu-node-b", "gpu-node-b"]
    assert {d.world_size for d in dumps} == {4}
    assert stats.garbled_lines == 0
    d0 = dumps[0]
    # the server's own thread (<no Python frame>) is left out; the tqdm monitor and the main thread stay
    assert len(d0.threads) == 2
    main = next(t for t in d0.threads if t.name == "MainThread")
    assert main.frames[0].function == "all_reduce" and main.frames[-1].function == "<module>"  # innermost first
    assert main.frames[2].file == "/srv/job/train.py" and main.frames[2].line == 74


def test_rank_in_its_data_loader_is_the_suspect_and_the_others_wait_for_it():
    dumps, _ = load_dumps([STACKS])
    a = analyze(dumps)
    assert suspects(a) == {2}
    waiting = [f for f in a.findings if f.severity is Severity.WAITING]
    assert waiting and set(waiting[0].ranks) == {0, 1, 3} and 2 in waiting[0].waits_for
    suspect = next(f for f in a.findings if f.severity is Severity.SUSPECT)
    assert "data loader" in suspect.summary and suspect.hosts == ("gpu-node-b",)


def test_rank_that_did_not_answer_is_unreadable_not_missing():
    dumps, _ = load_dumps([PYSPY])
    assert [d.rank for d in dumps] == [0, 1, 2]
    assert dumps[1].threads == () and "HTTP 408" in (dumps[1].error or "")
    assert dumps[0].pid == 41200 and dumps[0].python == "3.11.9" and dumps[0].host == "fd00::10"
    a = analyze(dumps)
    assert a.unreadable == (1,) and 1 not in a.missing_ranks
    assert any(f.kind is Kind.UNREADABLE and 1 in f.ranks for f in a.findings)
    assert not {0, 2} & suspects(a)  # the ranks in all_reduce only wait


def test_block_rank_beats_the_file_name_and_py_spy_subprocesses_keep_the_rank_process():
    text = ("=== Rank 5: http://h:1/handler/pyspy_dump? ===\n"
            "Process 10: python train.py\nThread 10 (idle): \"MainThread\"\n    f (train.py:3)\n"
            "Process 11: python -c from multiprocessing.spawn import spawn_main\nThread 11 (idle): \"MainThread\"\n"
            "    g (worker.py:9)\n")
    procs, garbled = parse_debug_server_dump(text)
    assert len(procs) == 1 and procs[0].pid == 10 and procs[0].header["rank"] == "5"
    assert "world_size" not in procs[0].header  # block 5 alone says nothing of the job's size
    assert garbled == 0


def test_file_name_rank_is_ignored(tmp_path):
    f = tmp_path / "rank7.txt"
    shutil.copy(STACKS, f)
    dumps, _ = load_dumps([f])
    assert [d.rank for d in dumps] == [0, 1, 2, 3]


def test_error_statuses_and_empty_answers():
    text = ("=== Rank 0: http://a:1/handler/dump_traceback? ===\nError: 503\n"
            "=== Rank 1: http://b:1/handler/dump_traceback? ===\n\n"
            "=== Rank 2: http://c:1/handler/dump_traceback? ===\n"
            "Error: Failed to get process executable name. Check that the process is running.\n")
    procs, _ = parse_debug_server_dump(text)
    assert "HTTP 503" in procs[0].error and "connection" in procs[0].error
    assert "holds no stack" in procs[1].error
    assert procs[2].error and "HTTP" not in procs[2].error  # a py-spy error text, not the server's status line
    assert parse_debug_server_dump("Process 1: python x.py\n") is None


def test_bare_format_stack_answer_is_one_thread_outermost_printed_first():
    text = ("=== Rank 0: http://a:1/handler/dump_traceback? ===\n"
            '  File "/w/train.py", line 9, in <module>\n    main()\n'
            '  File "/w/train.py", line 5, in main\n    dist.barrier()\n')
    (proc,), garbled = parse_debug_server_dump(text)
    assert garbled == 0 and proc.error is None
    (t,) = proc.threads
    assert [f.function for f in t.frames] == ["main", "<module>"] and t.name == "MainThread"


def test_garbage_and_absurd_ranks_are_counted_not_raised():
    junk = "x" * 65536
    text = f"{junk}\n=== Rank 4294967296: http://a:1/ ===\n=== Rank 0: {'=' * 60000}\n"
    assert parse_debug_server_dump(text) is None
    procs, garbled = parse_debug_server_dump(text + "=== Rank 1: http://a:1/ ===\nError: 408\n")
    assert [p.header["rank"] for p in procs] == ["1"] and garbled == 3


def test_faulthandler_thread_names_and_truncation():
    text = ('Thread 0x00007f00000001 [worker] (most recent call first):\n  File "/w/a.py", line 3 in run\n  ...\n'
            'Current thread 0x00007f00000002 (most recent call first):\n  <no Python frame>\n')
    (proc,), garbled = parse_thread_dump(text)
    assert garbled == 0 and [(t.name, len(t.frames)) for t in proc.threads] == [("worker", 1)]


def test_sniffed_by_the_stacks_reader_only():
    head = STACKS.read_bytes()[:65536]
    assert is_debug_server_dump(head) and READER.sniff(head)
    assert not STACK_TEXT.sniff(head)  # the faulthandler text inside is read once, by block
    assert not is_debug_server_dump(b"=== Rank\n==== Rank 1: x ===\n")


def test_report_reads_the_dump_as_ranks(tmp_path):
    shutil.copy(STACKS, tmp_path / STACKS.name)
    sources, analysis, _unparsed, files = read_sources([str(tmp_path)])
    assert [c.kinds for c in files] == [(SourceKind.STACKS,)]
    assert analysis is not None and suspects(analysis) == {2}
    stacks = next(s for s in sources if s.kind is SourceKind.STACKS)
    assert stacks.records == 4
    assert {s.rank: s.state for s in stacks.ranks}[2] != "missing"


def test_wait_counter_dump_in_the_same_blocks_is_no_stack_dump():
    text = ('=== Rank 0: http://a:1/handler/wait_counter_values? ===\n{\n  "pg.wait": {"count": 3}\n}\n'
            '=== Rank 1: http://b:1/handler/wait_counter_values? ===\nError: 503\n')
    assert parse_debug_server_dump(text) is None
    assert not is_debug_server_dump(text.encode())
    no_handler = '=== Rank 0: a:1 ===\n{"x": 1}\n'
    assert parse_debug_server_dump(no_handler) is None and not is_debug_server_dump(no_handler.encode())
