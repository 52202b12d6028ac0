"""``hangdbg logs LOG...``: PyTorch watchdog timeouts, desync reports, torchrun failures, error.json."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..parse import torch_log
from .common import Command, emit_source_report, expand_paths

NOTHING = "no rank stands out: no watchdog timeout, desync report or failed child in these logs"


class LogsCommand(Command):
    description = (
        "Read text logs of a distributed PyTorch job (any launcher: [rankN]: prefixes, timestamps, "
        "interleaved ranks) and torchelastic error.json files. Reports ProcessGroupNCCL watchdog "
        "timeouts, the last SeqNum of every rank per process group, desync-debug reports, torchrun's "
        "ChildFailedError root cause, and names suspects: ranks whose SeqNum lags (or leads) the others, "
        "ranks the desync report names, the first failed rank. Exit status 3 when suspects are found."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="LOG", help="log files, error.json files, or directories holding them")
        p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
        p.add_argument("-o", "--out", metavar="DIR", help="also write logs.json there")
        p.add_argument("--no-evidence", action="store_true", help="leave the raw evidence lines out of the report")

    def run(self, args: argparse.Namespace) -> int:
        files = expand_paths(args.paths, torch_log.sniff)
        if not files:
            raise UsageError(f"no PyTorch log or error.json found in {' '.join(args.paths)}",
                             help="name the files explicitly to read them whatever their content")
        rep = torch_log.read(files)
        return emit_source_report(self, rep, args, "logs", "torch logs", NOTHING, len(files))
