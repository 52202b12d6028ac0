"""Do the files given to ``hangdbg report`` come from one job? (:class:`~hangdbg.model.Kind` ``mixed-jobs``)

Heuristic (ours): files of one job agree on its world size, run at the same time and (mostly) with
one NCCL release. Two files that share no host belong to different jobs when both state a world
size (``WORLD_SIZE``, ``world_size``) and the sizes differ, or when one shows a communicator
larger than the other's stated world size (an NCCL ``nranks`` is only a lower bound: a rank's log
may show only its tensor- or pipeline-parallel communicators), when their dates are more than :data:`MAX_DAYS_APART` days apart, or when their NCCL
``major.minor`` versions differ and they share no host (one job whose hosts run different NCCL
builds is a set-up difference the NCCL analysis reports, not two jobs). Files are grouped
greedily, in path order; files that show none of these traits join no group.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from ..model import Evidence, Finding, Kind, Severity
from .job_signature import JobSignature

__all__ = ["MAX_DAYS_APART", "job_groups", "mixed_jobs"]

MAX_DAYS_APART = 2


@dataclass
class _Job:
    files: list[str] = field(default_factory=list)
    worlds: set[int] = field(default_factory=set)
    least: int = 0
    versions: set[str] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    first: date | None = None
    last: date | None = None
    line: int | None = None

    def fits(self, s: JobSignature) -> bool:
        shared = bool(s.hosts & self.hosts)  # one job's files, whatever they show of its size
        if not shared and s.worlds and self.worlds and not s.worlds & self.worlds:
            return False
        # a communicator larger than the job's stated world size: another job
        if not shared and (s.least and self.worlds and s.least > max(self.worlds)
                           or self.least and s.worlds and self.least > max(s.worlds)):
            return False
        if s.dates and self.first is not None and self.last is not None:
            gap = timedelta(days=MAX_DAYS_APART)
            if s.dates[1] < self.first - gap or s.dates[0] > self.last + gap:
                return False
        if s.versions and self.versions and not s.versions & self.versions and not s.hosts & self.hosts:
            return False
        return True

    def add(self, path: str, s: JobSignature) -> None:
        if not self.files:
            self.line = s.line
        self.files.append(path)
        self.worlds |= s.worlds
        self.least = max(self.least, s.least)
        self.versions |= s.versions
        self.hosts |= s.hosts
        if s.dates:
            self.first = s.dates[0] if self.first is None else min(self.first, s.dates[0])
            self.last = s.dates[1] if self.last is None else max(self.last, s.dates[1])

    def describe(self) -> str:
        traits = []
        if self.worlds:
            traits.append("world size " + "/".join(map(str, sorted(self.worlds))))
        elif self.least:
            traits.append(f"communicators of up to {self.least} ranks")
        if self.versions:
            traits.append("NCCL " + "/".join(sorted(self.versions)))
        if self.hosts:
            hs = sorted(self.hosts)
            traits.append("hosts " + ", ".join(hs[:3]) + (f" +{len(hs) - 3}" if len(hs) > 3 else ""))
        if self.first is not None:
            traits.append(str(self.first) if self.first == self.last else f"{self.first}..{self.last}")
        names = [os.path.basename(f) for f in self.files]
        return ", ".join(names[:3]) + (f" +{len(names) - 3} files" if len(names) > 3 else "") + f" ({'; '.join(traits)})"


def job_groups(signatures: Sequence[tuple[str, JobSignature]]) -> list[_Job]:
    """Files grouped into jobs (files without traits left out)."""
    jobs: list[_Job] = []
    for path, s in sorted(signatures):
        if s.empty:
            continue
        job = next((j for j in jobs if j.fits(s)), None)
        if job is None:
            job = _Job()
            jobs.append(job)
        job.add(path, s)
    return jobs


def mixed_jobs(signatures: Sequence[tuple[str, JobSignature]]) -> list[Finding]:
    """One warning when the files look like several jobs, else nothing."""
    jobs = job_groups(signatures)
    if len(jobs) < 2:
        return []
    shown = "; ".join(f"job {i}: {j.describe()}" for i, j in enumerate(jobs[:6], 1)) + ("; ..." if len(jobs) > 6 else "")
    return [Finding(
        kind=Kind.MIXED_JOBS, severity=Severity.WARNING,
        summary=f"these files look like {len(jobs)} different jobs: {shown}; the findings below mix them",
        action="run hangdbg report on one job's files (one directory per job)",
        evidence=tuple(Evidence(j.files[0], j.line, j.describe()) for j in jobs[:6]))]
