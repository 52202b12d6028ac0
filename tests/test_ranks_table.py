"""The per-rank table of ``report`` and of the reader commands: one renderer, capped by ranks."""

from __future__ import annotations

import io

from rich.console import Console

from hangdbg.model import Finding, Kind, RankState, SourceKind, SourceReport, Verdict
from hangdbg.report.source_view import ranks_table, render_source_report
from hangdbg.report.verdict_console import render_verdict


def _text(renderable) -> str:
    console = Console(width=200, record=True, no_color=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _states(n: int) -> tuple[RankState, ...]:
    """Two rows (NCCL and torch log) for each of ``n`` ranks, sorted by rank."""
    return tuple(RankState(rank=r, host=f"node{r // 8}", pid=100 + r, last_collective="AllReduce", seq=7,
                           state=f"state-{r}-{src.value}", source=src)
                 for r in range(n) for src in (SourceKind.NCCL, SourceKind.TORCH_LOG))


def _state_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "state-" in line]


def test_cap_counts_ranks_not_rows():
    text = _text(ranks_table(_states(5), max_ranks=3))
    assert len(_state_lines(text)) == 6  # both rows of each of ranks 0-2
    assert "state-2-torch-log" in text and "state-3-" not in text
    assert "2 more ranks (see --json)" in text


def test_no_cap_and_no_ellipsis_when_all_fit():
    text = _text(ranks_table(_states(5), max_ranks=5))
    assert len(_state_lines(text)) == 10
    assert "more ranks" not in text
    assert len(_state_lines(_text(ranks_table(_states(5))))) == 10


def test_report_shows_64_ranks_and_marks_the_rest():
    suspect = Finding(Kind.NCCL_LAGGING, "rank 3 is behind", ranks=(3,), source=SourceKind.NCCL)
    v = Verdict(headline="rank 3 is behind", findings=(suspect,), rank_states=_states(70))
    text = _text(render_verdict(v, tree=False))
    assert "Per rank: last collective and state, by source" in text
    assert len(_state_lines(text)) == 128
    assert "state-63-nccl" in text and "state-64-" not in text
    assert "6 more ranks (see --json)" in text


def test_reader_table_shown_in_full_or_not_at_all():
    rep = SourceReport(kind=SourceKind.NCCL, records=140, ranks=_states(70))
    assert len(_state_lines(_text(render_source_report(rep, "h", "NCCL")))) == 140
    assert _state_lines(_text(render_source_report(rep, "h", "NCCL", rank_rows=0))) == []
