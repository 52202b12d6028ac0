"""A Python traceback as the error-lines reader follows it line by line, and the one an excerpt ends inside
(frozen dataclasses, no I/O).

The traceback format is CPython's (Lib/traceback.py ``StackSummary.format``: ``Traceback (most recent call
last):``, then per frame ``  File "path", line N, in func`` and its source line, then the exception line;
3.11+ adds ``~~~^^^`` carets under the source line), and IPython's / Jupyter's (IPython/core/ultratb.py
``VerboseTB``): a title that names the exception first (``ValueError      Traceback (most recent call last)``),
per frame ``File PATH:N, in func(args)`` (IPython 8; ``Cell In[5], line 3`` for a notebook cell; IPython 7 wrote
``PATH in func(args)`` and ``<ipython-input-5-...> in <module>``), then numbered source lines around the one that
ran, marked ``---->`` / ``-->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...catalog.message import parse_line
from ...model import Evidence

__all__ = ["CutTraceback", "FRAME", "traceback_at", "cut_header", "cut_at_end"]

FRAME = re.compile(r'File "(?P<path>[^"]{1,300})", line (?P<line>\d{1,7})(?:, in (?P<func>[\w<>.]{1,120}))?')
"""A frame line of a traceback (faulthandler's has no ``, in``)."""
_TB_HEAD = re.compile(r"Traceback \(most recent call last\):")
_TB_HEAD_END = re.compile(_TB_HEAD.pattern + r"\s*$")
"""The header as a line's end: an excerpt that stops right after it."""
CRASH_HEAD = re.compile(r"!{3,} ?Segfault encountered ?!{3,}")
"""tvm-ffi's SIGSEGV handler (apache/tvm-ffi src/ffi/backtrace.cc, loaded by vLLM, SGLang and FlashInfer): the
banner, then the native frames innermost first, each as ``  File "PATH", line N, in FUNC``."""
IPY_HEAD = re.compile(r"^\s*(?P<cls>[A-Za-z_][\w.]{0,120})\s{2,}Traceback \(most recent call last\)\s*$")
"""IPython's title line: the exception's class, then ``Traceback (most recent call last)`` (no colon)."""
IPY_FRAME = re.compile(r"^\s*(?:File (?P<path>\S[^\n]{0,300}?):(?P<line>\d{1,7}), in (?P<func>[\w<>.]{1,120})"
                       r"|Cell (?P<cell>In ?\[\d{1,6}\]), line (?P<cline>\d{1,7})"
                       r"|(?P<old>\S{1,300}\.py|<ipython-input-[\w-]{1,80}>) in (?P<ofunc>[\w<>.]{1,120})(?:\(|\s*$))")
"""An IPython frame line (8.x ``File PATH:N, in func(args)``, ``Cell In[5], line 3``; 7.x ``PATH in func(args)``)."""
IPY_CODE = re.compile(r"^\s*(?P<arrow>-*>)?\s*(?P<no>\d{1,7})(?:\s(?P<code>.*))?$")
"""A numbered source line of an IPython frame; ``-->`` marks the line that ran."""
_CARETS = re.compile(r"\s*[~^]+\s*$")
SPAWN_MAIN = "in _fixup_main_from_path"
"""The frame of CPython's Lib/multiprocessing/spawn.py ``prepare()`` that runs the parent's main script again in a
child started with the spawn (or forkserver) method (``runpy.run_path`` under ``__mp_main__``)."""


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
    exc: str = ""  # the exception's class, where the title names it (IPython's)
    ipython: bool = False  # IPython's format: numbered source lines follow each frame
    code_open: bool = False  # the marked source line opened a call the next numbered lines go on with
    crash: bool = False  # the frames of a crash handler's banner (innermost first): a whole report, never cut
    spawned_main: bool = False  # a frame is multiprocessing's _fixup_main_from_path: a spawned child re-runs __main__

def traceback_at(tb: CutTraceback | None, ev: Evidence, body: str, frame: str,
                  after_file_line: bool) -> CutTraceback | None:
    """The traceback open after line ``ev`` (``body``: its text without a launcher prefix; ``frame``: the
    last frame read, set by this very line when it is one), given the one open before it: a frame line opens
    or moves it on, its source line is kept, a header opens one, and any other text closes it (the traceback
    went on into its exception, or something else followed)."""
    line = ev.text
    if tb is not None and tb.ipython:
        return _ipython_at(tb, ev, body)
    if CRASH_HEAD.search(body):
        return CutTraceback(ev, "", crash=True)
    if tb is not None and tb.crash:
        return tb if "File \"" in line and FRAME.search(line) is not None else None
    if (m := IPY_HEAD.match(body)) is not None:
        return CutTraceback(ev, "", exc=m.group("cls"), ipython=True, rank=parse_line(line).rank)
    if "File \"" in line and FRAME.search(line) is not None:
        if tb is not None or ", in " in line:  # a traceback's frame (faulthandler's has no comma): a paste may start at one
            return CutTraceback(ev, frame, "", parse_line(line).rank, spawned_main=tb is not None and tb.spawned_main
                                or SPAWN_MAIN in line)
        return tb
    if tb is not None and after_file_line and body.strip():
        return replace(tb, code=body.strip())
    if _TB_HEAD.search(line) or cut_header(body):
        return CutTraceback(ev, "")
    if tb is not None and body.lstrip().startswith('File "'):
        return tb  # a frame the excerpt cut before its line number: the traceback goes on into it
    if tb is not None and body.strip() and not _CARETS.match(body):
        return None  # the traceback went on into its exception (or something else): not cut
    return tb


_IPY_MORE = 600
"""Characters of source kept from the marked line and the numbered lines after it when it opened a call (the
message of a ``raise``)."""


def _ipython_at(tb: CutTraceback, ev: Evidence, body: str) -> CutTraceback | None:
    """The IPython traceback open after line ``ev``: a frame line moves it on, the marked source line (``-->``) is
    its code, numbered lines after a marked line that opened a call go on with it, a blank line or another numbered
    line keeps it, and any other text (its ``Cls: message`` line) closes it."""
    if not body.strip():
        return tb
    if (f := IPY_FRAME.match(body)) is not None:
        if f.group("cell"):
            where = f"{f.group('cell')}:{f.group('cline')} in <cell>"
        elif f.group("path"):
            where = f"{f.group('path')}:{f.group('line')} in {f.group('func')}"
        else:
            where = f"{f.group('old')} in {f.group('ofunc')}"
        return replace(tb, evidence=ev, frame=where, code="", code_open=False)
    if (c := IPY_CODE.match(body)) is not None:
        code = (c.group("code") or "").strip()
        if c.group("arrow"):
            return replace(tb, code=code, code_open=code.endswith(("(", "[", "{", ",")))
        if tb.code_open and len(tb.code) < _IPY_MORE and code and not code.startswith("#"):
            return replace(tb, code=f"{tb.code} {code}", code_open=not code.endswith(")"))
        return replace(tb, code_open=False)
    if body.strip() == "...":
        return tb
    return None


_HEADER = "Traceback (most recent call last):"


def cut_header(text: str) -> bool:
    """Whether ``text`` is CPython's traceback header cut short (``Traceback (mo``: an excerpt that ends inside it)."""
    t = text.strip()
    return len(t) >= len("Traceback (") and len(t) < len(_HEADER) and _HEADER.startswith(t)


def cut_at_end(tb: CutTraceback | None) -> CutTraceback | None:
    """The traceback a file ends inside (``tb``, open at its last line): after a frame, or right after its header
    (whole or cut short); never a crash handler's frames (a whole report)."""
    if tb is None or tb.crash:
        return None
    return tb if tb.frame or tb.ipython or _TB_HEAD_END.search(tb.evidence.text) or cut_header(tb.evidence.text) else None
