"""``torchfrtrace`` text output -> findings: ranks that never joined a collective, mismatches.

The blocks are read by :mod:`hangdbg.evidence.flight_recorder.trace_text`; what they mean follows torch's
``error_analysis`` (``torch/distributed/flight_recorder/components/utils.py``):

* ``Not all ranks joining collective`` lists the ``missing ranks``: member ranks whose dump has no
  entry for that sequence number of the group, i.e. ranks that never called the collective the
  others wait in. They are the stragglers (``fr-missing-rank``, suspect); the others wait for them.
* ``has errors`` lists ``Culprit rank N; Error type: STATE``: ranks whose entry differs from the
  first rank's. Type, size and dtype mismatches are a wrong call (``fr-mismatch``, suspect); a
  state mismatch (one rank completed, another not) is a symptom (``fr-stuck``, warning).
  Torch compares every rank with the first one and warns that "if the current rank is the
  culprit, users will see lots of normal ranks reported as culprit": when the culprits are more
  than half of the expected ranks, the few ranks that are not named are blamed instead
  (heuristic).
* ``Input/output mismatch`` (all_to_all): the numel sums differ; torch cannot tell which rank.
* ``missed FR dumps from ranks`` / ``Missing dump files from ranks``: ranks without a dump (they
  died, were killed before dumping, or their file was not collected).
* the ``-j`` table of each rank's entries: the first position where the ranks differ, else the ranks
  whose column ends first.

The same block printed again (periodic analyses) counts once, and so do the blocks that follow
from a group's first one (see :func:`_key`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Sequence

from .facts import FrFacts, FrGroup
from ...model import SEVERITY_ORDER, Evidence, Finding, Kind, RankState, Severity, SourceKind
from .trace_table import FrEntryTable
from .trace_text import FrTraceReport, FrTraceText
from ...rankset import ranks_text

__all__ = ["analyze_text"]

KIND = SourceKind.FLIGHT_RECORDER
_WRONG_CALL = {"COLLECTIVE_TYPE_MISMATCH": "collective type", "SIZE_OR_SYNTAX_MISMATCH": "sizes",
               "COLLECTIVE_DTYPE_MISMATCH": "dtypes"}


def _wrong_call(state: str) -> str | None:
    """What differs in a wrong call (``sizes``), None for a state difference: any ``MatchState``
    but ``COLLECTIVE_STATE_MISMATCH``/``UNDECIDED``/``FULLY_MATCHED`` is a wrong call (names torch
    may add are read from their words)."""
    if "STATE" in state or state in ("UNDECIDED", "FULLY_MATCHED"):
        return None
    return _WRONG_CALL.get(state) or state.lower().replace("_mismatch", "").replace("_", " ")


_TORCH_FRAMES = ("torch/distributed/", "torch/nn/parallel/", "torch/utils/_contextlib")


def _site(r: FrTraceReport) -> str:
    """The innermost frame outside torch.distributed: ``sync_buffers (models/x.py:650)``."""
    for f in r.frames:
        if not any(t in f.file for t in _TORCH_FRAMES):
            return f"{f.function} ({f.file}:{f.line})"
    return ""


def _what(r: FrTraceReport) -> str:
    """``nccl:all_reduce seq 31117 of pg 0:default_pg``."""
    parts = [r.collective or "a collective"]
    if r.seq is not None:
        parts.append(f"seq {r.seq}")
    if r.group:
        parts.append(f"of pg {r.group}")
    return " ".join(parts)


def _evidence(path: str, r: FrTraceReport, *extra: str) -> tuple[Evidence, ...]:
    ev = [Evidence(path, r.line, r.header)]
    ev += [Evidence(path, None, e) for e in extra if e]
    site = _site(r)
    if site:
        ev.append(Evidence(path, None, f"called from {site}"))
    return tuple(ev)


def _expected(r: FrTraceReport) -> tuple[int, ...]:
    return r.expected_ranks


def _missing(path: str, r: FrTraceReport) -> list[Finding]:
    if not r.missing_ranks:
        return []
    expected = _expected(r)
    joined = tuple(x for x in expected if x not in r.missing_ranks)
    n = len(expected) or r.world_size
    site = _site(r)
    text = (f"{ranks_text(r.missing_ranks)} never joined {_what(r)}"
            + (f" ({len(r.missing_ranks)} of {n} ranks missing)" if n else "")
            + (f"; the others called it from {site}" if site else "")
            + (f", state {r.state} there" if r.state else "")
            + ": fr_trace \"Not all ranks joining collective\"")
    out = [Finding(Kind.FR_MISSING_RANK, text, ranks=r.missing_ranks,
                   evidence=_evidence(path, r, f"missing ranks: {set(r.missing_ranks)}",
                                      f"collective state: {r.state}" if r.state else ""),
                   action="see where the missing ranks are (their stacks, logs, exit): they never called this "
                          "collective, which the other ranks wait in")]
    if joined:
        out.append(Finding(Kind.WAITING, f"{ranks_text(joined)} wait in {_what(r)} for {ranks_text(r.missing_ranks)}",
                           ranks=joined, severity=Severity.WAITING, waits_for=r.missing_ranks,
                           evidence=(Evidence(path, r.line, r.header),)))
    return out


def _errors(path: str, r: FrTraceReport) -> list[Finding]:
    out: list[Finding] = []
    by_state: dict[str, list[int]] = {}
    detail: dict[str, str] = {}
    for c in r.culprits:
        by_state.setdefault(c.state, []).append(c.rank)
        detail.setdefault(c.state, c.detail)
    expected = set(_expected(r))
    for state, ranks in by_state.items():
        named = tuple(sorted(set(ranks)))
        what = _wrong_call(state)
        extra = f"error: Culprit rank {named[0]}; Error type: {state}" + (f", {detail[state]}" if detail[state] else "")
        if what is None:  # COLLECTIVE_STATE_MISMATCH (or UNDECIDED)
            out.append(Finding(Kind.FR_STUCK, f"{ranks_text(named)}: {_what(r)} is in another state than on the "
                               f"first rank ({detail[state] or state})", ranks=named, severity=Severity.WARNING,
                               evidence=_evidence(path, r, extra)))
            continue
        blamed, why = named, ""
        rest = tuple(sorted(expected - set(named) - set(r.missing_ranks)))
        if expected and len(named) > len(expected) / 2 and rest:
            blamed = rest
            why = (f" (fr_trace names {len(named)} of {len(expected)} ranks as culprits because it compares every "
                   f"rank with the first; the odd one out is {ranks_text(rest)})")
        out.append(Finding(
            Kind.FR_MISMATCH,
            f"{ranks_text(blamed)}: {_what(r)} called with different {what} than the other ranks "
            f"({detail[state] or state}){why}", ranks=blamed, evidence=_evidence(path, r, extra),
            action="compare the code path of these ranks at the call site: every rank must call the same "
                   "collective with the same sizes and dtypes"))
    return out


def _findings(path: str, r: FrTraceReport) -> list[Finding]:
    if r.what == "missing":
        return _missing(path, r)
    if r.what == "errors":
        return _errors(path, r)
    if r.what == "io-mismatch":
        tin, tout = r.total_numel
        numel = f" (total input numel {tin}, output {tout})" if tin is not None or tout is not None else ""
        return [Finding(Kind.FR_MISMATCH, f"{_what(r)}: the ranks' input and output sizes do not add up{numel}; "
                        "fr_trace cannot tell which rank passed the wrong split sizes",
                        evidence=_evidence(path, r), action="check the split sizes every rank passes to all_to_all")]
    if r.what == "no-dump" and r.missing_ranks:
        return [Finding(Kind.FR_MISSING_RANK, f"{ranks_text(r.missing_ranks)} left no flight-recorder dump, so "
                        "fr_trace could not match their collectives: such a rank died, was killed before dumping, "
                        "or its file was not collected", ranks=r.missing_ranks, evidence=(Evidence(path, r.line, r.header),),
                        action="look for this rank's exit (core file, torchrun log) and for its dump on its node")]
    return []


def _key(r: FrTraceReport) -> tuple:
    """What makes blocks say the same thing: the first block of a group about the same missing
    ranks, or the group's first mismatch, explains the later ones (torch goes on matching the next
    sequence numbers, which then differ as a consequence)."""
    if r.what == "missing":
        return (r.what, r.group, r.missing_ranks)
    if r.what == "errors" and r.culprits and all(_wrong_call(c.state) is None for c in r.culprits):
        return (r.what, r.group, r.seq)  # a state difference is no wrong call: it does not explain later blocks
    if r.what in ("errors", "io-mismatch"):
        return ("mismatch", r.group)
    return (r.what, r.missing_ranks)


def _first(reports: list[tuple[str, FrTraceReport]]) -> list[tuple[str, FrTraceReport, int]]:
    """One block per :func:`_key`: the one with the lowest sequence number (file order among
    equals), with how many later blocks it stands for."""
    best: dict[tuple, tuple[str, FrTraceReport]] = {}
    later: dict[tuple, int] = {}
    for path, r in reports:
        k = _key(r)
        old = best.get(k)
        if old is None:
            best[k] = (path, r)
            later[k] = 0
            continue
        if (old[1].seq, old[1].what) != (r.seq, r.what):
            later[k] += 1
        if r.seq is not None and (old[1].seq is None or r.seq < old[1].seq):
            best[k] = (path, r)
    return [(p, r, later[k]) for k, (p, r) in best.items()]


def _table(path: str, t: FrEntryTable) -> tuple[list[Finding], list[RankState]]:
    """The ``-j`` entry table: the first position where the ranks' entries differ (the ranks
    outside a strict majority are blamed), else the ranks whose column ends first (they never
    recorded the next entry the others did; heuristic, as ``_lagging`` for dumps)."""
    ents = dict(zip(t.ranks, t.entries))
    counts = {r: len(e) for r, e in ents.items()}
    rows = [RankState(r, last_collective=e[-1].op if e else None,
                      state=f"{e[-1].state or '?'} (fr_trace -j, {len(e)} entries)" if e else "no entry (fr_trace -j)",
                      source=KIND) for r, e in ents.items()]
    if len(ents) < 2:
        return [], rows
    short, top = min(counts.values()), max(counts.values())
    for i in range(short):
        sigs = Counter(ents[r][i].signature() for r in t.ranks)
        if len(sigs) == 1:
            continue
        common, n = sigs.most_common(1)[0]
        odd = tuple(r for r in t.ranks if ents[r][i].signature() != common)
        ref = next(r for r in t.ranks if ents[r][i].signature() == common)
        text = (f"entry #{i + 1}: {ranks_text(odd)} recorded {ents[odd[0]][i].text} where "
                f"{ranks_text([r for r in t.ranks if r not in odd])} recorded {ents[ref][i].text}")
        ev = (Evidence(path, t.line, f"fr_trace -j table of {ranks_text(t.ranks)}"),)
        if n > len(t.ranks) / 2:
            return [Finding(Kind.FR_MISMATCH, text + " (fr_trace -j)", ranks=odd, evidence=ev,
                            action="compare the code path of these ranks: every rank must call the same collectives "
                                   "in the same order with the same sizes")], rows
        return [Finding(Kind.FR_MISMATCH, text + ": no majority (several process groups in one table?)", ranks=(),
                        severity=Severity.WARNING, evidence=ev,
                        action="run torchfrtrace without -j (it matches per process group)")], rows
    if short == top:
        return [], rows
    behind = tuple(r for r in t.ranks if counts[r] == short)
    ahead = next(r for r in t.ranks if counts[r] == top)
    nxt = ents[ahead][short]
    text = (f"{ranks_text(behind)} recorded {short} entr{'y' if short == 1 else 'ies'} while "
            f"{ranks_text([r for r in t.ranks if counts[r] > short])} went on (up to {top}): "
            f"{'it' if len(behind) == 1 else 'they'} never called entry #{short + 1}, {nxt.text} (fr_trace -j)")
    return [Finding(Kind.FR_MISSING_RANK, text, ranks=behind,
                    evidence=(Evidence(path, t.line, f"fr_trace -j table of {ranks_text(t.ranks)}"),),
                    action="see where these ranks are (stacks, logs): they did not reach the next collective")], rows


def analyze_text(texts: Sequence[FrTraceText]) -> tuple[list[Finding], list[RankState], FrFacts]:
    """Findings, per-rank rows and facts of ``torchfrtrace`` output files.

    Args:
        texts: parsed files (:func:`hangdbg.evidence.flight_recorder.trace_text.read_fr_trace`).

    Returns:
        ``(findings, rows, facts)``: ``fr-missing-rank`` / ``fr-mismatch`` suspects, ``fr-stuck``
        warnings and ``waiting`` findings; a row per rank named by a block; :class:`FrFacts` with
        ``formats`` ``{"fr_trace text": n}`` and the groups' expected ranks.
    """
    findings: list[Finding] = []
    rows: dict[tuple[int, str], RankState] = {}
    groups: dict[str, FrGroup] = {}
    world: set[int] = set()
    for path, r, more in _first([(t.path, r) for t in texts for r in t.reports]):
        found = _findings(path, r)
        if more:
            found = [replace(f, summary=f"{f.summary} (and {more} later collective{'s' if more != 1 else ''} of "
                             "this group that follow from it)") if f.severity is Severity.SUSPECT else f
                     for f in found]
        findings += found
        world.update(r.expected_ranks)
        world.update(r.missing_ranks)
        if r.group and r.expected_ranks:
            groups.setdefault(r.group, FrGroup(r.expected_ranks, "fr_trace"))
        if r.what != "missing":
            continue
        for rank in r.expected_ranks or r.missing_ranks:
            gone = rank in r.missing_ranks
            # a missing rank never called the op: no last collective (the stack cross-check reads it)
            rows.setdefault((rank, r.group), RankState(
                rank, last_collective=None if gone else r.op or None, seq=None if gone else r.seq, group=r.group,
                state=f"never joined {r.op} seq {r.seq} (fr_trace)" if gone else f"{r.state or 'pending'} (fr_trace), waiting",
                source=KIND))
    for t in texts:
        for tab in t.tables:
            found, tab_rows = _table(t.path, tab)
            findings += found
            for row in tab_rows:
                rows.setdefault((row.rank, "fr_trace -j"), row)
            world.update(tab.ranks)
    order = {Kind.FR_MISMATCH: 0, Kind.FR_MISSING_RANK: 1, Kind.FR_STUCK: 2}
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], order.get(f.kind, 3)))
    n = sum(1 for t in texts if t.reports or t.tables)
    facts = FrFacts(world=tuple(sorted(world)), formats=dict(Counter({"fr_trace text": n})) if n else {},
                    groups=groups)
    return findings, sorted(rows.values(), key=lambda s: (s.rank, s.group)), facts
