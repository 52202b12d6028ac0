"""What a log file tells about the job that wrote it: world size, NCCL version, hosts, date.

Read from the first bytes of a file (``hangdbg report`` already holds them), for telling apart
files of unrelated jobs. Grammars:

* NCCL: ``NCCL version 2.18.1+cuda12.1`` (``init.cc`` banner), communicator init lines with
  ``nranks 16`` / ``nRanks 16``, the ``host:pid:tid [dev] NCCL`` line prefix (``debug.cc``);
* PyTorch / torchrun: ``world_size=16``, ``WORLD_SIZE=16``, ``world_size: 16``;
* syslog ``Jan  5 10:00:00 host kernel:`` hosts; ISO dates ``2024-01-29T21:54:38`` /
  ``2024-01-29 21:54:38`` (glog, Python logging, journal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

__all__ = ["JobSignature", "signature"]

_VERSION = re.compile(rb"NCCL version (\d{1,2})\.(\d{1,3})\.\d{1,3}")
_WORLD = re.compile(rb"\b(?:world_size(?:=|: ?)|WORLD_SIZE=)(\d{1,7})\b")
_NRANKS = re.compile(rb"\bn[Rr]anks[ =](\d{1,7})\b")
_NCCL_HOST = re.compile(rb"^(?:\S{0,40}\s)?([A-Za-z][\w.-]{0,62}):\d{1,9}:\d{1,9} \[\d{1,3}\] NCCL ", re.MULTILINE)
_SYSLOG_HOST = re.compile(rb"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d ([A-Za-z][\w.-]{0,62}) kernel: ", re.MULTILINE)
_DATE = re.compile(rb"\b(20\d\d)-(\d\d)-(\d\d)[T ]\d\d:\d\d:\d\d\b")
_MAX_WORLD = 1 << 20


@dataclass(frozen=True, slots=True)
class JobSignature:
    """The job traits one file shows (empty when it shows none).

    Attributes:
        worlds: world sizes the file states (``WORLD_SIZE``, ``world_size``).
        least: the largest communicator's ``nranks``: a lower bound of the world size (a rank's log
            may show only its tensor- or pipeline-parallel communicators), 0 when none.
        versions: NCCL ``major.minor`` versions.
        hosts: host names of NCCL line prefixes and syslog lines.
        dates: first and last calendar date printed, or ``None``.
        line: the line of the first trait (for the evidence).
    """

    worlds: frozenset[int] = frozenset()
    least: int = 0
    versions: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()
    dates: tuple[date, date] | None = None
    line: int | None = None

    @property
    def empty(self) -> bool:
        return not (self.worlds or self.least or self.versions or self.dates)


def _dates(head: bytes) -> tuple[date, date] | None:
    found = []
    for m in _DATE.finditer(head):
        try:
            found.append(date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        except ValueError:  # 2024-13-45: not a date
            continue
    return (min(found), max(found)) if found else None


def signature(head: bytes) -> JobSignature:
    """The :class:`JobSignature` of a file's first bytes; never raises."""
    # each pattern only where its fixed text is (a substring test is ~100x cheaper than the scan;
    # 10,000 py-spy files spent 2.3 s here)
    world = b"orld_size" in head or b"WORLD_SIZE=" in head
    nranks = b"anks" in head
    nccl = b"NCCL " in head
    worlds = [int(m.group(1)) for m in _WORLD.finditer(head)] if world else []
    worlds = [w for w in worlds if 0 < w <= _MAX_WORLD]
    least = max((n for n in (int(m.group(1)) for m in _NRANKS.finditer(head)) if 0 < n <= _MAX_WORLD),
                default=0) if nranks else 0
    versions = frozenset(f"{int(m.group(1))}.{int(m.group(2))}" for m in _VERSION.finditer(head)) if nccl else frozenset()
    hosts = frozenset(m.group(1).decode("ascii", "replace")
                      for rx, there in ((_NCCL_HOST, nccl), (_SYSLOG_HOST, b" kernel: " in head)) if there
                      for m in rx.finditer(head))
    firsts = [m.start() for m in (_VERSION.search(head) if nccl else None, _WORLD.search(head) if world else None,
                                  _NRANKS.search(head) if nranks else None, _DATE.search(head)) if m is not None]
    return JobSignature(frozenset({max(worlds)}) if worlds else frozenset(), least, versions, hosts, _dates(head),
                        head.count(b"\n", 0, min(firsts)) + 1 if firsts else None)
