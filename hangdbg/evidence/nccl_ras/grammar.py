"""Reading NCCL RAS reports: the text the ``ncclras`` client prints (NCCL >= 2.24).

Format: NCCL ``src/ras/client_support.cc`` (``rasClientRunInit``, ``rasClientRunConns``,
``rasClientRunComms``, ``rasClientBreakDownErrors``)::

    NCCL version 2.26.2 compiled with CUDA 12.6
    Job summary
    ===========
      Nodes  Processes         GPUs  Processes     GPUs
    (total)   per node  per process    (total)  (total)
          4          8            1         32       32
    Communicators... (0.00s)
    =============
    Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
        #  in group  per comm  per node  per comm  in group
        0         1         4         8        32        32   RUNNING  MISMATCH
    Errors
    ======
    INCOMPLETE                                   (job level; also DEAD, then process lines)
      Missing communicator data from 2 job processes
      Process 1234 on node 10.0.0.2 managing GPU 5
    #0-0 (fa93daea854b060b) INCOMPLETE|ERROR     (per communicator: group 0, communicator 0)
      Missing communicator data from 1 rank  /  Asynchronous errors on 2 ranks
      Rank 3 -- GPU 3 managed by process 1234 on node 10.0.0.2
    Warnings
    ========
    TIMEOUT
      Encountered 2 communication timeouts while gathering communicator data
    #0-0 (fa93daea854b060b) MISMATCH
      Communicator ranks have different AllGather operation counts   (older: "collective")
      30 ranks have launched up to operation 640
      2 ranks have launched up to operation 641
      Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124
      Rank 1 has launched up to operation 639 -- GPU 1 managed by process 7 on node n1   (a group of one)

A count line (``N ranks have launched up to operation M``, ``... have not launched any
operations``, ``... have status S``, ``... reported E``) opens a group; the ``Rank`` lines after it
are its members. RAS lists the members of a group only when it is an outlier (at most 10 ranks,
under a quarter of the communicator): the majority's ranks are usually not listed. ``Rank`` numbers
are ranks in the communicator. Pasted reports may have their column spacing collapsed; every
table is read with flexible whitespace. A file may hold several reports (repeated queries).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...rankset import MAX_RANKS
from ...text.lines import iter_lines, strip_prefix

__all__ = ["MAX_RANK", "RasRank", "RasCount", "RasTopic", "RasIssue", "RasCommGroup", "RasReport", "RasText",
           "parse_lines", "read_ras", "sniff"]

MAX_RANK = MAX_RANKS - 1  # hangdbg.rankset: the one bound on ranks read from text
"""Largest rank (or count) taken as real; a larger number is garbage."""

_MAX_LINE = 4096

_SNIFF = re.compile(rb"Job summary\s*\n\s*=+|Group\s+Comms\s+Nodes\s+Ranks|"
                    rb"#\d+-\d+ \([0-9a-f]{8,16}\) (?:MISMATCH|ERROR|INCOMPLETE)")
_TABLE = re.compile(r"Group\s+Comms\s+Nodes\s+Ranks")
_VERSION = re.compile(r"NCCL version (?P<v>\S+)(?: compiled with CUDA (?P<cuda>\S+))?\s*$")
_JOB_ROW = re.compile(r"(?P<nodes>\d+)\s+(?P<ppn>\d+(?:-\d+)?)\s+(?P<gpp>\d+(?:-\d+)?)\s+(?P<procs>\d+)\s+(?P<gpus>\d+)$")
_COMM_ROW = re.compile(r"(?P<group>\d+)\s+(?P<comms>\d+)\s+(?P<nodes>\d+)\s+(?P<rpn>\d+(?:-\d+)?)\s+(?P<rpc>\d+)\s+"
                       r"(?P<rig>\d+)\s+(?P<status>[A-Z]+)\s+(?P<errors>[A-Z,]+)$")
_COMM_HEADER = re.compile(r"#(?P<group>\d+)-(?P<comm>\d+) \((?P<hash>[0-9a-fA-F]+)\) (?P<kind>[A-Z]+)$")
_JOB_HEADER = re.compile(r"(?P<kind>INCOMPLETE|DEAD|TIMEOUT)$")
_TOPICS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("opcount", re.compile(r"Communicator ranks have different (?P<coll>\w+) operation counts$")),
    ("status", re.compile(r"Communicator ranks have different status$")),
    ("init-error", re.compile(r"Initialization errors? on (?P<n>\d+) ranks?$")),
    ("async-error", re.compile(r"Asynchronous errors? on (?P<n>\d+) ranks?$")),
    ("missing-ranks", re.compile(r"Missing communicator data from (?P<n>\d+) ranks?$")),
    ("missing-processes", re.compile(r"Missing communicator data from (?P<n>\d+) job process(?:es)?$")),
    ("dead-processes", re.compile(r"(?P<n>\d+) job process(?:es are| is) considered dead.*$")),
    ("timeouts", re.compile(r"Encountered (?P<n>\d+) communication timeouts? while gathering communicator data$")),
)
_COUNTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("op", re.compile(r"(?P<n>\d+) ranks have launched up to operation (?P<v>\d+)$")),
    ("op", re.compile(r"(?P<n>\d+) ranks have (?P<v>not) launched any operations$")),
    ("status", re.compile(r"(?P<n>\d+) ranks have status (?P<v>[A-Z]+)$")),
    ("error", re.compile(r"(?P<n>\d+) ranks reported (?P<v>[^\n]+)$")),
)
_RANK = re.compile(r"Rank (?P<rank>\d+)(?: has launched up to operation (?P<op>\d+)| has (?P<none>not) launched any "
                   r"operations| has status (?P<status>[A-Z]+)| reported (?P<error>[^-\n][^\n]*?))? -- "
                   r"(?:GPU (?P<gpu>[\d,]+(?: \(NVML [\d,]+\))?) managed by process (?P<pid>\d+) on node (?P<node>\S+)|"
                   r"\[process information not found\])$")
_PROCESS = re.compile(r"Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? (?P<gpu>[\d,]+(?: \(NVML [\d,]+\))?)$")


@dataclass(frozen=True, slots=True)
class RasRank:
    """One ``Rank N -- GPU g managed by process p on node h`` (or ``Process p on node h managing
    GPU g``) line.

    Attributes:
        rank: the rank in the communicator, ``None`` for a process line.
        gpu: the CUDA device(s) as printed (``4``, ``0,1 (NVML 2,3)``), ``""`` when not found.
        pid: the process id, ``None`` when RAS had no process information.
        node: the node's address as RAS prints it (an IP or a host name), ``""`` when not found.
        value: for a group of one, what the line says of it (``639``, ``0`` for no operation,
            ``ABORT``, an error), else ``""``.
        line: line number (1-based).
    """

    rank: int | None
    gpu: str = ""
    pid: int | None = None
    node: str = ""
    value: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class RasCount:
    """A group of ranks with the same value: ``30 ranks have launched up to operation 640``.

    Attributes:
        count: how many ranks.
        what: ``op`` (value: the operation count, ``0`` for none launched), ``status`` or ``error``.
        value: the shared value as text.
        ranks: the members RAS listed (outliers only; often none for the majority).
        line: line number of the count line (of the rank line for a group of one).
    """

    count: int
    what: str
    value: str
    ranks: tuple[RasRank, ...] = ()
    line: int = 0


@dataclass(frozen=True, slots=True)
class RasTopic:
    """One problem inside an issue: ``Communicator ranks have different AllGather operation counts``.

    Attributes:
        kind: ``opcount``, ``status``, ``init-error``, ``async-error``, ``missing-ranks``,
            ``missing-processes``, ``dead-processes`` or ``timeouts``.
        text: the line as printed.
        collective: for ``opcount``: the collective (``AllGather``; ``collective`` in NCCL 2.24).
        number: the number the line states (ranks with errors, missing processes...), else None.
        groups: the count groups that follow.
        members: ``Rank`` / ``Process`` lines that follow directly (missing or dead ones).
        line: line number.
    """

    kind: str
    text: str
    collective: str = ""
    number: int | None = None
    groups: tuple[RasCount, ...] = ()
    members: tuple[RasRank, ...] = ()
    line: int = 0


@dataclass(frozen=True, slots=True)
class RasIssue:
    """One entry of the ``Errors`` or ``Warnings`` section.

    Attributes:
        section: ``Errors`` or ``Warnings``.
        kind: ``MISMATCH``, ``ERROR``, ``INCOMPLETE`` (per communicator or job), ``DEAD``, ``TIMEOUT``.
        comm: ``#0-0`` (group 0, communicator 0 of the summary table), ``""`` for job-level entries.
        comm_hash: the communicator hash (also in NCCL_DEBUG output), ``""`` for job-level entries.
        header: the header line as printed.
        topics: what it says.
        line: line number of the header.
    """

    section: str
    kind: str
    comm: str
    comm_hash: str
    header: str
    topics: tuple[RasTopic, ...] = ()
    line: int = 0

    @property
    def group(self) -> int | None:
        """The summary table's group number of ``comm`` (``#0-1`` -> 0)."""
        return int(self.comm[1:].split("-", 1)[0]) if self.comm else None


@dataclass(frozen=True, slots=True)
class RasCommGroup:
    """A row of the ``Communicators`` table: communicators of the same size, status and errors."""

    group: int
    comms: int
    nodes: int
    ranks_per_node: str
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: str
    line: int = 0


@dataclass(frozen=True, slots=True)
class RasReport:
    """One RAS report.

    Attributes:
        line: where it starts.
        nccl_version: from ``NCCL version 2.26.2 compiled with CUDA 12.6``, ``""`` when absent.
        nodes, processes, gpus: the ``Job summary`` totals (None when absent).
        processes_per_node, gpus_per_process: as printed (``8``, ``7-8``).
        comm_groups: the ``Communicators`` table.
        issues: the ``Errors`` and ``Warnings`` entries.
        pids: the process ids of every rank the report lists (the JSON format lists them all;
            empty for the text, which lists outliers only).
    """

    line: int
    nccl_version: str = ""
    nodes: int | None = None
    processes_per_node: str = ""
    gpus_per_process: str = ""
    processes: int | None = None
    gpus: int | None = None
    comm_groups: tuple[RasCommGroup, ...] = ()
    issues: tuple[RasIssue, ...] = ()
    pids: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class RasText:
    """What one file holds: its reports (several when RAS was queried repeatedly), lines read,
    and lines inside a report's sections that did not parse."""

    path: str
    reports: tuple[RasReport, ...] = ()
    lines_read: int = 0
    skipped: int = 0


def sniff(head: bytes) -> bool:
    """True when ``head`` holds a RAS report's ``Job summary`` or ``Communicators`` table, or a
    ``#0-0 (hash) MISMATCH`` entry."""
    return _SNIFF.search(head) is not None


def _num(text: str | None) -> int | None:
    if text is None or not text.isdigit() or len(text) > 9:
        return None
    n = int(text)
    return n if n <= MAX_RANK else None


class _Parser:
    """A line-at-a-time state machine: ``where`` is ``job``, ``comms``, ``Errors``, ``Warnings``
    or ``""`` (outside a report)."""

    def __init__(self) -> None:
        self.reports: list[RasReport] = []
        self.rep: dict | None = None
        self.where = ""
        self.issue: dict | None = None
        self.topic: dict | None = None
        self.count: dict | None = None
        self.version = ""
        self.version_line = 0
        self.skipped = 0
        self.lines = 0

    # -- closing what is open ----------------------------------------------------------------
    def _close_count(self) -> None:
        if self.count is not None and self.topic is not None:
            c = self.count
            self.topic["groups"].append(RasCount(c["count"], c["what"], c["value"], tuple(c["ranks"]), c["line"]))
        self.count = None

    def _close_topic(self) -> None:
        self._close_count()
        if self.topic is not None and self.issue is not None:
            t = self.topic
            self.issue["topics"].append(RasTopic(t["kind"], t["text"], t["collective"], t["number"], tuple(t["groups"]),
                                                 tuple(t["members"]), t["line"]))
        self.topic = None

    def _close_issue(self) -> None:
        self._close_topic()
        if self.issue is not None and self.rep is not None:
            i = self.issue
            self.rep["issues"].append(RasIssue(i["section"], i["kind"], i["comm"], i["hash"], i["header"],
                                               tuple(i["topics"]), i["line"]))
        self.issue = None

    def close(self) -> None:
        self._close_issue()
        if self.rep is not None:
            r = self.rep
            r["comm_groups"], r["issues"] = tuple(r["comm_groups"]), tuple(r["issues"])
            self.reports.append(RasReport(**r))
        self.rep = None
        self.where = ""

    def _open(self, no: int) -> None:
        self.close()
        self.rep = {"line": self.version_line or no, "nccl_version": self.version, "comm_groups": [], "issues": []}
        self.version, self.version_line = "", 0

    # -- one line -------------------------------------------------------------------------------
    def line(self, no: int, raw: str) -> None:
        self.lines += 1
        if len(raw) > _MAX_LINE:
            if self.where in ("Errors", "Warnings"):
                self.skipped += 1
            return
        text = strip_prefix(raw).text.strip()
        if not text or set(text) == {"="}:
            return
        m = _VERSION.match(text)
        if m is not None:
            self.close()
            self.version, self.version_line = m.group("v"), no
            return
        if text == "Job summary":
            self._open(no)
            self.where = "job"
            return
        if text.startswith("Communicators..."):
            if self.rep is None or self.where not in ("job", ""):
                self._open(no)
            self.where = "comms"
            return
        if _TABLE.match(text):  # a report pasted from its table on
            if self.rep is None or self.where not in ("job", "comms"):
                self._open(no)
            self.where = "comms"
            return
        if text in ("Errors", "Warnings"):  # (a paste of these sections alone opens a report too)
            if self.rep is None:
                self._open(no)
            self._close_issue()
            self.where = text
            return
        if self.rep is None:
            return
        if self.where == "job":
            m = _JOB_ROW.match(text)
            if m is not None:
                self.rep.update(nodes=_num(m.group("nodes")), processes_per_node=m.group("ppn"),
                                gpus_per_process=m.group("gpp"), processes=_num(m.group("procs")),
                                gpus=_num(m.group("gpus")))
            return
        if self.where == "comms":
            m = _COMM_ROW.match(text)
            if m is not None:
                vals = [_num(m.group(k)) for k in ("group", "comms", "nodes", "rpc", "rig")]
                if any(v is None for v in vals):
                    self.skipped += 1
                    return
                g, c, n, rpc, rig = vals
                assert g is not None and c is not None and n is not None and rpc is not None and rig is not None
                self.rep["comm_groups"].append(RasCommGroup(g, c, n, m.group("rpn"), rpc, rig, m.group("status"),
                                                            m.group("errors"), no))
            return
        if self.where in ("Errors", "Warnings"):
            if not self._section_line(no, text) :
                if raw[:1] in (" ", "\t"):
                    self.skipped += 1
                else:  # not RAS any more (a log line after the report): the report ends
                    self.close()

    def _section_line(self, no: int, text: str) -> bool:
        m = _COMM_HEADER.match(text)
        if m is not None:
            self._close_issue()
            self.issue = {"section": self.where, "kind": m.group("kind"), "comm": f"#{m.group('group')}-{m.group('comm')}",
                          "hash": m.group("hash"), "header": text, "topics": [], "line": no}
            return True
        m = _JOB_HEADER.match(text)
        if m is not None:
            self._close_issue()
            self.issue = {"section": self.where, "kind": m.group("kind"), "comm": "", "hash": "", "header": text,
                          "topics": [], "line": no}
            return True
        if self.issue is None:
            return False
        for kind, rx in _TOPICS:
            m = rx.match(text)
            if m is not None:
                self._close_topic()
                d = m.groupdict()
                self.topic = {"kind": kind, "text": text, "collective": d.get("coll") or "", "number": _num(d.get("n")),
                              "groups": [], "members": [], "line": no}
                return True
        if self.topic is None:
            return False
        for what, rx in _COUNTS:
            m = rx.match(text)
            if m is not None:
                n = _num(m.group("n"))
                if n is None:
                    self.skipped += 1
                    return True
                self._close_count()
                value = "0" if m.group("v") == "not" else m.group("v")
                if what == "op" and _num(value) is None:
                    self.skipped += 1
                    return True
                self.count = {"count": n, "what": what, "value": value, "ranks": [], "line": no}
                return True
        m = _RANK.match(text)
        if m is not None:
            self._rank(no, m)
            return True
        m = _PROCESS.match(text)
        if m is not None:
            self.topic["members"].append(RasRank(None, m.group("gpu"), _num(m.group("pid")), m.group("node"), "", no))
            return True
        return text.startswith("[could not find information on")

    def _rank(self, no: int, m: re.Match[str]) -> None:
        assert self.topic is not None
        rank = _num(m.group("rank"))
        if rank is None:
            self.skipped += 1
            return
        single = next(((w, v) for w, v in (("op", m.group("op")), ("op", "0" if m.group("none") else None),
                                          ("status", m.group("status")), ("error", m.group("error"))) if v), None)
        r = RasRank(rank, m.group("gpu") or "", _num(m.group("pid")), m.group("node") or "", single[1] if single else "", no)
        if single is not None:  # a group of one: "Rank 1 has launched up to operation 639 -- ..."
            if single[0] == "op" and _num(single[1]) is None:
                self.skipped += 1
                return
            self._close_count()
            self.topic["groups"].append(RasCount(1, single[0], single[1], (r,), no))
        elif self.count is not None:
            self.count["ranks"].append(r)
        else:
            self.topic["members"].append(r)


def parse_lines(lines, path: str = "") -> RasText:
    """Parse ``(line_number, text)`` pairs; lines outside a RAS report are ignored."""
    p = _Parser()
    for no, raw in lines:
        p.line(no, raw)
    p.close()
    return RasText(path, tuple(p.reports), p.lines, p.skipped)


def read_ras(path: str) -> RasText:
    """Read one file holding RAS reports.

    Raises:
        OSError: the file cannot be read.
    """
    return parse_lines(iter_lines(path), path)
