"""What ``watch`` records of a stall (the ``watch`` document's ``stalls``): data only, importing nothing of
collect/ or transport/, so that the JSON document's types load without them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..model import Finding

__all__ = ["SIGNALS", "Signal", "StallRecord", "StragglerBasis", "StragglerRank", "StragglerReport"]

Signal = Literal["log", "heartbeat", "stacks"]
SIGNALS: tuple[Signal, ...] = ("log", "heartbeat", "stacks")
"""What can declare a stall."""


@dataclass(frozen=True, slots=True)
class StallRecord:
    """One stall ``watch`` declared and what it did about it (also an entry of the ``watch``
    document's ``stalls``).

    Attributes:
        detected: when (ISO 8601, UTC).
        signal: what declared it (of :data:`SIGNALS`).
        quiet_seconds: seconds the signal had not moved.
        reason: one sentence.
        dump_dir: the stall's dump (``OUT/stall-YYYYmmdd-HHMMSS``, its ``hangdbg.json`` inside).
        dump_exit: the exit status ``dump`` would have had (3: suspects named; 1: nothing read or
            the dump failed; 2: usage), None when it did not run.
        headline: the dump's headline, None when it could not be taken.
        suspects: the ranks the dump blamed.
        dump_seconds: seconds from the detection to the finished dump.
        on_hang_exit: exit status of ``on_hang`` (None: not given, or it could not run).
        then: what ``then`` did (``"kill: sent SIGTERM to 5 processes"``), or None.
    """

    detected: str
    signal: Signal
    quiet_seconds: float
    reason: str
    dump_dir: str
    dump_exit: int | None
    headline: str | None
    suspects: tuple[int, ...]
    dump_seconds: float
    on_hang_exit: int | None
    then: str | None


StragglerBasis = Literal["compute", "arrival", "cpu-time"]
"""What the ranks were compared on: the compute seconds before each step's sync point, the arrival
time at it (heartbeat files, :mod:`hangdbg.hooks.heartbeat`), or the CPU time between stack samples."""


@dataclass(frozen=True, slots=True)
class StragglerRank:
    """One rank that was slower than the others in at least one compared step.

    Attributes:
        rank: the rank.
        chronic: slow in at least ``PERSIST`` of the latest steps and in most steps since
            ``since_step`` (a ``straggler`` finding); False: transient (a few slow steps, no finding).
        lag_seconds: the median, over its slow steps since ``since_step`` (chronic) or over all its
            slow steps (transient), of how much later it was than the median of the other ranks
            (seconds; with ``cpu-time``: the seconds of CPU more per interval).
        lag_percent: ``lag_seconds`` as a percentage of the median rank's figure (its compute time,
            its step period, or its CPU time per interval).
        since_step: the first step (sample number with ``cpu-time``) of the chronic run, else the first slow step.
        last_slow_step: the latest step in which it was slow.
        steps_slow: steps in which it was slow.
        steps_seen: steps compared.
    """

    rank: int
    chronic: bool
    lag_seconds: float
    lag_percent: float
    since_step: int | None
    last_slow_step: int | None
    steps_slow: int
    steps_seen: int


@dataclass(frozen=True, slots=True)
class StragglerReport:
    """A straggler report of ``watch --straggler-every N`` (also ``watch.json``'s ``stragglers``).

    Attributes:
        basis: what the ranks were compared on (:data:`StragglerBasis`).
        step: the latest step compared (with ``cpu-time``: the number of stack samples).
        steps: how many steps (intervals) were compared.
        ranks: the ranks slow in at least one step, chronic first, then by lag.
        findings: one ``straggler`` warning per chronic straggler (none for a healthy job).
        summary: one sentence.
    """

    basis: StragglerBasis
    step: int
    steps: int
    ranks: tuple[StragglerRank, ...] = ()
    findings: tuple[Finding, ...] = ()
    summary: str = ""
