"""Exports of a stack analysis to the flame-graph tools people already use (builders, and
:func:`write_exports`, which writes them through the run's :class:`~hangdbg.outdir.OutDir`).

* :func:`folded_lines`: Brendan Gregg's folded stacks (``frame;frame;frame COUNT``, outermost
  frame first; https://github.com/brendangregg/FlameGraph, the input of ``flamegraph.pl``, which
  speedscope imports too);
* :func:`speedscope_document`: the speedscope file format
  (https://www.speedscope.app/file-format-schema.json, defined by ``src/lib/file-format-spec.ts``
  of https://github.com/jlfwong/speedscope): one ``sampled`` profile per equivalence class, or
  per rank.

Every thread of every rank is counted (not only the thread the analysis chose), in its last
sample (``RankDump.threads``); each thread is one sample of weight 1. Ranks whose stack could not
be taken, and threads without frames, are left out. A frame is named ``function (file:line)``
(:meth:`hangdbg.model.Frame.__str__`, native frames included when the dump has them).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable

from ..collect.plan import SpeedscopeBy as ExportBy
from ..model import Analysis, RankDump
from ..frames import Frame
from ..outdir import OutDir
from ..rankset import ranks_text

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
"""The ``$schema`` of a speedscope file."""

EXPORTER = "hangdbg"


_FOLDED_REPLACE = str.maketrans({";": ",", "\n": " ", "\r": " "})


def frame_name(f: Frame) -> str:
    """``function (file:line)``, as the console report names a frame."""
    return str(f)


def _folded_name(f: Frame) -> str:
    """:func:`frame_name` with the separators of the folded format replaced (``;`` -> ``,``,
    newlines -> spaces)."""
    return frame_name(f).translate(_FOLDED_REPLACE)


def _stacks(dumps: Iterable[RankDump]) -> Iterable[tuple[Frame, ...]]:
    """Every thread's frames, outermost first (threads without frames left out)."""
    for d in dumps:
        for t in d.threads:
            if t.frames:
                yield tuple(reversed(t.frames))


def folded_lines(analysis: Analysis) -> list[str]:
    """The folded stacks of every thread of every rank of ``analysis``.

    Args:
        analysis: a stack analysis (:class:`hangdbg.model.Analysis`).

    Returns:
        One line per distinct stack, ``frame;frame;...;frame COUNT`` (outermost frame first,
        ``COUNT`` the number of threads, over all ranks, with that stack), sorted by stack; no
        trailing newline. ``;`` inside a frame name becomes ``,`` and newlines become spaces.
    """
    counts: dict[str, int] = {}
    for stack in _stacks(analysis.ranks):
        key = ";".join(_folded_name(f) for f in stack)
        counts[key] = counts.get(key, 0) + 1
    return [f"{key} {n}" for key, n in sorted(counts.items())]


class _Frames:
    """The shared frame table of a speedscope file: one entry per distinct frame key."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, str, int | None], int] = {}
        self.frames: list[dict[str, Any]] = []

    def of(self, f: Frame) -> int:
        i = self.index.get(f.key)
        if i is None:
            i = self.index[f.key] = len(self.frames)
            entry: dict[str, Any] = {"name": frame_name(f), "file": f.file}
            if f.line is not None:
                entry["line"] = f.line
            self.frames.append(entry)
        return i


def _profile(name: str, dumps: Iterable[RankDump], table: _Frames) -> dict[str, Any]:
    """One ``sampled`` profile: a sample per distinct stack, weighted by its number of threads."""
    weights: dict[tuple[int, ...], int] = {}
    for stack in _stacks(dumps):
        key = tuple(table.of(f) for f in stack)
        weights[key] = weights.get(key, 0) + 1
    total = sum(weights.values())
    return {"type": "sampled", "name": name, "unit": "none", "startValue": 0, "endValue": total,
            "samples": [list(k) for k in weights], "weights": list(weights.values())}


def speedscope_document(analysis: Analysis, by: ExportBy = "class") -> dict[str, Any]:
    """A speedscope file (https://www.speedscope.app/file-format-schema.json) of ``analysis``.

    Args:
        analysis: a stack analysis (:class:`hangdbg.model.Analysis`).
        by: ``"class"``: one profile per equivalence class (``analysis.classes``, largest first),
            named ``ranks {0-6, 8}`` (:func:`hangdbg.rankset.ranks_text`) with the class's place;
            ``"rank"``: one profile per rank whose stack was read, named ``rank N``.

    Returns:
        The document as a ``dict`` ready for ``json.dumps``: ``$schema``, ``shared.frames``
        (``name``, ``file``, ``line``), ``profiles`` (``type: sampled``, ``unit: none``; each
        sample is frame indices outermost first, its weight the number of threads with that
        stack), ``name``, ``activeProfileIndex`` (0) and ``exporter``.

    Raises:
        ValueError: ``by`` is neither ``"class"`` nor ``"rank"``.
    """
    table = _Frames()
    readable = [d for d in analysis.ranks if d.threads]
    profiles: list[dict[str, Any]] = []
    if by == "class":
        by_rank = {d.rank: d for d in readable}
        for g in analysis.classes:
            label = ranks_text(g.ranks)
            where = g.place.describe()
            name = f"{label}: {where}" if where and where != "stack unknown" else label
            profiles.append(_profile(name, (by_rank[r] for r in g.ranks if r in by_rank), table))
    elif by == "rank":
        for d in readable:
            profiles.append(_profile(f"rank {d.rank}", [d], table))
    else:
        raise ValueError(f"by must be 'class' or 'rank', not {by!r}")
    return {"$schema": SPEEDSCOPE_SCHEMA, "shared": {"frames": table.frames}, "profiles": profiles,
            "name": f"hangdbg: {len(readable)} ranks, one profile per {by}", "activeProfileIndex": 0,
            "exporter": EXPORTER}


def write_exports(analysis: Analysis | None, files: OutDir, speedscope: str | os.PathLike | None = None,
                  speedscope_by: ExportBy = "class", folded: str | os.PathLike | None = None,
                  warn: Callable[[str], None] = lambda _text: None) -> None:
    """Write the ``--speedscope``/``--folded`` files of ``analysis`` (none asked: nothing) through
    ``files`` (a file that cannot be written is in its ``not_saved``); with no stack analysis
    nothing is written and ``warn`` says so."""
    if speedscope is None and folded is None:
        return
    if analysis is None or not analysis.ranks:
        names = " and ".join(str(p) for p in (speedscope, folded) if p is not None)
        warn(f"no stacks among the inputs: {names} not written")
        return
    if speedscope is not None:
        files.save_text(speedscope, json.dumps(speedscope_document(analysis, by=speedscope_by), ensure_ascii=False) + "\n")
    if folded is not None:
        files.save_text(folded, "".join(line + "\n" for line in folded_lines(analysis)))
