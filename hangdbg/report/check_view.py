"""The terminal report of ``hangdbg check``: headline, steps, nodes, figures, trials, findings.

Data in, renderables out (no printing): :func:`render_check` takes the command's
:class:`~hangdbg.report.document.CheckDocument`, so the view and ``--json`` say the same thing.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..check.blame import STEPS, slots_text
from ..rankset import rank_set
from .document import CheckDocument
from .source_view import findings_table, headline_panel

__all__ = ["render_check"]


def _steps(doc: CheckDocument) -> Table:
    t = Table(title=f"Steps (first run: {doc.world_size} ranks)", title_justify="left", expand=True)
    t.add_column("step", no_wrap=True, style="bold")
    t.add_column("passed", justify="right", no_wrap=True)
    t.add_column("failed", ratio=1)
    t.add_column("slowest s", justify="right", no_wrap=True)
    for i, step in enumerate(STEPS):
        passed: list[int] = []
        timed_out: list[int] = []
        failed: list[int] = []
        silent: list[int] = []
        earlier: list[int] = []
        secs: list[float] = []
        for r in doc.ranks:
            res = r.result(step)
            stopped_at = r.failed_step
            if res is None:
                (earlier if stopped_at is not None and STEPS.index(stopped_at) < i else silent).append(r.rank)
            elif res.ok:
                passed.append(r.rank)
                secs.append(res.seconds)
            elif res.timeout:
                timed_out.append(r.rank)
            else:
                failed.append(r.rank)
        parts = []
        if failed:
            parts.append(Text(f"failed: {rank_set(failed)}", style="bold red"))
        if silent:
            parts.append(Text(f"no result: {rank_set(silent)}", style="bold red"))
        if timed_out:
            parts.append(Text(f"timed out (waiting): {rank_set(timed_out)}", style="yellow"))
        if earlier:
            parts.append(Text(f"not reached: {rank_set(earlier)}", style="dim"))
        ok_style = "green" if len(passed) == len(doc.ranks) else "red"
        t.add_row(step, Text(f"{len(passed)}/{len(doc.ranks)}", style=ok_style), Text("; ").join(parts),
                  f"{max(secs):.3g}" if secs else "")
    return t


def _nodes(doc: CheckDocument) -> Table:
    t = Table(title="Nodes", title_justify="left", expand=True)
    for col in ("node", "ranks", "status", "interface (configured / route)", "recv GB/s (median)"):
        t.add_column(col, no_wrap=col != "status", overflow="fold")
    for n in doc.nodes:
        recv = sorted(r.recv_gbps for r in doc.ranks if r.host == n.host and r.recv_gbps)
        mid = f"{recv[len(recv) // 2]:.3g}" if recv else ""
        bad = n.host in doc.bad_nodes or any(g.startswith(f"{n.host}:") for g in doc.bad_gpus)
        if n.status == "failed" and not bad:
            status = Text("waited for others", style="yellow")  # its ranks only timed out
        else:
            label = "bad: " + n.status if bad and n.status in ("ok", "failed") else n.status
            status = Text(label + (": " + n.reason if n.reason else ""), style="bold red" if bad or n.status != "ok" else "green")
        unit = "GPU" if n.gpus and n.backend != "gloo" else "slot"
        ranks = f"{len(n.slots)}: {unit}{'s' if len(n.slots) > 1 else ''} {slots_text(n.slots)}"
        t.add_row(Text(n.host, style="bold red" if bad else ""), ranks, status,
                  f"{n.ifname_configured or '-'} / {n.route_interface or '?'}", mid)
    return t


def _gpus(doc: CheckDocument) -> Table | None:
    """Each GPU's own figures (the health steps) and its NVML memory counters; None on CPU."""
    gpu = [r for r in doc.ranks if r.on_gpu]
    if not gpu:
        return None
    counters = {(n.host, slot): c for n in doc.nodes for c in n.nvml if (slot := n.slot_of(c)) is not None}
    t = Table(title="GPUs (each alone)", title_justify="left", expand=True)
    for col in ("rank", "GPU", "name", "bf16 matmul TFLOP/s", "memory copy GB/s", "host->GPU GB/s", "GPU->host GB/s", "ECC / rows"):
        t.add_column(col, no_wrap=col in ("rank", "GPU"), overflow="fold")
    for r in gpu:
        c = counters.get((r.host, r.slot))
        mem: Text
        if c is None:
            mem = Text("-")
        elif c.faults:
            mem = Text("; ".join(c.faults), style="bold red")
        else:
            mem = Text(f"uncorrected {c.ecc_uncorrected_volatile if c.ecc_uncorrected_volatile is not None else '-'}, "
                       f"remap pending {'yes' if c.remap_pending else 'no'}", style="green")
        t.add_row(str(r.rank), f"{r.host}:{r.slot}", r.gpu or "", *(f"{v:.3g}" if v is not None else "-" for v in (
            r.matmul_tflops, r.copy_gbps, r.h2d_gbps, r.d2h_gbps)), mem)
    return t


def _trials(doc: CheckDocument) -> Table:
    t = Table(title="Runs (1: every node; then the interface retry and the bisection)", title_justify="left", expand=True)
    for col in ("#", "purpose", "nodes:slots", "interface", "result", "s"):
        t.add_column(col, no_wrap=col in ("#", "result", "s"), overflow="fold", ratio=1 if col == "nodes:slots" else None)
    for tr in doc.trials:
        res = Text("passed", style="green") if tr.passed else Text(f"failed at {tr.failed_step or 'start'}", style="red")
        t.add_row(str(tr.number), tr.purpose, " ".join(tr.layout), tr.ifname or "-", res, f"{tr.seconds:.1f}")
    return t


def _figures(doc: CheckDocument) -> RenderableType:
    bw = doc.bandwidth
    if bw is None:
        if doc.world_size == 1 and doc.trials and doc.trials[0].passed:
            return Text("bandwidth: one rank, no link to measure", style="dim")
        return Text("bandwidth: no run of two or more ranks passed, no figures", style="dim")
    text = (f"bandwidth (run {bw.trial}, {bw.world_size} ranks): all_reduce of {bw.bytes} bytes x {bw.iters}: "
            f"{bw.time_s * 1e3:.3g} ms, algbw {bw.algbw_gbps:.3g} GB/s, busbw {bw.busbw_gbps:.3g} GB/s")
    if bw.recv_gbps_median:
        text += f"; ring send/recv median {bw.recv_gbps_median:.3g} GB/s"
    return Text(text)


def render_check(doc: CheckDocument, evidence: bool = True) -> RenderableType:
    """The whole report of a check."""
    parts: list[RenderableType] = [headline_panel(doc.headline, "hangdbg check", doc.found), _steps(doc), _nodes(doc),
                                   _figures(doc)]
    gpus = _gpus(doc)
    if gpus is not None:
        parts.append(gpus)
    if len(doc.trials) > 1:
        parts.append(_trials(doc))
    if doc.findings:
        parts.append(findings_table(doc.findings, evidence=evidence))
    if doc.exclude:
        parts.append(Text.assemble(("leave out: ", "bold"), (f"sbatch --exclude={doc.exclude}", "bold red")))
    if doc.bad_gpus:
        parts.append(Text.assemble(("bad GPUs: ", "bold"), (", ".join(doc.bad_gpus), "bold red")))
    return Group(*parts)
