"""GPU faults without an Xid number and PCIe AER errors (fixtures written from the documented
formats: the driver's ``nv.c`` "has fallen off the bus" report over several lines, nvidia-smi's
``Unable to determine the device handle`` (NVML error strings), ``NV_ERR_RESET_REQUIRED``, CUDA's
"uncorrectable ECC error encountered", Linux ``drivers/pci/pcie/aer.c``), hosts, quoted prose."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, main_json

from hangdbg.evidence.gpu import grammar as xid
from hangdbg.evidence.gpu.reader import READER

FX = FIXTURES / "gpu_text"
H200 = FIXTURES / "gpu_h200"


def _one(rep, kind):
    found = [f for f in rep.findings if f.kind == kind]
    assert len(found) == 1, rep.findings
    return found[0]


def test_multiline_fallen_off_the_bus_without_xid():
    rep = READER.read([str(FX / "gpu-n11.dmesg.txt")])
    lost = _one(rep, "gpu-lost")
    assert (lost.severity, lost.gpus, lost.hosts) == ("suspect", ("gpu-n11:0000:41:00",), ("gpu-n11",))
    assert "fallen off the bus" in lost.summary and [e.line for e in lost.evidence] == [2, 3, 4]
    code, doc = main_json("gpu", FX / "gpu-n11.dmesg.txt")
    assert code == 3 and "no GPU error" not in doc["headline"] and "no lost GPU" not in doc["headline"]


def test_one_line_of_the_report_alone_is_no_lost_gpu():
    lines = ["[ 1.0] NVRM: The NVIDIA GPU 0000:41:00.0", "               NVRM: (PCI ID: 10de:2330) installed in this system has"]
    assert not xid.scan(enumerate(lines, 1), "x").lost
    # a continuation line after another kind of line does not join it
    lines = ["[ 1.0] NVRM: The NVIDIA GPU 0000:41:00.0", "[ 1.1] usb 1-1: reset", "   NVRM: fallen off the bus and is not responding"]
    assert not xid.scan(enumerate(lines, 1), "x").lost


def test_nvidia_smi_cannot_open_a_gpu_host_from_the_prompt():
    rep = READER.read([str(FX / "smi-session.txt")])
    lost = _one(rep, "gpu-lost")
    assert lost.severity == "suspect" and lost.gpus == ("gpu-n4:0000:c1:00",) and lost.hosts == ("gpu-n4",)
    assert "GPU is lost" in lost.summary and "reboot" in lost.action
    # without a prompt the file name is the (weak) host source; the GPU is still named
    ev = xid.scan(enumerate(["Unable to determine the device handle for GPU0000:03:00.0: Unknown Error"], 1), "s", "nodeX")
    assert [(f.host, f.bus, f.what, f.detail) for f in ev.faults] == [("nodeX", "0000:03:00", "unusable", "Unknown Error")]


def test_aer_corrected_on_a_port_is_a_warning_uncorrected_on_a_gpu_a_suspect():
    rep = READER.read([str(FX / "gpu-n12.kern.log")])
    aer = [f for f in rep.findings if f.kind == "pcie-aer"]
    port = next(f for f in aer if "0000:80:01.1" in f.summary)
    assert port.severity == "warning" and port.hosts == ("gpu-n12",) and not port.gpus
    assert "2 PCIe Corrected errors" in port.summary and "RxErr" in port.summary and "reseat" in port.action
    gpu = next(f for f in aer if "0000:a1:00.0" in f.summary)
    assert gpu.severity == "suspect" and gpu.gpus == ("gpu-n12:0000:a1:00",) and "CmpltTO" in gpu.summary
    reset = _one(rep, "gpu-lost")
    assert reset.gpus == ("gpu-n12:GPU3",) and "reset" in reset.summary and reset.severity == "suspect"
    assert rep.lines_skipped == 1  # the cut last AER line
    assert rep.findings[0].severity == "suspect"


def test_ecc_text_in_an_application_log():
    assert xid.sniff((FX / "app-ecc.log").read_bytes())
    ecc = _one(READER.read([str(FX / "app-ecc.log")]), "ecc")
    assert ecc.severity == "suspect" and "uncorrectable ECC error" in ecc.summary
    ev = xid.scan(enumerate(["Jan  5 10:00:00 n7 kernel: NVRM: GPU 0000:3b:00.0: Row remapping failure"], 1), "s")
    assert [(f.host, f.bus, f.what) for f in ev.faults] == [("n7", "0000:3b:00", "remap-failed")]


def test_quoted_lines_and_markdown_rows_are_not_log_records():
    lines = ["- `NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.`",
             "| xid | `Jan  5 10:00:00 `hpc-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.` |",
             "| Unable to determine the device handle for GPU0000:03:00.0: Unknown Error |"]
    ev = xid.scan(enumerate(lines, 1), "README.md", "README.md")
    assert not ev.xids and not ev.faults and not ev.lost and ev.records == 0 and ev.quoted_lines == 3


def test_host_from_path_drops_words_only_at_the_ends():
    assert xid.host_from_path("open-gpu-kernel-modules-1150-xid45.txt") == "open-gpu-kernel-modules-1150-xid45"
    assert xid.host_from_path("kernel-gpu-n3.log") == "gpu-n3"
    assert xid.host_from_path("gpu-n3-dmesg.txt") == "gpu-n3"


@pytest.mark.parametrize("name, host", [
    ("nvsmi-q.txt", ""), ("nvidia-smi-q.txt", ""), ("nvidia-smi-q.h200.txt", ""), ("smi.txt", ""), ("dmesg.txt", ""),
    ("q.txt", ""), ("nvidia-smi-topo-m.txt", ""), ("2026-11-27.dmesg.txt", ""), ("vm.dmesg.txt", ""),
    ("gpu-h200/nvidia-smi-q.txt", ""),  # a folder named after the GPU model, not a node
    ("/tmp/pytest-of-root/pytest-3/test_run_0/nvsmi-q.txt", ""),  # nor a test's folder
    ("node3.dmesg.txt", "node3"), ("gpu-node-017.nvsmi.txt", "gpu-node-017"), ("dgx01-nvidia-smi-q.txt", "dgx01"),
    ("h100-01.nvsmi-q.txt", "h100-01"), ("hpc_7.smi.txt", "hpc_7"), ("gpu12/nvidia-smi-q.txt", "gpu12"),
])
def test_a_file_name_names_a_node_only_when_it_looks_like_a_host(name, host):
    assert xid.host_from_path(name) == host


def test_nvidia_smi_q_of_the_h200_names_no_node_from_its_file_name(tmp_path):
    """`hangdbg gpu nvsmi-q.txt` once named the node "q"; the real H200 file (tests/fixtures/gpu_h200)
    under its own name and under the names people give it."""
    real = H200 / "nvidia-smi-q.h200.txt"
    for path in (real, tmp_path / "nvsmi-q.txt", tmp_path / "q.txt"):
        if path != real:
            path.write_bytes(real.read_bytes())
        code, doc = main_json("gpu", path)
        (gpu,) = doc["source"]["facts"]["gpus"]
        assert gpu["gpu"] == "0000:00:06" and doc["source"]["facts"]["hosts"] == [], path.name
        assert gpu["ecc"]["volatile_uncorrectable"] == 0 and not gpu["xids"]
    named = tmp_path / "dgx01-nvidia-smi-q.txt"
    named.write_bytes(real.read_bytes())
    code, doc = main_json("gpu", named)
    assert [g["gpu"] for g in doc["source"]["facts"]["gpus"]] == ["dgx01:0000:00:06"]
    code, doc = main_json("gpu", "--host", "n5", tmp_path / "nvsmi-q.txt")
    assert [g["gpu"] for g in doc["source"]["facts"]["gpus"]] == ["n5:0000:00:06"]


def test_nvidia_smi_q_of_a_healthy_h200_says_nothing_is_wrong():
    """The real H200's `nvidia-smi -q` once gave a warning, "unrecognised error line: Access Timeout
    Recovery : N/A": a report row whose value says nothing happened is no error line."""
    code, doc = main_json("gpu", H200 / "nvidia-smi-q.h200.txt")
    assert code == 0 and doc["findings"] == [], [f["summary"] for f in doc["findings"]]


def test_syslog_host_wins_over_the_file_name(tmp_path):
    p = tmp_path / "node-from-name.log"
    p.write_text("Jan  5 10:00:00 real-host kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    rep = READER.read([str(p)])
    assert rep.findings[0].hosts == ("real-host",)


def test_fast_line_filter_keeps_aer_records(tmp_path):
    noise = b"Mar  3 04:00:00 gpu-n12 kernel: [1.0] IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready\n" * 30000
    p = tmp_path / "gpu-n12.big.log"
    p.write_bytes(noise + (FX / "gpu-n12.kern.log").read_bytes() + noise + (FX / "smi-session.txt").read_bytes())
    fast = xid.scan_file(str(p), "f", "h")
    assert len(fast.aer) == 3 and [a.errors for a in fast.aer] == [["RxErr"], ["RxErr"], ["CmpltTO"]] and len(fast.faults) == 2


def test_a_fatal_error_on_a_port_names_the_gpu_below_it_that_was_not_recovered(tmp_path):
    # drivers/pci/pcie/aer.c and err.c wording (dmesg -H deltas): the root port reports, the GPU cannot recover
    log = tmp_path / "n5.dmesg"
    log.write_text("[  +0.000001] pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0\n"
                   "[  +0.000004] pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
                   "type=Transaction Layer, (Requester ID)\n"
                   "[  +0.000006] pcieport 0000:00:03.0:    [14] CmpltTO                (First)\n"
                   "[  +0.000921] nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)\n"
                   "[  +0.000008] pcieport 0000:00:03.0: AER: device recovery failed\n")
    aer = _one(READER.read([str(log)]), "pcie-aer")
    assert aer.severity == "suspect" and aer.gpus == ("n5:0000:03:00",) and "0000:03:00.0 below it" in aer.summary
    # without the GPU's line it stays the port's warning
    log.write_text("\n".join(log.read_text().splitlines()[:3]) + "\n")
    aer = _one(READER.read([str(log)]), "pcie-aer")
    assert aer.severity == "warning" and aer.gpus == ()


def test_nvidia_smis_table_with_err_names_the_gpu_and_a_healthy_table_says_nothing(tmp_path):
    """nvidia-smi's default view: a GPU whose fields NVML could not read shows ERR! (its first row holds the bus id;
    ERR! may be in its second row only)."""
    from hangdbg.evidence.gpu.reader import READER

    bad = tmp_path / "bad.txt"
    bad.write_text("|   2  NVIDIA A100-SXM4-80GB          On  | 00000000:47:00.0 Off |                    0 |\n"
                   "| N/A   35C    P0    62W /  400W |      0MiB / 81920MiB |      0%      Default |\n"
                   "|   3  NVIDIA A100-SXM4-80GB          On  | 00000000:4B:00.0 Off |                    0 |\n"
                   "| N/A   34C    P0    ERR! /  400W |      0MiB / 81920MiB |      0%      Default |\n")
    rep = READER.read([str(bad)])
    assert [f.gpus for f in rep.findings if f.is_suspect] and all("4b:00" in g for f in rep.findings for g in f.gpus)
    good = tmp_path / "good.txt"
    good.write_text(bad.read_text().replace("ERR!", "61W"))
    assert not READER.read([str(good)]).findings
