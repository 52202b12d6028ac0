"""The traces reader: the per-rank files of the ``tracer`` package (``trace-HOST-RANK-PID.txt``,
format v1; grammar: :mod:`hangdbg.evidence.traces.grammar`).

Findings (heuristic: a trace ends where its rank stopped tracing):

* ``trace-diverged`` (suspect): the first traced call that not all ranks made; the ranks whose
  trace ends there (they never reached the call the others made next), or, when every trace
  goes on, the ranks whose next call differs from the most common one. When every rank made the
  same calls, the traces that stopped (no end line) are compared by the line they end at: the
  ranks that end elsewhere than the most (a unique largest group of at least two) are named,
  as the stack analysis names the ranks outside the collective the others wait in;
* ``trace-stopped``: traces without the tracer's end line. A suspect when other traces did end
  normally (those ranks died or hang while the others finished); a warning when no trace ended
  (the job was killed or is still running: the divergence, if any, names the culprit).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

from .facts import DivergenceFacts, NextCall, TraceEntry, TracesFacts
from ...model import Evidence, FileError, Finding, Kind, RankState, Severity, SourceKind, SourceReport
from .grammar import Divergence, RankTrace, divergence, read_trace
from ...rankset import ranks_text
from ..base import ReaderBase

__all__ = ["TracesReader", "READER", "where"]

_HEAD = b"# tracer v1 "


def who(t: RankTrace) -> str:
    return f"rank {t.rank}" if t.rank is not None else f"{t.host} pid {t.pid}"


def where(last_line: str | None) -> str:
    """A traced line without its timestamp: ``train.py:21 | dist.all_reduce(t)``."""
    if not last_line:
        return "(nothing traced)"
    return last_line.strip().split(" ", 1)[-1]


def _ranks(traces: Sequence[RankTrace]) -> tuple[int, ...]:
    return tuple(sorted({t.rank for t in traces if t.rank is not None}))


def _hosts(traces: Sequence[RankTrace]) -> tuple[str, ...]:
    return tuple(sorted({t.host for t in traces if t.host}))


def _names(traces: Sequence[RankTrace]) -> str:
    known = _ranks(traces)
    parts = [ranks_text(known)] if known else []
    parts += [f"{t.host} pid {t.pid}" for t in traces if t.rank is None][:8]
    return ", ".join(parts)


def _evidence(t: RankTrace) -> Evidence:
    return Evidence(str(t.path), None, f"{who(t)} ends at {where(t.last_line)}")


def findings_of(traces: list[RankTrace], div: Divergence) -> list[Finding]:
    """The findings of the module docstring, the divergence first."""
    out: list[Finding] = []
    if div.diverged:
        after = f"call #{div.common} ({div.last_common})" if div.common else "the start"
        behind = [traces[i] for i in div.behind]
        if behind:
            nxt = Counter(c for c in div.next_calls if c).most_common(1)[0][0]
            summary = (f"{_names(behind)} stopped at {where(behind[0].last_line)} after {after}, while the others went "
                       f"on to call #{div.common + 1} ({nxt})")
            odd = behind
        else:
            top, n = Counter(div.next_calls).most_common(1)[0]
            odd = [t for t, c in zip(traces, div.next_calls, strict=True) if c != top] if n > len(traces) / 2 else list(traces)
            summary = f"the ranks' calls part after {after}: " + "; ".join(
                f"{who(t)} next called {c}" for t, c in list(zip(traces, div.next_calls, strict=True))[:8])
        out.append(Finding(Kind.TRACE_DIVERGED, summary, _ranks(odd), _hosts(odd), severity=Severity.SUSPECT,
                           evidence=tuple(_evidence(t) for t in odd[:4]),
                           action="look at where these ranks' traces end: the line they were running when they stopped"))
    stopped = [t for t in traces if not t.ended]
    if not div.diverged:
        out += _ends_elsewhere(stopped)
    if stopped:
        some_ended = len(stopped) < len(traces)
        severity = Severity.SUSPECT if some_ended else Severity.WARNING
        why = ("while the others ended normally: they died, were killed or still hang" if some_ended
               else "none ended: the job was killed or is still running")
        out.append(Finding(Kind.TRACE_STOPPED,
                           f"{len(stopped)} of {len(traces)} traces end without the tracer's end line "
                           f"({', '.join(who(t) for t in stopped[:8])}): {why}",
                           _ranks(stopped), _hosts(stopped), severity=severity,
                           evidence=tuple(_evidence(t) for t in stopped[:4])))
    return out


def _ends_elsewhere(stopped: list[RankTrace]) -> list[Finding]:
    """Traces that stopped at another line than the (unique, at least two) most."""
    by: dict[str, list[RankTrace]] = {}
    for t in stopped:
        by.setdefault(where(t.last_line), []).append(t)
    if len(by) < 2:
        return []
    sizes = sorted((len(v) for v in by.values()), reverse=True)
    if sizes[0] < 2 or sizes[0] == sizes[1]:
        return []  # no place most traces end at: nobody to compare with
    top_where, top = max(by.items(), key=lambda kv: len(kv[1]))
    odd = [t for w, ts in by.items() if w != top_where for t in ts]
    parts = "; ".join(f"{_names(ts)} at {w}" for w, ts in by.items() if w != top_where)
    verb = "is" if len(top) == 1 else "are"
    return [Finding(Kind.TRACE_DIVERGED, f"made the same calls but stopped elsewhere: {parts}, while {_names(top)} "
                                         f"{verb} at {top_where}", _ranks(odd), _hosts(odd), severity=Severity.SUSPECT,
                    evidence=tuple(_evidence(t) for t in odd[:4]),
                    action="look at where these ranks' traces end: the line they were running when they stopped")]


def _facts(traces: list[RankTrace], div: Divergence) -> TracesFacts:
    entries = tuple(TraceEntry(t.rank, t.host, t.pid, str(t.path), t.events, t.ended, t.elapsed, t.last_call, t.last_line, t.last_lines,
                               t.grep_count, t.garbled, t.cut) for t in traces)
    nxt = tuple(NextCall(t.rank, t.host, t.pid, c) for t, c in zip(traces, div.next_calls, strict=True))
    return TracesFacts(entries, DivergenceFacts(div.common, div.last_common, nxt, div.diverged))


class TracesReader(ReaderBase[TracesFacts]):
    """Trace files: ``records`` counts the files read.

    Args:
        last: last lines kept per trace.
        grep: count the lines matching this pattern per trace.
    """

    kind = SourceKind.TRACES


    def all_clear(self, rep: SourceReport[Any]) -> str:
        return f"all {rep.records} traces ended normally and made the same calls"

    def __init__(self, last: int = 8, grep: re.Pattern[str] | None = None) -> None:
        self.last = last
        self.grep = grep

    def sniff(self, head: bytes) -> bool:
        """True for a tracer v1 file (its first line is the ``# tracer v1 host=...`` header)."""
        return head.startswith(_HEAD)

    def takes(self, name: str, head: bytes) -> bool:
        """A trace by its header, or by the tracer's file name (``trace-*.txt``), so that a garbled
        trace in a directory is reported rather than skipped."""
        return self.sniff(head) or (name.startswith("trace-") and name.endswith(".txt"))

    def _read(self, paths: list[str]) -> SourceReport[TracesFacts]:
        traces: list[RankTrace] = []
        errors: list[FileError] = []
        for p in paths:
            try:
                traces.append(read_trace(p, self.last, self.grep))
            except (OSError, ValueError) as exc:
                errors.append(FileError(p, str(exc)))
        traces.sort(key=lambda t: (t.rank is None, t.rank if t.rank is not None else 0, t.host, t.pid or 0))
        div = divergence(traces)
        states = [RankState(t.rank, t.host, t.pid, state=("ended" if t.ended else f"stopped at {where(t.last_line)}"),
                            source=SourceKind.TRACES) for t in traces if t.rank is not None]
        return SourceReport(kind=self.kind, files=tuple(paths), findings=tuple(findings_of(traces, div)), ranks=tuple(states),
                            records=len(traces), lines_read=sum(t.events + t.garbled for t in traces),
                            lines_skipped=sum(t.garbled for t in traces), errors=tuple(errors), facts=_facts(traces, div))


READER = TracesReader()
