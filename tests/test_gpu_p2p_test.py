"""CUDA's p2pBandwidthLatencyTest output (hangdbg/evidence/gpu/p2p_test.py): P2P slower than a staged copy is named,
a healthy machine (NVLink, PCIe P2P, or no P2P at all) is not."""

from __future__ import annotations

from hangdbg.evidence.gpu.p2p_test import p2p_findings, parse_p2p_test
from hangdbg.evidence.gpu.reader import READER
from hangdbg.model import Kind, Severity

HEAD = """[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
Device: 0, NVIDIA RTX A6000, pciBusID: 3, pciDeviceID: 0, pciDomainID:0
Device: 1, NVIDIA RTX A6000, pciBusID: 21, pciDeviceID: 0, pciDomainID:0
"""


def _matrix(title: str, rows: list[list[float]], head: str = "D\\D") -> str:
    out = [title, f"   {head}" + "".join(f"{j:>7}" for j in range(len(rows)))]
    out += [f"     {i} " + " ".join(f"{v:6.2f}" for v in row) for i, row in enumerate(rows)]
    return "\n".join(out) + "\n"


def _test(off: float, on: float) -> str:
    return HEAD + _matrix("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", [[673.2, off], [off, 673.2]]) + \
        _matrix("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", [[673.5, on], [on, 672.3]])


def test_p2p_slower_than_a_staged_copy_is_a_suspect_naming_both_gpus():
    [f] = p2p_findings(parse_p2p_test(_test(13.15, 2.6).split("\n")), "p2p.txt")
    assert f.kind is Kind.HARDWARE_ERROR and f.severity is Severity.SUSPECT and not f.hosts and not f.ranks
    assert f.gpus == ("0000:03:00", "0000:21:00") and "IOMMU" in f.summary and "NCCL_P2P_DISABLE=1" in f.action
    assert f.evidence[0].line == 8


def test_nvlink_pcie_p2p_or_no_p2p_at_all_is_no_finding():
    for off, on in ((19.0, 270.8), (22.2, 26.3), (22.02, 22.18)):
        assert p2p_findings(parse_p2p_test(_test(off, on).split("\n")), "p2p.txt") == []


def test_latency_ten_times_the_staged_copy_is_slow_and_cpu_rows_are_not_gpu_rows():
    text = HEAD + _matrix("P2P=Disabled Latency Matrix (us)", [[2.1, 12.5], [12.4, 2.2]], "GPU") + \
        _matrix("", [[3.1, 3.0], [3.0, 3.1]], "CPU").lstrip("\n") + \
        _matrix("P2P=Enabled Latency (P2P Writes) Matrix (us)", [[2.1, 49000.0], [49000.0, 2.2]], "GPU") + \
        _matrix("", [[3.1, 3.0], [3.0, 3.1]], "CPU").lstrip("\n")
    test = parse_p2p_test(text.split("\n"))
    assert test.matrices[("", "enabled", "latency")][(0, 1)] == 49000.0
    [f] = p2p_findings(test, "p2p.txt")
    assert "latency" in f.summary and "49000 us with P2P" in f.summary


def test_the_gpu_reader_takes_the_output_and_counts_a_garbled_row(tmp_path):
    p = tmp_path / "p2pBandwidthLatencyTest.txt"
    p.write_text(_test(13.15, 2.6).replace("     1  13.15 673.20", "     1  13.15"))
    rep = READER.read([str(p)])
    assert READER.sniff(p.read_bytes()[:4096]) and rep.records == 2 and rep.lines_skipped == 1
    assert [f.kind for f in rep.findings] == [Kind.HARDWARE_ERROR]
