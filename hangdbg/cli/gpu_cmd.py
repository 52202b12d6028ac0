"""``hangdbg gpu LOG...``: NVIDIA Xid events, lost GPUs and ECC state per node and GPU."""

from __future__ import annotations

import argparse

from rich.console import RenderableType

from ..evidence.gpu.facts import GpuFacts
from ..model import SourceReport
from ..evidence.base import Reader
from ..evidence.gpu.reader import GpuReader
from ..report.kind_views import gpu_table
from ..evidence.verdict import with_catalog
from .common import ReaderCommand


class GpuCommand(ReaderCommand):
    description = (
        "Read kernel logs (dmesg, dmesg -T, syslog, journalctl -k) for NVIDIA 'NVRM: Xid' lines and the "
        "'GPU has fallen off the bus' report (also over several lines, without an Xid number), PCIe AER "
        "errors (corrected ones on a port: a warning; uncorrected ones on a GPU: a suspect), "
        "NV_ERR_RESET_REQUIRED, and nvidia-smi output: -q for ECC and remapped-row state, 'Unable to "
        "determine the device handle' for a lost GPU. "
        "Names each Xid's meaning and the action that clears it (restart the app, reset the GPU, drain "
        "the node, RMA), per node and GPU. The node comes from syslog lines or a shell prompt "
        "(user@node3 ~ $ nvidia-smi), else --host, else the file name when it looks like a host name "
        "(node3.dmesg.txt, dgx01-nvidia-smi-q.txt; not nvsmi-q.txt or nvidia-smi-q.h200.txt). Exit status 3 "
        "when a fatal GPU error is found, 1 when no file holds a GPU record."
    )
    name = "gpu"
    error_lines = True
    json_name = "gpu.json"
    title = "GPU errors"
    metavar = "LOG"
    paths_help = "kernel logs, nvidia-smi -q texts, or directories holding them"
    nothing_help = "pass `dmesg -T`, `journalctl -k` or /var/log/kern.log of the nodes, or `nvidia-smi -q` output"

    @classmethod
    def add_reader_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--host", help="node name for lines and files that name none")

    def reader(self, args: argparse.Namespace) -> Reader:
        return GpuReader()

    def read(self, reader: Reader, files: list[str], args: argparse.Namespace) -> SourceReport:
        assert isinstance(reader, GpuReader)
        return with_catalog(reader.read_host(files, host=args.host), files)


    def extra_views(self, rep: SourceReport, args: argparse.Namespace) -> list[RenderableType]:
        return [gpu_table(rep.facts)] if isinstance(rep.facts, GpuFacts) and rep.facts.gpus else []
