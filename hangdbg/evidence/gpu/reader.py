"""The GPU reader: dmesg / syslog / journal files with NVIDIA Xid lines, ``nvidia-smi -q`` outputs and CUDA's
p2pBandwidthLatencyTest output (:mod:`hangdbg.evidence.gpu.p2p_test`).

The grammar is :mod:`hangdbg.evidence.gpu.grammar`, the findings :mod:`hangdbg.evidence.gpu.analysis`.
"""

from __future__ import annotations

from typing import Any, Sequence

from .analysis import findings_from
from .facts import GpuFacts
from ...model import FileError, Finding, SourceKind, SourceReport
from .grammar import GpuLogEvents, host_from_path, scan_file, sniff
from .p2p_test import marked as p2p_marked, p2p_findings, read_p2p_test
from ..base import ReaderBase, with_source

__all__ = ["GpuReader", "READER"]


class GpuReader(ReaderBase[GpuFacts]):
    """Kernel logs and ``nvidia-smi -q`` texts: ``records`` counts Xid lines, lost-GPU reports and
    GPUs described."""

    kind = SourceKind.GPU


    def all_clear(self, rep: SourceReport[Any]) -> str:
        return f"no GPU error in {rep.records} kernel-log / nvidia-smi records: no fatal Xid, lost GPU or uncorrectable ECC error"

    def sniff(self, head: bytes) -> bool:
        return sniff(head) or p2p_marked(head)

    def _read(self, paths: list[str]) -> SourceReport[GpuFacts]:
        return self.read_host(paths)

    def read_host(self, paths: Sequence[str], host: str | None = None) -> SourceReport[GpuFacts]:
        """Read kernel logs and ``nvidia-smi -q`` outputs.

        Args:
            paths: the files.
            host: node name for lines that name none (default: from each file's name, see
                :func:`hangdbg.evidence.gpu.grammar.host_from_path`).

        Never raises for bad content: unreadable files go into ``errors``; ``NVRM: Xid`` lines that
        do not parse are counted in ``lines_skipped``.
        """
        ev = GpuLogEvents()
        errors: list[FileError] = []
        p2p: list[Finding] = []
        matrices = p2p_skipped = 0
        for path in map(str, paths):
            try:
                if (read := read_p2p_test(path)) is not None:
                    test, n = read
                    p2p += p2p_findings(test, path)
                    matrices, p2p_skipped = matrices + len(test.matrices), p2p_skipped + test.lines_skipped
                    ev.lines_read += n
                    continue
                scan_file(path, path, host if host is not None else host_from_path(path), ev)
            except OSError as exc:
                errors.append(FileError(path, exc.strerror or str(exc)))
        findings, facts = findings_from(ev)
        return with_source(SourceReport(kind=self.kind, files=tuple(map(str, paths)), findings=tuple(p2p + findings),
                                        records=ev.records + matrices, lines_read=ev.lines_read,
                                        lines_skipped=ev.lines_skipped + p2p_skipped,
                                        errors=tuple(errors), facts=facts))


READER = GpuReader()
