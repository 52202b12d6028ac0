"""Launcher banners that say one thing over several lines: a head line, then ``Key: value`` lines that name the
process. Their lines are joined into one message before the catalog reads it, so that the rank, host and exit
status the later lines give belong to the failure the head announces.

Banners, from the upstream texts:

* Open MPI's mpirun / PRRTE's prun ``[orterun:non-zero-exit]`` (open-mpi/ompi
  orte/tools/orterun/help-orterun.txt; openpmix/prrte src/tools/prun/help-prun.txt)::

      %s detected that one or more processes exited with non-zero status, thus causing
      the job to be terminated. The first process to do so was:

        Process name: %s          (ORTE_NAME_PRINT: [[jobfamily,job],vpid], the vpid being the MPI rank)
        Exit code:    %d

* MPICH's Hydra (pmodels/mpich v4.1.2 src/pm/hydra/mpiexec/pmiserv_cb.c:312, v3.2 pm/pmiserv/pmiserv_cb.c:252), printed
  only for a process that did not exit (``!WIFEXITED``), with its raw wait status as the code (the signal number,
  +128 when it dumped core); Intel MPI's Hydra names the rank and the signal instead::

      =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
      =   PID %d RUNNING AT %s            (Intel MPI: =   RANK %d PID %d RUNNING AT %s)
      =   EXIT CODE: %d                   (Intel MPI: =   KILLED BY SIGNAL: %d (%s))
      =   CLEANING UP REMAINING PROCESSES
      =   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES

* Open MPI's / PRRTE's out-of-band TCP failure (open-mpi/ompi v4.1.6 orte/mca/oob/tcp/oob_tcp_connection.c, openpmix/
  prrte src/mca/oob/tcp/oob_tcp_connection.c), the remote host being the one not reached::

      A process or daemon was unable to complete a TCP connection
      to another process:
        Local host:    %s
        Remote host:   %s

* Open MPI's / PMIx's / PRRTE's component that could not be opened (open-mpi/ompi opal/mca/base/help-mca-base.txt
  ``[find-available:not-valid]``; the same text in openpmix and prrte), the host row naming the node whose install
  lacks it::

      A requested component was not found, or was unable to be opened.  This
      means that this component is either not installed or is unable to be
      ... (three more lines of help text)

      Host:      %s
      Framework: %s
      Component: %s

* libstdc++'s verbose terminate handler (gcc libstdc++-v3/libsupc++/vterminate.cc)::

      terminate called after throwing an instance of '%s'
        what():  %s

  Here the row says what failed: the pair is read as its ``what()`` message (a NCCL watchdog's timeout of a rank
  that only waited is that rank's wait, not a failure of its own).

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ...catalog.catalog import Catalog
from ...catalog.message import Message
from .log import ErrorEvent, ErrorLog

__all__ = ["Banner", "OpenBlock", "banner_of", "opened"]

_BANNER_RULE = re.compile(r"^[=\s]{0,12}")
"""Hydra's ``=   `` before each line of its banner (the separator rows of ``=`` are no lines of it)."""


@dataclass(frozen=True, slots=True)
class Banner:
    """A banner: its head, the lines that may follow it (at most ``span`` lines on, blank lines between them allowed),
    and the groups of those lines that name the rank and the host."""

    name: str
    head: re.Pattern[str]
    rows: tuple[re.Pattern[str], ...]
    span: int
    said: bool = False  # its one row (read in the raw line) is the message that says what failed


BANNERS = (
    Banner("openmpi-non-zero-exit",
           re.compile(r"detected that one or more processes exited with non-zero status, thus causing"
                      r"(?: the job to be terminated\. The first process to do so was:)?\s*$"),
           (re.compile(r"^the job to be terminated\. The first process to do so was:\s*$"),
            re.compile(r"^Process name: \[\[\d{1,10},\d{1,10}\],(?P<rank>\d{1,9})\]\s*$"),
            re.compile(r"^Exit code: {0,12}-?\d{1,5}\s*$")), 6),
    Banner("hydra-bad-termination",
           re.compile(r"^BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\s*$"),
           (re.compile(r"^(?:RANK (?P<rank>\d{1,9}) )?PID \d{1,10} RUNNING AT (?P<host>[\w.\-]{1,253})\s*$"),
            re.compile(r"^(?:EXIT CODE: \d{1,5}|KILLED BY SIGNAL: \d{1,3}(?: \([^)\n]{0,40}\))?)\s*$"),
            re.compile(r"^CLEANING UP REMAINING PROCESSES\s*$"),
            re.compile(r"^YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\s*$")), 8),
    Banner("openmpi-oob-tcp",
           re.compile(r"^A process or daemon was unable to complete a TCP connection(?: to another process:)?\s*$"),
           (re.compile(r"^to another process:\s*$"),
            re.compile(r"^Local host: {0,12}[\w.\-]{1,253}(?:\s|$)"),  # a paste may join the help text after a row
            re.compile(r"^Remote host: {0,12}(?P<host>[\w.\-]{1,253})(?:\s|$)")), 5),
    Banner("mca-component-not-found",
           re.compile(r"^A requested component was not found, or was unable to be opened\."),
           (re.compile(r"^means that this component is either not installed"),
            re.compile(r"^used on your system \(e\.g\., sometimes"),
            re.compile(r"^that the component requires are unable to be found"),
            re.compile(r"^[\w ]{1,40} stopped checking at the first component"),
            re.compile(r"^Host: {0,12}(?P<host>[\w.\-]{1,253})(?:\s|$)"),
            re.compile(r"^Framework: {0,12}\S{1,80}\s*$"),
            re.compile(r"^Component: {0,12}\S{1,200}\s*$")), 10),
    Banner("cpp-terminate",
           re.compile(r"^terminate called after throwing an instance of '[^'\n]{1,300}'\s*$"),
           (re.compile(r"^.{0,200}?\bwhat\(\):\s"),), 2, said=True),
)


def _bare(text: str) -> str:
    return _BANNER_RULE.sub("", text, count=1).strip()


def banner_of(text: str) -> Banner | None:
    """The banner whose head ``text`` (a message, its prefixes peeled) is, or None."""
    if "detected that one or more" not in text and "BAD TERMINATION" not in text and "terminate called" not in text \
            and "complete a TCP connection" not in text and "requested component was not found" not in text:
        return None
    bare = _bare(text)
    return next((b for b in BANNERS if b.head.search(bare)), None)


@dataclass
class OpenBlock:
    """A banner whose head was read at line ``line`` and became event ``index`` of the log: the rows read since."""

    banner: Banner
    line: int
    index: int
    text: str
    rows: list[str] = field(default_factory=list)
    rank: int | None = None
    host: str | None = None
    done: set[int] = field(default_factory=set)
    took: bool = False  # the last line offered (:meth:`after`) was a row
    said: Message | None = None  # the message of a :attr:`Banner.said` banner's row

    def take(self, no: int, text: str, raw: str = "") -> bool | None:
        """Offer the message of line ``no``: True when it is a row of the banner (kept), None for a blank line
        (it may stand between rows), False when the banner is over (this line and the span it may wait)."""
        if no - self.line > self.banner.span:
            return False
        bare = _bare(text)
        if not bare:
            return None
        for i, rx in enumerate(self.banner.rows):
            if i in self.done:
                continue
            m = rx.match(raw if self.banner.said else bare)
            if m is not None:
                self.done.add(i)
                self.rows.append(bare)
                d = m.groupdict()
                if d.get("rank"):
                    self.rank = int(d["rank"])
                if d.get("host"):
                    self.host = d["host"]
                return True
        return False

    def joined(self) -> str:
        """The head and its rows as one message, as the catalog's banner entries read them."""
        return " ".join([_bare(self.text)] + [" ".join(r.split()) for r in self.rows])

    def after(self, log: ErrorLog, no: int, raw: str, msg: Message, catalog: Catalog) -> OpenBlock | None:
        """This block after line ``no`` (``raw``, its message ``msg``; :attr:`took` says whether it was a row), or
        None once the banner is over (its head's event then holds the rows read: :meth:`close`)."""
        took = self.take(no, msg.text, raw)
        if took and self.banner.said:
            self.said = msg
        self.took = bool(took)
        if took is False:
            self.close(log, catalog)
            return None
        return self

    def close(self, log: ErrorLog, catalog: Catalog) -> None:
        """Replace the head's event by one whose message is the whole banner, read again by the catalog, with the
        rank and host its rows name (a launcher prints it: a rank prefix on its head names no process of it)."""
        if not self.rows or self.index >= len(log.events):
            return
        ev = log.events[self.index]
        if self.said is not None:
            self._close_said(log, ev, self.said, catalog)
            return
        text = self.joined()
        msg = replace(ev.message, text=text, rank=self.rank, host=self.host or ev.message.host)
        log.events[self.index] = replace(ev, message=msg, match=catalog.match(text) or ev.match, weak=False)
        self.rows = []

    def _close_said(self, log: ErrorLog, ev: ErrorEvent, said: Message, catalog: Catalog) -> None:
        """The head's event read as the message its row says (``what():``) where the catalog knows that message,
        with the row's rank; else the head's own entry, quoting the row too."""
        self.rows = []
        found = catalog.search(said.text)
        if found is None:
            msg = replace(ev.message, text=f"{ev.message.text} what(): {said.text}")
            log.events[self.index] = replace(ev, message=msg)
            return
        msg = replace(said, rank=said.rank if said.rank is not None else ev.message.rank,
                      host=said.host or ev.message.host)
        log.events[self.index] = replace(ev, message=msg, match=found, weak=False)


def opened(log: ErrorLog, event: ErrorEvent) -> OpenBlock | None:
    """The banner opened by ``event`` (the last event of ``log``), the head of a launcher's multi-line report."""
    banner = banner_of(event.message.text)
    if banner is None or not log.events or log.events[-1] is not event:
        return None  # (an event past the log's cap was counted, not kept: no event of the log is its head)
    return OpenBlock(banner, event.evidence.line or 0, len(log.events) - 1, event.message.text)
