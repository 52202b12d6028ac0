"""The vocabulary of blocked states (hangdbg.stacks.blockers) on hand-built stacks, with py-spy's class-qualified
names of CPython 3.11+ and the bare names of older versions, and the /proc facts (hand-built ProcFacts) that
name a socket's peer, a D state, a lock's holder, a child, a full pipe."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from hangdbg.enums import ThreadStatus
from hangdbg.frames import Frame, bare_name
from hangdbg.model import RankDump, Thread
from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.places import lock_wait
from hangdbg.waits import LockFact, OpenFile, ProcessRef, ProcFacts, TaskState, WaitKind
from hangdbg.collect.needs import needs
from hangdbg.collect.proc_facts import parse_locks

LIB = "/usr/lib/python3.11"
DIST = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
TRAIN = "/w/train.py"


def py(*frames: tuple[str, str, int]) -> tuple[Frame, ...]:
    return tuple(Frame(fn, file, line) for fn, file, line in frames)


def qualified(frames: tuple[Frame, ...], bare: bool) -> tuple[Frame, ...]:
    """The frames as py-spy prints them before 3.11 (``bare``: ``co_name``) or from 3.11 (``co_qualname``)."""
    return tuple(replace(f, function=bare_name(f.function)) for f in frames) if bare else frames


def job(blocked: tuple[Frame, ...], *, threads: tuple[Thread, ...] = (), proc: ProcFacts | None = None,
        tid: int = 101) -> list[RankDump]:
    """Ranks 0 and 2 in all_reduce; rank 1 (pid 100, main thread ``tid``) idle in ``blocked``."""
    waiting = py(("all_reduce", DIST, 2806), ("step", TRAIN, 40), ("<module>", TRAIN, 90))
    out = []
    for rank in range(3):
        frames = blocked if rank == 1 else waiting
        main = Thread(tid if rank == 1 else 200 + rank, "MainThread", ThreadStatus.IDLE, frames)
        ts = (main, *threads) if rank == 1 else (main,)
        out.append(RankDump(rank, pid=100 + rank, world_size=3, threads=ts, samples=(ts,),
                            proc=proc if rank == 1 else None))
    return out


def culprit(dumps: list[RankDump]) -> tuple[str, dict]:
    a = analyze(dumps)
    found = [f for f in a.findings if f.is_suspect]
    assert [f.ranks for f in found] == [(1,)]
    return found[0].summary, {"wait": a.waits[1], "action": found[0].action}


@pytest.mark.parametrize("bare", [False, True], ids=["3.11+ qualified", "bare"])
def test_pdb_prompt_is_named_at_the_debugged_line(bare):
    stack = qualified(py(("Cmd.cmdloop", f"{LIB}/cmd.py", 126), ("Pdb._cmdloop", f"{LIB}/pdb.py", 352),
                         ("Pdb.interaction", f"{LIB}/pdb.py", 435), ("Pdb.user_line", f"{LIB}/pdb.py", 279),
                         ("Bdb.dispatch_line", f"{LIB}/bdb.py", 90), ("Bdb.trace_dispatch", f"{LIB}/bdb.py", 67),
                         ("step", TRAIN, 41), ("<module>", TRAIN, 90)), bare)
    summary, got = culprit(job(stack))
    assert summary.startswith("sits in pdb at w/train.py:41 in step(), waiting on stdin, in no collective; "
                              "ranks {0, 2} wait for it in all_reduce")
    assert got["wait"].blocker == "debugger" and "`q`" in got["action"]


def test_ipdb_is_named_and_a_program_run_under_pdb_is_not_in_the_debugger():
    ipdb = py(("TerminalPdb.cmdloop", "/site-packages/IPython/terminal/debugger.py", 120),
              ("TerminalPdb.interaction", "/site-packages/IPython/core/debugger.py", 300),
              ("set_trace", "/site-packages/ipdb/__main__.py", 77), ("step", TRAIN, 41))
    assert culprit(job(ipdb))[0].startswith("sits in ipdb at w/train.py:41")
    under_pdb = py(("read_shard", TRAIN, 12), ("<module>", TRAIN, 90), ("Bdb.run", f"{LIB}/bdb.py", 597),
                   ("Pdb._run", f"{LIB}/pdb.py", 1730), ("main", f"{LIB}/pdb.py", 1880))
    _summary, got = culprit(job(under_pdb))
    assert got["wait"].blocker != "debugger"


@pytest.mark.parametrize("bare", [False, True], ids=["3.11+ qualified", "bare"])
def test_popen_communicate_is_a_child_process_wait(bare):
    stack = qualified(py(("PollSelector.select", f"{LIB}/selectors.py", 415),
                         ("Popen._communicate", f"{LIB}/subprocess.py", 2115),
                         ("Popen.communicate", f"{LIB}/subprocess.py", 1209), ("run", f"{LIB}/subprocess.py", 550),
                         ("convert", TRAIN, 30), ("<module>", TRAIN, 90)), bare)
    summary, got = culprit(job(stack))
    assert summary.startswith("waits for its child process at w/train.py:30 in convert()")
    assert got["wait"].blocker == "child process"
    kids = ProcFacts(tasks=(TaskState(101, "S", "do_select", "poll"),), children=(ProcessRef(4242, "ffmpeg -i x"),))
    summary, _ = culprit(job(stack, proc=kids))
    assert summary.startswith("waits for its child process pid 4242 (`ffmpeg -i x`) at w/train.py:30")


def test_wait4_names_the_child_it_waits_for():
    stack = py(("Popen._try_wait", f"{LIB}/subprocess.py", 1959), ("Popen._wait", f"{LIB}/subprocess.py", 2017),
               ("Popen.wait", f"{LIB}/subprocess.py", 1264), ("step", TRAIN, 50))
    facts = ProcFacts(tasks=(TaskState(101, "S", "do_wait", "wait4", arg=7),),
                      children=(ProcessRef(6, "sleep 1"), ProcessRef(7, "tar cf x")))
    summary, _ = culprit(job(stack, proc=facts))
    assert "waits for its child process pid 7 (`tar cf x`)" in summary and "pid 6" not in summary


@pytest.mark.parametrize("bare", [False, True], ids=["3.11+ qualified", "bare"])
def test_queue_get_is_a_queue_wait_not_a_lock(bare):
    stack = qualified(py(("Condition.wait", f"{LIB}/threading.py", 327), ("Queue.get", f"{LIB}/queue.py", 171),
                         ("next_item", TRAIN, 20), ("<module>", TRAIN, 90)), bare)
    _summary, got = culprit(job(stack))
    assert got["wait"].kind is WaitKind.BLOCKED
    assert got["wait"].detail == "waiting on a queue another thread or process fills"


@pytest.mark.parametrize("bare", [False, True], ids=["3.11+ qualified", "bare"])
def test_event_wait_whose_setter_is_gone(bare):
    stack = qualified(py(("Condition.wait", f"{LIB}/threading.py", 327), ("Event.wait", f"{LIB}/threading.py", 629),
                         ("wait_loaded", TRAIN, 60), ("<module>", TRAIN, 90)), bare)
    main = Thread(101, "MainThread", ThreadStatus.IDLE, stack)
    assert not lock_wait(main)  # Condition.wait acquires its waiter lock: a wait for notify, not for a mutex
    summary, got = culprit(job(stack))
    assert summary.startswith("waits on a threading.Event at w/train.py:60 in wait_loaded(), no thread can set it")
    assert got["wait"].blocker == "event"
    other = Thread(102, "loader", ThreadStatus.IDLE, py(("load", TRAIN, 70), ("Thread.run", f"{LIB}/threading.py", 982)))
    summary, _ = culprit(job(stack, threads=(other,)))
    assert "another thread must set it (loader alive)" in summary


def test_condition_wait_alone_is_a_condition_and_two_waiting_threads_are_no_deadlock():
    stack = py(("Condition.wait", f"{LIB}/threading.py", 327), ("consume", TRAIN, 80))
    other = Thread(102, "producer", ThreadStatus.IDLE, stack)
    a = analyze(job(stack, threads=(other,)))
    assert not [f for f in a.findings if f.kind.value == "deadlock"]
    assert a.waits[1].detail == "waits on a threading.Condition"


def test_socket_read_names_its_peer():
    stack = py(("SocketIO.readinto", f"{LIB}/socket.py", 706), ("fetch", TRAIN, 33), ("<module>", TRAIN, 90))
    facts = ProcFacts(tasks=(TaskState(101, "S", "wait_woken", "recvfrom", fd=5),),
                      files=(OpenFile(5, "socket:[991]", True, local="10.0.0.1:41234", remote="10.0.0.7:8080",
                                      status="ESTABLISHED"),))
    summary, got = culprit(job(stack, proc=facts))
    assert summary.startswith("blocked reading a socket from 10.0.0.7:8080 (local 10.0.0.1:41234, ESTABLISHED) "
                              "at w/train.py:33 in fetch()")
    assert got["wait"].blocker == "socket" and "proc" in got["wait"].evidence
    assert culprit(job(stack))[1]["wait"].blocker == "socket"  # a saved dump: the stack alone


def test_d_state_of_the_thread_and_of_the_process():
    stack = py(("read_shard", TRAIN, 12), ("<module>", TRAIN, 90))
    facts = ProcFacts(tasks=(TaskState(101, "D", "nfs_wait_bit_killable", "read", fd=7),))
    summary, got = culprit(job(stack, proc=facts))
    assert summary.startswith("in uninterruptible sleep (D state) in the kernel's nfs_wait_bit_killable at "
                              "w/train.py:12")
    assert got["wait"].blocker == "D state" and "dmesg" in got["action"]
    unmapped = ProcFacts(tasks=(TaskState(5, "S"), TaskState(6, "D", "io_schedule")))
    summary, _ = culprit(job(stack, proc=unmapped, tid=0x7F00DEAD))
    assert summary.startswith("in uninterruptible sleep (D state) in the kernel's io_schedule (threads 6)")


def test_full_pipe_names_its_reader():
    stack = py(("log", TRAIN, 15), ("<module>", TRAIN, 90))
    pipe = OpenFile(1, "pipe:[55]", True, 65000, 65536, (ProcessRef(77, "tee out.log"),))
    facts = ProcFacts(tasks=(TaskState(101, "S", "pipe_write", "write", fd=1),), files=(pipe,))
    summary, got = culprit(job(stack, proc=facts))
    assert summary.startswith("blocked writing to its stdout, a full pipe (pipe:[55], 65000 of 65536 bytes unread) "
                              "at w/train.py:15 in log(), its read end is held by pid 77 (`tee out.log`), which "
                              "does not read it")
    assert got["wait"].blocker == "output"


LOCKING = py(("BaseFileLock.acquire", "/site-packages/filelock/_api.py", 344), ("save", TRAIN, 25))


def test_filelock_polling_asks_for_locals_then_names_a_stale_lock_file():
    a = analyze(job(LOCKING))
    assert a.waits[1].blocker == "file lock" and 1 in needs(a).locals
    with_path = (replace(LOCKING[0], locals=(("self", "<filelock.SoftFileLock>"), ("lock_filename", "'/ckpt/x.lock'"))),
                 LOCKING[1])
    a = analyze(job(with_path))
    assert "on /ckpt/x.lock" in a.waits[1].detail and 1 not in needs(a).locals
    stale = ProcFacts(locks=(LockFact("/ckpt/x.lock", "fe:00:12"),))
    summary, _ = culprit(job(with_path, proc=stale))
    assert ("waits for a file lock (filelock, polling) on /ckpt/x.lock at w/train.py:25 in save(), a stale lock "
            "file: it exists, no process holds a lock on it or has it open") in summary


def test_flock_held_by_a_live_process_is_not_stale():
    stack = py(("take", TRAIN, 8),)
    held = LockFact("/tmp/a.lock", "fe:00:3", "FLOCK", True, (ProcessRef(9, "python other.py"),))
    facts = ProcFacts(tasks=(TaskState(101, "S", "locks_lock_inode_wait", "flock", fd=4),),
                      files=(OpenFile(4, "/tmp/a.lock"),), locks=(held,))
    summary, _ = culprit(job(stack, proc=facts))
    assert "waits for a file lock (flock) on /tmp/a.lock at w/train.py:8 in take(), held by pid 9" in summary
    assert "stale" not in summary


def test_proc_locks_lines_parse():
    text = ("1: FLOCK  ADVISORY  WRITE 27786 fe:00:2146919 0 EOF\n"
            "1: -> FLOCK  ADVISORY  WRITE 27807 fe:00:2146919 0 EOF\n"
            "2: POSIX  ADVISORY  READ 1 08:01:7 128 128\n3: OFDLCK ADVISORY  WRITE -1 00:1a:9 0 EOF\nnot a lock\n")
    assert parse_locks(text) == [(False, "FLOCK", 27786, "fe:00:2146919"), (True, "FLOCK", 27807, "fe:00:2146919"),
                                 (False, "POSIX", 1, "08:01:7"), (False, "OFDLCK", -1, "00:1a:9")]


def test_facts_travel_in_the_class_messages():
    """A node agent's class message carries a rank's /proc facts (the generic codec of transport/classes.py)."""
    from hangdbg.transport.classes import ClassMerger, encode_classes

    facts = ProcFacts((TaskState(1, "D", "x", "write", 1),), (OpenFile(1, "pipe:[2]", True, 3, 4, (ProcessRef(5),)),),
                      (LockFact("/a", "fe:00:1", "FLOCK", True, (ProcessRef(6, "", False),), (ProcessRef(7, "s"),)),),
                      (ProcessRef(8, "sleep 1"),), "")
    thread = Thread(501, "MainThread", ThreadStatus.IDLE, py(("log", TRAIN, 15)))
    dump = RankDump(1, pid=501, host="node1", threads=(thread,), samples=((thread,),), proc=facts)
    merger = ClassMerger()
    got = [d for msg in encode_classes([dump, RankDump(0, pid=500, host="node1")]) for d in merger.add(msg)]
    assert {d.rank: d.proc for d in got} == {0: None, 1: facts}


def _rank_text(rank: int, frames: list[str]) -> str:
    pid = 500 + rank
    return (f"# hangdbg rank={rank} pid={pid} host=node1 local_rank={rank} world_size=2 local_world_size=2 "
            f"rank_source=RANK sample=1\nProcess {pid}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            f'Thread {pid} (idle): "MainThread"\n' + "".join(f"    {f}\n" for f in frames))


def test_fanout_carries_the_facts_of_a_node_agent(tmp_path):
    """The agent's class messages carry each rank's ``proc``; the coordinator's dumps have them."""
    from hangdbg.collect.agent import send_classes
    from hangdbg.collect.fanout import fan_out
    from hangdbg.outdir import OutDir
    from hangdbg.stacks.saved import load_dump_texts
    from hangdbg.transport.runners import FakeRunner
    from hangdbg.transport.wire import WIRE_VERSION, encode_message

    pipe = OpenFile(1, "pipe:[9]", True, 65500, 65536, (ProcessRef(3, "tee log"),))
    facts = ProcFacts(tasks=(TaskState(501, "S", "pipe_write", "write", fd=1),), files=(pipe,))
    texts = [(f"rank-{r:04d}.txt", t) for r, t in
             ((0, _rank_text(0, [f"all_reduce ({DIST}:2806)", f"step ({TRAIN}:40)"])),
              (1, _rank_text(1, [f"log ({TRAIN}:15)", f"<module> ({TRAIN}:90)"])))]
    dumps = [replace(d, proc=facts) if d.rank == 1 else d for d in load_dump_texts(texts)[0]]
    lines: list[str] = []

    def send(message: dict) -> None:
        lines.extend(encode_message("node1", len(lines) + 1, message))

    send({"type": "hello", "host": "node1", "pid": 1, "version": "t", "schema_version": 4, "wire": WIRE_VERSION})
    send_classes("node1", dumps, send)
    send({"type": "done", "host": "node1", "status": "ok", "error": None, "ranks": [0, 1], "seconds": 0.1})
    result = fan_out(FakeRunner({"all": lines}), ["node1"], ["agent"], OutDir(tmp_path), timeout=10)
    assert {d.rank: d.proc for d in result.dumps} == {0: None, 1: facts}
    found = [f for f in analyze(result.dumps, whole_job=True).findings if f.is_suspect]
    assert [f.ranks for f in found] == [(1,)]
    assert "blocked writing to its stdout, a full pipe (pipe:[9]" in found[0].summary


def test_a_lone_rank_in_an_event_nobody_can_set_is_the_suspect_and_one_others_can_set_a_warning():
    """Saved dumps of one rank (the job's size unknown): a dead setter is a cause, a live one may be the job's work."""
    stack = py(("Condition.wait", f"{LIB}/threading.py", 327), ("Event.wait", f"{LIB}/threading.py", 629),
               ("wait_loaded", TRAIN, 60))
    lone = RankDump(0, pid=9, threads=(Thread(9, "MainThread", ThreadStatus.IDLE, stack),))
    lone = replace(lone, samples=(lone.threads,))
    found = analyze([lone]).findings
    assert [(f.severity.value, f.ranks) for f in found] == [("suspect", (0,))]
    other = Thread(10, "loader", ThreadStatus.IDLE, py(("load", TRAIN, 70),))
    alive = replace(lone, threads=(*lone.threads, other), samples=((*lone.threads, other),))
    assert [f.severity.value for f in analyze([alive]).findings] == ["warning"]


def test_a_read_under_a_print_is_not_called_output():
    stack = py(("ask", TRAIN, 5),)  # print(input()) -- the source is not readable here: a native write frame says it
    native = Frame("_Py_write", "libpython3.11.so", native=True)
    facts = ProcFacts(tasks=(TaskState(101, "S", "pipe_read", "read", fd=0),), files=(OpenFile(0, "/dev/pts/1"),))
    assert culprit(job((native, *stack)))[1]["wait"].blocker == "output"  # the stack alone
    summary, got = culprit(job((native, *stack), proc=facts))
    assert summary.startswith("blocked reading its stdin (/dev/pts/1)") and got["wait"].blocker == ""
