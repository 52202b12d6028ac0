"""``hangdbg gpu LOG...``: NVIDIA Xid events, lost GPUs and ECC state per node and GPU."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table

from ..errors import UsageError
from ..parse import xid
from .common import Command, emit_source_report, expand_paths

NOTHING = "no GPU error: no fatal Xid, lost GPU or uncorrectable ECC error in these files"


def _gpu_table(facts: dict) -> Table:
    t = Table(title="GPUs", title_justify="left", expand=True)
    for col in ("node:GPU (PCI)", "Xid (count)", "ECC uncorr. vol/agg", "remap pending/failed"):
        t.add_column(col, no_wrap=col != "Xid (count)")
    t.add_column("UUID", style="dim", overflow="fold")
    for gpu, d in sorted(facts.get("gpus", {}).items()):
        xids = ", ".join(f"{c}x{n}" if n > 1 else c for c, n in sorted(d.get("xids", {}).items(), key=lambda kv: int(kv[0])))
        if d.get("fallen_off_bus"):
            xids = (xids + ", " if xids else "") + "fell off the bus"
        ecc = d.get("ecc") or {}
        vol, agg = ecc.get("volatile_uncorrectable"), ecc.get("aggregate_uncorrectable")
        ecc_txt = "" if not ecc else f"{'-' if vol is None else vol}/{'-' if agg is None else agg}"
        rem = "" if not ecc else f"{'yes' if ecc.get('remap_pending') else 'no'}/{'YES' if ecc.get('remap_failed') else 'no'}"
        t.add_row(escape(gpu), escape(xids), ecc_txt, rem, escape(d.get("uuid", "")))
    return t


class GpuCommand(Command):
    description = (
        "Read kernel logs (dmesg, dmesg -T, syslog, journalctl -k) for NVIDIA 'NVRM: Xid' lines and the "
        "'GPU has fallen off the bus' report, and nvidia-smi -q outputs for ECC and remapped-row state. "
        "Names each Xid's meaning and the action that clears it (restart the app, reset the GPU, drain "
        "the node, RMA), per node and GPU. The node comes from syslog lines, else --host, else the file "
        "name (node3.dmesg.txt). Exit status 3 when a fatal GPU error is found."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("paths", nargs="+", metavar="LOG", help="kernel logs, nvidia-smi -q texts, or directories holding them")
        p.add_argument("--host", help="node name for lines and files that name none")
        p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
        p.add_argument("-o", "--out", metavar="DIR", help="also write gpu.json there")
        p.add_argument("--no-evidence", action="store_true", help="leave the raw evidence lines out of the report")

    def run(self, args: argparse.Namespace) -> int:
        files = expand_paths(args.paths, xid.sniff)
        if not files:
            raise UsageError(f"no kernel log with NVRM lines or nvidia-smi -q output found in {' '.join(args.paths)}")
        rep = xid.read(files, host=args.host)
        return emit_source_report(self, rep, args, "gpu", "GPU errors", NOTHING, len(files),
                                  lambda: [_gpu_table(rep.facts)] if rep.facts.get("gpus") else [])
