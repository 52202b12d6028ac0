"""The error-lines reader (evidence/error_lines), the chain across readers (evidence/chain.py) and the
flight recorder's scheduled-not-started reading, on real outputs of an H200 run
(tests/fixtures/gpu_h200, copied from ../shared/gpu-h200: NCCL 2.28.9, torch 2.11) and on small logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import main_json

from hangdbg.evidence.error_lines.reader import READER
from hangdbg.model import Kind, Severity

H200 = Path(__file__).resolve().parent / "fixtures" / "gpu_h200"


def _suspects(doc):
    return [f for f in doc["findings"] if f["severity"] == "suspect"]


def test_two_ranks_on_one_gpu_blame_the_launch_not_a_rank():
    rc, doc = main_json("report", str(H200 / "nccl_dup_2ranks_1gpu"))
    assert rc == 3
    first = doc["findings"][0]
    assert first["kind"] == "launch-error" and first["ranks"] == [] and first["hosts"] == []
    assert "Duplicate GPU detected" in first["summary"] and "own GPU" in first["action"]
    assert not [f for f in _suspects(doc) if f["ranks"]], "no rank is to blame for a launch mistake"
    rc, doc = main_json("nccl", "summary", str(H200 / "nccl_dup_2ranks_1gpu"))
    assert doc["findings"][0]["kind"] == "launch-error" and "read the first line" not in doc["headline"]


def test_a_gpu_that_never_started_the_collective_is_named():
    rc, doc = main_json("report", str(H200 / "watchdog_timeout_behind_kernel"))
    assert rc == 3
    first = doc["findings"][0]
    assert first["kind"] == "gpu-blocked" and first["ranks"] == [0]
    assert "scheduled" in first["summary"] and "no peer" in first["summary"] and "seq 5" in first["summary"]


def test_a_healthy_run_has_no_suspect():
    rc, doc = main_json("report", str(H200 / "nccl_1rank_ok"))
    assert rc == 0 and not _suspects(doc)


def _read(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text)
    return READER.read([str(p)])


def test_unrecognised_error_lines_are_quoted_never_dropped(tmp_path):
    rep = _read(tmp_path, "step 1 ok\nfrobnicator exploded: flux capacitor failure on node7\nstep 2 ok\n")
    assert rep.records == 1
    (f,) = rep.findings
    assert f.kind is Kind.UNRECOGNISED_ERROR and f.severity is Severity.WARNING
    assert "flux capacitor failure" in f.summary and f.evidence[0].line == 2


def test_a_file_without_error_lines_reads_nothing(tmp_path):
    rep = _read(tmp_path, "epoch 1 loss 0.3\nepoch 2 loss 0.2\n")
    assert rep.records == 0 and not rep.findings


def test_the_earliest_own_failure_is_the_suspect_and_later_ones_are_warnings(tmp_path):
    text = ("[2026-11-26 10:00:05] [rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "[2026-11-26 10:00:01] [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    rep = _read(tmp_path, text)
    sus = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert [f.ranks for f in sus] == [(3,)]
    later = next(f for f in rep.findings if f.ranks == (1,))
    assert later.severity is Severity.WARNING and "after the first failure" in later.summary


def test_a_line_cut_at_the_end_of_an_excerpt_is_no_evidence_of_absence(tmp_path):
    rep = _read(tmp_path, "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n[rank1]:[E1126 00")
    assert [f.ranks for f in rep.findings if f.severity is Severity.SUSPECT] == [(0,)]


def test_a_hardware_or_host_fault_blames_no_rank(tmp_path):
    rep = _read(tmp_path, "[rank5]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    (f,) = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert f.ranks == () and f.kind in (Kind.HARDWARE_ERROR, Kind.KNOWN_ERROR)


def test_large_files_take_the_grep_pass_and_read_the_same(tmp_path, monkeypatch):
    import hangdbg.evidence.error_lines.grammar as grammar

    body = "".join(f"host:1:1 [0] NCCL INFO Channel {i:02d} : 0[0] -> 1[1] via P2P/IPC\n" for i in range(40000))
    text = body + "host:1:1 [0] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes\n"
    small = _read(tmp_path, text, "a.log")
    monkeypatch.setattr(grammar, "GREP_FROM_BYTES", 1)
    large = _read(tmp_path, text, "b.log")
    assert small.records == large.records == 1 and small.lines_read == large.lines_read
    assert [f.summary for f in small.findings] == [f.summary for f in large.findings]
    assert small.findings[0].kind is Kind.RESOURCE_ERROR and small.findings[0].severity is Severity.SUSPECT


def test_a_hard_wrapped_error_line_is_read_with_its_continuation(tmp_path):
    text = ("[rank8] Warning: Unable to resolve hostname to a (local) address. Using the loopback\n"
            "        address as fallback. Manually set the network interface with GLOO_SOCKET_IFNAME\n")
    rep = _read(tmp_path, text, "engine.txt")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert any("GLOO_SOCKET_IFNAME" in (f.summary + f.action) for f in rep.findings)


def test_an_exception_printed_with_an_empty_first_line_takes_the_lines_after_it(tmp_path):
    # CPython prints "Cls: " and then the message's own lines when str(exception) starts with a newline
    text = ('Traceback (most recent call last):\n  File "train.py", line 5, in main\n    raise ValueError(msg)\n'
            "ValueError: \nthe frobnicator needs a world size divisible by 8\n")
    rep = _read(tmp_path, text, "tb.txt")
    (f,) = [f for f in rep.findings if f.kind is Kind.RANK_ERROR]
    assert "ValueError: the frobnicator needs a world size divisible by 8" in f.summary
    # with no line after it, the empty head is still the exception the traceback ends in
    rep = _read(tmp_path, "RuntimeError: \n", "bare.txt")
    assert any("RuntimeError" in f.summary for f in rep.findings if f.kind is Kind.RANK_ERROR)


def test_a_wrap_that_lost_its_indent_is_joined_but_a_new_record_is_not(tmp_path):
    # a paste wrapped NCCL 2.10's WARN (net_socket.cc) at 'truncated :' and dropped the indentation
    text = ("transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 10.0.0.3<59210> message truncated :\n"
            "receiving 1048576 bytes instead of 65536\n")
    rep = _read(tmp_path, text, "warn.txt")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert any("size" in f.summary for f in rep.findings)
    # the next line has its own prefix: a record of its own, never a continuation
    text = ("[rank1]: RuntimeError: the widget frobnicated\n[rank2]: RuntimeError: the widget frobnicated too\n")
    rep = _read(tmp_path, text, "two.txt")
    assert {r for f in rep.findings for r in f.ranks} == {1, 2}


def test_a_known_message_a_hard_wrap_cut_inside_a_word_and_a_number_is_joined_without_a_blank(tmp_path):
    # NCCL's ibvwrap.c WARN cut at a fixed column inside "failed" and inside "index": joined with a blank it would be
    # "f ailed" and no message; the join without one reads it
    text = ("[2026-03-13 22:26:02] host-01:123456 [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp f\n"
            "ailed with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, next state RTR, local GID inde\n"
            "x 3, local GID ::ffff:10.0.0.1, remote GID ::ffff:10.0.0.2\n")
    rep = _read(tmp_path, text, "cut.txt")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert any("RTR" in f.summary for f in rep.findings)


def test_a_message_wrapped_before_its_error_word_is_read_with_its_head(tmp_path):
    # Ray's raylet summary (node_manager.cc) soft-wrapped at a blank: the head line holds no error word
    text = ("[2024-03-10 10:00:00,123 E 1234 1250] (raylet) node_manager.cc:3007: 2 Workers (tasks /\n"
            " actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
            "abd406d4, IP: 127.0.0.9) over the last time period.\n")
    rep = _read(tmp_path, text, "raylet.txt")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert any("127.0.0.9" in f.hosts and f.severity is Severity.SUSPECT for f in rep.findings)
    # a line with a prefix of its own is no continuation: the head is not taken in
    text = ("[2024-03-10 10:00:00,123 E 1234 1250] (raylet) node_manager.cc:3007: 2 Workers (tasks /\n"
            "[2024-03-10 10:00:01,000 E 1234 1250] actors) killed due to memory pressure (OOM), 0 Workers crashed\n")
    rep = _read(tmp_path, text, "two.txt")
    assert [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]


def test_an_mpich_error_stack_is_read_at_its_failing_level(tmp_path):
    # MPICH's error stack (errutil.c header, errnames.txt texts after each FUNC(LINE)....: head)
    text = ("Fatal error in PMPI_Init_thread: Other MPI error, error stack:\n"
            "MPIR_Init_thread(474)..............: \n"
            "MPID_Init(190).....................: channel initialization failed\n"
            "MPID_nem_tcp_init(379).............: gethostbyname failed, nodeA (errno 1)\n")
    rep = _read(tmp_path, text, "mpi.txt")
    first = rep.findings[0]
    assert first.severity is Severity.SUSPECT and "host name did not resolve" in first.summary and not first.ranks
    assert "nodeA" in first.summary
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert not [f for f in rep.findings if f.severity is Severity.SUSPECT and "Fatal error in" in f.summary]


def test_open_mpi_btl_prefix_gives_host_and_rank_and_a_shared_address_blames_the_launch(tmp_path):
    text = ("[nodeA][[1234,1],3][btl_tcp_endpoint.c:626:mca_btl_tcp_endpoint_recv_connect_ack] received unexpected "
            "process identifier [[1234,1],0]\n")
    rep = _read(tmp_path, text, "mpirun.txt")
    first = rep.findings[0]
    assert first.kind is Kind.LAUNCH_ERROR and first.severity is Severity.SUSPECT and not first.ranks
    assert "btl_tcp_if_include" in first.action and "NCCL btl" not in first.summary


def test_a_gpu_that_fell_off_the_bus_at_probe_is_a_hardware_suspect(tmp_path):
    text = ("[14387.209961] NVRM: The NVIDIA GPU 0000:5d:00.0\n"
            "               NVRM: (PCI ID: 10de:2330) installed in this system has\n"
            "               NVRM: fallen off the bus and is not responding to commands.\n"
            "[14387.210134] nvidia: probe of 0000:5d:00.0 failed with error -1\n")
    rep = _read(tmp_path, text, "dmesg.txt")
    assert rep.findings[0].kind is Kind.HARDWARE_ERROR and rep.findings[0].severity is Severity.SUSPECT
    assert any("0000:5d:00.0" in g for f in rep.findings for g in f.gpus)
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]


def test_an_argument_the_script_does_not_declare_blames_the_launch(tmp_path):
    # CPython argparse's error, as every rank prints it when the launcher passes --local-rank
    text = "usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: --local-rank=0\n"
    rep = _read(tmp_path, text, "stderr.txt")
    first = rep.findings[0]
    assert first.kind is Kind.LAUNCH_ERROR and first.severity is Severity.SUSPECT and "--local-rank" in first.action


def test_horovods_log_prefix_and_a_bare_exception_class_are_peeled(tmp_path):
    from hangdbg.catalog.message import parse_line
    msg = parse_line("[2024-01-01 00:00:00.000000: W /tmp/pip/horovod/common/stall_inspector.cc:107] One or more "
                     "tensors were submitted")
    assert msg.text.startswith("One or more tensors")
    msg = parse_line("Exception: Gloo connectFullMesh failed with [pair.cc:144] no error")
    assert msg.exception == "Exception" and msg.text.startswith("Gloo connectFullMesh")
    assert parse_line("ErrorCode: 3").exception == ""  # only the bare class Exception, not any word


def test_ray_workers_that_never_register_are_the_nodes_environment(tmp_path):
    text = ("(raylet) [2024-03-10 10:00:00,123 E 1234 1250] (raylet) worker_pool.cc:550: Some workers of the worker "
            "process(4321) have not registered within the timeout. The process is still alive, probably it's hanging "
            "during start.\n")
    rep = _read(tmp_path, text, "raylet.txt")
    assert rep.findings[0].severity is Severity.SUSPECT and "register" in rep.findings[0].summary
    assert not rep.findings[0].ranks


def test_kubectl_describe_rows_are_read(tmp_path):
    # kubectl describe pod: an Events row (Type Reason Age From Message) and a container's last state
    text = ("Events:\n  Type     Reason            Age   From               Message\n"
            "  ----     ------            ----  ----               -------\n"
            "  Warning  FailedScheduling  10s   default-scheduler  0/4 nodes are available: 4 Insufficient "
            "nvidia.com/gpu.\n")
    rep = _read(tmp_path, text, "describe.txt")
    assert rep.findings[0].kind is Kind.LAUNCH_ERROR and "cannot place the pod" in rep.findings[0].summary
    rep = _read(tmp_path, "    State:          Terminated\n      Reason:       OOMKilled\n", "pod.txt")
    assert rep.findings[0].severity is Severity.SUSPECT and "OOM" in rep.findings[0].summary


def test_an_excerpt_cut_inside_a_frame_line_is_a_cut_traceback_not_nothing(tmp_path):
    text = ('Traceback (most recent call last):\n  File "/w/train.py", line 9, in <module>\n    main()\n'
            '  File "/w/deepspeed/runtime/engine.py", line 1667, in _save_zero_checkpoint\n'
            "    zero_sd = {'optimizer_state_dict': self.optimizer.state_dict()}\n"
            '  File "/w/deepspeed/runtime/zero/stage3.py"\n')
    rep = _read(tmp_path, text, "tb.txt")
    assert rep.findings and "ends inside" in rep.findings[0].summary and "engine.py:1667" in rep.findings[0].summary


def test_mp_spawns_process_index_is_the_rank_it_names(tmp_path):
    # torch/multiprocessing/spawn.py: "process %d terminated with signal %s" (the entry's rank_field)
    rep = _read(tmp_path, "torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal "
                          "SIGKILL\n", "err.txt")
    assert rep.findings[0].ranks == (3,) and "SIGKILL" in rep.findings[0].summary


def test_slurm_lines_without_an_error_word_in_their_message_are_read(tmp_path):
    # slurmstepd's cancellation banner (req.c) and execve's errno text after the "error:" level
    rep = _read(tmp_path, "slurmstepd: error: *** STEP 123.0 ON gpu01 CANCELLED AT 2024-03-01T10:00:00 DUE TO TIME "
                          "LIMIT ***\n", "slurm.txt")
    assert rep.findings and "time limit" in rep.findings[0].summary
    rep = _read(tmp_path, "slurmstepd: error: execve(): python: No such file or directory\n", "slurm2.txt")
    assert rep.findings and rep.findings[0].kind is not Kind.UNRECOGNISED_ERROR


def test_a_json_lines_log_is_read_by_its_message_fields(tmp_path):
    # a structured log, one JSON object per line (hangdbg check's own trial messages are one): the record's
    # message field is the message, its rank and host go with it; a record without one is data
    text = ('{"type": "trial", "argv": ["python", "--init-timeout", "30"]}\n'
            '{"from": "vm", "step": "init", "rank": 1, "ok": false, "error": "DistStoreError: wait timeout after '
            '30000ms, keys: /pg/0", "host": "vm"}\n')
    rep = _read(tmp_path, text, "messages.jsonl")
    assert rep.findings and not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert rep.findings[0].ranks == (1,) and "vm" in rep.findings[0].hosts
    from hangdbg.evidence.error_lines.grammar import sniff
    assert sniff(text.encode()) and not sniff(b'{\n  "schema_version": 3,\n  "tool": "hangdbg"\n}\n')
    assert not sniff(b'{"one": "document"}\n')


def test_a_traceback_pasted_without_its_newlines_is_read_from_its_exception(tmp_path):
    text = ('File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 1906, in '
            "broadcast work = default_pg.broadcast([tensor], opts) torch.distributed.DistBackendError: NCCL error in: "
            "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1331, unhandled system error (run with NCCL_DEBUG=INFO "
            "for details), NCCL version 2.18.5 ncclSystemError: System call (e.g. socket, malloc) or external library "
            "call failed or device error.\n")
    rep = _read(tmp_path, text, "glued.txt")
    assert rep.records >= 1 and any("ncclSystemError" in f.summary for f in rep.findings)


def test_an_excerpt_that_ends_inside_a_traceback_says_where_not_why(tmp_path):
    text = ('  File "/site-packages/torch/distributed/distributed_c10d.py", line 423, in init_process_group\n'
            "    store, rank, world_size = next(rendezvous_iterator)\n"
            '  File "/site-packages/torch/distributed/rendezvous.py", line 133, in _tcp_rendezvous_handler\n'
            "    store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)\n")
    rep = _read(tmp_path, text, "traceback.txt")
    [f] = rep.findings
    assert f.severity is Severity.WARNING and "rendezvous.py:133 in _tcp_rendezvous_handler" in f.summary
    assert "TCPStore(" in f.summary and rep.records == 1
    # a traceback that goes on into its exception line is not cut
    rep = _read(tmp_path, text + "RuntimeError: Address already in use\n", "whole.txt")
    assert not [f for f in rep.findings if "ends inside" in f.summary]


def test_a_node_fault_takes_the_node_a_line_of_its_block_names(tmp_path):
    text = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n\n"
            "Memory on the node (IP: 10.0.0.7, ID: 5bf8d24f) where the task was running was 54.86GB / 57.60GB "
            "(0.952354), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 0c7d1c) "
            "because it was the most recently scheduled task; to see more information about memory usage on this "
            "node, use `ray logs raylet.out -ip 10.0.0.7`.\n")
    rep = _read(tmp_path, text, "oom.txt")
    sus = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert sus and all(f.hosts == ("10.0.0.7",) for f in sus)


def test_a_pod_evicted_for_node_pressure_names_the_node_of_kubectl_describe(tmp_path):
    text = ("Name:             trainer-worker-3\nNamespace:        default\nNode:             gpu-node-7/10.1.2.3\n"
            "Status:           Failed\nReason:           Evicted\n"
            "Message:          The node was low on resource: memory. Threshold quantity: 1Gi, available: 991045Ki.\n")
    rep = _read(tmp_path, text, "describe.txt")
    [f] = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert f.hosts == ("gpu-node-7",) and "evicted" in f.summary and not f.ranks


def test_mpirun_s_report_of_a_signal_is_read_with_the_signal_not_as_the_shell_s_killed(tmp_path):
    text = "mpirun noticed that process rank 3 with PID 1234 on node gpu-07 exited on signal 9 (Killed).\n"
    rep = _read(tmp_path, text, "mpirun.txt")
    [f] = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert "mpirun saw this MPI rank die" in f.summary and "SIGKILL" in f.summary
    assert rep.facts.first_failure == "system.openmpi.proc-aborted-strsignal"


def test_terminal_colours_anywhere_in_a_line_change_nothing(tmp_path):
    plain = ("transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 10.0.0.3<59210> message truncated :\n"
             "receiving 1048576 bytes instead of 65536\n")
    coloured = "".join(f"\x1b[31m{ln}\x1b[0m\n" for ln in plain.splitlines())
    a, b = _read(tmp_path, plain, "plain.txt"), _read(tmp_path, coloured, "colour.txt")
    assert [f.summary for f in a.findings] == [f.summary for f in b.findings] and a.findings


def test_a_quoted_or_indented_paste_reads_as_the_plain_one(tmp_path):
    plain = ("transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 10.0.0.3<59210> message truncated :\n"
             "receiving 1048576 bytes instead of 65536\n")
    a = _read(tmp_path, plain, "plain.txt")
    for deco in ("> ", "    ", ">     "):
        b = _read(tmp_path, "".join(f"{deco}{ln}\n" for ln in plain.splitlines()), "deco.txt")
        assert [f.summary for f in a.findings] == [f.summary for f in b.findings] and a.findings, deco


def test_records_a_paste_ran_into_one_line_are_read_one_by_one(tmp_path):
    lines = ["[rank1]:[E1126 00:32:28.1 ProcessGroupNCCL.cpp:632] [Rank 1] some progress note " + "x" * 120,
             "[rank0]: Traceback (most recent call last):",
             '[rank0]:   File "/work/train.py", line 10, in <module>',
             "[rank0]:     main()",
             "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
             "capacity of 79.10 GiB of which 1.06 GiB is free."]
    a = _read(tmp_path, "\n".join(lines) + "\n", "lines.txt")
    b = _read(tmp_path, " ".join(lines) + "\n", "glued.txt")
    sus = [f for f in b.findings if f.severity is Severity.SUSPECT]
    assert sus and sus[0].ranks == (0,) and "out of memory" in sus[0].summary
    assert [f.summary for f in a.findings if f.severity is Severity.SUSPECT] == [f.summary for f in sus]


def test_the_line_after_last_error_is_the_first_failure_of_its_block(tmp_path):
    """PyTorch prints NCCL's own last error after 'Last error:' (c10d NCCLUtils): it names the cause."""
    text = ("DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, invalid argument, "
            "NCCL version 2.14.3\nncclInvalidArgument: Invalid value for an argument.\nLast error:\n"
            "Invalid config blocking attribute value -2147483648\n")
    rep = _read(tmp_path, text, "err.txt")
    assert rep.facts.first_failure == "nccl.config-undefined-value"
    assert not [f for f in rep.findings if "Last error" in f.summary]


def test_a_terminal_wrap_pasted_as_blanks_inside_a_word_is_joined(tmp_path):
    text = ("torch.distributed.DistNetworkError: The client socket has timed out after 600s w" + " " * 200 +
            "hile trying to connect to (10.60.2.1, 53591).\n")
    rep = _read(tmp_path, text, "error.txt")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert rep.facts.first_failure == "pytorch.socket-connect-timeout"


def test_an_uncaught_exception_no_entry_knows_is_the_first_failure_with_its_frame(tmp_path):
    text = ('[rank1]: Traceback (most recent call last):\n[rank1]:   File "/work/train.py", line 10, in <module>\n'
            '[rank1]:     x = batch["labels"]\n[rank1]: KeyError: \'labels\'\n')
    rep = _read(tmp_path, text, "train.log")
    (f,) = [f for f in rep.findings if f.kind is Kind.RANK_ERROR]
    assert f.ranks == (1,) and "KeyError: 'labels'" in f.summary and "/work/train.py:10 in <module>" in f.summary
    assert rep.facts.first_failure == "python.exception"
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]


def test_an_exception_that_waited_for_another_rank_is_no_first_failure(tmp_path):
    text = "Traceback (most recent call last):\nfoo.bar.WorkerLostError: the peer went away while receiving\n"
    rep = _read(tmp_path, text, "train.log")
    (f,) = [f for f in rep.findings if f.kind is Kind.RANK_ERROR]
    assert f.severity is Severity.WARNING and "consequence" in f.summary and rep.facts.first_failure == ""
    assert f.evidence[-1].text.startswith("python.exception-waited:")


def test_a_waiters_exception_alone_is_shown_never_nothing_abnormal(tmp_path):
    """A bare RendezvousTimeoutError: the process waited (no suspect), but an exception was raised: a warning."""
    (tmp_path / "run.log").write_text("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n")
    rc, doc = main_json("report", str(tmp_path))
    assert rc == 0 and "nothing abnormal" not in doc["headline"] and "RendezvousTimeoutError" in doc["headline"]
    assert not [f for f in doc["findings"] if f["severity"] == "suspect"]


def test_a_bare_exception_class_still_reads_as_its_catalog_entry(tmp_path):
    rep = _read(tmp_path, "Traceback (most recent call last):\nMemoryError\n", "train.log")
    assert rep.facts.first_failure == "system.python.memory-error"


def test_a_python_warning_class_is_no_exception(tmp_path):
    rep = _read(tmp_path, "/x.py:3: UserWarning: this will change\n  warnings.warn(\n", "train.log")
    assert not [f for f in rep.findings if f.kind is Kind.RANK_ERROR]


def test_the_exception_of_a_rank_another_reader_suspects_is_its_cause(tmp_path):
    from conftest import main_json, suspects
    (tmp_path / "train.log").write_text(
        '[rank1]: Traceback (most recent call last):\n[rank1]:   File "/work/train.py", line 10, in <module>\n'
        '[rank1]:     x = batch["labels"]\n[rank1]: KeyError: \'labels\'\n' + "".join(
            f"[rank{r}]:[E1126 00:32:28.123456789 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            f"for 600123 milliseconds before timing out.\n" for r in (0, 2)))
    rc, doc = main_json("report", str(tmp_path))
    assert rc == 3 and "KeyError: 'labels'" in doc["headline"] and "rank 1" in doc["headline"]
    assert {tuple(f["ranks"]) for f in suspects(doc)} == {(1,)}


def test_a_node_named_only_by_its_address_is_the_host_of_an_environment_fault(tmp_path):
    text = ("Memory on the node (IP: 10.0.167.26, ID: abc) where the task (task ID: 1, name=x, pid=2, memory "
            "used=0.05GB) was running was 219.41GB / 230.40GB (0.952289), which exceeds the memory usage threshold "
            "of 0.95. Ray killed this worker\n")
    rep = _read(tmp_path, text, "raylet.out")
    (f,) = [f for f in rep.findings if f.kind is Kind.RESOURCE_ERROR]
    assert f.hosts == ("10.0.167.26",) and not f.ranks


def test_a_launcher_line_with_a_signal_exit_status_says_which_signal(tmp_path):
    line = ("[2023-03-01 10:00:00,123] [ERROR] [launch.py:324:sigkill_handler] ['/usr/bin/python', '-u', "
            "'train.py', '--local_rank=0'] exits with return code = -9\n")
    (tmp_path / "job.log").write_text(line)
    rc, doc = main_json("logs", str(tmp_path / "job.log"))
    s = _suspects(doc)
    assert rc == 3 and len(s) == 1 and "SIGKILL" in s[0]["summary"] and "OOM killer" in s[0]["summary"]


def test_a_launcher_line_with_exit_status_zero_is_no_failure(tmp_path):
    line = "[2023-03-01 10:00:00,123] [INFO] [launch.py:351:main] Process 1234 exits successfully.\n" \
           "['/usr/bin/python', 'train.py'] exits with return code = 0\n"
    assert not [f for f in _read(tmp_path, line).findings if f.severity is Severity.SUSPECT]


def test_an_out_of_memory_error_names_the_gpu_its_message_names(tmp_path):
    rep = _read(tmp_path, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total "
                          "capacity of 79.10 GiB of which 1.2 MiB is free.\n")
    (f,) = [f for f in rep.findings if f.kind is not Kind.UNRECOGNISED_ERROR]
    assert f.gpus == ("GPU 3",) and "on GPU 3" in f.summary and f.ranks == ()


def test_srun_label_numbers_name_the_rank_when_most_lines_carry_one(tmp_path):
    text = ("0: step 10 loss 1.2\n1: step 10 loss 1.3\n2: step 10 loss 1.1\n3: step 10 loss 1.2\n"
            "2: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    (f,) = [f for f in _read(tmp_path, text).findings if f.severity is Severity.SUSPECT]
    assert f.ranks == (2,)


def test_a_numbered_line_alone_is_no_srun_label(tmp_path):
    text = "training\n12: RuntimeError: CUDA error: an illegal memory access was encountered\nbye\n"
    (f,) = [f for f in _read(tmp_path, text).findings if f.severity is Severity.SUSPECT]
    assert f.ranks == ()


def test_the_same_exception_on_every_rank_blames_no_rank(tmp_path):
    text = "".join(f"[rank{r}]:Traceback (most recent call last):\n[rank{r}]:  File \"t.py\", line 3, in <module>\n"
                   f"[rank{r}]:    import tyro\n[rank{r}]:ModuleNotFoundError: No module named 'tyro'\n" for r in (0, 1))
    (f,) = [f for f in _read(tmp_path, text).findings if f.kind is Kind.RANK_ERROR]
    assert f.ranks == () and "every rank" in f.summary and "a cause they share" in f.summary


def test_an_exception_class_is_no_waiter_word_inside_it(tmp_path):
    text = "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n    f(1, 2)\n" \
           "TypeError: f() takes 1 positional argument but 2 were given\n"
    (f,) = [f for f in _read(tmp_path, text).findings if f.kind is Kind.RANK_ERROR]
    assert f.severity is Severity.WARNING and "waited" not in f.summary  # "TypeError" holds "peEr"


def test_pdsh_host_labels_are_peeled_and_name_the_host(tmp_path):
    text = ("node7: Traceback (most recent call last):\nnode7:   File \"launch.py\", line 3, in <module>\n"
            "node7:     main()\nnode7: TypeError: main() takes 3 positional arguments but 4 were given\n")
    (f,) = [f for f in _read(tmp_path, text).findings if f.kind is Kind.RANK_ERROR]
    assert f.hosts == ("node7",) and "node7" in f.summary and "TypeError" in f.summary


CHILD_LOST_PEER = """\
[rank1]:Traceback (most recent call last):
[rank1]:  File "train.py", line 9, in main
[rank1]:    dist.all_reduce(t)
[rank1]:RuntimeError: Connection reset by peer
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_10:07:41
  host      : node3
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_a_failed_child_whose_error_says_it_lost_its_peer_is_no_suspect(tmp_path):
    (tmp_path / "job.log").write_text(CHILD_LOST_PEER)
    rc, doc = main_json("logs", str(tmp_path / "job.log"))
    child = next(f for f in doc["findings"] if f["kind"] == "child-failed")
    assert child["severity"] == "warning" and "outside it" in child["summary"]
    assert not [f for f in _suspects(doc) if 1 in f["ranks"]]


def test_the_line_after_last_error_names_the_cause_as_a_suspect(tmp_path):
    text = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, unhandled cuda error "
            "(run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5\n"
            "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
            "Cuda failure 217 'peer access is not supported between these two devices'\n")
    f = next(f for f in _read(tmp_path, text).findings if "peer access" in f.summary)
    assert f.severity is Severity.SUSPECT and f.ranks == ()


_ASSERT = ("/src/k.cu:12: operator(): block: [0,0,0], thread: [1,0,0] Assertion `index < size` failed.")


def test_a_local_rank_prefix_takes_the_global_rank_its_file_pairs_it_with(tmp_path):
    rep = _read(tmp_path, f"[default0]:[rank2]: step 1\n[default1]:[rank3]: step 1\n[default1]:{_ASSERT}\n")
    (f,) = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert tuple(f.ranks) == (3,) and "assert" in f.summary


def test_a_file_that_pairs_one_local_rank_with_two_ranks_names_none(tmp_path):
    """Two nodes' output in one file: [default0] is rank 0 on one and rank 2 on the other."""
    rep = _read(tmp_path, f"[default0]:[rank0]: step 1\n[default0]:[rank2]: step 1\n[default0]:{_ASSERT}\n")
    (f,) = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert not f.ranks


def test_a_cuda_error_printed_as_its_enum_number_is_read_by_value(tmp_path):
    """CUresult 2 is CUDA_ERROR_OUT_OF_MEMORY (include/cuda.h): a C++ extension that prints only the number."""
    rep = _read(tmp_path, "[ext.cpp] CUresult error  result=2 file=csrc/ext.cpp func=cu_mem_create line=103\n")
    (f,) = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert "CUDA_ERROR_OUT_OF_MEMORY = 2" in f.summary
    rep = _read(tmp_path, "error: cudaError_t 700 after the kernel\n")
    (f,) = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert "cudaErrorIllegalAddress = 700" in f.summary


def test_a_fixed_column_hard_wrap_is_joined_and_the_line_numbers_stay():
    from hangdbg.evidence.error_lines.paste import unwrapped as _unwrapped
    msg = ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system "
           "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5 and a long tail of words to wrap, "
           "long enough for three cut lines of seventy columns each and a rest")
    cut = [msg[i:i + 70] for i in range(0, len(msg), 70)]
    body = ("step 1\n" + "\n".join(cut) + "\nstep 2\n").encode()
    out = _unwrapped(body).split(b"\n")
    assert len(out) == len(body.split(b"\n")) and out[1].decode() == msg and out[2] == b"" and out[-2] == b"step 2"


def test_repeated_log_lines_of_one_length_are_no_wrap():
    from hangdbg.evidence.error_lines.paste import unwrapped as _unwrapped
    line = b"node-1:16:63 [0] NCCL INFO Call to connect returned Connection refused, retrying"
    body = b"\n".join([line] * 6) + b"\n"
    assert _unwrapped(body) == body


def test_one_tasks_srun_label_is_its_rank_when_its_own_line_names_that_rank(tmp_path):
    """srun --label's "N: " on every line of one task: taken as the rank only when a line's own prefix names rank N
    (Cray MPICH's [Rank N]); the label then gives the rank to the task's other lines."""
    rep = _read(tmp_path, "2047: cudaSetDevice(dev) error( cudaErrorLaunchFailure): unspecified launch failure\n"
                          "2047: MPICH ERROR [Rank 2047] [job id 1.0] [Fri Aug 28 22:45:13 2026] [nid004069] - "
                          "Abort(1) (rank 2047 in comm 432): application called MPI_Abort(comm=0xC4000001, 1) - process 2047\n")
    assert {r for f in rep.findings for r in f.ranks} == {2047}
    rep = _read(tmp_path, "12: step took 3 s\n12: RuntimeError: the loader failed\n")
    assert not {r for f in rep.findings for r in f.ranks}


def test_a_word_wrapped_help_text_is_no_fixed_column_wrap():
    """Three lines of one width that continue are no hard wrap when shorter lines continue too: Open MPI's help text
    is word-wrapped, and joining it without blanks makes "Thismeans" (paste.py unwrapped / soft_unwrapped)."""
    from hangdbg.evidence.error_lines.paste import soft_unwrapped, unwrapped
    body = (b"A requested component was not found, or was unable to be opened.  This\n"
            b"means that this component is either not installed or is unable to be\n"
            b"used on your system (e.g., sometimes this means that shared libraries\n"
            b"that the component requires are unable to be found/loaded).  Note that\n"
            b"Open MPI stopped checking at the first component that it did not find.\n")
    assert unwrapped(body) == body
    assert b"opened.  This means that" in soft_unwrapped(body)


def test_a_word_wrap_is_undone_but_not_around_a_line_that_is_a_message_itself():
    import textwrap

    from hangdbg.evidence.error_lines.paste import soft_unwrapped
    msg = ("RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: "
           "store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00) and a few more words here")
    text = "\n".join(textwrap.wrap(msg, 72) + textwrap.wrap(msg.replace("Timed", "It timed"), 72)).encode()
    out = soft_unwrapped(text).decode().split("\n")
    assert out[0] == msg and len(out) == len(text.split(b"\n"))  # joined in place, the line count kept
    # lines that each read as a message stay apart; an unwrapped log (longer lines, few near its longest) stays
    assert soft_unwrapped(text, lambda line: True) == text
    log = b"\n".join(b"x" * n + b" tail" for n in (40, 150, 90, 30, 60, 120))
    assert soft_unwrapped(log) == log


def test_records_a_paste_ran_together_are_cut_at_more_record_heads():
    from hangdbg.evidence.error_lines.grammar import _records_of
    pad = "x" * 400
    line = (f"root@node1:~# dmesg -T | grep NVRM {pad} [Tue Apr  9 01:21:38 2024] NVRM: Xid (PCI:0000:a1:00): 79, "
            "GPU has fallen off the bus. ERROR:root:the run failed [E ProcessGroupNCCL.cpp:719] [Rank 0] Watchdog caught")
    parts = _records_of(line)
    assert [p.split()[0] for p in parts] == ["root@node1:~#", "[Tue", "ERROR:root:the", "[E"]


def test_ib_hcas_named_but_no_ib_device_is_the_hosts_rdma_stack(tmp_path):
    """NCCL src/transport/net_ib/init.cc prints both as INFO: the HCAs the environment names, then none found."""
    rep = _read(tmp_path, "n1:7:7 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0:1,mlx5_1:1\n"
                          "n1:7:7 [0] NCCL INFO NET/IB : No device found.\n"
                          "n1:7:7 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n")
    (f,) = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert f.kind is Kind.RESOURCE_ERROR and f.hosts == ("n1",) and "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1" in f.summary
    rep = _read(tmp_path, "n1:7:7 [0] NCCL INFO NET/IB : No device found.\nn1:7:7 [0] NCCL INFO Using network Socket\n")
    assert not [f for f in rep.findings if f.severity is Severity.SUSPECT]  # no IB asked for: sockets are fine


def test_a_table_header_with_an_error_column_is_no_error_line(tmp_path):
    """nccl-tests prints a results table whose header names an ``error`` column."""
    rep = _read(tmp_path, "#       size         count      type   redop     time   algbw   busbw  error     time   algbw"
                          "   busbw  error\n     8388608       2097152     float     sum   5729.5    1.46    1.46  0e+00\n")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    rep = _read(tmp_path, "the job failed to start on node one and two\n")  # a sentence is no table header
    assert [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]


def _only_suspect(v):
    """The one suspect finding of verdict ``v`` (fails when there are none or several)."""
    [top] = [f for f in v.findings if f.severity is Severity.SUSPECT]
    return top


def _verdict(tmp_path, text, name="job.log"):
    from hangdbg.evidence.read import read_sources
    from hangdbg.evidence.verdict import build_verdict

    (tmp_path / name).write_text(text)
    return build_verdict(*read_sources([str(tmp_path)]))


def test_a_cut_traceback_outside_a_wait_is_the_first_failure_when_nothing_else_is(tmp_path):
    text = ('Traceback (most recent call last):\n  File "/w/train.py", line 9, in <module>\n    main()\n'
            '  File "/w/deepspeed/runtime/engine.py", line 1667, in _save_zero_checkpoint\n'
            "    zero_sd = {'optimizer_state_dict': self.optimizer.state_dict()}\n")
    v = _verdict(tmp_path, text)
    top = _only_suspect(v)
    assert "engine.py:1667" in top.summary and "the first failure in these logs" in top.summary and not top.ranks


def test_a_cut_traceback_inside_a_wait_stays_a_warning(tmp_path):
    # the last frame waits (Work.wait of a collective): most often a waiter's timeout, an echo of another rank
    text = ('[rank3]: Traceback (most recent call last):\n[rank3]:   File "/w/train.py", line 9, in <module>\n'
            "[rank3]:     dist.all_reduce(t)\n"
            '[rank3]:   File "/site-packages/torch/distributed/distributed_c10d.py", line 2501, in all_reduce\n'
            "[rank3]:     work.wait()\n")
    v = _verdict(tmp_path, text)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT]
    assert any("ends inside" in f.summary and f.severity is Severity.WARNING for f in v.findings)


def test_a_ranks_cut_traceback_blames_no_rank(tmp_path):
    text = ('[rank1]: Traceback (most recent call last):\n'
            '[rank1]:   File "/site-packages/torch/distributed/rendezvous.py", line 133, in _tcp_rendezvous_handler\n'
            "[rank1]:     store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)\n")
    v = _verdict(tmp_path, text)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT and 1 in f.ranks]
    # a backward pass ends in autograd whether the rank failed or timed out waiting for another: no suspect
    (tmp_path / "b").mkdir()
    text = ('[rank3]: Traceback (most recent call last):\n[rank3]:   File "/w/train.py", line 50, in step\n'
            "[rank3]:     loss.backward()\n"
            '[rank3]:   File "/site-packages/torch/autograd/graph.py", line 744, in _engine_run_backward\n'
            "[rank3]:     return Variable._execution_engine.run_backward(\n")
    v = _verdict(tmp_path / "b", text)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT and 3 in f.ranks]


def test_the_levels_of_an_mpich_error_stack_are_read_under_their_location(tmp_path):
    # MPIR_Err_print_stack_string: "FUNC(LINE)", dots to the widest location, ": ", the level's message
    text = ("Abort(3712399) on node 0 (rank 0 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:\n"
            "MPIR_Init_thread(159).......: \nMPID_Init(597)..............: \n"
            "MPIR_pmi_kvs_get(227).......: PMI_KVS_Get returned -1\n")
    v = _verdict(tmp_path, text)
    top = v.findings[0]
    assert top.severity is Severity.SUSPECT and "PMI_KVS_Get returned -1" in top.summary and not top.ranks
    from hangdbg.catalog.message import parse_line
    assert parse_line("MPIR_pmi_kvs_get(227).......: PMI_KVS_Get returned -1").src == "MPIR_pmi_kvs_get(227)"


def test_an_ascend_hccl_failure_is_read_by_its_cann_error_code(tmp_path):
    # torch_npu's HCCL error (HcclResult 7), its own error code line, then CANN's documented code line
    text = ("[rank0]: RuntimeError: create:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:89 HCCL function error: "
            "HcclCommInitRootInfo(numRanks, &rootInfo, rank, &(comm->hcclComm_)), error code is 7\n"
            "[rank0]: [ERROR] 2025-03-26-11:49:12 (PID:3674, Device:0, RankID:0) ERR02200 DIST call hccl api failed.\n"
            "[rank0]: EJ0003: [PID: 3674] 2025-03-26-11:49:11.832.492 Failed to bind the IP port. Reason: The IP "
            "address and port have been bound already.\n[rank0]:         TraceBack (most recent call last):\n")
    v = _verdict(tmp_path, text)
    top = _only_suspect(v)
    assert "EJ0003" in top.summary and "port" in top.summary and not top.ranks
    assert not [f for f in v.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    # a message reworded in another CANN release is still read by its code
    (tmp_path / "b").mkdir()
    v = _verdict(tmp_path / "b", "EJ0001: 2024-05-21-11:57:54.167.645 HCCP could not start (reworded).\n")
    assert any("EJ0001" in f.summary and f.severity is Severity.SUSPECT for f in v.findings)


def test_a_traceback_wrapped_at_a_width_is_joined_back_by_its_syntax():
    from hangdbg.evidence.error_lines.paste import frames_unwrapped

    wrapped = (b'  File "/env/lib/python3.7/site-packages/torch/distr\nibuted/rendezvous.py", line 133, in _tcp_rende\n'
               b"zvous_handler\n    store = TCPStore(result.hostname, result.port, world_size, \ntimeout)\n"
               b"RuntimeError: Address already in use\n")
    lines = frames_unwrapped(wrapped).split(b"\n")
    assert len(lines) == len(wrapped.split(b"\n"))  # line numbers kept: the joined pieces become blank
    assert lines[2] == b'  File "/env/lib/python3.7/site-packages/torch/distributed/rendezvous.py", line 133, in ' \
                       b"_tcp_rendezvous_handler"
    assert lines[3] == b"    store = TCPStore(result.hostname, result.port, world_size, timeout)" and lines[4] == b""
    assert lines[5] == b"RuntimeError: Address already in use"
    whole = b'  File "/a.py", line 1, in f\n    g(x,\n      y)\nValueError: bad\n'
    assert frames_unwrapped(whole) == b'  File "/a.py", line 1, in f\n    g(x, y)\n\nValueError: bad\n'


def test_a_dcgmi_diag_box_table_is_read_as_rows_and_its_message_by_dcgms_catalog(tmp_path):
    from hangdbg.evidence.error_lines.paste import boxed

    text = ("+---------------------------+------------------------------------------------+\n"
            "| Memory                    | Fail                                           |\n"
            "| Warning: GPU0             | Detected 2 volatile double-bit ECC error(s) in |\n"
            "|                           |  GPU 0.                                        |\n"
            "+---------------------------+------------------------------------------------+\n")
    rows = boxed(text.encode()).split(b"\n")
    assert rows[1] == b"Memory: Fail" and rows[3] == b"" and len(rows) == len(text.split("\n"))
    assert rows[2] == b"Warning: GPU0: Detected 2 volatile double-bit ECC error(s) in GPU 0."
    v = _verdict(tmp_path, text)
    top = v.findings[0]
    assert top.severity is Severity.SUSPECT and "DCGM_FR_VOLATILE_DBE_DETECTED" in top.summary


def test_an_exception_whose_next_lines_say_it_waited_for_a_peer_blames_no_rank(tmp_path):
    # a framework's own exception text no entry knows, then the library's account: it waited for a remote rank
    text = ("[rank1]: RuntimeError: frobnicator step failed, error code is 6\n"
            "[rank1]: EI0006: [PID: 12] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank "
            "did not send the data in time. Please check the reason for the rank being stuck\n")
    v = _verdict(tmp_path, text)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT and 1 in f.ranks]
    assert any("EI0006" in f.summary for f in v.findings)


def test_more_processes_with_one_local_rank_than_nodes_is_a_launch_error(tmp_path):
    def log(locals_):
        return "".join(f"LOCAL_RANK: {lr} - CUDA_VISIBLE_DEVICES: [0,1]\ninitializing ddp: GLOBAL_RANK: {g}, "
                       f"MEMBER: {g + 1}/4\n" for g, lr in enumerate(locals_))
    v = _verdict(tmp_path, log([0, 0, 0, 0]))  # 4 ranks on nodes of 2 GPUs: 2 nodes, local rank 0 at most twice
    top = _only_suspect(v)
    assert top.kind is Kind.LAUNCH_ERROR and "LOCAL_RANK 0" in top.summary and not top.ranks
    (tmp_path / "ok").mkdir()
    v = _verdict(tmp_path / "ok", log([0, 1, 0, 1]))
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT]


def test_short_pastes_that_lost_their_newlines_are_split_at_record_starts(tmp_path):
    # NCCL lines without their host prefix, and a logging line, run together in fewer than 400 characters
    text = ("NCCL version 2.18.5+cuda12.2 ... transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument' NCCL "
            "INFO transport/nvls.cc:324 -> 1 NCCL INFO init.cc:1093 -> 1 NCCL INFO init.cc:1358 -> 1\n")
    v = _verdict(tmp_path, text)
    assert any("invalid argument" in f.summary for f in v.findings)
    (tmp_path / "b").mkdir()
    text = ("INFO 2020-01-17 00:55:01,694 Using TCPStore for c10d::Store implementation INFO 2020-01-17 00:55:01,702 "
            "Rank 1 will connect to TCPStore server at job-z2b7s:47279 [ERROR] 2020-01-17 00:55:01,724 coordinator_p2p:"
            " Rank: -1 Error: Rank -1 received an Exception. Detailed message: host not found: Name or service not known\n")
    v = _verdict(tmp_path / "b", text)
    assert v.findings and v.findings[0].severity is Severity.SUSPECT and "resolved" in v.findings[0].summary


def test_a_double_spaced_paste_keeps_its_traceback_and_its_hard_wrap(tmp_path):
    from hangdbg.evidence.error_lines.paste import unwrapped

    text = ('  File "/env/torch/distributed/rendezvous.py", line 133, in _tcp_rendezvous_handler\n\n'
            "    store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)\n\n")
    v = _verdict(tmp_path, text * 2)
    assert any("rendezvous.py:133" in f.summary for f in v.findings)  # the cut traceback, source line and all
    cut = b"x" * 59 + b"a"
    body = b"\n\n".join([cut, b"bcd rest one", cut, b"bcd rest two", cut, b"bcd rest three"]) + b"\n"
    lines = unwrapped(body).split(b"\n")
    assert lines[0] == cut + b"bcd rest one" and lines[2] == b"" and len(lines) == len(body.split(b"\n"))


def test_a_known_message_split_by_a_wrap_is_joined_again(tmp_path):
    text = ("WARNING 06-13 11:35:04 [ray_utils.py:341] The number of required GPUs exceeds\n"
            "the total number of available GPUs in the placement group.\n")
    v = _verdict(tmp_path, text)
    assert v.findings and "placement group" in v.findings[0].summary


def test_an_exception_message_over_several_lines_is_quoted_whole(tmp_path):
    text = ("AssertionError: the frobnicator device, its firmware and/or toolkit version does not support\n"
            "warp-drive overlap with quantum Multicast. Launch app with WD_SKIPQM=1 to try classic\nIPC instead.\n")
    v = _verdict(tmp_path, text)
    assert v.findings and "WD_SKIPQM=1" in v.findings[0].summary and "IPC instead" in v.findings[0].summary


def test_a_capability_assertion_of_transformer_engine_blames_the_machine_not_the_rank(tmp_path):
    text = ("[rank0]: AssertionError: CUDA device, driver and/or toolkit version does not support comm+GEMM overlap "
            "with CUDA Multicast. Launch app with UB_SKIPMC=1 to try CUDA IPC instead.\n")
    v = _verdict(tmp_path, text)
    top = _only_suspect(v)
    assert "Multicast" in top.summary and not top.ranks


def test_announcements_a_paste_ran_together_count_one_by_one(tmp_path):
    # two nodes each numbering ranks from 0, their lines glued into one (a paste that lost its newlines)
    text = " ".join(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4" for r in (0, 1, 0, 1)) + "\n"
    v = _verdict(tmp_path, text)
    top = _only_suspect(v)
    assert top.kind is Kind.LAUNCH_ERROR and "announced by 2 processes" in top.summary


def test_a_cut_traceback_after_a_timeout_is_no_first_failure(tmp_path):
    text = ("[E ProcessGroupNCCL.cpp:719] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
            "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806456 milliseconds before timing out.\n"
            'Traceback (most recent call last):\n  File "/w/train.py", line 9, in <module>\n    main()\n'
            '  File "/w/runner.py", line 64, in train_step\n    outputs = self.model.train_step(batch)\n')
    v = _verdict(tmp_path, text)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT and "ends inside" in f.summary]


def test_a_rank_killed_when_slurm_ended_the_job_is_no_suspect(tmp_path):
    text = ("slurmstepd: error: *** JOB 1234 ON node7 CANCELLED AT 2024-01-01T10:00:00 DUE TO TIME LIMIT ***\n"
            "mpirun noticed that process rank 3 with PID 4242 on node node7 exited on signal 9 (Killed).\n")
    v = _verdict(tmp_path, text)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT and f.ranks]
    (tmp_path / "alone").mkdir()  # with nothing else, the rank mpirun saw killed is the one that ended first
    v = _verdict(tmp_path / "alone", text.split("\n", 1)[1])
    assert [f.ranks for f in v.findings if f.severity is Severity.SUSPECT] == [(3,)]


def test_a_child_signalled_when_slurm_ended_the_job_is_no_suspect(tmp_path):
    block = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n" + "=" * 60 + "\ntrain.py FAILED\n"
             + "-" * 60 + "\nFailures:\n  <NO_OTHER_FAILURES>\n" + "-" * 60 + "\nRoot Cause (first observed failure):\n"
             "[0]:\n  time      : 2024-01-01_10:00:01\n  host      : node7\n  rank      : 3 (local_rank: 3)\n"
             "  exitcode  : -15 (pid: 4242)\n  error_file: <N/A>\n  traceback : Signal 15 (SIGTERM) received by PID 4242\n"
             + "=" * 60 + "\n")
    end = "slurmstepd: error: *** JOB 1234 ON node7 CANCELLED AT 2024-01-01T10:00:00 DUE TO TIME LIMIT ***\n"
    v = _verdict(tmp_path, end + block)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT and f.ranks]
    assert any("time limit" in f.summary for f in v.findings if f.severity is Severity.SUSPECT)
    (tmp_path / "alone").mkdir()  # without Slurm's end, torchrun's first failure stays the suspect
    v = _verdict(tmp_path / "alone", block)
    assert [f.ranks for f in v.findings if f.severity is Severity.SUSPECT][:1] == [(3,)]


def test_a_child_signalled_after_its_launcher_got_a_death_signal_is_no_suspect(tmp_path):
    text = ("[2024-01-01 10:00:00,000] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGTERM "
            "death signal, shutting down workers\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
            + "=" * 60 + "\ntrain.py FAILED\n" + "-" * 60 + "\nRoot Cause (first observed failure):\n[0]:\n"
            "  time      : 2024-01-01_10:00:01\n  host      : node7\n  rank      : 3 (local_rank: 3)\n"
            "  exitcode  : -15 (pid: 4242)\n  error_file: <N/A>\n  traceback : Signal 15 (SIGTERM) received by PID 4242\n"
            + "=" * 60 + "\n")
    v = _verdict(tmp_path, text)
    sus = [f for f in v.findings if f.severity is Severity.SUSPECT]
    # rank 3 is no suspect: the job was stopped from outside, and that end (no rank, no host) is what the logs show
    assert len(sus) == 1 and not sus[0].ranks and not sus[0].hosts and "stopped from outside" in sus[0].summary


def test_an_exception_behind_a_prefix_no_rule_peels_is_still_an_error_line(tmp_path):
    """``Cls: message`` whose message has no error word, behind pytest's ``E   `` or an unknown logger's prefix:
    the exception class makes it an error line (read, or quoted as unrecognised), never "nothing could be read"."""
    v = _verdict(tmp_path, "E       RuntimeError: the shard index went past the dataset\n")
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "RuntimeError: the shard index went past the dataset" in top.summary
    (tmp_path / "logger").mkdir()
    v = _verdict(tmp_path / "logger", "train.py:42 - step 7 - RuntimeError: the shard index went past the dataset\n")
    assert [f.kind for f in v.findings] == [Kind.UNRECOGNISED_ERROR]
    (tmp_path / "mirror").mkdir()  # a word that only ends like one is none
    v = _verdict(tmp_path / "mirror", "sync mirror: done in 3 s\n")
    assert not v.findings


def test_a_python_warning_pasted_without_its_file_is_read_as_with_it(tmp_path):
    """warnings' ``FILE:LINE: UserWarning: MSG`` with the file cut by the paste: the message is still known."""
    for i, line in enumerate(["/x/torch/cuda/__init__.py:141: UserWarning: CUDA initialization: The NVIDIA driver on "
                              "your system is too old (found version 11040).",
                              "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found "
                              "version 11040)."]):
        (tmp_path / str(i)).mkdir()
        v = _verdict(tmp_path / str(i), line + "\n")
        assert [f.kind for f in v.findings if f.severity is Severity.SUSPECT] == [Kind.RESOURCE_ERROR], line


_OMPI_BANNER = ("--------------------------------------------------------------------------\n"
                "Primary job  terminated normally, but 1 process returned\n"
                "a non-zero exit code. Per user-direction, the job has been aborted.\n"
                "--------------------------------------------------------------------------\n"
                "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
                "the job to be terminated. The first process to do so was:\n\n"
                "  Process name: [[50371,1],{rank}]\n  Exit code:    1\n"
                "--------------------------------------------------------------------------\n")


def test_mpiruns_first_process_banner_names_the_rank_its_rows_give_not_a_prefix(tmp_path):
    """Open MPI's [orterun:non-zero-exit]: the vpid of 'Process name: [[J,S],R]' is the rank that failed first."""
    peer = ("[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the "
            "ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.\n")
    v = _verdict(tmp_path, peer + _OMPI_BANNER.format(rank=3))
    assert [f.ranks for f in v.findings if f.severity is Severity.SUSPECT] == [(3,)]
    assert not [f for f in v.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    (tmp_path / "prefixed").mkdir()  # a head under a rank prefix: the rows decide
    v = _verdict(tmp_path / "prefixed", "".join(f"[1,0]<stderr>:{ln}\n" for ln in _OMPI_BANNER.format(rank=2).split("\n")[4:6])
                 + "  Process name: [[50371,1],2]\n  Exit code:    1\n")
    assert [f.ranks for f in v.findings if f.severity is Severity.SUSPECT] == [(2,)]


def test_hydras_bad_termination_banner_reads_the_signal_and_host(tmp_path):
    """MPICH Hydra prints its banner only for a signalled process, with the wait status as the code."""
    rule = "=" * 83 + "\n"
    banner = (rule + "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 92248 RUNNING AT node7\n"
              "=   EXIT CODE: {code}\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n" + rule)
    v = _verdict(tmp_path, banner.format(code=9))
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "SIGKILL" in top.summary and top.hosts == ("node7",) and not top.ranks
    (tmp_path / "segv").mkdir()
    v = _verdict(tmp_path / "segv", banner.format(code=139))
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "139 SIGSEGV" in top.summary and "SIGKILL" not in top.summary.split("(")[0]
    (tmp_path / "intel").mkdir()  # Intel MPI's Hydra: the rank and the signal by name
    v = _verdict(tmp_path / "intel", rule + "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
                 "=   RANK 1 PID 5491 RUNNING AT gn59\n=   KILLED BY SIGNAL: 9 (Killed)\n" + rule)
    assert [(f.ranks, f.hosts) for f in v.findings if f.severity is Severity.SUSPECT] == [((1,), ("gn59",))]
    (tmp_path / "cut").mkdir()  # the excerpt ends after the head: no rank or host is made up
    v = _verdict(tmp_path / "cut", rule + "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n")
    assert not [f for f in v.findings if f.ranks or f.hosts]


def test_a_log_stored_as_one_escaped_string_is_read_line_by_line(tmp_path):
    """A JSON or repr string's ``\\n`` escapes, never undone by whoever stored it: its lines are the log's."""
    text = ('Traceback (most recent call last):\\n  File "train.py", line 10, in <module>\\n    main()\\n'
            'RuntimeError: CUDA error: an illegal memory access was encountered\\nCUDA kernel errors might be '
            'asynchronously reported at some other API call')
    v = _verdict(tmp_path, text)
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "cudaErrorIllegalAddress" in top.summary
    from hangdbg.evidence.error_lines.paste import unescaped
    kept = b'print("a\\\\nb")\nsecond line\nthird\n'  # a log with lines of its own keeps its escapes
    assert unescaped(kept) == kept


def test_srun_task_lines_name_their_node_not_a_rank(tmp_path):
    """srun's ``NODE: task N: ...`` (src/srun/launch.c): the node is the host; the task id is no rank (one srun task
    may be a whole node's torchrun)."""
    v = _verdict(tmp_path, "srun: error: node03: task 5: Exited with exit code 1\n")
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert top.hosts == ("node03",) and not top.ranks


def test_deepspeeds_return_code_names_the_signal_and_pdsh_names_the_node(tmp_path):
    """DeepSpeed's sigkill_handler quotes Popen.returncode (-N: signal N); pdsh's 'node2: ' before its time is the host."""
    v = _verdict(tmp_path, "node2: [2024-01-01 10:00:00,000] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 4321\n"
                           "node2: [2024-01-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', "
                           "'-u', 'train.py', '--local_rank=3'] exits with return code = -9\n")
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "SIGKILL" in top.summary and top.hosts == ("node2",) and not top.ranks


def test_richs_log_columns_are_peeled_and_its_boxed_traceback_is_no_error(tmp_path):
    """rich's RichHandler: level column, message, the caller's file:line at the right edge (a wrapped message's rest on
    the next line); rich's traceback box header is context."""
    text = (" WARNING  Sending process 14 closing signal SIGTERM         api.py:699\n"
            " ERROR    failed (exitcode: -9) local_rank: 5 (pid: 22) of  api.py:673\n"
            " binary: /opt/conda/bin/python \n"
            "\u256d\u2500\u2500\u2500\u2500 Traceback (most recent call last) \u2500\u2500\u2500\u2500\u256e\n")
    v = _verdict(tmp_path, text)
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "exitcode: -9" in top.summary and "SIGKILL" in top.summary
    assert not [f for f in v.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    from hangdbg.catalog.message import parse_line
    m = parse_line("[06/01/23 10:00:00] ERROR    the store went away    store.py:12")
    assert (m.text, m.level, m.src) == ("the store went away", "ERROR", "store.py:12")
    assert parse_line("ERROR    no path column here").text == "ERROR    no path column here"  # the level alone is kept


def test_ucx_fatal_signal_names_its_host_and_nvml_init_failures_are_read(tmp_path):
    """UCX's "[host:pid:thread:tid] Caught signal 11 (...)" (ucs/debug/debug.c) and nvidia-smi's NVML init failures."""
    v = _verdict(tmp_path, "[worker-0:4682 :0:4682] Caught signal 11 (Segmentation fault: address not mapped to object at "
                           "address (nil))\n==== backtrace (tid:   4677) ====\n")
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert top.hosts == ("worker-0",) and "UCX" in top.summary
    (tmp_path / "nvml").mkdir()
    v = _verdict(tmp_path / "nvml", "Failed to initialize NVML: Driver/library version mismatch\n")
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "kernel module" in top.summary


_WATCHDOG = ("[rank3]:[E1121 01:02:03.456789 1234 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 "
             "milliseconds before timing out.\n")


def test_a_rank_its_watchdog_aborts_is_no_suspect(tmp_path):
    """terminate + what(): the pair is its what() message; the shell's 'Aborted' after a rank's own timeout is that
    wait's end: nothing here is a failure of its own (the rank waited for one not in these logs)."""
    text = (_WATCHDOG + "terminate called after throwing an instance of 'c10::DistBackendError'\n"
            "  what():  [PG 0 Rank 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600123 milliseconds before timing out.\n"
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):\n"
            + "".join(f"frame #{i}: <unknown function> + 0x{i:x}00 (0x7f in /usr/lib/libtorch.so)\n" for i in range(20))
            + "Aborted (core dumped)\n")
    v = _verdict(tmp_path, text)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT]
    assert any(f.kind is Kind.ECHO and "Aborted" in f.summary for f in v.findings)


def test_an_abort_after_an_unknown_what_keeps_the_terminate_line(tmp_path):
    """A what() no entry knows: the terminate line stays the failure, quoting its what()."""
    v = _verdict(tmp_path, "terminate called after throwing an instance of 'acme::Glitch'\n  what():  frob-17 glitched\n"
                           "Aborted (core dumped)\n")
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert "what(): frob-17 glitched" in top.summary


def test_an_uncaught_bad_alloc_is_the_hosts_memory(tmp_path):
    v = _verdict(tmp_path, "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"
                           "Aborted (core dumped)\n")
    top = _only_suspect(v)
    assert "allocation on the host failed" in top.summary and not top.ranks


def test_a_ranks_exception_before_the_launchers_lines_is_its_own_failure(tmp_path):
    """The agent's 'Sending process N closing signal SIGTERM' under a rank's traceback is the launcher's line, not
    that rank saying it waited: the rank's KeyError is the first failure, the others' timeouts wait for it."""
    text = (
        "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"/w/data.py\", line 33, in __getitem__\n"
        "[rank0]:     img = self.cache[key]\n[rank0]: KeyError: 'sample_000123'\n" + _WATCHDOG.replace("rank3", "rank1")
        .replace("Rank 3", "Rank 1") +
        "W1121 01:32:10.000000 999 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 1235 closing "
        "signal SIGTERM\n")
    v = _verdict(tmp_path, text)
    assert any(f.severity is Severity.SUSPECT and f.ranks == (0,) and "KeyError" in f.summary for f in v.findings)


def test_a_known_message_a_wrap_cut_after_a_comma_is_no_code(tmp_path):
    """'Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3,' ends like code that opens a call, but its
    long head names PyTorch's watchdog message: the wrapped timeout is read, never 'nothing could be read'."""
    v = _verdict(tmp_path, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, \n"
                           "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1808442 milliseconds before \ntiming out.\n")
    assert any("process group timeout" in f.summary for f in v.findings)
    assert not [f for f in v.findings if f.severity is Severity.SUSPECT]


def test_an_excerpt_that_ends_at_a_traceback_header_says_so(tmp_path):
    """The last pasted line is 'Traceback (most recent call last):': a failure began there (a warning, never
    'nothing could be read'), and nothing says where or that it was first."""
    v = _verdict(tmp_path, "Epoch 3: 100%|####| 10/10\nTraceback (most recent call last):\n")
    assert [(f.kind, f.severity) for f in v.findings] == [(Kind.RANK_ERROR, Severity.WARNING)]
    assert "no frame pasted" in v.findings[0].summary


@pytest.mark.parametrize("line,words", [
    ("double free or corruption (!prev)", "heap corrupted"),
    ("*** Error in `python': malloc(): memory corruption: 0x00007f0000000000 ***", "heap corrupted"),
    ("ImportError: /x/_C.so: undefined symbol: ncclCommRegister", "built against another version"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
     "driver is installed and running.", "kernel driver"),
    ("No devices were found", "found no GPU")])
def test_native_heap_linker_and_driver_failures_are_read(tmp_path, line, words):
    v = _verdict(tmp_path, line + "\n")
    top = next(f for f in v.findings if f.severity is Severity.SUSPECT)
    assert words in top.summary


@pytest.mark.parametrize("line", ["[2024-01-01 10:00:00,000] [ERROR] worker 3 stopped responding",
                                  "ERROR:root:the job stopped at step 500",
                                  "E1121 01:02:03.456789 1234 some/file.cc:12] something went wrong on this node",
                                  "The process crashed with no output"])
def test_a_line_at_an_error_level_is_an_error_line_whatever_its_words(tmp_path, line):
    """Python logging's and glog's error levels (and the word 'crashed') make a line an error line: quoted as
    unrecognised when no entry knows it, never 'nothing could be read'."""
    v = _verdict(tmp_path, line + "\n")
    assert [f.kind for f in v.findings] == [Kind.UNRECOGNISED_ERROR]


def test_an_info_line_stays_quiet(tmp_path):
    v = _verdict(tmp_path, "[2024-01-01 10:00:00,000] [INFO] worker 3 started\nI1121 01:02:03.456789 1234 a.cc:1] ok\n")
    assert not v.findings


def test_a_banner_head_past_the_event_cap_rewrites_no_kept_event():
    """An event the log dropped (past MAX_EVENTS) opens no banner: the kept last event is another line's."""
    from hangdbg.catalog.message import parse_line
    from hangdbg.evidence.error_lines.blocks import opened
    from hangdbg.evidence.error_lines.log import ErrorEvent, ErrorLog
    from hangdbg.model import Evidence
    log = ErrorLog()
    kept = ErrorEvent(Evidence("f", 1, "RuntimeError: x"), parse_line("RuntimeError: x"), None, 1)
    log.add(kept)
    head = "mpirun detected that one or more processes exited with non-zero status, thus causing"
    dropped = ErrorEvent(Evidence("f", 2, head), parse_line(head), None, 2)
    assert opened(log, dropped) is None
    log.add(dropped)
    assert opened(log, dropped) is not None


_IPYTHON_TB = (
    "---------------------------------------------------------------------------\n"
    "RuntimeError                              Traceback (most recent call last)\n"
    "Cell In[7], line 2\n"
    "      1 import torch\n"
    "----> 2 x = torch.zeros(10).cuda()\n\n"
    "File /opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:298, in _lazy_init()\n"
    "    294     raise RuntimeError(\n"
    '    295         "Cannot re-initialize CUDA in forked subprocess. To use CUDA with "\n'
    "    297     )\n"
    "--> 298 torch._C._cuda_init()\n\n")


def test_an_ipython_traceback_is_context_up_to_its_exception_line(tmp_path):
    """Jupyter's traceback (IPython ultratb): its title, frames and numbered source lines are no error lines (the
    source shows a raise that did not run); its last line is the error."""
    rep = _read(tmp_path, _IPYTHON_TB + "RuntimeError: CUDA error: out of memory\n")
    assert [f.kind for f in rep.findings if f.severity is Severity.SUSPECT] == [Kind.KNOWN_ERROR]
    assert not [f for f in rep.findings if "re-initialize" in f.summary or "Traceback" in f.summary]


def test_an_ipython_traceback_cut_before_its_exception_names_the_class_and_the_raise(tmp_path):
    text = _IPYTHON_TB.replace("--> 298 torch._C._cuda_init()", "--> 298     raise ValueError(\n"
                               '    299         "CUDA was initialized before the fork"\n    300     )')
    rep = _read(tmp_path, text.rstrip("\n") + "\n")
    [cut] = [f for f in rep.findings if "excerpt ends inside" in f.summary]
    assert "raised RuntimeError" in cut.summary and "__init__.py:298 in _lazy_init" in cut.summary
    assert "CUDA was initialized before the fork" in cut.summary
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]


def test_an_ipython7_frame_line_moves_the_cut_traceback_on(tmp_path):
    text = ("ValueError                                Traceback (most recent call last)\n"
            "<ipython-input-3-5c1a> in <module>\n----> 1 notebook_launcher(train, num_processes=2)\n\n"
            "~/envs/p/lib/python3.8/site-packages/accelerate/launchers.py in notebook_launcher(function, args)\n"
            "    122 if torch.cuda.is_initialized():\n--> 123     raise ValueError(\n")
    rep = _read(tmp_path, text)
    [cut] = [f for f in rep.findings if "excerpt ends inside" in f.summary]
    assert "launchers.py in notebook_launcher" in cut.summary and "raised ValueError" in cut.summary


def test_a_crash_handlers_banner_is_the_failure_and_its_frames_are_no_cut_traceback(tmp_path):
    """tvm-ffi's SIGSEGV handler prints its banner, then native frames innermost first in the shape of Python
    frame lines: a whole report, not a traceback the excerpt ends inside."""
    text = ("!!!!!!! Segfault encountered !!!!!!!\n"
            '  File "/libvgpu/src/cuda/memory.c", line 582, in cuMemCreate\n'
            '  File "misc/cudawrap.cc", line 92, in ncclCuMemHostEnable()\n'
            '  File "<unknown>", line 0, in _PyObject_MakeTpCall\n')
    rep = _read(tmp_path, text)
    [top] = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert "segmentation fault" in top.summary
    assert not [f for f in rep.findings if "excerpt ends inside" in f.summary]


def test_a_traceback_header_cut_short_is_the_excerpts_end_not_an_error_line(tmp_path):
    rep = _read(tmp_path, "step 9 done\nTraceback (mo\n")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert [f for f in rep.findings if "ends at its header" in f.summary]


def test_a_log_without_an_error_line_that_stops_at_a_jit_build_says_where_it_stops(tmp_path):
    """No error line, but the last line starts a step that can wait forever (the catalog entry's stall): a warning
    that says where the output stops and what that step waits for, never 'nothing could be read', never a suspect."""
    text = ("> compiling and loading fused kernels ...\nDetected CUDA files, patching ldflags\n"
            "Emitting ninja build file /opt/megatron/fused_kernels/build/build.ninja...\n"
            "Building extension module scaled_masked_softmax_cuda...\n")
    rep = _read(tmp_path, text)
    [f] = rep.findings
    assert f.kind is Kind.STALL and f.severity is Severity.WARNING and "lock" in f.summary
    assert rep.records == 1 and rep.facts.quiet_files == ()


def test_a_progress_line_in_the_middle_of_a_log_is_no_stall(tmp_path):
    text = "Building extension module fused_adam...\nLoading extension module fused_adam...\nstep 10 loss 2.3\n"
    rep = _read(tmp_path, text)
    assert not rep.findings and rep.facts.quiet_files


def test_a_stall_line_that_other_processes_copies_follow_is_where_the_output_stops(tmp_path):
    """The processes of a job print the same lines interleaved: a stall line followed only by copies of earlier lines
    (the same but for numbers) is still where the output stops (stall.py stall_in_tail); a new line after it is not."""
    cdb = "[2024-06-11 00:23:36,{}] [INFO] [comm.py:637:init_distributed] cdb=None\n"
    init = "[2024-06-11 00:23:36,254] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl\n"
    rep = _read(tmp_path, cdb.format(254) + init + cdb.format(296))
    [f] = rep.findings
    assert f.kind is Kind.STALL and f.evidence[0].line == 2 and "ranks are missing" in f.summary
    rep = _read(tmp_path, cdb.format(254) + init + "step 1 loss 2.3\n")
    assert not rep.findings


def test_a_log_that_stops_waiting_in_the_store_barrier_names_missing_ranks(tmp_path):
    text = ("I1127 22:14:21.696000 579 torch/distributed/distributed_c10d.py:1620] Waiting in store based barrier to "
            "initialize process group for 30 seconds\n")
    rep = _read(tmp_path, text)
    [f] = rep.findings
    assert f.kind is Kind.STALL and "ranks are missing" in f.summary


def test_torchelastics_old_log_format_is_peeled_and_a_rendezvous_wait_is_a_stall(tmp_path):
    """PyTorch 1.9-1.10's torchelastic format '[INFO] DATE TIME,ms module: message'; a log that stops while the
    node joins the rendezvous says the rendezvous waits for nodes."""
    text = ("[INFO] 2021-06-29 12:04:55,398 api: [default] Rendezvous'ing worker group\n"
            "[INFO] 2021-06-29 12:04:55,398 dynamic_rendezvous: The node 'master1_21848_0' attempts to join the next "
            "round of the rendezvous '11'.\n")
    rep = _read(tmp_path, text)
    [f] = rep.findings
    assert f.kind is Kind.STALL and "nodes are missing" in f.summary


def test_an_installation_or_capability_exception_names_no_rank(tmp_path):
    """A missing module or a 'does not support' on one rank is the installation's or the machine's: the same on
    every rank with these packages; the rank that printed it first is no culprit."""
    for line in ("[rank0]: ModuleNotFoundError: No module named 'flash_attn'",
                 "[rank2]: RuntimeError: this GPU does not support bf16 matmuls with fp8 scaling",
                 "[rank0]:[rank0]: RuntimeError: Missing key in checkpoint state_dict: model.layers.0.wq.weight.",
                 "[rank1]: RuntimeError: ProcessGroupNCCL does not support barrier"):  # a collective's name: no wait
        v = _verdict(tmp_path, line + "\n")
        top = _only_suspect(v)
        assert not top.ranks and "not that rank's own" in top.summary and "consequence" not in top.summary


def test_a_ranks_own_code_exception_still_names_it(tmp_path):
    v = _verdict(tmp_path, "[rank3]: KeyError: 'sample_000123'\n")
    top = _only_suspect(v)
    assert top.ranks == (3,)


def test_a_json_document_no_reader_takes_is_read_for_its_error_lines(tmp_path):
    (tmp_path / "event.json").write_text('{"level": "error", "msg": "worker 3 failed: RuntimeError: CUDA error: an '
                                         'illegal memory access was encountered", "ts": 1}\n')
    rc, doc = main_json("report", str(tmp_path))
    assert rc == 3 and "invalid address" in doc["headline"]


def test_a_py_spy_header_without_a_thread_still_has_its_error_lines_read(tmp_path):
    """A paste that kept py-spy's header and the error after it, no stack: the error is not lost behind
    'could not read the stacks'."""
    (tmp_path / "dump.txt").write_text("Process 1234: python train.py\nPython v3.10.12 (/usr/bin/python3.10)\n\n"
                                       "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    rc, doc = main_json("report", str(tmp_path))
    assert rc == 3 and "invalid address" in doc["headline"]


def test_an_ibstat_port_that_is_not_up_is_the_hardwares_warning(tmp_path):
    text = ("CA 'mlx5_1'\n\tCA type: MT4123\n\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Disabled\n\t\tRate: 10\n"
            "\t\tLink layer: InfiniBand\n")
    v = _verdict(tmp_path, text)
    top = _only_suspect(v)
    assert top.kind is Kind.HARDWARE_ERROR and ("Down" in top.summary or "Disabled" in top.summary) and not top.ranks


def test_an_active_port_is_no_finding(tmp_path):
    rep = _read(tmp_path, "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 200\n")
    assert not rep.findings


def test_a_dev_shm_of_64_mb_in_a_df_table_is_the_environments_warning(tmp_path):
    text = ("Filesystem      Size  Used Avail Use% Mounted on\noverlay         1.8T  1.2T  600G  67% /\n"
            "shm              64M     0   64M   0% /dev/shm\n")
    v = _verdict(tmp_path, text)
    top = _only_suspect(v)
    assert "64 MB" in top.summary and not top.ranks


def test_a_large_dev_shm_is_no_finding(tmp_path):
    rep = _read(tmp_path, "Filesystem Size Used Avail Use% Mounted on\ntmpfs 252G 1.1G 251G 1% /dev/shm\n")
    assert not rep.findings


def test_a_rank_the_shell_reports_killed_keeps_its_rank_other_environment_errors_name_none(tmp_path):
    """``[0]<stderr>:Killed``: rank 0's process died of SIGKILL (the host's OOM killer or the scheduler) and the
    others' lost peers are its echoes, so the line keeps rank 0; a full /dev/shm a rank prints names no rank."""
    rep = _read(tmp_path, "[0]<stderr>:Killed\n[1]<stderr>:terminate called after throwing an instance of "
                          "'gloo::IoException'\n[1]<stderr>:  what():  [pair.cc:589] Read error [127.0.0.1]:3977: "
                          "Connection reset by peer\n")
    killed = [f for f in rep.findings if f.kind is Kind.RESOURCE_ERROR]
    assert [f.ranks for f in killed] == [(0,)] and "SIGKILL" in killed[0].summary
    rep = _read(tmp_path, "[rank1]: NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes\n", "b.log")
    assert rep.findings and all(f.ranks == () for f in rep.findings if f.kind is Kind.RESOURCE_ERROR)


def test_a_connection_to_an_address_no_host_has_blames_the_launch(tmp_path):
    """The store client connecting to 255.255.0.0 (a netmask taken for MASTER_ADDR): the launch configuration is the
    suspect, no rank or host; a routable or loopback address stays the peer's problem."""
    line = "[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:{}]:29500 (errno: 110 - " \
           "Connection timed out).\n"
    rep = _read(tmp_path, line.format("255.255.0.0"), "a.log")
    [f] = rep.findings
    assert f.kind is Kind.LAUNCH_ERROR and f.severity is Severity.SUSPECT and f.ranks == () and f.hosts == ()
    assert "255.255.0.0" in f.summary and "MASTER_ADDR" in f.action
    for ok in ("10.1.2.3", "127.0.0.1"):
        rep = _read(tmp_path, line.format(ok), f"{ok}.log")
        assert [f.kind for f in rep.findings] == [Kind.PEER_ERROR]


def test_no_host_in_names_multicast_reserved_and_broadcast_addresses_only():
    from hangdbg.text.addresses import no_host_in
    assert no_host_in("connect to [::ffff:255.255.0.0]:29500") == "255.255.0.0"
    assert no_host_in("peer 239.1.2.3<1234>") == "239.1.2.3" and no_host_in("to 255.255.255.255") == "255.255.255.255"
    assert no_host_in("listening on 0.0.0.0:29500, peer 10.0.0.2, 1.2.3.4.5") == ""


def test_a_cann_error_codes_detail_line_is_read_as_that_code_with_its_own_text():
    """``EZ9999[PID: N] TIME (EZ9999):  TEXT``: the detail the error manager prints under a CANN code line is that code's
    message (its pid, its text), not an unknown line."""
    from hangdbg.catalog.message import parse_line
    m = parse_line("(EngineCore_DP0 pid=17833) EZ9999[PID: 17833] 2025-12-23-07:36:19.237.396 (EZ9999):  "
                   "HCCL_BUFFSIZE is too SMALL, maxBs = 512")
    assert (m.src, m.pid, m.text) == ("EZ9999", 17833, "HCCL_BUFFSIZE is too SMALL, maxBs = 512")
    assert parse_line("EZ9999[PID: 1] 2025-12-23-07:36:19.237 (EI0006):  x").src != "EZ9999"  # one code, not two


def test_a_long_timestamped_nccl_line_is_one_record_with_its_host(tmp_path):
    """``[TIME] host:pid:tid [dev] file.cc:N NCCL WARN ...`` holds three record starts, but the timestamp and the NCCL
    header are prefixes of one record: the line is not cut into pieces, and the host stays the message's."""
    rep = _read(tmp_path, "[2025-10-13 09:06:25] decode-0:3663:4044 [0] misc/shmutils.cc:129 NCCL WARN Error while "
                          "creating shared memory segment /dev/shm/nccl-Ewjreo (size 33030528), error: No space left on "
                          "device (28)\n")
    [f] = [f for f in rep.findings if f.kind is Kind.RESOURCE_ERROR]
    assert f.hosts == ("decode-0",) and "decode-0" in f.summary


def test_oneccl_records_are_read_past_their_prefix(tmp_path):
    """oneCCL's ``YYYY:MM:DD-HH:MM:SS:(TID) |CCL_ERROR| FILE:LINE FUNC: condition X failed``: a known failure of
    that process (the launch environment oneCCL reads), not an unknown line."""
    rep = _read(tmp_path, "2024:01:15-03:36:29:(1980058) |CCL_WARN| could not get local_idx/count from environment "
                          "variables, trying to get them from ATL\n2024:01:15-03:36:29:(1980058) |CCL_ERROR| "
                          "global.cpp:150 getenv_local_coord: condition global_data::env().ze_ipc_exchange == "
                          "ccl::ze::ipc_exchange_mode::sockets failed\n")
    assert not [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR]
    assert [f.severity for f in rep.findings if "oneCCL" in f.summary and f.kind is Kind.KNOWN_ERROR] == [Severity.SUSPECT]


def test_a_progress_bar_stopped_at_zero_is_a_stall_one_that_moved_is_not(tmp_path):
    """tqdm's bar at 0 of N as a quiet log's last line: the loop's first step never finished (a multi-GPU job's first
    collective most often); a bar that moved on, or a 0 % bar with lines after it, is no stall."""
    bar = "Processed prompts:   0%|          | 0/16 [00:00<?, ?it/s, est. speed input: 0.00 toks/s]\n"
    rep = _read(tmp_path, "INFO 11-01 23:16:33 executor.py:56] # GPU blocks: 185231\n" + bar, "a.log")
    [f] = rep.findings
    assert f.kind is Kind.STALL and "first collective" in f.summary
    moved = bar.replace("  0%|", " 50%|").replace("| 0/16", "| 8/16")
    assert not _read(tmp_path, "starting\n" + moved, "b.log").findings
    assert not _read(tmp_path, bar + "step 1 loss 2.3\n", "c.log").findings
