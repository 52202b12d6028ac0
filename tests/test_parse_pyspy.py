"""Tests of the stack grammars (hangdbg.stacks): py-spy dump text parsing and loading saved dumps.

Fixtures in tests/fixtures/pyspy/ were captured with py-spy 0.4.3 on Python 3.11.7 (torch 2.13
gloo job under torchrun, a lock deadlock, sleep, busy threads), except the hand-written
``old_hex_threads``, ``ancient_threads_only``, ``error_failure_reason``, ``collector_headers``
and ``garbled`` variants.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hangdbg.model import Thread
from hangdbg.frames import Frame
from hangdbg.stacks.saved import LoadStats, load_dumps
from hangdbg.stacks.pyspy_text import ParsedProcess, parse_pyspy_dump, rank_from_filename, sample_from_filename

FIXTURES = Path(__file__).parent / "fixtures" / "pyspy"
PY311 = "/root/.pyenv/versions/3.11.7/bin/python3.11"
TORCH_CMD = f"{PY311} -u mismatch.py"
NO_PID = (
    "Failed to get process executable name. Check that the process is running. "
    "Caused by: No such file or directory (os error 2)"
)
BOOTSTRAP = (
    Frame("Thread.run", "threading.py", 982),
    Frame("Thread._bootstrap_inner", "threading.py", 1045),
    Frame("Thread._bootstrap", "threading.py", 1002),
)
RANK1_STACK = (
    Frame("broadcast", "torch/distributed/distributed_c10d.py", 3151),
    Frame("_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 83),
    Frame("train_step", "mismatch.py", 12),
    Frame("main", "mismatch.py", 20),
    Frame("<module>", "mismatch.py", 24),
)
RANK0_STACK = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 3252),) + RANK1_STACK[1:2] + (
    Frame("train_step", "mismatch.py", 10),
) + RANK1_STACK[3:]


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_bytes().decode("utf-8", errors="replace")


def parse_fixture(name: str) -> tuple[list[ParsedProcess], int]:
    return parse_pyspy_dump(fixture_text(name))


def native(function: str, lib: str = "libc.so.6") -> Frame:
    return Frame(function, lib, None, True)


# --- single real dumps --------------------------------------------------------------------


def test_sleep_main_exact():
    procs, garbled = parse_fixture("sleep_main.txt")
    assert garbled == 0
    assert procs == [
        ParsedProcess(
            pid=2966,
            cmdline="/root/.pyenv/versions/3.11.7/bin/python sleeper.py",
            python="3.11.7",
            threads=(
                Thread(2966, "MainThread", "idle", (
                    Frame("wait_forever", "sleeper.py", 4),
                    Frame("<module>", "sleeper.py", 6),
                )),
            ),
            error=None,
            header={},
        )
    ]


def test_lock_deadlock_threads_with_spaces_in_name():
    (proc,), garbled = parse_fixture("lock_default.txt")
    assert garbled == 0
    assert proc.pid == 3067 and proc.python == "3.11.7"
    main, loader = proc.threads
    assert main == Thread(3067, "MainThread", "idle", (
        Frame("main", "lockhang.py", 21), Frame("<module>", "lockhang.py", 26)))
    assert loader == Thread(3109, "data loader 1", "idle", (Frame("load_batches", "lockhang.py", 13),) + BOOTSTRAP)


def test_full_filenames_kept_as_printed():
    (proc,), _ = parse_fixture("lock_full_filenames.txt")
    frames = proc.threads[1].frames
    assert frames[0] == Frame("load_batches", "/tmp/hd_cap/lockhang.py", 13)
    assert frames[1].file == "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py"
    assert not any(f.native for f in frames)


def test_locals_arguments_first_then_locals():
    (proc,), garbled = parse_fixture("lock_locals.txt")
    assert garbled == 0
    main, loader = proc.threads
    assert main.frames[0].locals == (("worker", "<Thread at 0x7f2dc6a66610>"), ("step", "3"))
    assert main.frames[1].locals == ()
    assert loader.frames[0] == Frame("load_batches", "lockhang.py", 13, False, (
        ("n_batches", "8"),
        ("batch_size", "32"),
        ("shard", '{"epoch": 0, "path": "/data/shard-00017.bin"}'),
    ))
    assert [f.locals for f in loader.frames[1:]] == [(("self", "<Thread at 0x7f2dc6a66610>"),)] * 3
    # locals do not change a frame's identity
    assert loader.frames[0].key == ("load_batches", "lockhang.py", 13)


def test_locals_long_values_with_colons_and_quotes():
    (proc,), garbled = parse_fixture("locals_long_ll.txt")
    assert garbled == 0
    f = proc.threads[0].frames[0]
    names = [n for n, _ in f.locals]
    assert names == ["text", "items", "d", "n", "big"]
    values = dict(f.locals)
    assert values["text"] == r'"line1\nline2: \"q\""'
    assert values["d"] == '{"a": "x:y", "b": [1, 2]}'
    assert values["n"] == "None"
    assert values["items"].startswith("[0, 1, 2,") and values["items"].endswith("63, ...]")
    assert values["big"] == '"' + "y" * 251 + '..."'
    assert proc.threads[0].frames[1] == Frame("<module>", "locals2.py", 7)


def test_torch_locals_only_locals_section():
    (proc,), _ = parse_fixture("torch_rank1_locals.txt")
    frames = proc.threads[0].frames
    assert tuple(f.key for f in frames) == tuple(f.key for f in RANK1_STACK)
    assert frames[0].locals[:2] == (("tensor", "<Tensor at 0x7f56efd39fe0>"), ("src", "0"))
    assert [n for n, _ in frames[0].locals] == [
        "tensor", "src", "group", "async_op", "group_src", "relevant_args", "opts", "sm90_or_more", "work"]
    assert frames[1].locals == (("args", "(<Tensor at 0x7f56efd39fe0>)"), ("kwargs", '{"src": 0}'))
    assert frames[4].locals == ()


def test_native_frames_interleaved():
    (proc,), garbled = parse_fixture("lock_native.txt")
    assert garbled == 0
    main, loader = proc.threads
    assert main.frames == (
        native("0x7f2dc70a3f16"),
        native("0x7f2dc70aed90"),
        native("PyThread_acquire_lock_timed", "libpython3.11.so.1.0"),
        native("lock_PyThread_acquire_lock", "libpython3.11.so.1.0"),
        Frame("main", "lockhang.py", 21),
        Frame("<module>", "lockhang.py", 26),
        native("0x7f2dc704524a"),
    )
    assert loader.python_frames == (Frame("load_batches", "lockhang.py", 13),) + BOOTSTRAP
    assert loader.frames[-3:] == (
        native("thread_run", "libpython3.11.so.1.0"), native("0x7f2dc70a71f5"), native("0x7f2dc71278ec"))


def test_native_long_cpp_name_split_on_last_paren():
    (proc,), garbled = parse_fixture("torch_rank0_native.txt")
    assert garbled == 0
    frames = proc.threads[0].frames
    assert len(frames) == 12
    assert frames[:4] == (
        native("0x7ff4ba0a3f16"),
        native("pthread_cond_wait"),
        native("std::condition_variable::wait", "libstdc++.so.6.0.30"),
        native("c10d::Work::wait", "libtorch_cpu.so"),
    )
    line9 = fixture_text("torch_rank0_native.txt").splitlines()[8].strip()
    long = frames[4]
    assert long.function == line9[: -len(" (libtorch_python.so)")]
    assert long.function.startswith("pybind11::cpp_function::initialize<pybind11::cpp_function::cpp_function<bool")
    assert long.function.endswith("::{lambda(pybind11::detail::function_call&)#1}::_FUN")
    assert "bool (*)(c10d::Work*" in long.function
    assert (long.file, long.line, long.native) == ("libtorch_python.so", None, True)
    assert proc.threads[0].stack_key == tuple(f.key for f in RANK0_STACK)


def test_statuses_and_thread_names_with_quotes_and_parens():
    (proc,), garbled = parse_fixture("busy_statuses.txt")
    assert garbled == 0
    assert [(t.thread_id, t.name, t.status) for t in proc.threads] == [
        (3881, "MainThread", "active+gil"),
        (3924, "Thread-1 (worker)", "active"),
        (3925, 'nap "q" (x)', "idle"),
    ]
    assert proc.threads[0].frames == (
        Frame("spin", "busy.py", 22), Frame("main", "busy.py", 28), Frame("<module>", "busy.py", 33))
    assert [t.idle for t in proc.threads] == [False, False, True]


def test_busy_native_gil_release_frame():
    (proc,), _ = parse_fixture("busy_native.txt")
    worker = proc.threads[1]
    assert worker.status == "idle"
    assert worker.frames[2] == native("pybind11::gil_scoped_release::~gil_scoped_release", "libtorch_python.so")
    assert worker.frames[3] == native("torch::autograd::THPVariable_mm", "libtorch_python.so")
    assert worker.frames[4] == Frame("worker", "busy.py", 10)


def test_unnamed_thread_as_non_root():
    (proc,), garbled = parse_fixture("unnamed_thread_nonroot.txt")
    assert garbled == 0
    assert proc.python == "3.11.2"  # what py-spy really printed for a 3.11.7 target
    assert proc.threads == (Thread(3559, None, "idle", (
        Frame("wait_forever", "sleeper_nobody.py", 4), Frame("<module>", "sleeper_nobody.py", 6))),)


# --- several processes in one text ---------------------------------------------------------


def test_subprocesses_output():
    procs, garbled = parse_fixture("torch_subprocesses.txt")
    assert garbled == 0  # "Parent Process" and the dashed separators are recognised
    assert [p.pid for p in procs] == [3580, 3626, 3627]
    assert procs[0].cmdline == f"{PY311} /root/.pyenv/versions/3.11.7/bin/torchrun --nproc_per_node 2 mismatch.py"
    assert [p.cmdline for p in procs[1:]] == [TORCH_CMD, TORCH_CMD]
    agent, timer = procs[0].threads
    assert (agent.name, timer.name, timer.thread_id) == ("MainThread", "RendezvousKeepAliveTimer_0", 3624)
    # a console script without .py extension is still a Python frame
    assert agent.frames[-1] == Frame("<module>", "torchrun", 8, False)
    assert procs[1].threads[0].frames == RANK0_STACK
    assert procs[2].threads[0].frames == RANK1_STACK


def test_xargs_concatenation_error_does_not_lose_others():
    procs, garbled = parse_fixture("torch_xargs.txt")
    assert garbled == 0
    assert [p.pid for p in procs] == [3580, 3626, 3627, None]
    assert [p.error for p in procs] == [None, None, None, NO_PID]
    assert procs[3].threads == ()
    assert procs[2].threads[0].frames == RANK1_STACK


def test_old_hex_thread_ids_and_double_colon_locals():
    procs, garbled = parse_fixture("old_hex_threads.txt")
    assert garbled == 0
    first, second = procs
    assert (first.pid, first.cmdline, first.python) == (21107, "python3 train.py --epochs 3", "3.8.10")
    assert [(t.thread_id, t.name, t.status) for t in first.threads] == [
        (0x7F4C6B7C0740, "MainThread", "active+gil"),
        (0x7F4C2ADFF700, None, "idle"),
        (0x7F4C29FFE700, "pin_memory", "active"),
    ]
    assert first.threads[0].frames[0].locals == (
        ("model", "<DistributedDataParallel at 0x7f4c2a1b3d90>"), ("buckets", "12"))
    assert first.threads[1].frames[0] == Frame("_worker", "concurrent/futures/thread.py", 78)
    assert (second.pid, second.python) == (21108, None)  # no "Python v" line
    assert second.threads[0].frames[0] == Frame("wait", "torch/distributed/distributed_c10d.py", 1203)


def test_threads_without_process_header():
    procs, garbled = parse_fixture("ancient_threads_only.txt")
    assert garbled == 0
    (proc,) = procs
    assert (proc.pid, proc.cmdline, proc.python, proc.error) == (None, "", None, None)
    assert [(t.thread_id, t.name, t.status) for t in proc.threads] == [
        (0x7F3B40A17700, None, "active"), (0x7F3B3E1FF700, None, "idle")]
    assert proc.threads[0].frames == (Frame("run_forever", "server.py", 42), Frame("<module>", "server.py", 60))


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("error_no_such_pid.txt", NO_PID),
        ("error_not_python.txt", "Failed to find python version from target process"),
        (
            "error_permission_denied.txt",
            "Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'",
        ),
        ("error_failure_reason.txt", "Failed to suspend process Caused by: Operation not permitted (os error 1)"),
    ],
)
def test_error_outputs(name, error):
    procs, garbled = parse_fixture(name)
    assert garbled == 0  # the Rust "Stack backtrace" lines are dropped, not counted
    assert procs == [ParsedProcess(pid=None, cmdline="", python=None, threads=(), error=error, header={})]
    assert "py_spy::" not in error


def test_error_after_process_line_belongs_to_that_process():
    text = "Process 77: python x.py\nPython v3.11.7 (/usr/bin/python3)\n\nError: Failed to copy PyThreadState\n"
    procs, garbled = parse_pyspy_dump(text)
    assert garbled == 0
    assert [(p.pid, p.error) for p in procs] == [(77, "Failed to copy PyThreadState")]


def test_two_consecutive_errors_without_header_are_two_processes():
    text = fixture_text("error_no_such_pid.txt") + "\n" + fixture_text("error_not_python.txt")
    procs, _ = parse_pyspy_dump(text)
    assert [p.error for p in procs] == [NO_PID, "Failed to find python version from target process"]


# --- hangdbg headers -----------------------------------------------------------------------


def test_collector_headers_apply_to_following_block():
    procs, garbled = parse_fixture("collector_headers.txt")
    assert garbled == 0  # "# collected with ..." is a comment
    ok, failed = procs
    assert ok.header == {
        "rank": "3", "pid": "3627", "host": "node1", "local_rank": "3", "world_size": "4",
        "local_world_size": "4", "sample": "1", "time": "2026-11-22T01:02:03Z", "gpu": "3",
    }
    assert ok.threads[0].frames == RANK1_STACK
    assert failed.header["rank"] == "2" and failed.header["pid"] == "3626"
    assert (failed.pid, failed.error, failed.threads) == (None, NO_PID, ())


def test_header_block_is_one_process_even_with_two_error_messages():
    # what hangdbg's collector writes: its diagnosis (quoting py-spy's first line), then py-spy's text
    diag = (
        "process 3626 is gone (it exited while hangdbg was looking): "
        "Error: Failed to get process executable name. Check that the process is running."
    )
    text = "# hangdbg rank=1 pid=3626\nError: " + diag + "\n" + fixture_text("error_no_such_pid.txt")
    procs, garbled = parse_pyspy_dump(text)
    assert garbled == 0
    (proc,) = procs
    assert proc.error == diag + " Caused by: No such file or directory (os error 2)"
    assert proc.header == {"rank": "1", "pid": "3626"}
    # a second py-spy message that the diagnosis does not quote is kept as a cause
    (proc,), _ = parse_pyspy_dump("# hangdbg rank=1\nError: py-spy failed on pid 9\nError: Failed to suspend\n")
    assert proc.error == "py-spy failed on pid 9 Caused by: Failed to suspend"


def test_header_block_with_timeout_error_then_partial_stack():
    text = "# hangdbg rank=4\nError: py-spy timed out after 20 s\n" + fixture_text("sleep_main.txt")
    (proc,), garbled = parse_pyspy_dump(text)
    assert garbled == 0
    assert (proc.pid, proc.error, len(proc.threads)) == (2966, "py-spy timed out after 20 s", 1)


def test_header_followed_by_nothing():
    procs, garbled = parse_pyspy_dump("# hangdbg rank=0 pid=1\n# hangdbg rank=1 pid=2\n" + fixture_text("sleep_main.txt") + "# hangdbg rank=2\n")
    assert garbled == 0
    assert [p.header.get("rank") for p in procs] == ["0", "1", "2"]
    assert [p.error for p in procs] == [
        "no py-spy output followed the hangdbg header", None, "no py-spy output followed the hangdbg header"]
    assert procs[1].pid == 2966


def test_parsed_process_hashable_despite_header_dict():
    proc = parse_fixture("collector_headers.txt")[0][0]
    assert hash(proc) == hash(ParsedProcess(proc.pid, proc.cmdline, proc.python, proc.threads, None, {}))


# --- garbage -------------------------------------------------------------------------------


def test_garbled_fixture_counts_and_keeps_good_lines():
    procs, garbled = parse_fixture("garbled.txt")
    assert garbled == 8
    (proc,) = procs
    assert (proc.pid, proc.python) == (4242, "3.10.12")
    assert proc.threads == (
        Thread(4242, "MainThread", "idle", (Frame("recv_into", "socket.py", 705), Frame("read_frame", "worker.py", 31))),
        Thread(4244, "Thread-2", "active", (Frame("poll", "worker.py", 12), Frame("<module>", "worker.py", 90))),
    )


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "garbage\n\x00\x01", "    indented (x.py:1)\n", "Python v3.11.7 (/usr/bin/python)\n", "Thread x (idle)"],
)
def test_never_raises_on_garbage(text):
    procs, garbled = parse_pyspy_dump(text)
    assert procs == []
    assert garbled == sum(1 for line in text.splitlines() if line.strip())


def test_ansi_colours_crlf_and_gil_status():
    text = (
        "Process \x1b[1;33m12\x1b[0m: python a.py\r\n"
        "Python v\x1b[1m3.12.1\x1b[0m (\x1b[2m/usr/bin/python3.12\x1b[0m)\r\n\r\n"
        "Thread \x1b[1;33m12\x1b[0m (gil): \"MainThread\"\r\n"
        "    \x1b[32mrun\x1b[0m (\x1b[36ma.py\x1b[0m:\x1b[2m3\x1b[0m)\r\n"
    )
    (proc,), garbled = parse_pyspy_dump(text)
    assert garbled == 0
    assert (proc.pid, proc.cmdline, proc.python) == (12, "python a.py", "3.12.1")
    assert proc.threads == (Thread(12, "MainThread", "active+gil", (Frame("run", "a.py", 3),)),)


@pytest.mark.parametrize(
    ("line", "frame"),
    [
        ("    c10d::ProcessGroupNCCL::WorkNCCL::wait (ProcessGroupNCCL.cpp:1234)",
         Frame("c10d::ProcessGroupNCCL::WorkNCCL::wait", "ProcessGroupNCCL.cpp", 1234, True)),
        ("    std::condition_variable::wait (/usr/include/c++/11/condition_variable:103)",
         Frame("std::condition_variable::wait", "/usr/include/c++/11/condition_variable", 103, True)),
        ("    <listcomp> (<string>:1)", Frame("<listcomp>", "<string>", 1)),
        ("    _call_with_frames_removed (<frozen importlib._bootstrap>:241)",
         Frame("_call_with_frames_removed", "<frozen importlib._bootstrap>", 241)),
        ("    <module> (/usr/local/bin/deepspeed:6)", Frame("<module>", "/usr/local/bin/deepspeed", 6)),
        ("    f (my (copy).py:3)", Frame("f (my", "copy).py", 3)),
        ("    unknown ()", Frame("unknown", "", None, True)),
    ],
)
def test_frame_line_variants(line, frame):
    (proc,), garbled = parse_pyspy_dump('Thread 1 (idle): "MainThread"\n' + line + "\n")
    assert garbled == 0
    assert proc.threads[0].frames == (frame,)


def test_truncated_thread_name_and_unknown_status():
    text = 'Thread 5 (active): "half\n    f (a.py:1)\nThread 6 (running)\n    g (a.py:2)\n'
    (proc,), garbled = parse_pyspy_dump(text)
    assert garbled == 2  # the bad thread header, and its frame which belongs to no thread
    assert proc.threads == (Thread(5, "half", "active", (Frame("f", "a.py", 1),)),)


# --- file names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank-0003.txt", 3),
        ("rank3.txt", 3),
        ("rank_3.log", 3),
        ("dump.rank12", 12),
        ("rank.3.txt", 3),
        ("nccl_trace_rank_5", 5),
        ("fr_trace_7", 7),
        ("rank-0003.sample-2.txt", 3),
        ("/some/dir/RANK_4.TXT", 4),
        ("rank-0001.pid-9999.txt", 1),
        # numbers that are not ranks: never a rank
        ("r7.txt", None),
        ("0003.txt", None),
        ("stack-5.txt", None),
        ("node3.pid-1234.txt", None),
        ("accelerate-3104-rankA-backward.txt", None),
        ("issue-3104-turn5-thread3293.txt", None),
        ("megatron-134-pp32-header-only.txt", None),
        ("bug-3380-h100-hang.txt", None),
        ("pytorch-99218-c10-frames.txt", None),
        ("torchrun-exitcode-6.log", None),
        ("fr_trace_7.txt", None),
        ("rank4294967296.txt", None),
        ("rank99999999999999.txt", None),
        ("stacks.txt", None),
        ("rank.txt", None),
        ("pid1234.txt", None),
        ("sample-3.txt", None),
    ],
)
def test_rank_from_filename(name, rank):
    assert rank_from_filename(name) == rank


@pytest.mark.parametrize(
    ("name", "sample"),
    [("rank-0003.sample-2.txt", 2), ("r1_sample10.log", 10), ("rank-0003.txt", None), ("x.SAMPLE.4", 4)],
)
def test_sample_from_filename(name, sample):
    assert sample_from_filename(name) == sample


# --- load_dumps ----------------------------------------------------------------------------


def header(rank: int | None = None, sample: int | None = None, **more: object) -> str:
    fields = {"rank": rank, **more, "sample": sample}
    return "# hangdbg " + " ".join(f"{k}={v}" for k, v in fields.items() if v is not None) + "\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_load_dumps_collector_directory_merges_samples(tmp_path):
    raw = tmp_path / "out" / "raw"
    common = dict(host="node1", world_size=2, local_world_size=2)
    # names sorted a < b < c, but the samples are 2, 1, 3: order by sample number
    write(raw / "a.txt", header(0, 2, pid=3626, local_rank=0, **common) + fixture_text("torch_rank0.txt"))
    write(raw / "b.txt", header(0, 1, pid=3626, local_rank=0, **common) + fixture_text("sleep_main.txt"))
    write(raw / "c.txt", header(0, 3, pid=3626, local_rank=0, **common) + fixture_text("error_no_such_pid.txt"))
    write(raw / "rank-0001.txt", header(1, 1, pid=3627, local_rank=1, rank_source="RANK", **common)
          + fixture_text("torch_rank1.txt"))
    write(tmp_path / "out" / "hangdbg.json", "{}")
    write(tmp_path / "out" / "report.txt", "not read: raw/ is used")

    dumps, stats = load_dumps([tmp_path / "out"])
    assert stats == LoadStats(files_read=4, processes=4, garbled_lines=0, unreadable=())
    r0, r1 = dumps
    assert (r0.rank, r0.rank_source, r0.pid, r0.host, r0.local_rank, r0.world_size, r0.local_world_size) == (
        0, "header", 3626, "node1", 0, 2, 2)
    # sample 3 failed: it is not a sample, and the rank is not in error since samples 1-2 worked
    assert [s[0].frames[0].function for s in r0.samples] == ["wait_forever", "all_reduce"]
    assert r0.threads == r0.samples[-1] and r0.error is None
    assert r0.cmdline == TORCH_CMD and r0.python == "3.11.7"
    assert (r1.rank, r1.rank_source, r1.local_rank) == (1, "RANK", 1)
    assert r1.threads[0].frames == RANK1_STACK and len(r1.samples) == 1


def test_load_dumps_sample_numbers_from_file_names(tmp_path):
    write(tmp_path / "rank-0002.sample-2.txt", fixture_text("torch_rank1.txt"))
    write(tmp_path / "rank-0002.sample-10.txt", fixture_text("torch_rank0.txt"))
    write(tmp_path / "rank-0002.sample-1.txt", fixture_text("sleep_main.txt"))
    (dump,), stats = load_dumps([tmp_path])
    assert stats.files_read == 3
    assert (dump.rank, dump.rank_source, dump.pid) == (2, "file name", 3626)
    assert [s[0].frames[0].function for s in dump.samples] == ["wait_forever", "broadcast", "all_reduce"]


def test_load_dumps_rank_sources(tmp_path):
    write(tmp_path / "x.txt", header(2, host="n2") + fixture_text("torch_rank0.txt"))
    write(tmp_path / "rank-0005.txt", fixture_text("torch_rank1.txt"))
    write(tmp_path / "stacks.txt", fixture_text("lock_default.txt"))
    write(tmp_path / "rank-0009.txt", fixture_text("torch_subprocesses.txt"))  # 3 processes: name unused
    dumps, stats = load_dumps([tmp_path])
    assert stats.processes == 6
    got = [(d.rank, d.rank_source, d.pid) for d in dumps]
    # files sorted: rank-0005, rank-0009 (3 processes), stacks, x; order ranks start after 5;
    # the torchrun launcher (pid 3580) of the --subprocesses output is not a rank
    assert got == [
        (2, "header", 3626),
        (5, "file name", 3627),
        (6, "order", 3626),
        (7, "order", 3627),
        (8, "order", 3067),
    ]
    assert dumps[0].host == "n2"


def test_load_dumps_order_ranks_merge_same_pid(tmp_path):
    a = write(tmp_path / "first.txt", fixture_text("torch_xargs.txt"))
    b = write(tmp_path / "second.txt", fixture_text("torch_xargs.txt"))
    dumps, stats = load_dumps([a, b])
    assert stats == LoadStats(2, 8, 0, ())
    # torchrun (pid 3580) is a launcher, not a rank
    assert [(d.rank, d.pid, len(d.samples)) for d in dumps] == [
        (0, 3626, 2), (1, 3627, 2), (2, None, 0), (3, None, 0)]
    assert dumps[2].error == NO_PID and dumps[2].threads == ()
    assert all(d.rank_source == "order" for d in dumps)


def test_load_dumps_error_only_rank_keeps_header_facts(tmp_path):
    write(tmp_path / "rank-0003.txt", header(3, 1, pid=555, host="n9") + fixture_text("error_permission_denied.txt"))
    (dump,), _ = load_dumps([tmp_path])
    assert (dump.rank, dump.pid, dump.host, dump.threads, dump.samples) == (3, 555, "n9", (), ())
    assert dump.error.startswith("Permission Denied")


def test_load_dumps_unreadable_reported_not_raised(tmp_path, monkeypatch):
    good = write(tmp_path / "d" / "rank-0000.txt", fixture_text("sleep_main.txt"))
    write(tmp_path / "d" / "rank-0001.txt", "Process 1: x\x00\x00binary")
    locked = write(tmp_path / "d" / "rank-0002.txt", fixture_text("sleep_main.txt"))
    write(tmp_path / "d" / ".hidden", "garbage")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    import hangdbg.stacks.saved as saved

    real = saved.open_input

    def open_input(path):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(saved, "open_input", open_input)
    dumps, stats = load_dumps([tmp_path / "d", fifo, good])  # good is named twice: read once
    assert [d.rank for d in dumps] == [0]
    assert stats.files_read == 1 and stats.processes == 1
    assert stats.unreadable == (
        (str(tmp_path / "d" / "rank-0001.txt"), "binary data, not py-spy text output"),
        (str(locked), "Permission denied"),
        (str(fifo), "not a regular file (a FIFO)"),
    )


def test_load_dumps_counts_garbled_lines(tmp_path):
    write(tmp_path / "garbled.txt", fixture_text("garbled.txt"))
    dumps, stats = load_dumps([str(tmp_path / "garbled.txt")])
    assert stats.garbled_lines == 8
    assert [(d.rank, d.rank_source, d.pid) for d in dumps] == [(0, "order", 4242)]


def test_load_dumps_missing_path_raises(tmp_path):
    write(tmp_path / "rank-0000.txt", fixture_text("sleep_main.txt"))
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_dumps([tmp_path, missing])


def test_load_dumps_empty_directory(tmp_path):
    assert load_dumps([tmp_path]) == ([], LoadStats())


def test_fuzz_never_raises():
    import random

    rng = random.Random(1234)
    pieces = fixture_text("lock_locals.txt").splitlines() + fixture_text("torch_xargs.txt").splitlines() + [
        "# hangdbg rank=x sample=²", "Thread ² (idle)", "    f (a.py:²)", "Error:", "Caused by:", "    0:",
        "Process 1:", "Python v", "        Locals:", "            x", "\x1b[", "Reason:", "# hangdbg",
    ]
    for _ in range(300):
        lines = [rng.choice(pieces)[: rng.randint(0, 80)] for _ in range(rng.randint(1, 30))]
        procs, garbled = parse_pyspy_dump("\n".join(lines))
        assert garbled >= 0 and all(isinstance(p, ParsedProcess) for p in procs)
