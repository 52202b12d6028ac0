"""``hangdbg fr DUMP...|DIR``: read PyTorch flight-recorder dumps of all ranks and compare them.

Per rank and process group: the last collective recorded (its state) and the last completed one;
then the findings: ranks without a dump or whose record stops early, the first collective whose
type, sizes or dtypes differ across ranks, collectives that never completed.

Also read, by content: the text ``torchfrtrace`` (``fr_trace``) printed after matching the dumps,
and NCCL RAS reports (``ncclras``), the other cross-rank report of where each rank is (read by
:mod:`hangdbg.evidence.nccl_ras.reader` and merged into this command's report).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Callable

from rich.console import RenderableType

from ..evidence.flight_recorder.facts import FrFacts
from ..model import SourceKind, SourceReport
from ..text.lines import read_head
from ..report.safetext import safe_text
from ..evidence.nccl_ras import reader as nccl_ras
from ..evidence.base import Reader
from ..evidence.flight_recorder.reader import READER
from ..report.kind_views import fr_table
from .common import ReaderCommand


def _is_ras(path: str) -> bool:
    try:
        head = read_head(path)
    except OSError:
        return False
    return nccl_ras.READER.sniff(head) and not READER.sniff(head)


def _merge(fr: SourceReport, ras: SourceReport) -> SourceReport:
    """One report of the dumps / fr_trace texts and the RAS reports (the flight recorder's facts;
    the kind of the RAS reader when only RAS reports were read)."""
    kind = SourceKind.NCCL_RAS if ras.records and not fr.records else fr.kind
    return replace(fr, kind=kind, files=fr.files + ras.files, findings=fr.findings + ras.findings,
                   ranks=fr.ranks + ras.ranks, records=fr.records + ras.records,
                   lines_read=fr.lines_read + ras.lines_read, lines_skipped=fr.lines_skipped + ras.lines_skipped,
                   errors=fr.errors + ras.errors)


class FrCommand(ReaderCommand):
    description = (
        "Read flight-recorder dumps (TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE; the files "
        "TORCH_NCCL_DUMP_ON_TIMEOUT writes to TORCH_FR_DUMP_TEMP_FILE or TORCH_NCCL_DEBUG_INFO_TEMP_FILE "
        "+ rank, JSON or pickle; pickles are read without running any code) and match the collectives "
        "across ranks by process group and sequence number. Shows per rank the last collective "
        "recorded and the last completed one, ranks without a dump or whose record stops early, and "
        "the first collective whose type, sizes or dtypes differ. Also reads, by content, the text torch's "
        "torchfrtrace (fr_trace) prints and NCCL RAS reports (ncclras). Exit status 3 when suspects are found, "
        "1 when no dump could be read."
    )
    name = "fr"
    json_name = "fr.json"
    title = "flight recorder"
    metavar = "DUMP|DIR"
    paths_help = ("dump files (rank = the number ending the name, e.g. nccl_trace_rank_3), fr_trace texts, RAS "
                  "reports, or directories")
    rank_table = False
    nothing_help = ("dumps are written when TORCH_NCCL_DUMP_ON_TIMEOUT=1 and TORCH_FR_BUFFER_SIZE>0, to "
                    "/tmp/nccl_trace_rank_<rank> unless TORCH_FR_DUMP_TEMP_FILE says otherwise")

    def reader(self, args: argparse.Namespace) -> Reader:
        return READER

    def takes(self, reader: Reader) -> Callable[[str, bytes], bool]:
        return lambda name, head: reader.takes(name, head) or nccl_ras.READER.sniff(head)

    def read(self, reader: Reader, files: list[str], args: argparse.Namespace) -> SourceReport:
        ras = [f for f in files if _is_ras(f)]
        fr = reader.read([f for f in files if f not in ras])
        return _merge(fr, nccl_ras.READER.read(ras)) if ras else fr

    def extra_views(self, rep: SourceReport, args: argparse.Namespace) -> list[RenderableType]:
        if not isinstance(rep.facts, FrFacts):
            return []
        f = rep.facts
        fmts = ", ".join(f"{n} {k}" for k, n in f.formats.items())
        if f.dumps:
            note = safe_text(f"{f.dumps} dumps ({fmts}), version {', '.join(f.versions) or '?'}, {rep.lines_read} entries",
                        style="dim")
        else:
            note = safe_text(f"no dump read ({fmts or 'RAS reports only'}), {rep.lines_read} lines", style="dim")
        return [fr_table(f, rep.ranks), note]
