"""GPU error reader: Xid lines from dmesg/syslog/journal, the fallen-off-the-bus report, nvidia-smi
-q ECC state (fixtures written from the driver's and nvidia-smi's documented formats), the CLI, fuzz."""

from __future__ import annotations

import io
import json
import re

import pytest
from infra.fuzz import mutated_lines
from conftest import FIXTURES, check_golden, run_main, main_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdbg.evidence.gpu.analysis import findings_from
from hangdbg.evidence.gpu import grammar as xid
from hangdbg.report.schema import to_jsonable
from hangdbg.evidence.gpu.reader import READER
from hangdbg.text.lines import iter_lines_from
from hangdbg.evidence.gpu.xid_codes import XID_CODES, xid_info

FX = FIXTURES / "xid"


def _by_gpu(rep):
    out = {}
    for f in rep.findings:
        for g in f.gpus:
            out.setdefault(g, []).append(f)
    return out


def _gpu(rep, name):
    return next(g for g in rep.facts.gpus if g.gpu == name)


def test_syslog_host_from_line_and_secondary_xids():
    rep = READER.read([str(FX / "syslog")])
    assert rep.kind == "gpu" and not rep.errors and rep.lines_skipped == 0
    lost = rep.findings[0]
    assert (lost.kind, lost.severity, lost.gpus, lost.hosts) == ("gpu-lost", "suspect", ("gpu-node3:0000:3b:00",), ("gpu-node3",))
    assert "drain the node" in lost.action and "+2 secondary Xid 45" in lost.summary
    # the fallen-off line after the Xid 79 is the same event, not a second finding
    assert len([f for f in rep.findings if "gpu-node3" in f.gpus[0]]) == 1
    g = _by_gpu(rep)
    x13 = next(f for f in g["gpu-node4:0000:b1:00"] if "Xid 13" in f.summary)
    assert x13.severity == "warning" and "x2" in x13.summary and "restart the app" in x13.action
    x154 = next(f for f in g["gpu-node4:0000:18:00"] if "Xid 154" in f.summary)
    assert x154.severity == "suspect" and x154.action == "recovery action: GPU Reset Required"
    assert {x.code: x.count for x in _gpu(rep, "gpu-node3:0000:3b:00").xids} == {79: 1, 45: 2}


def test_dmesg_relative_host_from_file_name_and_lost_report_without_number():
    rep = READER.read([str(FX / "gpu-node7.dmesg.txt")])
    lost = next(f for f in rep.findings if f.kind == "gpu-lost")
    assert lost.gpus == ("gpu-node7:0000:5e:00",) and "GPU-2a3c6f1e" in lost.summary and "without an Xid" in lost.summary
    assert len(lost.evidence) == 3  # GPU at / serial number / fallen off
    assert _gpu(rep, "gpu-node7:0000:5e:00").serial == "1324220012345"
    x119 = next(f for f in rep.findings if "Xid 119" in f.summary)
    assert x119.severity == "suspect" and "reset the GPU" in x119.action
    assert rep.lines_skipped == 1  # the Xid line cut by the ring buffer
    rep = READER.read_host([str(FX / "gpu-node7.dmesg.txt")], host="override")
    assert all(g.startswith("override:") for f in rep.findings for g in f.gpus)


def test_dmesg_T_crlf_non_utf8_truncated_mig():
    rep = READER.read([str(FX / "node9.dmesg.log")])
    codes = {x.code: x.count for x in _gpu(rep, "node9:0000:3b:00").xids}
    assert codes == {31: 1, 48: 1, 74: 1, 63: 1, 95: 1}  # incl. the MIG-attributed 31 and the cut last line
    sev = {re.search(r"Xid (\d+)", f.summary).group(1): f.severity for f in rep.findings}
    assert sev == {"48": "suspect", "74": "suspect", "95": "suspect", "31": "warning", "63": "warning"}
    assert "Mon Jan  5 10:00:05 2026" in next(f.summary for f in rep.findings if "Xid 48" in f.summary)


def test_journal_iso_secondary_folded_into_primary():
    rep = READER.read([str(FX / "journal-k.txt")])
    assert len(rep.findings) == 1
    f = rep.findings[0]
    assert f.hosts == ("gpu-node2",) and "Xid 120" in f.summary and "+1 secondary Xid 45" in f.summary


def test_secondary_without_primary(tmp_path):
    p = tmp_path / "n1.dmesg"
    p.write_text("[ 5.0] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python, Ch 00000010 caused by previous Xid 79\n")
    rep = READER.read([str(p)])
    f = rep.findings[0]
    assert f.severity == "suspect" and "previous Xid 79" in f.summary and "not in these logs" in f.summary
    assert f.gpus == ("n1:0000:3b:00",)


def test_nvidia_smi_ecc_and_remapping():
    rep = READER.read([str(FX / "nvidia-smi-q.gpu-node5.txt"), str(FX / "node6.nvidia-smi.txt")])
    g = _by_gpu(rep)
    assert "gpu-node5:0000:07:00" not in g  # healthy GPU: no finding
    bad = {f.summary.split(": ", 1)[1] for f in g["gpu-node5:0000:0f:00"]}
    assert bad == {"row remapping failed (nvidia-smi -q Remapped Rows)",
                   "2 uncorrectable ECC errors since the last driver load (volatile)",
                   "a row remapping / page retirement is pending"}
    assert _gpu(rep, "gpu-node5:0000:0f:00").ecc.aggregate_uncorrectable == 7
    old = _gpu(rep, "node6:0000:1a:00").ecc
    assert (old.volatile_uncorrectable, old.aggregate_uncorrectable, old.retired_pending) == (1, 1, True)


def test_xid_table_covers_the_issue_codes():
    for code in (13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 121):
        assert code in XID_CODES and XID_CODES[code].action
    assert {c for c, i in XID_CODES.items() if i.severity == "suspect"} >= {48, 74, 79, 94, 95, 119, 120}
    assert {c for c, i in XID_CODES.items() if i.severity == "warning"} >= {13, 31, 43}
    assert xid_info(9999).severity == "warning"


@pytest.mark.parametrize("name,host", [("node3.dmesg.txt", "node3"), ("dmesg-node3.log", "node3"),
                                       ("nvidia-smi-q.gpu-node1.txt", "gpu-node1"), ("logs/dmesg.txt", ""),
                                       ("gpu12/dmesg.txt", "gpu12"), ("syslog", "")])
def test_host_from_path(name, host):
    assert xid.host_from_path(name) == host


def test_sniff():
    for p in FX.iterdir():
        assert xid.sniff(p.read_bytes()[:65536]), p.name
    for other in (b"[rank0]:[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=X, Timeout(ms)=1)\n",
                  b"node1:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n",
                  b"Jan  5 10:00:00 n1 kernel: [ 1.0] usb 1-1: new high-speed USB device\n"):
        assert not xid.sniff(other)


def test_cli_gpu_text_json_exit_codes(tmp_path):
    res = run_main("gpu", FX, "--no-evidence")
    assert res.returncode == 3, res.stderr
    assert "GPUs" in res.stdout and "gpu-node3:0000:3b:00" in res.stdout and "fell off the bus" in res.stdout
    code, doc = main_json("gpu", FX / "journal-k.txt")
    assert code == 3 and doc["command"] == "gpu" and doc["schema_version"] == 4 and doc["findings"][0]["gpus"]
    check_golden(main_json("gpu", FX)[1], "gpu")
    healthy = tmp_path / "n2.dmesg"
    healthy.write_text("[ 1.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05\n")
    res = run_main("gpu", healthy)
    assert res.returncode == 0 and "no GPU error" in res.stdout
    # a file that is not a kernel log at all: nothing read, exit 1 (never an all-clear); a missing path: usage, 2
    other = tmp_path / "notes.txt"
    other.write_text("lunch at noon\n")
    code, doc = main_json("gpu", other)
    assert code == 1 and not doc["found"] and doc["headline"].startswith("nothing could be read")
    res = run_main("gpu", tmp_path / "nope")
    assert res.returncode == 2 and "no such file" in res.stderr


# --- fuzz ------------------------------------------------------------------------------------

_SAMPLES = [ln for p in sorted(FX.iterdir()) for ln in p.read_bytes().decode("utf-8", "replace").splitlines()]




@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated_lines(_SAMPLES, max_int=10**12), max_size=40))
def test_fuzz_no_exception_escapes(lines):
    data = "\n".join(lines).encode("utf-8", "replace")
    ev = xid.scan(iter_lines_from(io.BytesIO(data)), "fuzz.log", "h")
    assert 0 <= ev.lines_skipped <= ev.lines_read
    findings, facts = findings_from(ev)
    json.dumps(to_jsonable(facts))
    assert all(f.severity in ("suspect", "warning", "info") for f in findings)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=60).filter(lambda s: "NVRM" not in s and "GPU " not in s and "\n" not in s and "\r" not in s),
                max_size=20),
       st.lists(st.sampled_from(["[ 1.0] NVRM: Xid (PCI:0000:3b", "NVRM: Xid (PCI:zz): 79, x", "NVRM: Xid"]), max_size=5),
       st.randoms())
def test_fuzz_rejected_lines_counted(noise, garbled, rnd):
    lines = noise + garbled
    rnd.shuffle(lines)
    ev = xid.scan(enumerate(lines, 1), "fuzz.log")
    assert ev.lines_read == len(lines) and ev.lines_skipped == len(garbled) and not ev.xids


def test_skipping_reader_equals_line_reader(tmp_path):
    noise = b"Jan  5 09:00:00 gpu-node3 kernel: [1.0] IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready\n" * 25000
    data = noise + (FX / "syslog").read_bytes() + noise + (FX / "nvidia-smi-q.gpu-node5.txt").read_bytes() + noise
    p = tmp_path / "big.log"
    p.write_bytes(data)
    fast = findings_from(xid.scan_file(str(p), "big.log", "h"))
    with open(p, "rb") as f:
        slow = findings_from(xid.scan(iter_lines_from(f), "big.log", "h"))
    assert fast == slow and len(fast[0]) > 5


def test_lost_gpu_reports_of_interleaved_nodes_stay_apart():
    """A merged syslog interleaves two nodes' "GPU at / serial / fallen off" reports: each serial
    number and evidence line belongs to its own node's GPU (they were keyed by PCI bus alone)."""
    lines = [
        "Jan  5 10:00:00 node-a kernel: NVRM: GPU at PCI:0000:3b:00: GPU-aaaa",
        "Jan  5 10:00:00 node-b kernel: NVRM: GPU at PCI:0000:5e:00: GPU-bbbb",
        "Jan  5 10:00:00 node-a kernel: NVRM: GPU Board Serial Number: 111",
        "Jan  5 10:00:00 node-b kernel: NVRM: GPU Board Serial Number: 222",
        "Jan  5 10:00:00 node-b kernel: NVRM: GPU at PCI:0000:3b:00: GPU-cccc",
        "Jan  5 10:00:01 node-a kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
        "Jan  5 10:00:01 node-b kernel: NVRM: GPU 0000:5e:00.0: GPU has fallen off the bus.",
    ]
    ev = xid.scan(enumerate(lines, 1), "syslog")
    assert ev.serials == {("node-a", "0000:3b:00"): "111", ("node-b", "0000:5e:00"): "222"}
    lost = {(g.host, g.bus): [e.line for e in g.evidence] for g in ev.lost}
    assert lost == {("node-a", "0000:3b:00"): [1, 3, 6], ("node-b", "0000:5e:00"): [2, 4, 7]}


def test_an_xid_with_a_redacted_pci_address_is_kept_and_its_gpu_left_unnamed():
    """Pasted kernel logs often hide the address (``Xid (PCI:...)``): the Xid still counts."""
    lines = ["kernel: NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)",
             "kernel: NVRM: Xid (PCI:0000:xx:00): 79, pid=1, name=python, GPU has fallen off the bus."]
    ev = xid.scan(enumerate(lines, 1), "dmesg.txt")
    findings, _ = findings_from(ev)
    assert sorted(x.code for x in ev.xids) == [79, 145] and ev.lines_skipped == 0
    assert all("PCI address not shown" in f.summary and not f.gpus for f in findings if f.kind.value in ("xid", "gpu-lost"))


def test_an_xid_record_without_the_nvrm_tag_is_read_but_not_one_inside_prose():
    """A paste that dropped ``NVRM:`` keeps the record (``Xid (PCI:...): N, ...``) at the line's start."""
    lines = ["Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
             "[Mon Jan  1 00:00:00 2024] Xid (PCI:0000:5e:00): 48, pid=7, name=python, An uncorrectable double bit error",
             "we saw the Xid (PCI:0000:af:00): 79 twice"]
    ev = xid.scan(enumerate(lines, 1), "dmesg-node7.txt", "node7")
    assert [(x.bus, x.code) for x in ev.xids] == [("0000:3b:00", 79), ("0000:5e:00", 48)]
    assert xid.sniff(b"some text\n  Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    assert not xid.sniff(b"we saw the Xid (PCI:0000:3b:00): 79 twice\n")


@pytest.mark.parametrize("command", [["logs"], ["nccl", "summary"]])
def test_xid_lines_in_a_job_log_are_read_by_logs_and_nccl_summary(tmp_path, command):
    """A job log that holds the kernel's Xid lines too (pasted together, or collected in one file): the
    GPU is named by ``logs`` and ``nccl summary`` as ``report`` names it, not quoted as unrecognised."""
    log = tmp_path / "node7.log"
    log.write_text("[rank3]: RuntimeError: CUDA error: unspecified launch failure\n"
                   "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n")
    code, doc = main_json(*command, str(log))
    kinds = [f["kind"] for f in doc["findings"]]
    assert code == 3 and "gpu-lost" in kinds and "unrecognised-error" not in kinds
    lost = next(f for f in doc["findings"] if f["kind"] == "gpu-lost")
    assert lost["severity"] == "suspect" and "0000:3b:00" in lost["summary"]


def test_a_lost_gpu_report_without_the_nvrm_tag_is_read():
    """nv.c's "GPU 0000:a1:00.0: GPU has fallen off the bus." pasted without its "NVRM: " tag names the GPU."""
    ev = xid.scan(enumerate(["GPU 0000:a1:00.0: GPU has fallen off the bus."], 1), "dmesg.txt", "node7")
    findings, _ = findings_from(ev)
    assert [f.kind.value for f in findings] == ["gpu-lost"] and "0000:a1:00" in findings[0].summary
    assert xid.sniff(b"some text\nGPU 0000:a1:00.0: GPU has fallen off the bus.\n")


def test_a_gpu_the_driver_could_not_initialize_is_named():
    """osinit.c's "RmInitAdapter failed! (0x26:0xffff:1456)": the GPU is unusable (a suspect naming its address)."""
    lines = ["[   42.118] NVRM: GPU 0000:00:04.0: RmInitAdapter failed! (0x26:0xffff:1456)",
             "[   42.119] NVRM: rm_init_adapter failed for device bearing minor number 0"]
    ev = xid.scan(enumerate(lines, 1), "dmesg.txt", "node3")
    findings, _ = findings_from(ev)
    assert [(f.kind.value, f.severity.value) for f in findings] == [("gpu-lost", "suspect")]
    assert "0000:00:04" in findings[0].summary and "RmInitAdapter" in findings[0].summary


@pytest.mark.parametrize("status,kind", [("NVLink fabric state cached by the driver is out of sync [NV_ERR_FABRIC_STATE_OUT_OF_SYNC] (0x00000087)", "hardware-error"),
                                         ("GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F)", "gpu-lost")])
def test_a_failed_driver_check_with_a_hardware_status_names_the_fault(status, kind):
    """nvCheckOkFailedNoLog's status (nvstatuscodes.h) decides: a broken fabric or a lost GPU is a fault of the node."""
    line = f"[1891044.5] NVRM: nvCheckOkFailedNoLog: Check failed: {status} returned from status @ x.c:29`"
    findings, _ = findings_from(xid.scan(enumerate([line], 1), "dmesg.txt", "node5"))
    assert [(f.kind.value, f.severity.value, f.hosts) for f in findings] == [(kind, "suspect", ("node5",))]


def test_a_failed_driver_check_with_a_callers_status_is_no_fault():
    line = "NVRM: nvCheckOkFailedNoLog: Check failed: Invalid argument to call [NV_ERR_INVALID_ARGUMENT] (0x0000001F) returned from x"
    findings, _ = findings_from(xid.scan(enumerate([line], 1), "dmesg.txt", "node5"))
    assert not findings


def test_a_temp_directory_is_no_node_name():
    assert xid.host_from_path("/tmp/tmp_ekf6bdb/dmesg.txt") == "" and xid.host_from_path("/data/node7/dmesg.txt") == "node7"
