"""Saved native backtraces: what the stack-text reader concludes from each format and pattern
(fixtures written from the gdb/lldb/pstack, CPython libpython.py, PyTorch c10 and UCX formats)."""

from __future__ import annotations

import json
from pathlib import Path

from hangdbg.stacks.native_causes import native_cause
from hangdbg.stacks.places import place_of, primary_thread
from hangdbg.model import Kind, Severity, Thread
from hangdbg.frames import Frame
from hangdbg.stacks.native_text import parse_stacks, sniff
from hangdbg.text.lines import iter_lines
from hangdbg.evidence.stacks import text_reader as stack_text

STACKS = Path(__file__).parent / "fixtures" / "stacks"


def _load(name: str, tmp_path: Path | None = None, as_name: str | None = None):
    src = STACKS / name
    if as_name is not None and tmp_path is not None:
        dst = tmp_path / as_name
        dst.write_text(src.read_text())
        src = dst
    return stack_text.load([str(src)])


def _suspects(rep):
    return [f for f in rep.findings if f.severity is Severity.SUSPECT]


def _place(dump):
    i = primary_thread(dump.threads)
    return place_of(dump.threads[i])


def test_lldb_attach_signal_is_no_crash_and_the_abort_hang_is_the_cause():
    rep, (d,) = _load("lldb_attach_abort.txt")
    assert not any(f.kind is Kind.CRASH for f in rep.findings)  # SIGSTOP is lldb attaching
    (s,) = _suspects(rep)
    assert s.kind is Kind.ABORT_HANG and "ProcessGroupNCCL::abort" in s.summary and "ncclCommAbort" in s.summary
    assert "joins an NCCL thread" in s.summary and s.action
    assert s.ranks == ()  # no rank printed, none in the file name
    assert "in wait" not in _place(d).describe()


def test_lldb_real_signal_is_still_a_crash(tmp_path):
    text = (STACKS / "lldb_attach_abort.txt").read_text().replace("signal SIGSTOP", "signal SIGSEGV", 1)
    p = tmp_path / "rank-1.lldb.txt"
    p.write_text(text)
    rep, _ = stack_text.load([str(p)])
    assert any(f.kind is Kind.CRASH and "SIGSEGV" in f.summary and f.ranks == (1,) for f in rep.findings)


def test_gdb_destroy_joining_the_proxy_thread(tmp_path):
    rep, (d,) = _load("gdb_destroy_join.txt", tmp_path, "rank-4.gdb.txt")
    (s,) = _suspects(rep)
    assert s.kind is Kind.ABORT_HANG and s.ranks == (4,)
    assert "ncclCommDestroy" in s.summary and "commFree" in s.summary and "pthread_clockjoin" in s.summary
    # the main thread (in the destroy) speaks for the process, not NCCL's proxy service thread
    assert d.threads[primary_thread(d.threads)].thread_id == 8790
    assert _place(d).kind == "outside" and "in wait" not in _place(d).describe()


def test_a_destroy_caught_mid_work_is_only_a_warning(tmp_path):
    """One snapshot inside ncclCommDestroy that is not waiting (freeing memory at exit) is no hang."""
    text = (STACKS / "gdb_destroy_join.txt").read_text()
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if "(LWP 8790)" in ln)
    keep = lines[:start + 1] + ["#0  0x00007f2c3e4a5e10 in free () from /lib/x86_64-linux-gnu/libc.so.6"] + [
        ln for ln in lines[start + 1:] if "commFree" in ln or "commReclaim" in ln or "ncclCommDestroy" in ln
        or "NCCLComm" in ln or "ProcessGroupNCCL" in ln or "EvalFrame" in ln]
    p = tmp_path / "rank-2.gdb.txt"
    p.write_text("\n".join(keep) + "\n")
    rep, _ = stack_text.load([str(p)])
    assert not _suspects(rep)
    (w,) = [f for f in rep.findings if f.kind is Kind.ABORT_HANG]
    assert w.severity is Severity.WARNING and "not waiting" in w.summary


def test_cuda_check_failure_in_the_watchdog_is_a_cuda_error():
    rep, (d,) = _load("watchdog_cuda_check.txt")
    (s,) = _suspects(rep)
    assert s.kind is Kind.CUDA_ERROR and s.ranks == (2,)
    assert "c10_cuda_check_implementation" in s.summary and "finishedGPUExecutionInternal" in s.summary
    assert "Xid" in s.action
    assert d.rank == 2 and d.rank_source == "prefix"
    assert "in wait" not in _place(d).describe()


def test_c10_fatal_signal_handler_is_a_crash(tmp_path):
    rep, (d,) = _load("c10_signal_handler.txt", tmp_path, "rank3.txt")
    (s,) = _suspects(rep)
    assert s.kind is Kind.CRASH and s.summary == "rank 3 crashed with SIGSEGV in at::native::index_select_out_cpu_" and s.ranks == (3,)
    assert s.evidence[0].line == 1 and "SIGSEGV(11), PID: 40211" in s.evidence[0].text
    assert {t.thread_id for t in d.threads} == {40211, 40233}
    assert not any(f.kind is Kind.CPP_EXCEPTION for f in rep.findings)  # a signal dump is no C++ exception
    # the thread that ran fatalSignalHandler took the signal; the others only printed on SIGUSR2
    assert d.threads[0].thread_id == 40211 and d.threads[0].status == "active"


def test_ucx_caught_signal_is_a_crash_with_rank_host_and_site():
    rep, _ = _load("ucx_bus_error.txt")
    crashes = [f for f in rep.findings if f.kind is Kind.CRASH]
    assert len(crashes) == 2 and all(f.severity is Severity.SUSPECT for f in crashes)
    bus, segv = crashes
    assert bus.ranks == (3,) and bus.hosts == ("node7",)  # rank from mpirun's [1,3] prefix
    assert "SIGBUS" in bus.summary and "nonexistent physical address" in bus.summary and bus.summary.endswith("in ncclShmOpen")
    assert "/dev/shm" in bus.action
    assert segv.ranks == () and segv.hosts == ("node8",) and segv.summary.startswith("process 2201 on node8 crashed with SIGSEGV")


def test_pybt_frame_lines_are_python_frames():
    blocks, skipped, _ = parse_stacks(iter_lines(str(STACKS / "pybt_frames.txt")))
    assert skipped == 0 and sniff((STACKS / "pybt_frames.txt").read_bytes())
    (b,) = blocks
    assert b.thread_id == 3301
    assert [(f.function, Path(f.file).name, f.line, f.native) for f in b.frames] == [
        ("wait", "threading.py", 295, False), ("get", "queue.py", 164, False),
        ("main", "train.py", 40, False), ("<module>", "train.py", 52, False)]


def test_numbered_from_frames_are_python_frames_and_find_the_collective():
    assert sniff((STACKS / "numbered_frames.txt").read_bytes())
    _rep, (d,) = _load("numbered_frames.txt")
    (t,) = d.threads
    assert [f.function for f in t.frames][:3] == ["all_reduce", "wrapper", "reduce_grads"]
    assert not any(f.native for f in t.frames)
    p = _place(d)
    assert (p.kind, p.collective, p.call_site.function) == ("collective", "all_reduce", "reduce_grads")


def test_cut_numbered_frame_is_skipped_not_a_native_frame(tmp_path):
    p = tmp_path / "cut.txt"
    p.write_text((STACKS / "numbered_frames.txt").read_text() + "#5 _boots")
    blocks, skipped, _ = parse_stacks(iter_lines(str(p)))
    assert skipped == 1 and [f.function for f in blocks[0].frames][-1] == "<module>"


def test_failed_communicator_creation():
    rep, (d,) = _load("cpp_comm_init.txt")
    s = next(f for f in _suspects(rep))
    assert s.kind is Kind.COMM_INIT_FAILED and s.ranks == (5,)
    assert "for allreduce" in s.summary and "getNCCLComm -> ProcessGroupNCCL::broadcastUniqueNCCLID" in s.summary
    assert "MASTER_ADDR" in s.action
    assert _place(d).kind == "init"


def test_spinning_in_libcuda_under_a_cuda_call_with_wrapped_from_lines():
    rep, (d,) = _load("gdb_cuda_spin.txt")
    (w,) = [f for f in rep.findings if f.kind is Kind.CUDA_STUCK]
    assert w.severity is Severity.WARNING and "cudaStreamSynchronize" in w.summary and "Xid" in w.action
    assert not _suspects(rep)  # the GPU not progressing is a symptom: no cause is claimed
    frames = d.threads[0].frames
    assert frames[4].file.endswith("libcudart.so.12") and frames[5].function == "cudaStreamSynchronize"


def test_pstack_the_proxy_thread_never_speaks_for_the_process():
    _rep, (d,) = _load("pstack_proxy_first.txt")
    main = d.threads[primary_thread(d.threads)]
    assert main.thread_id == 7700  # not 7702 (NCCL's persistentThread in sched_yield), printed first
    assert _place(d).collective == "broadcast"  # ncclBroadcast names the op, not "wait"


def test_watchdog_checktimeout_trace_is_a_timeout_warning_and_a_timed_out_collective():
    frames = (Frame("c10::Error::Error", "libc10.so", None, native=True),
              Frame("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<long>)", "libtorch_cuda.so", None, native=True),
              Frame("c10d::ProcessGroupNCCL::watchdogHandler()", "libtorch_cuda.so", None, native=True),
              Frame("c10d::ProcessGroupNCCL::ncclCommWatchdog()", "libtorch_cuda.so", None, native=True))
    t = Thread(1, None, "active", frames)
    c = native_cause(t, thrown=True)
    assert c is not None and c.kind is Kind.WATCHDOG_TIMEOUT and c.severity is Severity.WARNING
    assert place_of(t).kind == "collective" and place_of(t).collective != "wait"
    # a live watchdog thread polling its work is the library's: it does not tell where the process is
    live = Thread(2, None, "idle", (Frame("__lll_lock_wait", "", None, native=True),
                                    Frame("c10d::ProcessGroupNCCL::checkForNCCLErrorsInternal()", "", None, native=True)) + frames[2:])
    assert native_cause(live) is None and place_of(live).kind == "unknown"
    cuda_evt = Thread(3, "cuda-EvtHandlr", "idle", (Frame("__GI___poll", "poll.c", 29, native=True),
                                                    Frame("??", "/usr/lib/libcuda.so.1", None, native=True)))
    assert place_of(cuda_evt).kind == "unknown"


def test_only_library_threads_blame_nobody(tmp_path):
    p = tmp_path / "rank-0.txt"  # NCCL's proxy and CUDA's polling thread; the main thread was not printed
    p.write_text("".join(ln + "\n" for ln in (STACKS / "pstack_proxy_first.txt").read_text().splitlines()[:7]))
    rep, (d,) = stack_text.load([str(p)])
    assert len(d.threads) == 2 and _place(d).kind == "unknown" and not _suspects(rep)


def test_no_cause_without_the_patterns():
    t = Thread(1, None, "idle", (Frame("epoll_wait", "", None, native=True), Frame("main", "a.c", 3, native=True)))
    assert native_cause(t) is None and native_cause(t, thrown=True) is None


def test_garbage_lines_never_raise(tmp_path):
    p = tmp_path / "junk.txt"
    p.write_text("\n".join([
        "[" + "a" * 65536 + ":1 :0:2] Caught signal 7 (Bus error",
        "SIGABRT(6), PID: " + "9" * 5000 + ", Thread 1:",
        "#4 Frame 0x" + "f" * 70000 + ", for file x.py, line 1, in f",
        "==== backtrace (tid: 12) ====",
        " 0 0x" + "0" * 40000,
        "#1 f from " + "/" * 65536 + ".py:3",
    ]))
    rep, _ = stack_text.load([str(p)])
    assert rep.lines_read == 6


def test_report_on_a_dir_with_an_lldb_abort_hang(tmp_path, capsys):
    from hangdbg.cli.main import main

    (tmp_path / "rank-0.lldb.txt").write_text((STACKS / "lldb_attach_abort.txt").read_text())
    rc = main(["report", str(tmp_path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 3
    sus = [f for f in doc["findings"] if f["severity"] == "suspect"]
    assert [f["kind"] for f in sus] == ["abort-hang"] and sus[0]["ranks"] == [0]
    assert "SIGSTOP" not in doc["headline"] and "abort" in doc["headline"]


def test_a_gdb_backtrace_at_address_0_is_a_crash_in_its_caller(tmp_path):
    """``#0 0x0000000000000000 in ?? ()``: the thread called through a NULL function pointer and faulted; frame
    #1 (a net plugin's init here) is where, and a live hang it is not."""
    p = tmp_path / "bt.txt"
    p.write_text("#0  0x0000000000000000 in ?? ()\n"
                 "#1  0x00007fefc64b890f in nccl_p2p_ib_init (num_devs=0x7fefc64cca38) at p2p_plugin.c:315\n"
                 "#2  0x00007ff2369daf80 in ncclNet_v6_as_v7_init (logfn=<optimized out>) at net.cc:54\n"
                 "#3  0x00007ff2369c661c in ncclAsyncJobMain (arg=0x557d0e341290) at group.cc:62\n")
    rep, _ = stack_text.load([str(p)])
    [crash] = [f for f in _suspects(rep) if f.kind is Kind.CRASH]
    assert "SIGSEGV" in crash.summary and "NULL function pointer" in crash.summary
    assert "nccl_p2p_ib_init" in crash.summary


def test_a_gdb_frame_0_at_a_real_address_is_no_crash(tmp_path):
    p = tmp_path / "bt.txt"
    p.write_text("#0  0x00007ff2364d7ac3 in __futex_abstimed_wait_common () from /lib/libc.so.6\n"
                 "#1  0x00007ff2369c661c in ncclAsyncJobMain (arg=0x557d0e341290) at group.cc:62\n")
    rep, _ = stack_text.load([str(p)])
    assert not any(f.kind is Kind.CRASH for f in rep.findings)


def test_a_native_thread_outside_torch_is_placed_at_its_own_frame_not_a_system_wait(tmp_path):
    """A gdb thread spinning in sched_yield under std::this_thread::yield under the framework's wait: the place
    names the framework's function (without its parameter types), where the thread waits."""
    lines = ["Thread 7 (Thread 0x7fdfd4a5e700 (LWP 144799)):",
             "#0  0x00007fe08975c8e7 in sched_yield () at ../sysdeps/unix/syscall-template.S:84",
             "#1  0x00007fdf6a03554d in __gthread_yield () at /usr/include/x86_64-linux-gnu/c++/5/bits/gthr-default.h:692",
             "#2  std::this_thread::yield () at /usr/include/c++/5/thread:270",
             "#3  horovod::common::GPUContext::WaitForEvents(std::queue<std::pair<std::string, CUevent_st*> >&) "
             "(this=0x1) at horovod/common/ops/cuda_operations.cc:106",
             "#4  0x00007fdf6a0399d4 in horovod::common::RunLoopOnce () at horovod/common/operations.cc:600"]
    for n, want in ((len(lines), "horovod::common::GPUContext::WaitForEvents"), (3, "sched_yield")):
        f = tmp_path / f"bt{n}.txt"
        f.write_text("\n".join(lines[:n]) + "\n")
        _rep, (d,) = stack_text.load([str(f)])
        assert _place(d).call_site.function == want  # only system frames: the innermost one is all there is
    # the one rank these stacks show, blocked: undecided (what to collect), naming it only as a warning
    from hangdbg.stacks.analysis import analyze
    a = analyze([d], live=False)
    (u,) = a.findings
    assert u.kind is Kind.UNDECIDED and u.severity is Severity.WARNING and "only rank these stacks show" in u.summary
    assert "--samples" in u.action
