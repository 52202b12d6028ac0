"""What ``watch`` records of a stall (the ``watch`` document's ``stalls``): data only, importing nothing of
collect/ or transport/, so that the JSON document's types load without them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["SIGNALS", "Signal", "StallRecord"]

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
