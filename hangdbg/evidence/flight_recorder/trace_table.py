"""Reading the per-rank entry table ``torchfrtrace -j`` prints (``just_print_entries``).

``torch/distributed/flight_recorder/components/utils.py`` ``just_print_entries`` prints, with
``tabulate`` (format ``simple``), one column per rank (header ``Rank N``) and one row per recorded
entry, oldest first; a cell is ``str(Op)`` (``components/types.py`` ``Op.__repr__``)::

    Rank 0                                             Rank 1
    -------------------------------------------------  -------------------------------------------------
    all_reduce(input_sizes=[[1024]], state=completed)  all_reduce(input_sizes=[[1024]], state=completed)
    broadcast(input_sizes=[[1024]], state=scheduled)
    send(s=0 d=1, input_sizes=[[4]], state=started)    ...

(``FR_TRACE_VERBOSE_OUTPUT=1`` cells: ``all_reduce(timestamp_created=..., input_sizes=...,
state=...)``). A column that ends early is a rank that recorded fewer entries. Column spans come
from the dashes line; a row whose cells are not ops ends the table. Ranks above
:data:`MAX_RANK` are garbage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...text.lines import strip_prefix

__all__ = ["MAX_RANK", "FrCell", "FrEntryTable", "parse_tables", "sniff_table"]

MAX_RANK = 1 << 22
"""Largest rank number taken as real (as in :mod:`hangdbg.evidence.flight_recorder.trace_text`)."""

_HEADER = re.compile(r"Rank \d{1,9}(?: {2,}Rank \d{1,9})+\s*$")
_SNIFF_HEADER = re.compile(rb"(?m)^[ \t]*Rank \d+ {2,}Rank \d+")
_SNIFF_CELL = re.compile(rb"\w\((?:[^()\n]{0,400}, )?state=(?:scheduled|started|completed)\)")
_DASHES = re.compile(r"-+")
_CELL = re.compile(r"(?P<op>\w+)\((?P<args>[^()]*)\)$")
_ARG_STATE = re.compile(r"(?:^|, )state=(?P<v>\w+)")
_ARG_SIZES = re.compile(r"(?:^|, )input_sizes=(?P<v>\[[\[\]\d, ]*\])")
_ARG_PEERS = re.compile(r"(?:^|, )s=(?P<s>\d+|None) d=(?P<d>\d+|None)")
_MAX_LINE = 1 << 20


@dataclass(frozen=True, slots=True)
class FrCell:
    """One entry of one rank: ``all_reduce(input_sizes=[[1024]], state=scheduled)``.

    Attributes:
        op: the op type (``all_reduce``, ``send``, ``coalesced``).
        input_sizes: as printed, ``""`` when absent.
        state: ``scheduled``, ``started`` or ``completed`` (``""`` when absent).
        peers: ``s=0 d=1`` of a p2p op (global ranks), ``""`` otherwise.
        text: the cell as printed.
    """

    op: str
    input_sizes: str = ""
    state: str = ""
    peers: str = ""
    text: str = ""

    def signature(self) -> tuple[str, str, str]:
        """What must be equal across ranks at the same position: op, sizes, peers."""
        return (self.op, self.input_sizes, self.peers)


@dataclass(frozen=True, slots=True)
class FrEntryTable:
    """One ``-j`` table.

    Attributes:
        line: the header's line number.
        ranks: the columns' ranks, in order.
        entries: per column, that rank's entries, oldest first.
    """

    line: int
    ranks: tuple[int, ...]
    entries: tuple[tuple[FrCell, ...], ...]


def sniff_table(head: bytes) -> bool:
    """True when ``head`` holds a ``Rank 0  Rank 1`` header and an op cell."""
    return _SNIFF_HEADER.search(head) is not None and _SNIFF_CELL.search(head) is not None


def _cell(text: str) -> FrCell | None:
    m = _CELL.match(text)
    if m is None:
        return None
    args = m.group("args")
    st, sz, pe = _ARG_STATE.search(args), _ARG_SIZES.search(args), _ARG_PEERS.search(args)
    return FrCell(m.group("op"), sz.group("v") if sz else "", st.group("v") if st else "",
                  f"s={pe.group('s')} d={pe.group('d')}" if pe else "", text)


def parse_tables(lines) -> tuple[list[FrEntryTable], int]:
    """The ``-j`` tables in ``(line_number, text)`` pairs, and the count of rows skipped (a cell
    that is no op inside a table ends it; an over-long line is skipped)."""
    tables: list[FrEntryTable] = []
    skipped = 0
    ranks: list[int] | None = None
    spans: list[tuple[int, int]] = []
    cols: list[list[FrCell]] = []
    start = 0
    pending_header: tuple[int, list[int]] | None = None

    def close() -> None:
        nonlocal ranks, cols, spans
        if ranks and any(cols):
            tables.append(FrEntryTable(start, tuple(ranks), tuple(tuple(c) for c in cols)))
        ranks, cols, spans = None, [], []

    for no, raw in lines:
        if len(raw) > _MAX_LINE:
            if ranks is not None:
                skipped += 1
            continue
        p = strip_prefix(raw) if raw[:1] == "[" else None
        line = p.text if p is not None else raw
        pre = len(raw) - len(line)
        body = line.strip()
        if pending_header is not None:  # the dashes under a header give the column spans
            hno, hranks = pending_header
            pending_header = None
            runs = [(m.start() + pre, m.end() + pre) for m in _DASHES.finditer(raw)]
            if body and set(body) <= {"-", " "} and len(runs) == len(hranks):
                close()
                ranks, spans, cols, start = hranks, runs, [[] for _ in hranks], hno
                continue
        if _HEADER.match(body):
            nums = [int(x) for x in re.findall(r"\d+", body)]
            if all(n <= MAX_RANK for n in nums) and len(set(nums)) == len(nums):
                close()
                pending_header = (no, nums)
                continue
        if ranks is None:
            continue
        if not body:
            close()
            continue
        cells = [raw[a:spans[i + 1][0] if i + 1 < len(spans) else None].strip() if a < len(raw) else ""
                 for i, (a, _) in enumerate(spans)]
        parsed = [_cell(c) if c else None for c in cells]
        if any(c and q is None for c, q in zip(cells, parsed)):
            if not any(parsed):
                close()  # the next table (stack ids) or other text
            else:
                skipped += 1
            continue
        for col, q in zip(cols, parsed):
            if q is not None:
                col.append(q)
    close()
    return tables, skipped
