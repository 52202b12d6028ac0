"""A Python traceback as the error-lines reader follows it line by line, and the one an excerpt ends inside
(frozen dataclasses, no I/O).

The traceback format is CPython's (Lib/traceback.py ``StackSummary.format``: ``Traceback (most recent call
last):``, then per frame ``  File "path", line N, in func`` and its source line, then the exception line;
3.11+ adds ``~~~^^^`` carets under the source line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...catalog.message import parse_line
from ...model import Evidence

__all__ = ["CutTraceback", "FRAME", "traceback_at"]

FRAME = re.compile(r'File "(?P<path>[^"]{1,300})", line (?P<line>\d{1,7})(?:, in (?P<func>[\w<>.]{1,120}))?')
"""A frame line of a traceback (faulthandler's has no ``, in``)."""
_TB_HEAD = re.compile(r"Traceback \(most recent call last\):")
_CARETS = re.compile(r"\s*[~^]+\s*$")


@dataclass(frozen=True, slots=True)
class CutTraceback:
    """A Python traceback an excerpt ends inside: its exception line was never pasted.

    Attributes:
        evidence: the last frame line (file, line number, text).
        frame: that frame, ``path:line in func``.
        code: the source line shown under it ("" when the paste ended before it).
        rank: the rank of the traceback's prefix, when one named it.
    """

    evidence: Evidence
    frame: str
    code: str = ""
    rank: int | None = None

def traceback_at(tb: CutTraceback | None, ev: Evidence, body: str, frame: str,
                  after_file_line: bool) -> CutTraceback | None:
    """The traceback open after line ``ev`` (``body``: its text without a launcher prefix; ``frame``: the
    last frame read, set by this very line when it is one), given the one open before it: a frame line opens
    or moves it on, its source line is kept, a header opens one, and any other text closes it (the traceback
    went on into its exception, or something else followed)."""
    line = ev.text
    if "File \"" in line and FRAME.search(line) is not None:
        if tb is not None or ", in " in line:  # a traceback's frame (faulthandler's has no comma): a paste may start at one
            return CutTraceback(ev, frame, "", parse_line(line).rank)
        return tb
    if tb is not None and after_file_line and body.strip():
        return replace(tb, code=body.strip())
    if _TB_HEAD.search(line):
        return CutTraceback(ev, "")
    if tb is not None and body.lstrip().startswith('File "'):
        return tb  # a frame the excerpt cut before its line number: the traceback goes on into it
    if tb is not None and body.strip() and not _CARETS.match(body):
        return None  # the traceback went on into its exception (or something else): not cut
    return tb
