"""The error catalog (hangdbg/catalog): its data, its patterns, and one generated test per entry.

Each entry's line is built from its own upstream format string (``sample``: ``%d`` -> 3, ``%s`` -> text)
or, for a regex entry, taken from its example, put behind the prefixes its program writes (a NCCL
header, a rank prefix, an exception class), and must be read back as that entry (or as an entry at
least as specific whose pattern also matches it: two upstream messages may share a format).
"""

from __future__ import annotations

import re

import pytest

from hangdbg.catalog.catalog import CatalogError, load, parse_entries
from hangdbg.catalog.entry import Blame, Role, Syntax
from hangdbg.catalog.message import looks_like_error, parse_line
from hangdbg.catalog.pattern import FormatError, compile_format, literal_length, sample

CATALOG = load()
SOURCE = re.compile(r"^(?:[\w.-]+/[\w.-]+ [\w.+-]+ [\w./+-]+:\d+(?:-\d+)?|https://\S+)$")
PREFIXES = {
    "nccl": "node7:1234:1240 [3] src/init.cc:904 NCCL WARN ",
    "pytorch": "[rank3]:[E1126 00:32:28.123456 472 ProcessGroupNCCL.cpp:632] ",
    "cuda": "[default3]:RuntimeError: CUDA error: ",
    "system": "Nov 26 00:32:07 node7 kernel: ",
    "frameworks": "[2026-11-26 00:32:07,123] [ERROR] ",
}


def _line(e) -> str:
    body = e.example or sample(e.format, e.syntax)
    prefix = PREFIXES.get(e.domain, "")
    if e.domain == "system" and not e.id.startswith(("system.oom-killer", "system.kernel")):
        prefix = ""
    return prefix + body


def test_catalog_is_large_and_every_entry_cites_its_source():
    assert len(CATALOG) >= 300
    bad = [e.id for e in CATALOG.entries if not SOURCE.match(e.source)]
    assert not bad, f"entries without an upstream source: {bad[:10]}"
    assert {e.domain for e in CATALOG.entries} >= {"nccl", "pytorch", "cuda", "system", "frameworks"}


def test_every_root_suspect_has_an_action():
    assert not [e.id for e in CATALOG.entries if e.severity != "info" and not e.action.strip()]


@pytest.mark.parametrize("entry_id", [e.id for e in CATALOG.entries])
def test_entry_reads_back_from_a_line_built_from_its_format(entry_id):
    e = CATALOG.get(entry_id)
    line = _line(e)
    msg = parse_line(line)
    # as the error-lines grammar reads it: by the code printed with it (Ascend CANN's EI0006: ...), the message,
    # else the exception class with it (an entry for the class)
    m = CATALOG.match_code(msg.src, msg.text) or CATALOG.match(msg.text) or (
        CATALOG.match(f"{msg.exception}: {msg.text}") if msg.exception else None)
    assert m is not None, f"{line!r} -> message {msg.text!r} matched nothing"
    if e not in m.chain:
        winner = m.entry
        assert winner.literal >= e.literal and e.pattern.match(msg.text), \
            f"{line!r} read as {winner.id} ({winner.format!r}), not {e.id}"


def test_a_cuda_error_inside_pytorchs_wrapper_is_read_as_the_cuda_error():
    m = CATALOG.match(parse_line("[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered").text)
    assert m is not None and m.innermost.domain == "cuda" and m.innermost.blame is Blame.SELF


def test_duplicate_gpu_blames_the_launch():
    line = "[2026-11-26 00:32:07] vm:626:626 [0] init.cc:904 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60"
    msg = parse_line(line)
    assert (msg.host, msg.pid, msg.dev) == ("vm", 626, 0) and msg.time is not None
    m = CATALOG.match(msg.text)
    assert m is not None and m.innermost.blame is Blame.LAUNCH and m.innermost.role is Role.ROOT


# ---- patterns ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,syntax,line,ok", [
    ("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx", Syntax.PRINTF,
     "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60", True),
    ("Cuda failure '%s'", Syntax.PRINTF, "Cuda failure 'out of memory'", True),
    ("Call to %s failed : %s", Syntax.PRINTF, "Call to ibv_reg_mr failed : Cannot allocate memory", True),
    ("%-8s took %.2f s", Syntax.PRINTF, "alpha    took 1.25 s", True),
    ("DataLoader worker (pid {}) is killed by signal: {}", Syntax.PYTHON,
     "DataLoader worker (pid 123) is killed by signal: Killed.", True),
    ("literal {{braces}} and {x!r}", Syntax.PYTHON, "literal {braces} and 'y'", True),
    ("an illegal memory access was encountered", Syntax.LITERAL, "an  illegal memory access was encountered", True),
    ("rank %d failed", Syntax.PRINTF, "rank x failed", False),
    ("rank %d failed", Syntax.PRINTF, "the rank 3 failed", False),  # anchored at the start
])
def test_compile_format(fmt, syntax, line, ok):
    assert (compile_format(fmt, syntax).match(line) is not None) is ok


def test_patterns_are_bounded():
    p = compile_format("a %s b %s c", Syntax.PRINTF)
    assert p.match("a " + "x" * 10_000 + " b y c") is None  # a field is at most MAX_FIELD characters


@pytest.mark.parametrize("fmt,syntax", [("50%% done %", Syntax.PRINTF), ("open { brace", Syntax.PYTHON), ("(", Syntax.REGEX)])
def test_malformed_formats_raise(fmt, syntax):
    with pytest.raises(FormatError):
        compile_format(fmt, syntax)


def test_literal_length_counts_text_not_placeholders():
    assert literal_length("rank %d of %d", Syntax.PRINTF) == len("rankof")
    assert sample("rank %d on %s: %5.2f%%", Syntax.PRINTF) == "rank 3 on text: 2.50%"


def test_parse_entries_rejects_bad_entries():
    good = dict(id="x.y", syntax="literal", format="a message long enough", source="https://example.org/x",
                meaning="m", blame="self", role="root", severity="suspect", action="a")
    assert len(parse_entries({"entry": [good]}, "t")) == 1
    for bad in ({"blame": "nobody"}, {"id": "NoDomain"}, {"format": "short"}, {"severity": "fatal"},
                {"syntax": "regex", "format": "x{3}yyyyyyyyyyyy"}):
        with pytest.raises(CatalogError):
            parse_entries({"entry": [dict(good, **bad)]}, "t")
    with pytest.raises(CatalogError):
        parse_entries({"entry": [{k: v for k, v in good.items() if k != "source"}]}, "t")


# ---- line prefixes ----------------------------------------------------------------------------

@pytest.mark.parametrize("line,text,rank,host", [
    ("[rank3]:[E1126 00:32:28.123456 472 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) "
     "Rank 3] Watchdog caught collective operation timeout", "Watchdog caught collective operation timeout", 3, None),
    ("(train pid=2657296) 2024-05-11 14:10:52.227 n176:2657296:2658232 [0] include/alloc.h:102 NCCL WARN Cuda failure 1 'invalid argument'",
     "Cuda failure 1 'invalid argument'", None, "n176"),
    ("[1,5]<stderr>:torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error",
     "NCCL error in: x.cpp:1, unhandled system error", 5, None),
    ("> ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0",
     "failed (exitcode: -9) local_rank: 0", None, None),
    ("Nov 26 00:32:07 node7 kernel: NVRM: Xid (PCI:0000:09:00): 79, pid=1234", "NVRM: Xid (PCI:0000:09:00): 79, pid=1234", None, "node7"),
    ("  what():  CUDA error: misaligned address", "CUDA error: misaligned address", None, None),
])
def test_parse_line_peels_prefixes(line, text, rank, host):
    m = parse_line(line)
    assert (m.text, m.rank, m.host) == (text, rank, host)


@pytest.mark.parametrize("line,err", [
    ("vm:1:1 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin", False),
    ("UserWarning: this will fail in the future", False),
    ("vm:1:1 [0] init.cc:9 NCCL WARN something", True),
    ("RuntimeError: CUDA error: out of memory", True),
    ("epoch 3 loss 0.25", False),
    ("  rdzv_configs     : {'timeout': 900}", False),  # a timeout setting, not an event
    ("dist.init_process_group('nccl', timeout=1800)", False),
    ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000)",
     True),
    ("RuntimeError: Socket Timeout", True),
    ("RayMasterWorker CRITICAL: Ray does not have enough resources to launch workers.", True),  # a logging level
    ("the critical path of the step is the all_reduce", False),
    ("Not enough GPUs available for 8 processes", True),
])
def test_looks_like_error(line, err):
    assert looks_like_error(line) is err


@pytest.mark.parametrize("cut, entry_id, inner", [
    ("Cuda failure 999 'unknown error", "nccl.cuda-failure-driver", "cuda.unknown"),
    ("Error: failed to extend /dev/shm/nccl-AbC to 96378", "nccl.shm-extend-failed", None),
])
def test_a_line_cut_after_the_formats_head_is_read_as_far_as_it_goes(cut, entry_id, inner):
    m = CATALOG.match_cut(cut)
    assert m is not None and m.entry.id.startswith(entry_id)  # one of the versions' wordings
    assert (m.inner.entry.id if m.inner else None) == inner


def test_a_cut_line_that_leaves_the_format_is_not_read_as_it():
    assert CATALOG.match_cut("Cuda failure 999 but then something else entirely") is None or \
        CATALOG.match_cut("Cuda failure 999 but then something else entirely").entry.id != "nccl.cuda-failure-driver"
    assert CATALOG.match_cut("Cuda fail") is None  # under CUT_MIN characters


def test_compile_cut_takes_every_prefix_of_a_sample_line():
    from hangdbg.catalog.pattern import compile_cut, sample
    fmt = "NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d (%s)"
    pat = compile_cut(fmt, Syntax.PRINTF)
    line = sample(fmt, Syntax.PRINTF)
    # a cut inside the head: match_cut compares heads; a cut inside the text field right after the
    # head is no evidence (the field would take any text)
    head = len("NET/IB : Got completion from peer text ")
    assert all(pat.fullmatch(line[:i].rstrip()) for i in range(head + 1, len(line) + 1))
    assert not pat.fullmatch("NET/IB : Got completion from peer went away and never came back")
    assert compile_cut("%s: failed", Syntax.PRINTF) is None  # no literal head to anchor a cut line
    actor = compile_cut("The actor {} is unavailable: {}. The task may or may not have been executed", Syntax.PYTHON)
    assert not actor.fullmatch("The actor is dead because its node has died. Node Id: 93")


def test_a_message_up_to_a_value_the_paste_hid_is_read_even_when_its_format_starts_with_a_placeholder():
    """Ray node_manager.cc's summary starts with %d; the paste hid the node as ``(...)``."""
    from hangdbg.catalog.pattern import compile_cut
    head = "17 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node"
    m = CATALOG.match_hidden(head)
    assert m is not None and m.entry.id == "frameworks.ray.raylet-oom-summary"
    assert CATALOG.match_hidden("17 Workers were busy") is None  # under HIDDEN_MIN characters
    assert CATALOG.match_hidden("17 Workers (tasks / actors) were rescheduled after the node was drained") is None
    lead = compile_cut("%s: failed to connect to %s on port %d", Syntax.PRINTF, lead_field=True)
    assert lead.fullmatch("x: failed to connect to h1 on po")  # cut after the head (the field and its literal)
    assert not lead.fullmatch("x: failed to conn")  # a cut inside the head is no evidence


def test_an_error_line_with_a_hidden_value_is_read_by_its_visible_part(tmp_path):
    from hangdbg.evidence.error_lines.reader import READER
    p = tmp_path / "raylet.txt"
    p.write_text("(raylet) node_manager.cc:3026: 17 Workers (tasks / actors) killed due to memory pressure (OOM), "
                 "0 Workers crashed due to other reasons at node (...) over the last time period.\n")
    (f,) = [f for f in READER.read([str(p)]).findings if f.severity.value == "suspect"]
    assert "memory" in f.summary and "unrecognised" not in f.summary


def test_c10_log_prefix_with_a_three_digit_date_is_peeled():
    """c10/util/Logging.cpp writes (month * 100 + day): Sep 9 is 909, not 0909."""
    msg = parse_line("[E909 09:55:29.313379098 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 12] Exception "
                     "(either an error or timeout) detected by watchdog at work: 5")
    assert msg.text.startswith("Exception (either") and msg.rank == 12 and msg.level == "E"


@pytest.mark.parametrize("line, rank, host", [
    ("2024-05-02T10:11:12.123456789Z stderr F RuntimeError: CUDA error: an illegal memory access was encountered",
     None, None),                                                             # Kubernetes CRI log
    ("node03: [rank5]: RuntimeError: CUDA error: an illegal memory access was encountered", 5, "node03"),  # pdsh
    ("3: [rank3]: RuntimeError: CUDA error: an illegal memory access was encountered", 3, None),  # srun --label
    ("[80750] [rank2]: RuntimeError: CUDA error: an illegal memory access was encountered", 2, None),
    ("\x1b[36m(TaskRunner pid=123)\x1b[0m RuntimeError: CUDA error: an illegal memory access was encountered", None, None),
    ("#033[36m(TaskRunner pid=123)#033[0m RuntimeError: CUDA error: an illegal memory access was encountered", None, None),
    ("[36m(TaskRunner pid=123)[0m RuntimeError: CUDA error: an illegal memory access was encountered", None, None),
    ("2024-01-01 12:00:00.123 | ERROR    | trainer:step:12 - RuntimeError: CUDA error: an illegal memory access "
     "was encountered", None, None),                                          # loguru
    ("[2024-01-01 12:00:00,123][root][ERROR] - RuntimeError: CUDA error: an illegal memory access was encountered",
     None, None),                                                             # Hydra
    ("2024/01/01 12:00:00 RuntimeError: CUDA error: an illegal memory access was encountered", None, None),
    ("(RayWorkerWrapper pid=1234, ip=10.0.0.7) RuntimeError: CUDA error: an illegal memory access was encountered",
     None, "10.0.0.7"),                                                       # Ray: the node's address
    ("(VllmWorker rank=2 pid=1234) RuntimeError: CUDA error: an illegal memory access was encountered", 2, None),
    ("(Worker_TP1 pid=672838) ERROR 05-28 18:41:47 [multiproc_executor.py:962] torch.AcceleratorError: CUDA error: "
     "an illegal memory access was encountered", 1, None),                   # vLLM V1: TP only, TP rank = rank
    ("(Worker_PP1_TP0 pid=5) RuntimeError: CUDA error: an illegal memory access was encountered", None, None),
    ("(raylet) [2023-10-20 10:50:23,422 E 285 285] (raylet) node_manager.cc:3026: RuntimeError: CUDA error: an "
     "illegal memory access was encountered", None, None),                   # Ray's C++ log and RAY_LOG head
    ("[2024-01-01 00:00:00,000] [ERROR] [rank=3] RuntimeError: CUDA error: an illegal memory access was "
     "encountered", 3, None),                                                 # a program's own rank prefix
    ("[RANK 3] RuntimeError: CUDA error: an illegal memory access was encountered", 3, None),
    ("[rank 5/8] RuntimeError: CUDA error: an illegal memory access was encountered", 5, None),
    ("RANK 4: RuntimeError: CUDA error: an illegal memory access was encountered", 4, None),
    ("[2024-01-01 00:00:00.000] [error] RuntimeError: CUDA error: an illegal memory access was encountered",
     None, None),                                                             # spdlog-style lowercase level
    ("2024-01-01 00:00:00,123 - __main__ - INFO - RuntimeError: CUDA error: an illegal memory access was "
     "encountered", None, None),                                              # logging's default format, any level
    ("[ERROR] RUNTIME(2210,python3):2025-01-06-10:04:09.261.455 [api_impl.cc:4643]tid:11543,SyncGetDevMsg(4643) : "
     "RuntimeError: CUDA error: an illegal memory access was encountered", None, None),  # Ascend CANN's log line
    ("EE9999: 2024-05-21-11:57:54.167.645 RuntimeError: CUDA error: an illegal memory access was encountered",
     None, None),                                                             # Ascend CANN's error-code line
    ("MPIR_Init_thread(159).......: RuntimeError: CUDA error: an illegal memory access was encountered",
     None, None),                                                             # a level of MPICH's error stack
    ("2020-02-26 02:45:13,375 [INFO ] W-9001-model_1.0-stdout org.pytorch.serve.wlm.WorkerLifeCycle - RuntimeError: "
     "CUDA error: an illegal memory access was encountered", None, None),      # log4j (TorchServe)
    ("[gpu-node-7:24984] RuntimeError: CUDA error: an illegal memory access was encountered", None, "gpu-node-7"),  # opal_output
    ("MPICH ERROR [Rank 1534] [job id 114930.0] [Mon Feb 15 14:58:48 2021] [unknown] [nid001192] - RuntimeError: "
     "CUDA error: an illegal memory access was encountered", 1534, "nid001192"),  # HPE Cray MPICH
    ("MPICH ERROR [Rank 0] [job id ] [Thu Dec 29 08:08:13 2022] [login31] - Abort(-1) (rank 0 in comm 0): "
     "RuntimeError: CUDA error: an illegal memory access was encountered", 0, "login31"),
    ("Abort(1) on node 3 (rank 3 in comm 0): RuntimeError: CUDA error: an illegal memory access was encountered",
     3, None),                                                                # MPICH's MPID_Abort head
    ("Abort(1) (rank 7 in comm 432): RuntimeError: CUDA error: an illegal memory access was encountered",
     None, None),                                                             # a rank in another communicator
])
def test_more_prefixes_are_peeled(line, rank, host):
    msg = parse_line(line)
    assert msg.text == "CUDA error: an illegal memory access was encountered"
    assert (msg.rank, msg.host) == (rank, host)


def test_mpi_abort_names_its_rank_only_in_mpi_comm_world():
    """MPICH src/mpi/init/abort.c "application called MPI_Abort(%s, %d) - process %d": the caller's rank in that
    communicator, the global rank in MPI_COMM_WORLD (named, or its handle 0x44000000)."""
    assert parse_line("application called MPI_Abort(MPI_COMM_WORLD, 1) - process 5").rank == 5
    assert parse_line("application called MPI_Abort(comm=0x44000000, 1) - process 6").rank == 6
    assert parse_line("application called MPI_Abort(comm=0xC4000001, 1) - process 2").rank is None
    assert load().match("application called MPI_Abort(MPI_COMM_WORLD, 1) - process 5").innermost.id == \
        "system.mpich.application-called-mpi-abort"
    # Open MPI's report (ompi_mpi_abort.c): likewise only MPI_COMM_WORLD's rank is global
    assert parse_line("MPI_ABORT was invoked on rank 6 in communicator MPI_COMM_WORLD").rank == 6
    assert parse_line("MPI_ABORT was invoked on rank 472 in communicator MPI COMMUNICATOR 7 CREATE FROM 4").rank is None


def test_ascend_cann_lines_keep_their_code_time_and_pid():
    m = parse_line("EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process.")
    assert (m.src, m.text, m.clock) == ("EJ0001", "Failed to initialize the HCCP process.", 11 * 3600 + 57 * 60 + 54)
    m = parse_line("[ERROR] HCCP(2210,python3):2025-01-06-10:04:09.261.455 [ra_hdc.c:876]tid:11543,"
                   "ra_hdc_qp_create_with_attrs(876) : create qp fail, ret(-12)")
    assert (m.pid, m.level, m.src, m.text) == (2210, "ERROR", "ra_hdc.c:876", "create qp fail, ret(-12)")


def test_dmesg_x_facility_and_level_are_peeled_with_talos_node():
    m = parse_line("192.168.11.119: kern:     err: [2026-04-22T21:25:20.466440686Z]: nvidia-nvswitch1: SXid "
                   "(PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00")
    assert m.host == "192.168.11.119" and m.text.startswith("nvidia-nvswitch1: SXid")
    assert load().search(m.text).entry.id == "system.nvswitch.sxid"
    assert parse_line("kern  :err   : [  12.345] NVRM: Xid (PCI:0000:3b:00): 79, pid=1").text.startswith("NVRM: Xid")


def test_no_break_spaces_of_a_web_paste_read_as_spaces():
    m = parse_line("TypeError:\xa0EngineArgs.__init__() got an unexpected keyword argument\xa0'worker_use_ray'")
    assert (m.exception, m.text) == ("TypeError", "EngineArgs.__init__() got an unexpected keyword argument 'worker_use_ray'")


def test_a_message_that_starts_with_a_rank_keeps_it():
    assert parse_line("Rank 3 timed out waiting for its peers").text == "Rank 3 timed out waiting for its peers"


def test_a_word_before_an_exception_is_no_host():
    msg = parse_line("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert msg.host is None and msg.text.startswith("CUDA error")


@pytest.mark.parametrize("line", [
    "Socket creation failed : Address family not supported by protocol",      # no tag (an older build)
    "NET/Socket : Socket creation failed : Address family not supported",     # another release's tag
    "Net : Socket creation failed : Address family not supported by protocol",  # the 2.3-2.15 tag
])
def test_an_nccl_warn_is_read_whatever_subsystem_tag_its_release_printed(line):
    m = load().search(line)
    assert m is not None and m.entry.id == "nccl.net-socket-creation-failed"


def test_the_tagged_format_wins_over_its_untagged_reading():
    m = load().match("ncclSocketInit: Socket creation failed : Address family not supported by protocol")
    assert m is not None and m.entry.id == "nccl.ncclsocketinit-socket-creation-failed"
    assert m.entry.format.startswith("ncclSocketInit: ")


def test_an_untagged_reading_needs_enough_literal_text():
    from hangdbg.catalog.catalog import MID_LINE_LITERAL, _untagged
    short = next(e for e in load().entries if e.format == "socketProgressOpt: abort called")
    assert _untagged(short) is None and len("abort called") < MID_LINE_LITERAL
    literal = next(e for e in load().entries if e.format == "NET/Socket : No usable listening interface found")
    assert _untagged(literal).format == "No usable listening interface found"
    pytorch = next(e for e in load().entries if e.domain == "pytorch" and ": " in e.format[:30])
    assert _untagged(pytorch) is None  # only NCCL renames its tags


@pytest.mark.parametrize("line, entry_id", [
    ("cuMemCreate failed with CUDA_ERROR_OUT_OF_MEMORY", "cuda.curesult.out-of-memory"),
    ("Triton Error [CUDA]: CUDA_ERROR_ILLEGAL_ADDRESS", "cuda.curesult.illegal-address"),
    ("CUDARuntimeError: cudaErrorMemoryAllocation: out of memory", "cuda.cudaerror.memory-allocation"),
])
def test_a_cuda_error_enum_name_is_read_anywhere_in_a_line(line, entry_id):
    m = load().search(line)
    assert m is not None and m.entry.id == entry_id
    assert m.entry.severity == "suspect" and m.entry.role is Role.ROOT


def test_an_enum_name_inside_a_longer_word_is_not_read():
    assert load().search("the variable MY_CUDA_ERROR_OUT_OF_MEMORY_COUNT went up") is None


def test_driver_and_runtime_names_of_one_value_mean_the_same():
    cat = load()
    assert cat.get("cuda.curesult.illegal-address").blame is cat.get("cuda.illegal-address").blame
    assert "= 700" in cat.get("cuda.curesult.illegal-address").meaning


def test_the_shells_bare_killed_is_read_only_as_a_whole_line():
    assert load().search("Killed").entry.id == "system.shell.killed"
    assert load().search("Killed process 12 because") is None


def test_a_whole_line_regex_needs_its_dollar_and_flag_to_be_short():
    base = dict(id="system.x", syntax="regex", format="Killed$", source="https://x", meaning="m", blame="self",
                role="root", severity="warning", action="a", example="Killed")
    assert parse_entries({"entry": [dict(base, whole_line=True)]}, "t")
    with pytest.raises(CatalogError):
        parse_entries({"entry": [base]}, "t")
    with pytest.raises(CatalogError):
        parse_entries({"entry": [dict(base, whole_line=True, format="Killed", example="Killed")]}, "t")


@pytest.mark.parametrize("line, entry_id", [
    ("RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file data/228: "
     "file write failed", "pytorch.stream-writer-failed"),                   # CAFFE_THROW: empty condition
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: you "
     "tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)", "pytorch.cpu-allocator-cannot-allocate"),
    ("  ifa != nullptr. Unable to find address for: ^lo", "pytorch.gloo-no-address"),  # a sentence after a condition
    ("The worker fails with {0: ProcessFailure(local_rank=0, pid=54, exitcode=-7, error_file='<N/A>', "
     "message='Signal 7 (SIGBUS) received by PID 54', timestamp=1711419181)}", "pytorch.elastic-signal-received-by-pid"),
])
def test_messages_behind_an_enforce_prefix_a_condition_or_inside_quotes_are_read(line, entry_id):
    m = load().search(parse_line(line).text)
    assert m is not None and m.entry.id == entry_id


def test_a_regex_entry_that_starts_with_a_word_is_found_on_a_line_without_an_error_word(tmp_path):
    from hangdbg.catalog.catalog import _regex_word
    assert _regex_word("Using IP address of  for node (?P<s0>\\S{1,253})") == "using"
    assert _regex_word("Uncorrect(?:ed|able) error") == "" and _regex_word("a b|c") == ""
    m = load().match("Using IP address of  for node ddp-0.ddp.svc", indexed_only=True)
    assert m is not None and m.entry.id == "frameworks.deepspeed.empty-master-addr"
    assert load().match("Using IP address of 10.0.0.1 for node ddp-0", indexed_only=True) is None


def test_the_json_twin_is_current_and_holds_the_toml_files():
    """scripts/catalog/json_twin.py writes it: rerun it after changing a data file."""
    import json
    import tomllib
    from importlib import resources

    from hangdbg.catalog.catalog import TWIN, data_files, toml_digest
    files = data_files()
    twin = json.loads(resources.files("hangdbg.catalog").joinpath("data").joinpath(TWIN).read_bytes())
    assert twin["toml_sha256"] == toml_digest(files), "stale: run python scripts/catalog/json_twin.py"
    assert twin["files"] == {name: tomllib.loads(data.decode()) for name, data in files}


def test_every_data_file_passes_the_checks_the_twin_skips():
    import tomllib

    from hangdbg.catalog.catalog import data_files
    n = sum(len(parse_entries(tomllib.loads(data.decode()), name.removesuffix(".toml"), checked=True))
            for name, data in data_files())
    assert n == len(load())
    for e in load().entries:  # every pattern builds and compiles
        text = e.example or sample(e.format, e.syntax)
        assert e.pattern.match(text) or e.pattern.match(parse_line(text).text), e.id


def test_a_stale_twin_is_not_used(monkeypatch):
    import hangdbg.catalog.catalog as cc
    monkeypatch.setattr(cc, "toml_digest", lambda files: "not the twin's")
    docs = cc._documents()
    assert docs and not any(from_twin for _, _, from_twin in docs)
    assert len(cc.load.__wrapped__()) == len(load())


def test_an_entry_code_must_be_an_integer():
    from hangdbg.catalog.catalog import CatalogError, parse_entries
    doc = {"entry": [{"id": "cuda.curesult.x", "syntax": "literal", "format": "CUDA_ERROR_SOMETHING_LONG",
                      "source": "https://docs.nvidia.com/x", "meaning": "m", "blame": "self", "role": "root",
                      "severity": "suspect", "action": "a", "code": "2"}]}
    with pytest.raises(CatalogError, match="not an integer"):
        parse_entries(doc, "cuda")
    doc["entry"][0]["code"] = 2
    (e,) = parse_entries(doc, "cuda")
    assert e.code == 2


def test_a_message_whose_last_field_is_empty_still_matches():
    """NCCLUtils.cpp: "NCCL communicator was aborted on rank {}. {}" prints nothing after the period when no
    failure reason was kept."""
    m = CATALOG.search("NCCL communicator was aborted on rank 3.")
    assert m is not None and m.entry.id == "pytorch.nccl-comm-aborted"
    m = CATALOG.search("NCCL communicator was aborted on rank 3. Original reason for failure was: timeout")
    assert m is not None and m.entry.id == "pytorch.nccl-comm-aborted"


def test_a_text_field_between_blanks_may_be_empty():
    """help-orterun.txt 'on node %s exited on signal %d (%s).': a paste that lost the host name keeps the message."""
    m = CATALOG.search("mpirun noticed that process rank 0 with PID 0 on node exited on signal 4 (Illegal instruction).")
    assert m is not None and m.entry.id == "system.openmpi.proc-aborted-strsignal"
    m = CATALOG.search("mpirun noticed that process rank 0 with PID 12 on node n1 exited on signal 9 (Killed).")
    assert m is not None and "n1" in m.fields


def test_a_host_before_a_port_has_no_blank():
    """NCCL's ras/client.cc 'Connecting to %s:%s: %s': the host of an address is one token, so Ray's 'Connecting to
    existing Ray cluster at address: h:1' is not read as NCCL's RAS client."""
    assert CATALOG.search("Connecting to existing Ray cluster at address: sphinx4:64053...") is None
    m = CATALOG.search("Connecting to node7:28028: Connection refused")
    assert m is not None and m.entry.id == "nccl.ras-client-connecting-to" and m.fields[0] == "node7"


def test_a_rocm_builds_renamed_cuda_message_and_a_python_warning_are_read():
    from hangdbg.catalog.message import parse_line
    line = ("/opt/conda/lib/python3.7/site-packages/torch/cuda/__init__.py:82: UserWarning: HIP initialization: "
            "Unexpected error from hipGetDeviceCount(). Did you run some cuda functions before calling NumHipDevices() "
            "that might have already set an error? Error 101: hipErrorInvalidDevice")
    msg = parse_line(line)
    assert msg.text.startswith("HIP initialization:") and msg.level == "UserWarning"
    from hangdbg.catalog.catalog import cuda_named
    m = CATALOG.match(cuda_named(msg.text))
    assert m is not None and m.entry.id == "pytorch.cuda-initialization-warning"
    assert m.inner is not None and "cudaGetDeviceCount" in m.inner.entry.format


def test_a_shortened_long_message_is_read_by_its_shared_start_never_as_harmless():
    # NCCL's src/transport/nvls.cc "Failed to bind NVLink SHARP (NVLS) Multicast memory of size %ld : CUDA error ..."
    m = CATALOG.match_head("Failed to bind NVLink SHARP (NVLS) Multicast memory: CUDA error 401")
    assert m is not None and "NVLS" in m.entry.format and m.entry.severity != "info"
    assert CATALOG.match_head("Failed to bind the widget to the frobnicator of size 3") is None  # too little shared


def test_a_hip_error_name_reads_as_the_cuda_error_it_mirrors():
    m = CATALOG.search("RuntimeError: HIP error: hipErrorNoDevice")
    assert m is not None and m.entry.format == "cudaErrorNoDevice"
    assert CATALOG.search("hipErrorNoSuchThingAtAll happened") is None  # a name CUDA has not is no reading


def test_a_text_field_that_starts_the_message_may_be_empty():
    """DeepSpeed launch.py '%s exits with return code = %d' pasted without the command it names."""
    m = CATALOG.search("exits with return code = -9")
    assert m is not None and m.entry.id.startswith("frameworks.deepspeed") and "return code" in m.entry.format
    m = CATALOG.search("['python', '-u', 'train.py'] exits with return code = 1")
    assert m is not None and m.fields[0].startswith("['python'")


@pytest.mark.parametrize("line, entry_id", [
    ("bash: orted: command not found", "system.shell.command-not-found"),
    ("ORTE was unable to reliably start one or more daemons.", "system.openmpi.failed-daemon-launch"),
    ("There are not enough slots available in the system to satisfy the 2 slots", "system.openmpi.not-enough-slots-head"),
])
def test_launcher_messages_from_their_sources(line, entry_id):
    m = CATALOG.search(line)
    assert m is not None and m.entry.id == entry_id


@pytest.mark.parametrize("line, text, exc", [
    ('    "message": "RendezvousConnectionError: The connection to the C10d store has failed.",',
     "The connection to the C10d store has failed.", "RendezvousConnectionError"),
    ('{"error": "CUDA error: out of memory"}', "CUDA error: out of memory", ""),
])
def test_a_json_field_that_holds_a_message_is_peeled(line, text, exc):
    msg = parse_line(line)
    assert msg.text == text and msg.exception == exc


def test_a_message_glued_behind_other_text_is_found_inside_the_line():
    # two ranks wrote into one line at once: the message starts glued to an exception class
    m = CATALOG.match_inside("OutOfMemoryErrorOutOfMemoryError.: : OutOfMemoryErrorCUDA out of memory. Tried to "
                             "allocate 2.11 GiB (GPU 6; 39.45 GiB total capacity; 37.14 GiB already allocated)")
    assert m is not None and "out of memory" in m.entry.meaning.lower()
    assert CATALOG.match_inside("nothing here resembles any upstream message at all, truly") is None


def test_an_unknown_nccl_result_code_is_a_version_mismatch_wherever_it_is_quoted(tmp_path):
    """ncclGetErrorString's default text, as the NCCLCHECK macro of NCCL's examples prints it and as PyTorch does."""
    from conftest import main_json
    log = tmp_path / "out.txt"
    for line in ("Failed, NCCL error /src/plugins/ncclPlugin/allreducePlugin.cpp:183 'unknown result code'",
                 "RuntimeError: NCCL error in: /opt/torch/ProcessGroupNCCL.cpp:1269, unknown result code, NCCL version 2.18.6"):
        log.write_text(line + "\n")
        code, doc = main_json("logs", str(log))
        top = doc["findings"][0]
        assert code == 3 and top["severity"] == "suspect" and "another NCCL version" in top["summary"], line


def test_a_short_wrapper_is_read_through_to_the_specific_message_it_quotes():
    """vLLM's "Worker failed with error '{}'" quoting "CUDA error: {}" quoting cudaGetErrorString's text: the worker's
    own failure, not only a report that some worker failed."""
    from hangdbg.catalog.catalog import load
    m = load().search("Worker failed with error 'CUDA error: an illegal memory access was encountered', please check "
                      "the stack trace above for the root cause")
    assert m is not None and m.entry.id == "frameworks.vllm.worker-failed-with-error"
    assert "illegal" in m.innermost.meaning.lower() or "invalid address" in m.innermost.meaning


def test_a_short_head_and_its_field_are_found_mid_line_together():
    """'...: CUDA error: out of memory' behind an unknown head: 'CUDA error: ' and 'out of memory' together are as
    specific as one long entry (Catalog.search's mid-line threshold counts the chain's literal text)."""
    from hangdbg.catalog.catalog import load
    m = load().search("Capture cuda graph failed: CUDA error: out of memory")
    assert m is not None and m.innermost.id == "cuda.out-of-memory"
    assert load().search("step failed: out of memory") is None or load().search("step failed: out of memory").entry.literal >= 16
