"""``hangdbg logs LOG...``: PyTorch watchdog timeouts, desync reports, torchrun failures, error.json."""

from __future__ import annotations

import argparse

from ..evidence.base import Reader

from ..evidence.torch_log.reader import READER
from ..evidence.verdict import with_catalog
from ..model import SourceReport
from .common import ReaderCommand


class LogsCommand(ReaderCommand):
    description = (
        "Read text logs of a distributed PyTorch job (any launcher: [rankN]: prefixes, timestamps, "
        "interleaved ranks) and torchelastic error.json files. Reports ProcessGroupNCCL watchdog "
        "timeouts, the last SeqNum of every rank per process group, desync-debug reports, torchrun's "
        "ChildFailedError root cause, and names suspects: ranks whose SeqNum lags (or leads) the others, "
        "ranks the desync report names, the first failed rank. Exit status 3 when suspects are found, "
        "1 when no file holds any of these."
    )
    name = "logs"
    error_lines = True
    json_name = "logs.json"
    title = "torch logs"
    metavar = "LOG"
    paths_help = "log files, error.json files, or directories holding them (searched by content)"
    nothing_help = ("pass the job's stdout/stderr logs (torchrun, srun, slurm-*.out) and the error.json files "
                    "torchelastic writes under its log directory")

    def reader(self, args: argparse.Namespace) -> Reader:
        return READER


    def read(self, reader: Reader, files: list[str], args: argparse.Namespace) -> SourceReport:
        """The torch-log report with every other error line of the same files read with the catalog."""
        return with_catalog(reader.read(files), files)
