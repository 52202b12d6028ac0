"""Reading the text that PyTorch's flight-recorder analyzer prints (``fr_trace`` / ``torchfrtrace``).

``torchfrtrace`` (``tools/flight_recorder/fr_trace.py``, ``torch/distributed/flight_recorder/
components/builder.py``, ``utils.py``, ``types.py`` in pytorch/pytorch) matches the dumps of all
ranks and logs, per collective it cannot match, one block. Three generations of that block are
read here:

* torch >= 2.6 (``EntryState.log`` in ``components/types.py``, called by ``error_analysis`` in
  ``components/utils.py``)::

      Not all ranks joining collective, sequence number: 31117     (also ``collective: sequence``)
      internal record id: 31116
      group info: 0:default_pg
      collective: nccl:all_reduce
      missing ranks: {3, 4, 5, 6, 7}
      input sizes: [[1571911]]
      output sizes: [[1571911]]
      world size: 8
      expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}
      collective state: scheduled
      error msg: Culprit rank 2; Error type: COLLECTIVE_TYPE_MISMATCH, Expected ...   (errors only)
      collective stack trace:
       all_reduce at /.../torch/distributed/distributed_c10d.py:2707
      sync_buffers at /.../models/model.py:650

  with the headers ``Collective sequence number: N has errors`` (type, size, dtype or state
  mismatch: ``error msg`` names ``Culprit rank N; Error type: STATE, detail``) and
  ``Input/output mismatch in the collective sequence number: N`` (all_to_all sizes, with
  ``total input numel`` / ``total output numel``);
* torch 2.5 (``builder.py`` ``build_collectives``): ``Not all ranks joining collective N at entry
  M`` / ``Collective N at entry M errors`` / ``Input/output mismatch in the collective N at entry
  M``, ``expected ranks: 8`` (a count), ``error message: Culprit rank 2; MatchState.X``;
* torch 2.4 (one ``print``): ``Not all ranks joining collective for group 0:default_pg collective
  nccl:all_reduce  Missing ranks are {1}  [[3, 4]] [[3, 4]] 2 scheduled``, then ``Collective stack
  traces:`` and the frames.

Also read: ``We cannot decide what's wrong with this collective entry because we missed FR dumps
from ranks ({3})`` and the assertion ``Missing dump files from ranks {3}``.

The analyzer logs through ``FlightRecorderLogger`` (``components/fr_logger.py``, format
``%(message)s``); a ``logging.basicConfig`` prefix (``INFO:Flight Recorder:``), launcher prefixes
and timestamps are peeled off every line (:func:`strip_prefix`); a line of a block that does not
parse is skipped and counted. Ranks above :data:`MAX_RANK` are garbage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...frames import Frame
from .trace_table import FrEntryTable, parse_tables, sniff_table
from ...rankset import MAX_RANKS
from ...text.lines import iter_lines, strip_prefix

__all__ = ["MAX_RANK", "FrTraceCulprit", "FrTraceReport", "FrTraceText", "parse_lines", "read_fr_trace", "sniff"]

MAX_RANK = MAX_RANKS - 1  # hangdbg.rankset: the one bound on ranks read from text
"""Largest rank number taken as real (4M ranks); a larger number is garbage."""

_MAX_LINE = 16 * 1024
"""Lines of a block longer than this are skipped (counted), never matched."""

_MARKERS = ("Not all ranks joining collective", "has errors", "at entry", "Input/output mismatch in the collective",
            "missed FR dumps from ranks", "Missing dump files from ranks")

_HEADERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("missing", re.compile(r"Not all ranks joining collective[,:]? sequence number: (?P<seq>\d+)\s*$")),
    ("missing", re.compile(r"Not all ranks joining collective (?P<seq>\d+) at entry (?P<rec>\d+)\s*$")),
    ("missing", re.compile(r"Not all ranks joining collective for group (?P<group>\S+) collective (?P<coll>\S+)\s+"
                           r"Missing ranks are (?P<missing>\{[\d, ]*\}|set\(\))(?P<rest>[^\n]*)$")),
    ("errors", re.compile(r"Collective sequence number: (?P<seq>\d+) has errors\s*$")),
    ("errors", re.compile(r"Collective (?P<seq>\d+) at entry (?P<rec>\d+) errors\s*$")),
    ("io-mismatch", re.compile(r"Input/output mismatch in the collective sequence number: (?P<seq>\d+)\s*$")),
    ("io-mismatch", re.compile(r"Input/output mismatch in the collective (?P<seq>\d+) at entry (?P<rec>\d+)\s*$")),
    ("no-dump", re.compile(r"We cannot decide what's wrong with this collective entry because we missed FR dumps "
                           r"from ranks \((?P<missing>\{[\d, ]*\})\)")),
    ("no-dump", re.compile(r"(?:AssertionError: )?Missing dump files from ranks (?P<missing>\{[\d, ]*\})\s*$")),
)
_START = re.compile(r"Not all ranks joining|Collective (?:sequence number: )?\d+ |Input/output mismatch|"
                    r"We cannot decide|(?:AssertionError: )?Missing dump files")
# the rest of torch 2.4's one-line header: input sizes, output sizes, expected ranks, state
_OLD_REST = re.compile(r"\s*(?P<ins>\[[\[\]\d, ]*\])\s+(?P<outs>\[[\[\]\d, ]*\])\s+(?P<n>\d+)\s+(?P<state>\w+)\s*$")
_KEY = re.compile(r"(?P<key>internal record id|group info|collective|missing ranks|total input numel|"
                  r"total output numel|input sizes|output sizes|world size|expected ranks|collective state|"
                  r"error msg|error message): ?(?P<value>[^\n]*)$")
_STACK = re.compile(r"(?:collective stack trace|Collective stack traces): ?(?P<rest>[^\n]*)$")
_LOGGER = re.compile(r"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):[\w. ]{0,64}:")
_INT = re.compile(r"\d{1,12}")
_CULPRIT = re.compile(r"Culprit rank (?P<rank>\d+); (?:Error type: )?(?:MatchState\.)?(?P<state>[A-Z_]+)")


@dataclass(frozen=True, slots=True)
class FrTraceCulprit:
    """One ``Culprit rank N; Error type: STATE, detail`` of a block's error message.

    Attributes:
        rank: the rank torch names (a rank whose entry differs from the first rank's, see
            ``check_current_entry_match``: "we assume the current rank is not the source").
        state: the ``MatchState`` name (``COLLECTIVE_TYPE_MISMATCH``, ``SIZE_OR_SYNTAX_MISMATCH``,
            ``COLLECTIVE_DTYPE_MISMATCH``, ``COLLECTIVE_STATE_MISMATCH``).
        detail: torch's sentence after the state (``Expected collective type: 'all_reduce' does
            not match found collective type: 'broadcast'``), ``""`` in torch 2.5.
    """

    rank: int
    state: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class FrTraceReport:
    """One block of ``torchfrtrace`` output.

    Attributes:
        what: ``missing`` (not all ranks joined), ``errors`` (type/size/dtype/state mismatch),
            ``io-mismatch`` (all_to_all input/output numel differ), ``no-dump`` (ranks without a dump).
        line: the header's line number (1-based).
        header: the header line as printed.
        seq: the collective's sequence number in its group, ``None`` when not printed.
        record_id: the entry's record id (``internal record id`` / ``at entry``).
        group: ``name:desc`` of the process group (``0:default_pg``), ``""`` when not printed.
        collective: the profiling name (``nccl:all_reduce``).
        missing_ranks: the ranks that did not join (or left no dump, for ``no-dump``).
        expected_ranks: the group's ranks when printed as a set.
        world_size: the group's size (``world size`` / a count in ``expected ranks``).
        input_sizes, output_sizes: as printed (``[[1571911]]``).
        total_numel: (input, output) numel of an all_to_all mismatch.
        state: the collective's state on the first rank (``scheduled``, ``started``, ``completed``).
        culprits: the ``Culprit rank`` items of ``error msg``.
        frames: the collective's stack, innermost first (``name at file:line`` lines).
    """

    what: str
    line: int
    header: str
    seq: int | None = None
    record_id: int | None = None
    group: str = ""
    collective: str = ""
    missing_ranks: tuple[int, ...] = ()
    expected_ranks: tuple[int, ...] = ()
    world_size: int | None = None
    input_sizes: str = ""
    output_sizes: str = ""
    total_numel: tuple[int | None, int | None] = (None, None)
    state: str = ""
    culprits: tuple[FrTraceCulprit, ...] = ()
    frames: tuple[Frame, ...] = ()

    @property
    def op(self) -> str:
        """The collective without its backend (``all_reduce``)."""
        return self.collective.rpartition(":")[2].split(" ", 1)[0]


@dataclass(frozen=True, slots=True)
class FrTraceText:
    """What one file of ``torchfrtrace`` output holds.

    Attributes:
        path: the file.
        reports: the blocks, in file order.
        lines_read: lines read.
        skipped: lines inside a block that did not parse (garbled, too long, bad numbers).
        tables: the per-rank entry tables of ``torchfrtrace -j`` (:mod:`hangdbg.evidence.flight_recorder.trace_table`).
    """

    path: str
    reports: tuple[FrTraceReport, ...] = ()
    lines_read: int = 0
    skipped: int = 0
    tables: tuple[FrEntryTable, ...] = ()


def sniff(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) holds a ``torchfrtrace`` block header
    together with one of its key lines (the headers alone are ordinary English)."""
    if b"Not all ranks joining collective" in head:
        return b"missing ranks" in head or b"Missing ranks are" in head
    if b"has errors" in head or b" errors\n" in head or b"Input/output mismatch in the collective" in head:
        return b"group info: " in head and b"collective state: " in head
    return b"missed FR dumps from ranks" in head or sniff_table(head)


def _ranks(text: str) -> tuple[int, ...] | None:
    """``{3, 4, 5}`` / ``set()`` -> ranks; None when a number is too large to be a rank."""
    out = [int(x) for x in _INT.findall(text)]
    if any(r > MAX_RANK for r in out):
        return None
    return tuple(sorted(set(out)))


def _num(text: str) -> int | None:
    t = text.strip()
    return int(t) if t.isdigit() and len(t) <= 12 else None


def _culprits(text: str) -> tuple[FrTraceCulprit, ...]:
    """``Culprit rank 2; Error type: X, detail, Culprit rank 5; ...`` (items joined by ``, ``)."""
    out: list[FrTraceCulprit] = []
    starts = [m for m in _CULPRIT.finditer(text)]
    for i, m in enumerate(starts):
        rank = int(m.group("rank")) if len(m.group("rank")) <= 12 else MAX_RANK + 1
        if rank > MAX_RANK:
            continue
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        detail = text[m.end():end].strip().lstrip(",").strip().rstrip(",").strip()
        out.append(FrTraceCulprit(rank, m.group("state"), detail))
    return tuple(out)


def _frame(text: str) -> Frame | None:
    """``name at /path/file.py:123`` -> Frame (string operations, no regex: lines may be long)."""
    t = text.strip()
    name, sep, rest = t.partition(" at ")
    if not sep or not name or " " in name.strip():
        return None
    path, colon, line = rest.rpartition(":")
    if not colon or not path or not line.isdigit() or len(line) > 9:
        return None
    return Frame(name.strip(), path.strip(), int(line))


class _Parser:
    def __init__(self) -> None:
        self.reports: list[FrTraceReport] = []
        self.cur: dict | None = None
        self.in_stack = False
        self.skipped = 0
        self.lines = 0

    def close(self) -> None:
        if self.cur is not None:
            c = self.cur
            c["frames"] = tuple(c["frames"])
            c["culprits"] = tuple(c["culprits"])
            self.reports.append(FrTraceReport(**c))
        self.cur = None
        self.in_stack = False

    def header(self, no: int, text: str) -> bool:
        if len(text) > _MAX_LINE:
            return False
        for what, rx in _HEADERS:
            m = rx.search(text)
            if m is None:
                continue
            d = m.groupdict()
            self.close()
            cur: dict = {"what": what, "line": no, "header": text.strip(), "frames": [], "culprits": []}
            if d.get("seq") is not None:
                cur["seq"] = _num(d["seq"])
            if d.get("rec") is not None:
                cur["record_id"] = _num(d["rec"])
            if d.get("group"):
                cur["group"] = d["group"]
            if d.get("coll"):
                cur["collective"] = d["coll"]
            if d.get("missing") is not None:
                ranks = _ranks(d["missing"])
                if ranks is None:
                    self.skipped += 1
                    return True
                cur["missing_ranks"] = ranks
            rest = d.get("rest")
            if rest:
                r = _OLD_REST.match(rest)
                if r is not None:
                    cur.update(input_sizes=r.group("ins"), output_sizes=r.group("outs"),
                               world_size=_num(r.group("n")), state=r.group("state"))
            self.cur = cur
            if what == "no-dump":  # one line, no block
                self.close()
            return True
        return False

    def line(self, no: int, raw: str) -> None:
        self.lines += 1
        text = strip_prefix(raw).text
        m = _LOGGER.match(text)
        if m is not None:  # a root logger configured with logging.basicConfig repeats the message so
            text = text[m.end():]
        if any(k in text for k in _MARKERS) and _START.search(text) and self.header(no, text):
            return
        if self.cur is None:
            return
        if len(text) > _MAX_LINE:
            self.skipped += 1
            return
        stripped = text.strip()
        if not stripped:
            if self.in_stack and self.cur["frames"]:
                self.close()
            return
        if self.in_stack:
            fr = _frame(stripped)
            if fr is not None:
                self.cur["frames"].append(fr)
                return
            self.close()  # the stack ends at the first line that is no frame
            return
        m = _STACK.match(stripped)
        if m is not None:
            self.in_stack = True
            fr = _frame(m.group("rest"))
            if fr is not None:
                self.cur["frames"].append(fr)
            return
        m = _KEY.match(stripped)
        if m is None:
            self.skipped += 1
            return
        self._key(m.group("key"), m.group("value").strip())

    def _key(self, key: str, value: str) -> None:
        cur = self.cur
        assert cur is not None
        if key == "internal record id":
            cur["record_id"] = _num(value)
        elif key == "group info":
            cur["group"] = value
        elif key == "collective":
            cur["collective"] = value
        elif key in ("missing ranks", "expected ranks"):
            if key == "expected ranks" and _num(value) is not None:
                cur.setdefault("world_size", _num(value))
                return
            ranks = _ranks(value)
            if ranks is None:
                self.skipped += 1
                return
            cur["missing_ranks" if key == "missing ranks" else "expected_ranks"] = ranks
        elif key in ("total input numel", "total output numel"):
            tin, tout = cur.get("total_numel", (None, None))
            cur["total_numel"] = (_num(value), tout) if key == "total input numel" else (tin, _num(value))
        elif key == "input sizes":
            cur["input_sizes"] = value
        elif key == "output sizes":
            cur["output_sizes"] = value
        elif key == "world size":
            cur["world_size"] = _num(value)
        elif key == "collective state":
            cur["state"] = value
        else:  # error msg / error message
            cur["culprits"].extend(_culprits(value))


def parse_lines(lines, path: str = "") -> FrTraceText:
    """Parse ``(line_number, text)`` pairs of ``torchfrtrace`` output (any other lines are ignored):
    the blocks, and the ``-j`` entry tables."""
    p = _Parser()
    seen: list[tuple[int, str]] = []
    for no, raw in lines:
        p.line(no, raw)
        seen.append((no, raw))
    p.close()
    tables, bad_rows = parse_tables(seen)
    return FrTraceText(path, tuple(p.reports), p.lines, p.skipped + bad_rows, tuple(tables))


def read_fr_trace(path: str) -> FrTraceText:
    """Read one file of ``torchfrtrace`` output.

    Raises:
        OSError: the file cannot be read.
    """
    return parse_lines(iter_lines(path), path)
