"""What the error-lines reader found, as typed facts (frozen, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ErrorLinesFacts", "EntryCount"]


@dataclass(frozen=True, slots=True)
class EntryCount:
    """One catalog entry and how many lines it matched.

    Attributes:
        id: the entry id (``nccl.duplicate-gpu``).
        lines: lines it matched.
        source: the upstream source the entry cites.
    """

    id: str
    lines: int
    source: str


@dataclass(frozen=True, slots=True)
class ErrorLinesFacts:
    """The error lines of the files read.

    Attributes:
        error_lines: error-looking lines (and catalog matches among other lines).
        recognised: lines a catalog entry matched.
        unrecognised: error-looking lines no entry matched (each quoted in a finding, grouped).
        entries: the entries that matched, most lines first.
        first_failure: the id of the entry of the first failure, "" when none.
        quiet_files: the files read that hold no error-looking line.
    """

    error_lines: int
    recognised: int
    unrecognised: int
    entries: tuple[EntryCount, ...]
    first_failure: str = ""
    quiet_files: tuple[str, ...] = ()
