"""One verdict from every kind of evidence (``hangdbg report``).

Heuristic (ours): a failure has a root cause and many symptoms. Findings are ordered by what
usually comes first in a post-mortem: the hardware (GPU fallen off the bus, fatal Xid, ECC), then
a process that died (core file, torchrun's first failure), then the network set-up (refused
connections, an init that never completed, hosts whose NCCL set-up differs), then what the
collectives show (a mismatch, a missing or lagging rank), and last the timeouts every rank
reports once a peer is gone. Within one level, a finding whose ranks or hosts other kinds of
evidence also name comes first.
"""

from __future__ import annotations

from ..model import Analysis, Finding, RankState, SourceReport, Verdict
from .rankset import compress

__all__ = ["build_verdict", "PRIORITY"]

PRIORITY: dict[str, int] = {
    "gpu-lost": 0, "xid": 1, "ecc": 1,
    "core-crash": 2, "child-failed": 2, "child-error": 2,
    "nccl-connect-failed": 3, "nccl-init-incomplete": 3, "nccl-setup-differs": 4,
    # the stack analyzer's kinds share one level: it orders its own suspects (stable sort)
    "missing": 5, "different-collective": 5, "deadlock": 5, "outside-collective": 5, "behind": 5, "diverged": 5,
    "fr-mismatch": 5, "fr-missing-rank": 6, "desync": 6, "desync-report": 6,
    "seq-lagging": 7, "nccl-lagging": 7, "fr-lagging": 7, "no-timeout": 7,
    "fr-stuck": 8,
    "watchdog-timeout": 9,
}
_DEFAULT_PRIORITY = 8


def _corroboration(f: Finding, own: str, named: dict[object, set[str]]) -> int:
    kinds: set[str] = set()
    for r in f.ranks:
        kinds |= named.get(("rank", r), set())
    for h in f.hosts:
        kinds |= named.get(("host", h), set())
    kinds.discard(own)
    return len(kinds)


def _who(f: Finding) -> str:
    """``rank 3 on node2`` for the verdict's first words; what the summary already says is left out."""
    low = f.summary.lower()
    parts = []
    if f.ranks and not low.startswith("rank"):
        parts.append(("rank " if len(f.ranks) == 1 else "ranks ") + compress(f.ranks))
    hosts = [h for h in f.hosts if h.lower() not in low]
    if hosts:
        parts.append("on " + ", ".join(hosts[:4]) + (" ..." if len(hosts) > 4 else ""))
    return " ".join(parts)


def build_verdict(sources: list[SourceReport], analysis: Analysis | None = None,
                  unparsed: list[tuple[str, str]] | None = None,
                  files: list[tuple[str, tuple[str, ...]]] | None = None) -> Verdict:
    """Merge the readers' reports into one :class:`Verdict`.

    Args:
        sources: one report per reader that found files.
        analysis: the stack analysis, when stacks were read.
        unparsed: ``(file, reason)`` for files no reader took.
        files: ``(file, kinds)`` for every file looked at.
    """
    named: dict[object, set[str]] = {}
    tagged: list[tuple[Finding, str]] = []
    for s in sources:
        for f in s.findings:
            tagged.append((f, s.kind))
            if f.severity == "suspect":
                for r in f.ranks:
                    named.setdefault(("rank", r), set()).add(s.kind)
                for h in f.hosts:
                    named.setdefault(("host", h), set()).add(s.kind)

    def order(item: tuple[Finding, str]) -> tuple:
        f, kind = item
        return (PRIORITY.get(f.kind, _DEFAULT_PRIORITY), -_corroboration(f, kind, named), len(f.ranks) or 10**9)

    suspects = tuple(f for f, _ in sorted((t for t in tagged if t[0].severity == "suspect"), key=order))
    warnings = tuple(f for f, _ in sorted((t for t in tagged if t[0].severity == "warning"), key=order))

    states: dict[int, list[RankState]] = {}
    for s in sources:
        for st in s.ranks:
            states.setdefault(st.rank, []).append(st)
    errors = [e for s in sources for e in s.errors]
    return Verdict(
        text=_text(suspects, warnings, len(files or ()), analysis),
        suspects=suspects,
        warnings=warnings,
        sources=tuple(sources),
        analysis=analysis,
        rank_states={r: tuple(v) for r, v in sorted(states.items())},
        unparsed=tuple((unparsed or []) + errors),
        files=tuple(files or ()),
    )


def _text(suspects, warnings, read: int, analysis) -> str:
    if not suspects:
        if analysis is not None and not warnings:
            return f"no suspect in {read} files: {analysis.verdict}"
        if warnings:
            return f"no suspect in {read} files, but {len(warnings)} warnings: first: {warnings[0].summary}"
        return f"no suspect in {read} files: nothing abnormal found"
    top = suspects[0]
    who = _who(top)
    text = f"{who}: {top.summary}" if who else top.summary
    others = [f for f in suspects[1:] if set(f.ranks) & set(top.ranks) or set(f.hosts) & set(top.hosts)]
    if others:
        kinds = sorted({f.kind for f in others})
        text += f" (also pointed at by: {', '.join(kinds)})"
    rest = len(suspects) - 1 - len(others)
    if rest > 0:
        text += f"; {rest} more suspect finding{'s' if rest > 1 else ''}"
    if top.action:
        text += f". Action: {top.action}"
    return text
