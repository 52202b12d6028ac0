"""Lines that are context, not reports of an error: frames and tracebacks' furniture, a launcher banner's rows,
code, table headers (an error word in them - a ``timeout`` argument, a column named ``error`` - is no error)."""

from __future__ import annotations

import re

from ...catalog.catalog import Catalog

__all__ = ["BANNER_ROW", "FILE_LINE", "header_row", "is_code", "is_context_line"]

_ROW_LABEL = r"[\u2502|]?\s*(?:time|host|rank|exitcode|error_file|traceback)\s*:"
BANNER_ROW = re.compile(r"^\s*" + _ROW_LABEL + r"\s*")
"""The label of a row of torchelastic's ChildFailedError banner (torch/distributed/elastic/multiprocessing/errors/
__init__.py ``_format_failure``: ``  traceback : Signal 7 (SIGBUS) received by PID 16609``): its value is the message."""

_CONTEXT = re.compile(
    r"""^\s*(?:File\ "[^"]*",\ line\ \d+|frame\ \#\d+:|\#\d+\s+0x[0-9a-f]+|Exception\ raised\ from\ |Traceback\ \(most\ recent
    |TraceBack\ \(most\ recent  # Ascend CANN's error manager: the calls inside its error, the error line above them
    |raise\ |except\ |assert\ |return\ |if\ |elif\ |def\ |class\ |\^+\s*$|~+\^*~*\s*$|During\ handling\ of\ the\ above
    |The\ above\ exception\ was\ the\ direct\ cause|error_file:|traceback\s*:\s*To\ enable\ traceback
    |""" + _ROW_LABEL + r"""\s)""", re.VERBOSE)
_CODE = re.compile(r"[\w.]+(?:\[[^\]]{0,80}\])?\s*[-+*/]?=\s*\S|(?!.{0,300}?[a-z]\. [A-Z]).{0,160}[(,\[{]\s*$")
"""Code: an assignment, or a short line that opens a call or a literal continued on the next line (a line of
prose - with a sentence's end inside, or long - that a paste cut after a comma is no code)."""
_PY_WORDS = frozenset("if not and or in is for return lambda else await yield with as from import del assert raise "
                      "def class async while elif try except finally pass".split())
_THREE_WORDS = re.compile(r"(?<![\w.])([A-Za-z]{2,30}) ([A-Za-z]{2,30}) ([A-Za-z]{2,30})(?![\w(.])")


def _prose(text: str) -> bool:
    """True when ``text`` holds three plain words in a row, not all Python keywords (``Gloo connectFullMesh failed``,
    ``timed out connecting``): a message a paste cut after its comma, not a line of code (``if not isinstance(``)."""
    return any(not {w.lower() for w in m.groups()} <= _PY_WORDS for m in _THREE_WORDS.finditer(text))


def is_code(text: str, catalog: Catalog) -> bool:
    """True for a line of code (:data:`_CODE`, not prose) that is not a known message a wrap cut."""
    return _CODE.match(text) is not None and not _prose(text) and catalog.match_cut(text) is None


_COLUMNS = re.compile(r"^\s*#?\s*(?:[#(]?[a-z][\w/()#%.-]{0,11}(?:[ \t]{2,}|[ \t](?=#))){5,}[#(]?[a-z][\w/()#%.-]{0,11}\s*$")
"""A table's header row: six or more short lowercase column names, two blanks or more apart, or one before
a ``#name`` (nccl-tests' ``size  count  type  redop  time  algbw  busbw  error ...``, later ``... busbw #wrong``):
a column named ``error`` is no error."""


_CSV_HEADER = re.compile(r"^\s*[a-z_][\w.]{0,80}(?: \[[^\]]{1,12}\])?(?:,\s*[a-z_][\w.]{0,80}(?: \[[^\]]{1,12}\])?){4,}\s*$")
"""A CSV header row of five or more lowercase field names (nvidia-smi --query-gpu=...,ecc.errors.uncorrected.volatile
.total --format=csv; a unit in brackets: ``power.draw [W]``): a column named after errors is no error."""


def is_context_line(line: str) -> bool:
    """True for a line that is code or a frame of a trace, or a table's header row, not a report of an error."""
    return _CONTEXT.match(line) is not None or header_row(line)


FILE_LINE = re.compile(r'\s*File "[^"]*", line \d+')
"""A CPython traceback's frame line: the line after it is source code."""


def header_row(line: str) -> bool:
    """True for a table's header row (:data:`_COLUMNS`, :data:`_CSV_HEADER`) or rich's boxed traceback title."""
    return (len(line) < 300 and _COLUMNS.match(line) is not None) or (
        len(line) < 1000 and _CSV_HEADER.match(line) is not None) or (
        "\u2500 Traceback (most recent call last) \u2500" in line)  # rich's boxed traceback header (rich/traceback.py)
