"""The typed facts of PyTorch and torchrun logs: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ['RankSeq', 'CppFrames', 'TorchLogFacts']


@dataclass(frozen=True, slots=True)
class RankSeq:
    """A rank's last SeqNum in a process group."""

    rank: int
    seq: int


@dataclass(frozen=True, slots=True)
class CppFrames:
    """The C++ ``frame #N:`` lines printed for a rank (``None`` when no rank was printed)."""

    rank: int | None
    frames: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TorchLogFacts:
    """The torch-log reader's facts.

    Attributes:
        timeouts: watchdog timeout lines.
        seqs: process group -> each rank's last SeqNum in it.
        desync_reports: desync-debug reports.
        child_failures: torchrun ``ChildFailedError`` entries.
        error_files: torchelastic ``error.json`` files.
        cpp_frames: the first C++ frames printed per rank.
        ranks_seen: ranks named by a ``[rankN]:`` prefix or tag.
    """

    timeouts: int = 0
    seqs: dict[str, tuple[RankSeq, ...]] = field(default_factory=dict)
    desync_reports: int = 0
    child_failures: int = 0
    error_files: int = 0
    cpp_frames: tuple[CppFrames, ...] = ()
    ranks_seen: tuple[int, ...] = ()
