"""The ``last-stacks`` reader: ``OUT/last/`` of ``hangdbg watch --keep-last`` (format: :mod:`.ring`).

For a job that died, it says where every rank was in its newest kept sample and how long before
the end that sample was taken (the end: when the watch saw the job gone, ``end.txt``; else the
newest sample). Ranks sampled together share a round number; a rank whose newest sample is from an
earlier round than the others' stopped answering first (it exited, was killed, or could not be
sampled any more): a warning that names it, never a suspect (the samples say where it was, not why
it died; the job's logs do). The samples are not fed to the joint stack analysis: they were taken
at different times, up to the end, and a dead job's ranks cannot be compared as one snapshot.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from ...model import FileError, Finding, Kind, RankDump, RankState, Severity, SourceKind, SourceReport
from ...rankset import ranks_text
from ...stacks.places import place_of, primary_thread
from ...stacks.saved import load_dump_texts
from ...text.lines import open_input
from ..base import ReaderBase
from .facts import LastSample, LastStacksFacts
from .ring import MARKER, parse_line

__all__ = ["LastStacksReader", "READER"]

_CAP = 8 << 20
"""Bytes of one sample file read (a py-spy dump of many threads stays far below)."""

_Sample = tuple[int, float, str, str]  # round, unix, file, body


class LastStacksReader(ReaderBase[LastStacksFacts]):
    """``OUT/last/`` files: ``records`` counts the samples read."""

    kind = SourceKind.LAST_STACKS

    def sniff(self, head: bytes) -> bool:
        """True for a file that starts with ``# hangdbg-last sample|gone|end`` (:mod:`.ring`)."""
        return head.startswith(MARKER.encode()) and parse_line(head.split(b"\n", 1)[0].decode("utf-8", "replace")) is not None

    def all_clear(self, rep: SourceReport[LastStacksFacts]) -> str:
        n = len(rep.facts.ranks) if rep.facts is not None else 0
        return f"the last stack samples of {n} ranks: all were sampled in the last round before the end"

    def _read(self, paths: list[str]) -> SourceReport[LastStacksFacts]:
        samples: dict[int, list[_Sample]] = defaultdict(list)
        gone: dict[int, tuple[int, str]] = {}
        end: tuple[float, str] | None = None
        errors: list[FileError] = []
        for p in paths:
            try:
                with open_input(p) as f:
                    text = f.read(_CAP).decode("utf-8", "replace")
            except OSError as exc:
                errors.append(FileError(p, f"cannot read: {exc.strerror or exc}"))
                continue
            first, _nl, body = text.partition("\n")
            got = parse_line(first)
            try:
                if got is None:
                    raise ValueError("no `# hangdbg-last` line")
                what, kv = got
                if what == "sample":
                    samples[int(kv["rank"])].append((int(kv["round"]), float(kv["unix"]), p, body))
                elif what == "gone":
                    gone[int(kv["rank"])] = (int(kv["round"]), kv.get("why", ""))
                else:
                    end = (float(kv["unix"]), "watch")
            except (KeyError, ValueError) as exc:
                errors.append(FileError(p, f"not a --keep-last file: {exc}"))
        if not samples:
            return SourceReport(kind=self.kind, files=tuple(paths), errors=tuple(errors))
        end_at, end_source = end if end is not None else (max(s[1] for v in samples.values() for s in v), "newest-sample")
        ranks = tuple(_last(r, sorted(v, reverse=True), end_at, gone.get(r)) for r, v in sorted(samples.items()))
        facts = LastStacksFacts(end_at, "watch" if end_source == "watch" else "newest-sample", ranks)
        states = tuple(RankState(rank=s.rank, host=s.host, pid=s.pid, source=self.kind,
                                 state=f"last sample {s.age_seconds:.1f} s before the end: {s.place}") for s in ranks)
        return SourceReport(kind=self.kind, files=tuple(paths), findings=_findings(facts), ranks=states,
                            records=sum(len(v) for v in samples.values()), errors=tuple(errors), facts=facts)


def _dump(name: str, body: str) -> RankDump | None:
    dumps, _stats = load_dump_texts([(name, body)])
    return dumps[0] if dumps and dumps[0].threads else None


def _last(rank: int, kept: list[_Sample], end: float, gone: tuple[int, str] | None) -> LastSample:
    """The newest of ``kept`` (newest first) of ``rank``, placed and aged."""
    round_, unix, name, body = kept[0]
    dumps = [_dump(n, b) for _r, _u, n, b in kept]
    d = dumps[0]
    unchanged = 1
    if d is not None:
        key = tuple(sorted(th.stack_key for th in d.threads))
        for other in dumps[1:]:
            if other is None or tuple(sorted(th.stack_key for th in other.threads)) != key:
                break
            unchanged += 1
    place, frame, idle = _where(d)
    if d is not None and not frame:  # no Python frame: the interpreter was exiting (torchrun's SIGTERM) or starting
        before = next((w for w in map(_where, dumps[1:]) if w[1]), None)
        place = "no Python frame (its interpreter was finishing, as after torchrun's SIGTERM)" + (f"; in the sample before, {before[0]}" if before else "")
        frame = before[1] if before else ""
    return LastSample(rank, d.pid if d is not None else None, d.host if d is not None else "", round_, unix,
                      round(max(0.0, end - unix), 2), place, frame, idle, len(kept), unchanged,
                      gone[0] if gone else None, gone[1] if gone else "")


def _where(d: RankDump | None) -> tuple[str, str, bool]:
    """``(place, innermost Python frame or "", idle)`` of a sample's speaking thread."""
    if d is None:
        return "its stacks could not be read", "", False
    places = [place_of(th) for th in d.threads]
    i = primary_thread(d.threads, places)
    th = d.threads[i]
    py = th.python_frames
    return places[i].describe(), (f"{py[0].function} ({py[0].short_file}:{py[0].line})" if py else ""), th.idle


def _findings(facts: LastStacksFacts) -> tuple[Finding, ...]:
    """An info per place (where those ranks were, how long before the end), and a warning naming
    the ranks last sampled in an earlier round than the others."""
    out = []
    by_place: dict[str, list[LastSample]] = defaultdict(list)
    for s in facts.ranks:
        by_place[s.place].append(s)
    end = "the end" if facts.end_source == "watch" else "the newest sample (the job's end was not recorded)"
    for place, group in sorted(by_place.items(), key=lambda kv: kv[1][0].rank):
        ages = sorted(s.age_seconds for s in group)
        age = f"{ages[0]:.1f} s" if ages[0] == ages[-1] else f"{ages[0]:.1f}-{ages[-1]:.1f} s"
        out.append(Finding(Kind.LAST_STACKS, f"{ranks_text([s.rank for s in group])}: last sampled {age} before {end}, "
                           f"{place}", ranks=tuple(s.rank for s in group), severity=Severity.INFO))
    newest = max(s.round for s in facts.ranks)
    early = [s for s in facts.ranks if s.round < newest]
    if early and len(early) < len(facts.ranks):
        latest = max(s.time for s in facts.ranks)
        why = {"exited": "its process had exited", "not-sampled": "it could not be sampled"}
        parts = [("" if len(early) == 1 else f"rank {s.rank} ") + f"last sampled in round {s.round}, {latest - s.time:.1f} s before the others' last "
                 f"(round {newest})" + (f"; at round {s.gone_round} {why.get(s.gone_why, s.gone_why)}"
                                        if s.gone_round is not None else "") for s in early[:4]]
        out.append(Finding(Kind.LAST_STACKS, f"{ranks_text([s.rank for s in early])} stopped answering before the "
                           f"others: " + "; ".join(parts) + (" ..." if len(early) > 4 else ""),
                           ranks=tuple(s.rank for s in early), severity=Severity.WARNING,
                           action="read those ranks' logs and exit status (torchrun's summary, dmesg for the OOM "
                                  "killer): the samples show where they were, not why they stopped"))
    return tuple(out)


READER = LastStacksReader()
