"""The typed facts of ``last-stacks`` evidence (``SourceReport.facts``, the ``facts`` of the JSON
documents). Frozen dataclasses, no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["LastSample", "LastStacksFacts"]


@dataclass(frozen=True, slots=True)
class LastSample:
    """One rank's newest kept stack sample.

    Attributes:
        rank, pid, host: the rank and its process.
        round: the watch's observation number of the sample (the same for every rank sampled together).
        time: when it was taken (Unix seconds, the watching host's clock).
        age_seconds: how long before the end (``LastStacksFacts.end``) it was taken.
        place: where the rank was (``in all_reduce at train.py:88``, ``in step (train.py:40)``).
        frame: its speaking thread's innermost Python frame (``function (file:line)``), or "".
        idle: py-spy saw that thread idle (waiting) rather than active.
        samples: samples of this rank kept in the ring.
        unchanged: how many of its newest samples in a row show the same stacks (1: it moved since the one before).
        gone_round: the round the watch first saw it gone or not answering while others were sampled, or None.
        gone_why: ``exited`` (its process was gone), ``not-sampled`` (its node did not answer, py-spy failed), or "".
    """

    rank: int
    pid: int | None
    host: str
    round: int
    time: float
    age_seconds: float
    place: str
    frame: str = ""
    idle: bool = False
    samples: int = 1
    unchanged: int = 1
    gone_round: int | None = None
    gone_why: str = ""


@dataclass(frozen=True, slots=True)
class LastStacksFacts:
    """What ``OUT/last/`` holds: the end it is measured from and each rank's newest sample.

    Attributes:
        end: the end (Unix seconds): when the watch saw the job gone, else the newest sample's time.
        end_source: ``watch`` (``OUT/last/end.txt``) or ``newest-sample`` (the job's end was not recorded).
        ranks: one entry per rank, by rank.
    """

    end: float
    end_source: Literal["watch", "newest-sample"]
    ranks: tuple[LastSample, ...] = ()
