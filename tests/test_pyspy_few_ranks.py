"""Saved py-spy dumps of one or a few ranks (what people paste into issues): ranks only from explicit
file names, library collective wrappers (DeepSpeed ZeRO-3, transformers), a rank blocked on its data
loader as the root even when alone, a lone waiter that says whom it waits for is not dumped, and
thread dumps printed by the program itself. Fixtures: tests/fixtures/pyspy_few (written by hand in
py-spy 0.3 / traceback formats)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.places import place_of
from hangdbg.model import Kind, Severity
from hangdbg.stacks.pyspy_text import parse_pyspy_dump
from hangdbg.stacks.saved import load_dumps
from hangdbg.stacks.thread_dump_text import parse_thread_dump
from hangdbg.evidence.stacks.reader import READER

FIX = Path(__file__).parent / "fixtures" / "pyspy_few"


def copy(tmp_path: Path, fixture: str, name: str) -> Path:
    dst = tmp_path / name
    shutil.copy(FIX / fixture, dst)
    return dst


def run(paths):
    dumps, _stats = load_dumps(paths)
    return dumps, analyze(dumps)


def suspects(a) -> set[int]:
    return {r for f in a.findings if f.severity is Severity.SUSPECT for r in f.ranks}


# --- rank from file names and command lines ---------------------------------------------------


def test_issue_and_thread_numbers_in_a_name_are_no_rank(tmp_path):
    f = copy(tmp_path, "zero3_allgather.txt", "deepspeed-3104-turn5-thread51234-h100.txt")
    (d,), a = run([f])
    assert d.rank_source == "order" and d.rank == 0
    text = " ".join(x.summary for x in a.findings)
    assert "rank unknown" in text and "3104" not in text and "51234" not in text


def test_local_rank_argument_is_a_local_rank_not_a_rank(tmp_path):
    f = tmp_path / "megatron-134-pp32.txt"
    f.write_text("Process 715627: /usr/bin/python -u pretrain_gpt.py --local_rank=3 --pipeline-model-parallel-size 32\n")
    (d,), _ = run([f])
    assert (d.rank, d.rank_source, d.local_rank) == (0, "order", 3)
    g = tmp_path / "other.txt"
    g.write_text("Process 9: python train.py --local-rank 5\n")
    (e,), _ = run([g])
    assert e.local_rank == 5


# --- collective wrappers -------------------------------------------------------------------


def test_zero3_all_gather_coalesced_is_a_collective():
    (proc,), _ = parse_pyspy_dump((FIX / "zero3_allgather.txt").read_text())
    p = place_of(proc.threads[0])
    assert (p.kind, p.collective) == ("collective", "all_gather_coalesced")
    # the call site skips the nvtx decorator: the ZeRO coordinator that fetched the parameters
    assert p.call_site is not None and p.call_site.function == "__all_gather_params_"


def test_old_zero3_fetch_and_the_checkpoint_tag_check_are_collectives():
    # faulthandler dumps (innermost first): DeepSpeed 0.3 ZeRO-3's fetch waiting on its comm stream, and
    # save_checkpoint's tag check pasted from its own frame on
    text = ("Thread 0x00007f57caf71740 (most recent call first):\n"
            '  File "/env/lib/python3.8/site-packages/torch/cuda/streams.py", line 95 in synchronize\n'
            '  File "/env/DeepSpeed/deepspeed/runtime/zero/stage3.py", line 490 in _synchronize_communication\n'
            '  File "/env/DeepSpeed/deepspeed/runtime/zero/stage3.py", line 406 in fetch_sub_module\n'
            '  File "/env/transformers/models/t5/modeling_t5.py", line 474 in forward\n')
    (proc,), _ = parse_thread_dump(text)
    assert (place_of(proc.threads[0]).kind, place_of(proc.threads[0]).collective) == ("collective", "all_gather")

def test_faulthandler_frames_pasted_without_their_header_are_read_as_a_stack(tmp_path):
    from hangdbg.evidence.stacks.text_reader import READER as TEXT

    f = tmp_path / "hang-stack.txt"
    f.write_text('  File "/src/DeepSpeed/deepspeed/runtime/engine.py", line 1456 in _checkpoint_tag_validation\n'
                 '  File "/src/DeepSpeed/deepspeed/runtime/engine.py", line 1489 in save_checkpoint\n'
                 '  File "/src/transformers/trainer.py", line 1212 in _save_checkpoint\n')
    assert TEXT.sniff(f.read_bytes())
    _, dumps = TEXT.read_dumps([str(f)])
    (u,) = [x for x in analyze(dumps).findings if x.kind is Kind.UNDECIDED]
    assert "waits in all_reduce at runtime/engine.py:1489 in save_checkpoint()" in u.summary


def test_a_wrapper_with_user_code_inside_is_not_a_collective():
    text = ("Thread 1 (active): \"MainThread\"\n    tokenize (myproj/text.py:10)\n"
            "    gather (accelerate/utils/operations.py:400)\n    main (run.py:3)\n")
    (proc,), _ = parse_pyspy_dump(text)
    assert place_of(proc.threads[0]).kind == "outside"


def test_one_process_in_all_gather_coalesced_waits_for_ranks_not_dumped(tmp_path):
    f = copy(tmp_path, "zero3_allgather.txt", "stuck.txt")
    _, a = run([f])
    assert not suspects(a)
    (u,) = [x for x in a.findings if x.kind is Kind.UNDECIDED]
    assert u.severity is Severity.WARNING and "all_gather_coalesced" in u.summary
    assert "not in these dumps" in u.summary and "dump every rank" in u.action
    assert a.headline.startswith("undecided:")


def test_known_complete_job_all_in_one_collective_keeps_no_single_rank(tmp_path):
    body = (FIX / "zero3_allgather.txt").read_text()
    for r in range(2):
        (tmp_path / f"rank-{r}.txt").write_text(f"# hangdbg rank={r} world_size=2 local_world_size=2 local_rank={r}\n{body}")
    _, a = run([tmp_path])
    assert not a.findings and "no single rank stands out" in a.headline


def test_seven_in_all_gather_coalesced_and_one_in_forward_name_the_one(tmp_path):
    for r in range(7):
        copy(tmp_path, "zero3_allgather.txt", f"rank-{r}.txt")
    copy(tmp_path, "model_forward.txt", "rank-7.txt")
    _, a = run([tmp_path])
    assert not suspects(a) & set(range(7))
    named = [f for f in a.findings if 7 in f.ranks]
    assert named and all(set(f.ranks) == {7} for f in named)
    text = named[0].summary
    assert "no collective" in text and "ranks {0-6} wait in all_gather_coalesced" in text


# --- a rank blocked on something that is not a rank ------------------------------------------


def test_lone_rank_in_its_data_loader_queue_is_the_suspect(tmp_path):
    f = copy(tmp_path, "dataloader_queue.txt", "job-4816-rank0-dump.txt")
    (d,), a = run([f])
    assert d.rank == 0 and d.rank_source == "file name"
    assert d.threads[0].thread_id == 0x7F3A1C2B5740 and [t.frames for t in d.threads[2:]] == [(), ()]
    (s,) = [x for x in a.findings if x.severity is Severity.SUSPECT]
    assert s.kind is Kind.OUTSIDE_COLLECTIVE and s.ranks == (0,)
    assert "data loader" in s.summary and "not in any collective" in s.summary
    assert "__next__ (mytrainer/data/loader.py:212)" in s.summary and "num_workers=0" in s.action


def test_torch_dataloader_wait_names_the_user_frame(tmp_path):
    f = copy(tmp_path, "torch_dataloader.txt", "rank3.txt")
    _, a = run([f])
    (s,) = [x for x in a.findings if x.severity is Severity.SUSPECT]
    assert s.ranks == (3,) and "data loader" in s.summary and "train (train.py:57)" in s.summary


def test_unknown_rank_blocked_alone_says_its_rank_is_unknown(tmp_path):
    f = copy(tmp_path, "torch_dataloader.txt", "paste.txt")
    _, a = run([f])
    (s,) = [x for x in a.findings if x.severity is Severity.SUSPECT]
    assert "rank unknown" in s.summary


def test_idle_rank_whose_frames_say_nothing_is_not_blamed_alone(tmp_path):
    f = tmp_path / "rank0.txt"
    f.write_text('Thread 7 (idle): "MainThread"\n    step (train.py:40)\n    <module> (train.py:90)\n')
    _, a = run([f])
    assert not suspects(a)


def test_blocked_rank_of_a_known_complete_job_is_not_blamed(tmp_path):
    body = (FIX / "dataloader_queue.txt").read_text()
    (tmp_path / "rank-0.txt").write_text(f"# hangdbg rank=0 world_size=1 local_world_size=1 local_rank=0\n{body}")
    _, a = run([tmp_path])
    assert not suspects(a)


# --- thread dumps the program printed itself -------------------------------------------------


def test_thread_id_printer_is_read_innermost_first():
    (proc,), garbled = parse_thread_dump((FIX / "thread_id_printer.txt").read_text())
    assert garbled == 0
    main, other = proc.threads
    assert main.thread_id == 140211234567808 and main.status == "idle" and main.name is None
    assert [f.function for f in main.frames] == ["_pad_across_processes", "evaluation_loop", "_inner_training_loop",
                                                 "<module>"]
    assert main.frames[0].line == 3352 and main.frames[0].file.endswith("transformers/trainer.py")
    assert other.frames[0].function == "wait"


def test_activestate_recipe_names_and_stray_frames():
    text = 'File "/x/stray.py", line 1, in f\n' + (FIX / "activestate_recipe.txt").read_text()
    (proc,), garbled = parse_thread_dump(text)
    assert garbled == 1  # the frame before any thread header
    a, b = proc.threads
    assert (a.thread_id, a.name, [f.function for f in a.frames]) == (139845561190208, None, ["main", "<module>"])
    assert (b.thread_id, b.name) == (139845400000000, "watchdog")


def test_thread_id_printer_waits_in_the_trainer_gather(tmp_path):
    f = copy(tmp_path, "thread_id_printer.txt", "transformers-24589.txt")
    assert READER.sniff(f.read_bytes())
    (d,), a = run([f])
    assert a.places[d.rank].collective == "_pad_across_processes"
    assert not suspects(a)
    assert any("_pad_across_processes" in x.summary and x.kind is Kind.UNDECIDED for x in a.findings)


def test_no_header_no_dump_and_garbage_is_cheap():
    assert parse_thread_dump('File "a.py", line 1, in f\n') == ([], 1)
    junk = "-- Thread ID: " + "9" * 70000 + " " + "-" * 70000
    assert parse_thread_dump(junk) == ([], 0)


WORKER = """Process 4242: pt_data_worker
Python v3.10.12 (/usr/bin/python3.10)

Thread 4242 (idle): "MainThread"
    wait (threading.py:324)
    get (multiprocessing/queues.py:113)
    _worker_loop (torch/utils/data/_utils/worker.py:275)
    run (multiprocessing/process.py:108)
    _bootstrap (multiprocessing/process.py:314)
"""

JOIN = """Process 77: python train.py
Python v3.10.12 (/usr/bin/python3.10)

Thread 77 (idle): "MainThread"
    _wait_for_tstate_lock (threading.py:1116)
    join (threading.py:1096)
    save_checkpoint (train/ckpt.py:40)
    main (train.py:90)
    <module> (train.py:120)
"""


def test_an_idle_data_loader_worker_is_no_suspect(tmp_path):
    f = tmp_path / "rank0.txt"
    f.write_text(WORKER)
    _dumps, a = run([f])
    assert not suspects(a)


def test_a_lone_thread_join_is_a_warning_not_a_suspect(tmp_path):
    f = tmp_path / "rank0.txt"
    f.write_text(JOIN)
    _dumps, a = run([f])
    assert not suspects(a)
    [w] = [x for x in a.findings if x.kind is Kind.OUTSIDE_COLLECTIVE]
    assert w.severity is Severity.WARNING and "Thread.join" in w.summary and w.ranks == (0,)
