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
