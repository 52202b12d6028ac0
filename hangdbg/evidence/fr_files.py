"""The flight-recorder dumps saved next to a job's stacks: the ``fr/`` folder of a dump directory.

``hangdbg dump -o DIR`` (with the flight recorder fetched from the job: the debug server's
``fr_trace_json`` handler, the NCCL pipe) and a user who copied torch's dumps keep one file per
rank in ``DIR/fr/`` (named for the rank: ``rank_3.json``, ``nccl_trace_rank_3``; see
:func:`~hangdbg.evidence.flight_recorder.grammar.rank_from_path`). ``analyze DIR`` joins them with
the stacks (:func:`~hangdbg.evidence.fr_join.joined_analysis`); ``report DIR`` finds them by content.
"""

from __future__ import annotations

import os
from typing import Sequence

from .flight_recorder.grammar import FrDump, FrDumpError, load_dump

__all__ = ["FR_FOLDER", "fr_dumps", "fr_dumps_beside"]

FR_FOLDER = "fr"
"""The folder of a dump directory that holds the flight-recorder dumps, one file per rank."""


def fr_dumps(files: Sequence[str]) -> list[FrDump]:
    """The flight-recorder dumps among ``files``, the first of each rank; files that are not a
    readable dump (an ``fr_trace`` text, a garbled file, no rank in the name) are left out: the
    flight-recorder reader reports them."""
    out: list[FrDump] = []
    for f in files:
        try:
            d = load_dump(f)
        except (FrDumpError, OSError):
            continue
        if all(x.rank != d.rank for x in out):
            out.append(d)
    return out


def fr_dumps_beside(paths: Sequence[str]) -> list[FrDump]:
    """The dumps in the ``fr/`` folder of each directory of ``paths`` (files in name order)."""
    files: list[str] = []
    for p in paths:
        folder = os.path.join(p, FR_FOLDER)
        if os.path.isdir(folder):
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            files += [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
    return fr_dumps(files)
