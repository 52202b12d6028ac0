"""The tables of the commands that read one kind of evidence, above their generic per-rank view:
``fr`` (last collective per rank and process group), ``gpu`` (Xid, ECC per GPU), ``nccl summary``
(per-rank NCCL set-up and counts, collectives per slice), ``traces`` (where each trace ends, the
last lines side by side). Each renders a reader's typed facts; the JSON twin is the same facts in
the command's document (:func:`hangdbg.report.build.source_document`)."""

from __future__ import annotations

from typing import Sequence

from rich.columns import Columns
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table

from ..evidence.flight_recorder.facts import FrFacts
from ..evidence.gpu.facts import GpuFacts
from ..evidence.nccl.facts import NcclFacts
from ..evidence.traces.facts import TracesFacts
from ..evidence.traces.reader import where
from ..model import RankState, SourceReport
from .safetext import escape, safe_text

__all__ = ["fr_table", "gpu_table", "nccl_ranks_table", "nccl_slices_table", "traces_views"]


def fr_table(facts: FrFacts, states: Sequence[RankState]) -> Table:
    """The last collective recorded, started and completed per rank and process group."""
    t = Table(title="Ranks (last collective per process group)", title_justify="left", expand=True)
    for col in ("rank", "group", "last seq", "last collective", "state", "last started", "last completed"):
        t.add_column(col, no_wrap=col != "last collective", overflow="fold")
    for row in facts.table:
        last, begun, done = row.last, row.last_started, row.last_completed
        state = last.state if last else ""
        t.add_row(str(row.rank), safe_text(row.group), str(last.seq) if last else "-",
                  safe_text(last.desc) if last else "(none)",
                  safe_text(state, style="" if state == "completed" or not last else "yellow"),
                  safe_text(f"{begun.seq} {begun.op}") if begun else "-", safe_text(f"{done.seq} {done.op}") if done else "-")
    for r in states:  # ranks without a (readable) dump, and those named by fr_trace text or RAS, have no row
        if r.state in ("no dump", "dump unreadable") or (not facts.table and r.state):
            t.add_row(str(r.rank), safe_text(r.group), str(r.seq) if r.seq is not None else "-", safe_text(r.last_collective or ""),
                      safe_text(r.state, style="red" if "dump" in r.state or "never" in r.state or "behind" in r.state
                           else "yellow"), "-", "-")
    return t


def gpu_table(facts: GpuFacts) -> Table:
    """Per node and GPU: the Xid codes, lost GPUs, ECC and row remapping."""
    t = Table(title="GPUs", title_justify="left", expand=True)
    for col in ("node:GPU (PCI)", "Xid (count)", "ECC uncorr. vol/agg", "remap pending/failed"):
        t.add_column(col, no_wrap=col != "Xid (count)")
    t.add_column("UUID", style="dim", overflow="fold")
    for g in facts.gpus:
        xids = ", ".join(f"{x.code}x{x.count}" if x.count > 1 else str(x.code) for x in g.xids)
        if g.fallen_off_bus:
            xids = (xids + ", " if xids else "") + "fell off the bus"
        e = g.ecc
        ecc_txt = rem = ""
        if e is not None:
            vol, agg = e.volatile_uncorrectable, e.aggregate_uncorrectable
            ecc_txt = f"{'-' if vol is None else vol}/{'-' if agg is None else agg}"
            rem = f"{'yes' if e.remap_pending else 'no'}/{'YES' if e.remap_failed else 'no'}"
        t.add_row(safe_text(g.gpu), safe_text(xids), ecc_txt, rem, safe_text(g.uuid))
    return t


def nccl_ranks_table(rep: SourceReport, facts: NcclFacts, rows: int) -> Table:
    """Per rank: host, pid, init state, version, network and plugin, interfaces, collective counts and
    the last opCount per communicator; the blamed ranks always shown, the others up to ``rows``."""
    blamed = {r for f in rep.suspects for r in f.ranks}
    blamed_hosts = {h for f in rep.suspects for h in f.hosts}
    procs = facts.processes
    if not rows or len(procs) <= rows:
        shown = list(procs)
    else:  # the blamed first (all of them), then the others up to --rows
        odd = [p for p in procs if p.rank in blamed or p.host in blamed_hosts]
        if len(odd) > rows:
            odd = [p for p in odd if p.rank in blamed] or odd[:rows]
        rest = [p for p in procs if p not in odd][:max(0, rows - len(odd))]
        shown = sorted(odd + rest, key=lambda p: procs.index(p))
    types = sorted({k for p in procs for k in p.collectives})
    t = Table(title=f"Ranks ({len(shown)} of {len(procs)} shown)", title_justify="left")
    for col in ("rank", "host", "pid", "init", "version", "net / plugin", "interfaces"):
        t.add_column(col, overflow="fold", no_wrap=col in ("rank", "pid", "init"))
    for ty in types:
        t.add_column(ty, justify="right")
    t.add_column("last opCount per comm", overflow="fold")
    for p in shown:
        rank = safe_text("?" if p.rank is None else str(p.rank), style="red" if p.rank in blamed else "")
        last = " ".join(f"{c.key[:10]}:{c.last_op_hex or '-'}" for c in p.comms)
        t.add_row(rank, safe_text(p.host), str(p.pid), safe_text(p.state, style="" if p.state == "ok" else "red"),
                  safe_text(p.version or "-"), safe_text(f"{','.join(p.networks) or '-'} / {p.plugin or '-'}"),
                  safe_text(",".join(p.interfaces) or "-"), *[str(p.collectives.get(ty, 0)) for ty in types], safe_text(last))
    return t


def nccl_slices_table(facts: NcclFacts) -> Table:
    """Collective counts per ``--split-on`` slice, marked red where they leave the majority."""
    table, majority = facts.slices or {}, facts.slice_majority or ()
    n = max((len(v) for v in table.values()), default=0)
    t = Table(title=escape(f"Collectives per slice (--split-on {facts.split_on!r})"), title_justify="left")
    t.add_column("rank")
    for s in range(n):
        t.add_column(f"slice {s}", justify="right")
    for label, rows in table.items():
        cells = []
        for s, c in enumerate(rows):  # marked against the majority the nccl-slice-differs findings used
            txt = " ".join(f"{k}:{v}" for k, v in c.items()) or "-"
            cells.append(safe_text(txt, style="red" if s < len(majority) and c != majority[s] else ""))
        t.add_row(safe_text(label), *cells)
    return t


def traces_views(facts: TracesFacts, grep: str | None = None, last: int = 8) -> list[RenderableType]:
    """The traces' table (where each rank's trace ends, ``grep`` counts) and the last lines of each
    rank side by side (when ``last``)."""
    t = Table(title="Traces", title_justify="left", expand=True)
    for col in ("rank", "host", "pid", "events", "ended"):
        t.add_column(col, no_wrap=True)
    t.add_column("where the trace ends", ratio=1, overflow="fold")
    if grep:
        t.add_column(safe_text(f"grep {grep!r}"), justify="right", no_wrap=True)
    for tr in facts.traces:
        row: list[RenderableType] = [str(tr.rank if tr.rank is not None else "?"), safe_text(tr.host), str(tr.pid),
                                     str(tr.events), safe_text("yes") if tr.ended else safe_text("no", style="red"),
                                     safe_text(where(tr.last_line))]
        if grep:
            row.append(str(tr.grep_count))
        t.add_row(*row)
    views: list[RenderableType] = [t]
    if last:
        panels = [Panel(safe_text("\n".join(x.strip() for x in tr.last_lines) or "(empty)"),
                        title=escape(f"rank {tr.rank}" if tr.rank is not None else f"{tr.host} pid {tr.pid}"),
                        border_style="green" if tr.ended else "red") for tr in facts.traces]
        views.append(Columns(panels, equal=True, expand=True) if len(panels) <= 4 else Columns(panels))
    return views
