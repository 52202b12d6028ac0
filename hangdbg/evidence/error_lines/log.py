"""The error-lines reader's record of what it read: one event per error line, and the log of the files read."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...catalog.catalog import Match
from ...catalog.entry import CatalogEntry
from ...catalog.message import Message
from ...model import Evidence
from .roster import Roster
from .tracebacks import CutTraceback

__all__ = ["ErrorEvent", "ErrorLog", "LOOKED_AT", "MAX_EVENTS"]

MAX_EVENTS = 20_000
"""Events kept per read (the rest are counted in :attr:`ErrorLog.dropped`)."""
LOOKED_AT = 4096
"""Characters of a line that are looked at (prefixes, error words, the catalog): a line of a megabyte
(a dump of a tensor, a base64 blob) is read in time linear in this, not in its length."""


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """One error line.

    Attributes:
        evidence: the file, line number and raw text.
        message: the message and its context (time, host, pid, rank, GPU).
        match: the catalog entry chain that matched, None for an unrecognised line.
        order: its position among all events read (file order, then line order).
    """

    evidence: Evidence
    message: Message
    match: Match | None
    order: int
    frame: str = ""  # for the last line of a traceback: its last frame, "path:line in func"
    named: bool = False  # the line after PyTorch's "Last error:": NCCL's own account of the failure just above
    weak: bool = False  # read by the shared start of a long message only (Catalog.match_head): a wrap may still join it


@dataclass
class ErrorLog:
    """The events of the files read, and the counts."""

    events: list[ErrorEvent] = field(default_factory=list)
    lines_read: int = 0
    error_lines: int = 0
    dropped: int = 0  # events beyond the cap (counted, never kept)
    quiet_files: list[str] = field(default_factory=list)  # files without an error-looking line
    stalls: list[tuple[Evidence, Message, CatalogEntry]] = field(default_factory=list)  # quiet files that end at a step that can wait forever
    gaps: dict[str, int] = field(default_factory=dict)  # path -> 2 for a double-spaced paste (lines apart per line)
    roster: Roster = field(default_factory=Roster)  # ranks announced (launchers, frameworks)
    cut_tracebacks: list[CutTraceback] = field(default_factory=list)  # excerpts that end inside a traceback
    ib_missing: list[tuple[Evidence, Evidence]] = field(default_factory=list)  # NCCL_IB_HCA set, no IB device

    def add(self, ev: ErrorEvent) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(ev)
        else:
            self.dropped += 1
