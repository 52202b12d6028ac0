"""Issue 26: an error-looking line is never dropped. Files cut down to what the scan reads as context (a launcher
banner's rows, ``Last error:``, a frame's ``Exception raised from``) still give a finding; code and table headers
stay quiet; srun's task-signal lines and messages cut after a comma are read (evidence/error_lines/passed.py,
context.py)."""

from __future__ import annotations

from conftest import main_json

from hangdbg.evidence.error_lines.reader import READER
from hangdbg.model import Kind, Severity


def _read(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text)
    return READER.read([str(p)])


def test_a_banner_cut_to_its_rows_is_read_by_its_values(tmp_path):
    """torchelastic's ChildFailedError rows without their head (the excerpt started below it)."""
    rep = _read(tmp_path, "  exitcode  : -7 (pid: 16609)\n  error_file: <N/A>\n"
                          "  traceback : Signal 7 (SIGBUS) received by PID 16609\n")
    assert rep.records >= 1 and rep.findings
    assert any("SIGBUS" in f.summary for f in rep.findings)


def test_context_alone_is_quoted_not_lost(tmp_path):
    for text in ("Exception raised from doWait at ../torch/csrc/distributed/c10d/TCPStore.cpp:445 "
                 "(most recent call first):\n", "[rank0]: Last error:\n"):
        rep = _read(tmp_path, text)
        assert [f for f in rep.findings if f.kind is Kind.UNRECOGNISED_ERROR], text


def test_code_with_a_timeout_argument_and_table_headers_stay_quiet(tmp_path):
    rc, doc = main_json("report", str(_dir(tmp_path, "    data = self._data_queue.get(timeout=timeout)\n"
                                                    "    ready = selector.select(timeout)\n")))
    assert rc == 1 and doc["headline"].startswith("nothing could be read")
    rep = _read(tmp_path, "index, name, pci.bus_id, uuid, ecc.errors.uncorrected.volatile.total, remapped_rows.failure\n")
    assert not rep.findings


def _dir(tmp_path, text):
    d = tmp_path / "job"
    d.mkdir(exist_ok=True)
    (d / "out.log").write_text(text)
    return d


def test_a_message_cut_after_its_comma_is_no_code(tmp_path):
    rep = _read(tmp_path, "[rank8] Gloo connectFullMesh failed ... timed out connecting: SO_ERROR: Connection refused,\n")
    assert rep.records == 1 and rep.findings[0].ranks == (8,)
    rep = _read(tmp_path, "    if not isinstance(value,\n")  # keywords only: code
    assert not rep.findings


def test_srun_task_signals_echo_or_crash(tmp_path):
    """SchedMD/slurm src/srun/launch.c: ``%s: %s %s: %s%s`` with strsignal(): Terminated is Slurm tearing the step
    down (an echo), Segmentation fault the task's own crash."""
    rep = _read(tmp_path, "srun: error: nid01934: tasks 0-1,3,6: Terminated\n")
    assert rep.findings and all(f.severity is not Severity.SUSPECT for f in rep.findings)
    assert rep.findings[0].hosts == ("nid01934",)
    rep = _read(tmp_path, "srun: error: nid01934: tasks 0-1,3,6: Terminated\n"
                          "srun: error: nid01935: task 9: Segmentation fault (core dumped)\n")
    sus = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert sus and sus[0].hosts == ("nid01935",) and "SIGSEGV" in sus[0].summary


def test_a_bare_assertion_error_says_its_condition(tmp_path):
    """CPython prints the ``assert`` statement under its frame: a message-less AssertionError is that condition."""
    rep = _read(tmp_path, 'vllm/model_executor/models/chatglm.py", line 53, in __init__\n'
                          "    assert self.total_num_kv_heads % tp_size == 0\nAssertionError\n")
    assert any("total_num_kv_heads % tp_size == 0" in f.summary for f in rep.findings)


def test_gdb_caught_sigbus_is_the_shared_memory(tmp_path):
    """gdb/infrun.c print_signal_received_reason: 'Thread N "name" received signal SIGBUS, Bus error.'"""
    rc, doc = main_json("report", str(_dir(tmp_path, 'Thread 787 "imagenet_fake_d" received signal SIGBUS, Bus error.\n'
                                                    "#0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long) ()\n")))
    assert rc == 3 and "/dev/shm" in doc["findings"][0]["summary"]


def test_open_mpi_oob_banner_names_the_remote_host(tmp_path):
    """ORTE oob_tcp_connection.c: the head, then 'Local host:' / 'Remote host:' rows (a paste may join the help text
    after the last row)."""
    rep = _read(tmp_path, "A process or daemon was unable to complete a TCP connection\nto another process:\n"
                          "  Local host:    master-0\n  Remote host:   worker-14\n"
                          "This is usually caused by a firewall on the remote host. Please\n")
    sus = [f for f in rep.findings if f.hosts]
    assert sus and sus[0].hosts == ("worker-14",)


def test_open_mpi_component_not_found_names_its_host(tmp_path):
    """opal/mca/base/help-mca-base.txt [find-available:not-valid]: the help text, then Host / Framework / Component."""
    rep = _read(tmp_path, "A requested component was not found, or was unable to be opened.  This\n"
                          "means that this component is either not installed or is unable to be\n"
                          "used on your system (e.g., sometimes this means that shared libraries\n"
                          "that the component requires are unable to be found/loaded).  Note that\n"
                          "Open MPI stopped checking at the first component that it did not find.\n\n"
                          "Host:      gpu-node-7\nFramework: btl\nComponent: openib\n")
    (sus,) = [f for f in rep.findings if f.severity is Severity.SUSPECT]
    assert sus.hosts == ("gpu-node-7",) and "Component" in sus.summary and "ompi_info" in sus.action


def test_open_mpi_names_the_rank_that_aborted_or_ended_first(tmp_path):
    """ompi_mpi_abort.c's MPI_ABORT report and orterun's "%s has exited due to process rank %s" (no error word: the
    launcher's own name starts the line) name the rank; the NOTE under the report is context."""
    rep = _read(tmp_path, "-" * 74 + "\nMPI_ABORT was invoked on rank 6 in communicator MPI_COMM_WORLD\nwith errorcode 102."
                          "\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n")
    assert [(f.severity, f.ranks) for f in rep.findings] == [(Severity.SUSPECT, (6,))]
    (tmp_path / "two").mkdir()
    rep = _read(tmp_path / "two", "mpirun has exited due to process rank 2 with PID 1712 on\n"
                                  "node studpc1 exiting improperly. There are three reasons this could occur:\n")
    assert [(f.severity, f.ranks) for f in rep.findings] == [(Severity.SUSPECT, (2,))]


def test_open_mpi_output_prefix_and_a_harmless_cma_read(tmp_path):
    """opal_output's '[host:pid] ' prefix; vader's CMA read denied in a container is a warning, not a failure."""
    rep = _read(tmp_path, "[96c7e3d99641:24984] Read -1, expected 122880, errno = 1\n"
                          "[96c7e3d99641:24986] Read -1, expected 122880, errno = 1\n")
    assert rep.findings and all(f.severity is Severity.WARNING for f in rep.findings)
    assert rep.findings[0].hosts == ("96c7e3d99641",) and "SYS_PTRACE" in rep.findings[0].action


def test_a_time_to_the_minute_before_the_rank_prefix_is_peeled():
    from hangdbg.text.lines import strip_prefix
    p = strip_prefix(" 2025-02-18 12:54 [rank13]:[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog")
    assert p.rank == 13 and p.text.startswith("[E218")


def test_a_message_after_error_colon_deep_in_a_glued_line_is_found(tmp_path):
    """A paste that lost its newlines: argparse's 'prog: error: MSG' far behind the usage text's brackets."""
    usage = " ".join(f"[--opt{i} VALUE{i}]" for i in range(40))
    rep = _read(tmp_path, f"{usage} [DIR] train.py: error: unrecognized arguments: --local-rank=2 usage: train.py [-h]\n")
    assert any(f.kind is Kind.LAUNCH_ERROR for f in rep.findings)


def test_cuda_codes_printed_as_numbers_after_a_call_or_as_driver_errors(tmp_path):
    """``Return value 46 from 'cudaStreamCreate(...)'`` (a runtime call: cudaError_t 46 = cudaErrorDevicesUnavailable),
    ``Cuda driver error 804`` (CUresult 804 = CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE), and the runtime's own text
    for error 100 behind an unknown prefix."""
    rep = _read(tmp_path, "Return value 46 from 'cudaStreamCreate(&kernel_stream)'.  Exiting.\n")
    assert any("cudaErrorDevicesUnavailable" in f.summary for f in rep.findings)
    rep = _read(tmp_path, "Cuda driver error 804 in call at file\n")
    assert any("804" in f.summary and "COMPAT" in f.summary for f in rep.findings)
    rep = _read(tmp_path, "GTL_DEBUG: [0] cudaHostRegister: no CUDA-capable device is detected\n")
    assert any("cudaErrorNoDevice" in f.summary for f in rep.findings)
    rep = _read(tmp_path, "Return value 0 from 'cudaStreamCreate(&kernel_stream)'.\n")
    assert not rep.findings


def test_a_cut_traceback_through_spawns_main_fixup_says_the_child_reran_the_script(tmp_path):
    """CPython Lib/multiprocessing/spawn.py: prepare() -> _fixup_main_from_path -> runpy.run_path (the parent's main
    script again, in the child)."""
    rep = _read(tmp_path, 'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
                          '  File "/usr/lib/python3.10/multiprocessing/spawn.py", line 236, in prepare\n'
                          "    _fixup_main_from_path(data['init_main_from_path'])\n"
                          '  File "/usr/lib/python3.10/multiprocessing/spawn.py", line 287, in _fixup_main_from_path\n'
                          "    main_content = runpy.run_path(main_path,\n"
                          '  File "/usr/lib/python3.10/runpy.py", line 86, in _run_code\n    exec(code, r')
    [f] = [f for f in rep.findings if f.kind is Kind.RANK_ERROR]
    assert "if __name__ == '__main__':" in f.summary


def test_a_gloo_comparison_keeps_its_condition(tmp_path):
    """gloo's GLOO_ENFORCE_LE(a, b) writes 'a <= b. X vs Y': the condition names the failure (a collective desync),
    the values alone say nothing (gloo/common/logging.h)."""
    rep = _read(tmp_path, "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] "
                          "op.preamble.length <= op.nbytes. 881392 vs 4\n")
    assert any("desync" in f.summary for f in rep.findings)


def test_diagnostic_outputs_without_an_error_word_are_read(tmp_path):
    """Report rows a user pastes while debugging (a regex entry whose head is 'Label:' is indexed by its label):
    ibv_devinfo's port state, lspci's ACS control, ulimit's locked-memory limit."""
    for text, word in (("hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n", "PORT_DOWN"),
                       ("\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n",
                        "Access Control"),
                       ("open files                          (-n) 1024\nmax locked memory           (kbytes, -l) 64\n",
                        "locked-memory")):
        rep = _read(tmp_path, text)
        assert any(word in f.summary for f in rep.findings), text
    rep = _read(tmp_path, "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\tACSCtl:\tSrcValid- TransBlk-\n"
                          "max locked memory           (kbytes, -l) unlimited\n")
    assert not rep.findings


def test_the_store_clients_retry_warning_is_no_suspect_and_localhost_errno_99_is_no_error(tmp_path):
    """torch/csrc/distributed/c10d/socket.cpp logs each failed connection attempt (C10D_WARNING) and retries until its
    timeout: no first failure by itself; the [localhost] IPv6 attempt's errno 99 is printed by healthy runs."""
    rep = _read(tmp_path, "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 "
                          "(errno: 99 - Cannot assign requested address).\nEpoch 1: 100% 10/10\n")
    assert not [f for f in rep.findings if f.severity in (Severity.SUSPECT, Severity.WARNING)]
    rep = _read(tmp_path, "[W socket.cpp:663] [c10d] The client socket has failed to connect to [node0]:29500 "
                          "(errno: 111 - Connection refused).\n" * 3)
    assert rep.findings and not [f for f in rep.findings if f.severity is Severity.SUSPECT]
