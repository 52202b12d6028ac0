"""What a paste did to a small log, undone before its lines are read (no I/O): a blank line after every
line (a web page's paste), a Markdown / e-mail quote or a code block's indentation on every line, a
fixed-column hard wrap (a terminal's or a paste tool's), a word wrap (an e-mail's, a chat's, Python's
textwrap), a traceback or a known message wrapped at any width, a box table's rows (:func:`repaired` applies
them in order). Line numbers stay the file's."""

from __future__ import annotations

import re
from collections import Counter
from itertools import islice
from typing import Callable

from ...catalog.catalog import Catalog
from ...catalog.message import parse_line
from ...text.lines import QUOTE, quoted, strip_ansi_bytes

__all__ = ["double_spaced", "dedented", "unwrapped", "soft_unwrapped", "frames_unwrapped", "boxed", "cut_unwrapped",
           "repaired", "WRAP_MIN", "WRAP_MAX", "SOFT_TAIL"]


def double_spaced(body: bytes) -> bool:
    """True for an excerpt whose every line with text is followed by a blank one (a web page's paste):
    at least 4 lines with text, and a blank line after 90 % of them."""
    lines = body.rstrip(b"\r\n\t ").splitlines()[:4000]
    text = [i for i, ln in enumerate(lines) if ln.strip()]
    if len(text) < 4:
        return False
    return sum(1 for i in text[:-1] if i + 1 < len(lines) and not lines[i + 1].strip()) >= 0.9 * (len(text) - 1)


def dedented(body: bytes) -> bytes:
    """``body`` without the decoration a paste put on every line: a Markdown / e-mail quote (``> ``) on
    90 % of the lines with text, then the indentation all of them share (a code block). The line count
    stays (line numbers of the evidence are the file's)."""
    if quoted(body):
        body = QUOTE.sub(b"", body)
    lines = body.split(b"\n")
    text = [ln for ln in lines if ln.strip()]
    if not text:
        return body
    pad = min(len(ln) - len(ln.lstrip(b" \t")) for ln in text)
    if pad == 0:
        return body
    return b"\n".join(ln[pad:] if ln.strip() else ln.strip(b" \t") for ln in lines)


_NOT_CONTINUATION = re.compile(r"^(?:Traceback \(|\s*File \"|[|+=]|-{4})")


def _continues(line: bytes) -> bool:
    """True when ``line`` may be the rest of a line a terminal or a paste cut at a fixed column: it has
    text and no record head of its own (no time, host, rank or level prefix, no exception class, no traceback or
    table line)."""
    text = line.rstrip(b"\r").decode("utf-8", "replace")
    if not text.strip() or _NOT_CONTINUATION.match(text):
        return False
    msg = parse_line(text)
    return msg.rank is None and msg.host is None and msg.time is None and not msg.level and not msg.exception


WRAP_MIN = 60
"""Fewest columns of a fixed-width hard wrap (:func:`_unwrapped`): shorter lines are not taken for cut ones."""
WRAP_MAX = 512
"""Longest line :func:`_unwrapped` makes: a catalog field takes at most 400 characters
(:data:`hangdbg.catalog.pattern.MAX_FIELD`), so a longer join would hide the message at its end."""


def unwrapped(body: bytes) -> bytes:
    """``body`` with the lines a fixed-column hard wrap cut joined again (a terminal's or a paste's width):
    the width is a length of at least :data:`WRAP_MIN` that 3 or more lines share, followed by a line that
    continues them (:func:`_continues`), and at least one cut falls inside a word (repeated log lines of
    one length are no wrap), and fewer shorter lines near that width continue into a word that would not have fitted
    (:func:`_soft_next`; where as many do, the text was word-wrapped and its blanks matter). The joined line takes the cut one's place and the rest becomes blank, so
    the line numbers stay the file's. In a double-spaced paste (:func:`double_spaced`) a cut line's rest is the
    next line with text, two lines down."""
    lines = body.split(b"\n")
    if len(lines) > 4000:
        return body
    step = 2 if double_spaced(body) else 1  # a double-spaced paste: the cut line's rest is two lines down
    width = [len(ln.rstrip(b"\r")) for ln in lines]
    for w, n in Counter(x for x in width if x >= WRAP_MIN).most_common(3):
        if n < 3:
            break
        cuts = [i for i in range(len(lines) - step) if width[i] == w and _continues(lines[i + step])]
        if len(cuts) < 2 or not any(lines[i].rstrip(b"\r")[-1:].isalnum() and lines[i + step][:1].isalnum()
                                    for i in cuts):
            continue
        if step == 1 and sum(w - SOFT_TAIL <= width[i] < w and _soft_next(lines[i], lines[i + 1], w)
                             for i in range(len(lines) - 1)) >= len(cuts):
            continue  # shorter lines continue too: a word wrap (soft_unwrapped joins it with its blanks)
        out = list(lines)
        for i in cuts:
            if not out[i].strip():
                continue  # already joined into the line above
            j = i
            while j < len(lines) - step and width[j] == w and _continues(lines[j + step]) and \
                    len(out[i]) + width[j + step] <= WRAP_MAX:
                out[i] = out[i].rstrip(b"\r") + lines[j + step].rstrip(b"\r")
                out[j + step] = b""
                j += step
        return b"\n".join(out)
    return body


SOFT_TAIL = 14
"""A word-wrapped line ends within this many columns of the wrap width (:func:`soft_unwrapped`)."""


def _soft_next(cur: bytes, nxt: bytes, width: int) -> bool:
    """True when ``nxt`` may be the rest of ``cur`` cut by a word wrap of ``width`` columns: it has no indentation
    of its own (at most one blank, the one the wrap fell on), no record head (:func:`_continues`), and its first
    word would not have fitted on ``cur``."""
    text = nxt.rstrip(b"\r")
    if not text.strip() or text[:2].isspace() or text[:1] == b"\t" or not _continues(text):
        return False
    first = text.lstrip().split(b" ", 1)[0]
    return len(cur.rstrip(b"\r").rstrip()) + 1 + len(first) > width


def soft_unwrapped(body: bytes, known: Callable[[bytes], bool] = lambda line: False) -> bytes:
    """``body`` with the lines a word wrap broke joined again (with a blank): the width is the longest line
    (:data:`WRAP_MIN` to 200 columns), at least 4 lines and 30 % of the lines with text end within
    :data:`SOFT_TAIL` columns of it (a log that was not wrapped has longer lines, and few near its longest),
    and a line that long is joined with the next when that one continues it (:func:`_soft_next`) and neither is
    a message on its own (``known``: a program that writes one message over several lines). The joined line
    takes the first one's place and the rest becomes blank, so the line numbers stay the file's."""
    lines = body.split(b"\n")
    if len(lines) > 4000:
        return body
    width = [len(ln.rstrip(b"\r")) for ln in lines]
    text = [w for w in width if w]
    if len(text) < 4 or not WRAP_MIN <= max(text) <= 200:
        return body
    wrap = max(text)
    long = [i for i, w in enumerate(width) if w >= wrap - SOFT_TAIL]
    if len(long) < 4 or len(long) < 0.3 * len(text):
        return body
    out = list(lines)
    for i in long:
        if not out[i].strip():
            continue  # already joined into the line above
        j = i
        while j < len(lines) - 1 and width[j] >= wrap - SOFT_TAIL and _soft_next(lines[j], lines[j + 1], wrap) \
                and len(out[i]) + width[j + 1] <= WRAP_MAX and not known(lines[j]) and not known(lines[j + 1]):
            out[i] = out[i].rstrip(b"\r").rstrip() + b" " + lines[j + 1].rstrip(b"\r").strip()
            out[j + 1] = b""
            j += 1
    return b"\n".join(out)


_OPEN_FRAME = re.compile(rb'^\s*File "[^"\n]*$|^\s*File "[^"\n]*",(?: line(?: \d+,?)?)?\s*$')
"""A traceback frame line cut before its end (CPython Lib/traceback.py: ``  File "{}", line {}, in {}``): its path's
quote is not closed, or the line stops before ``in FUNC``."""
_FRAME_DONE = re.compile(rb'^\s*File "[^"\n]*", line \d+, in \S')
_FUNC_REST = re.compile(rb"[\w<>.]{1,80}")
"""The rest of a frame's function name that a wrap at a fixed width put on its own, unindented line (the
source line under a frame is indented)."""


def frames_unwrapped(body: bytes) -> bytes:
    """``body`` with the traceback lines a wrap cut joined again, whatever the width: a frame line whose path
    quote or ``line N, in FUNC`` part is unfinished (:data:`_OPEN_FRAME`) takes the next lines until it is whole,
    and the source line under a frame takes the next line while its brackets stay open (``store = TCPStore(a,
    b,`` / ``timeout)``), when that line is no frame, traceback or record head of its own (:func:`_continues`).
    The rest of a joined line becomes blank, so the line numbers stay the file's (a frame's pieces before it, so
    that it stays next to its source line; a source line's after it)."""
    if b'File "' not in body:
        return body
    lines = body.split(b"\n")
    if len(lines) > 4000:
        return body
    out = list(lines)
    i = 0
    prev = b""  # the last line with text before line i (a joined line's rest is blank)
    while i < len(lines) - 1:
        line = out[i].rstrip(b"\r")
        j = i
        if _OPEN_FRAME.match(line):
            while j < len(lines) - 1 and not _FRAME_DONE.match(line) and len(line) <= WRAP_MAX and \
                    (nxt := lines[j + 1].rstrip(b"\r")).strip() and not nxt.lstrip().startswith(b'File "'):
                line = line + (b"" if line.endswith((b"/", b"_", b"-", b".")) or b'"' not in line[line.index(b'File "') + 6:]
                               else b" ") + nxt.strip()
                j += 1
            if j < len(lines) - 1 and line[:1].isspace() and len(line) >= WRAP_MIN and _FUNC_REST.fullmatch(
                    lines[j + 1].rstrip(b"\r")):
                line += lines[j + 1].rstrip(b"\r")  # the function's name cut at the width: its rest, unindented
                j += 1
            out[i:j + 1] = [b""] * (j - i) + [line]  # the frame ends next to its source line
        elif _FRAME_DONE.match(prev) and _opened(line):
            while j < len(lines) - 1 and _opened(line) and len(line) <= WRAP_MAX and _continues(lines[j + 1]) \
                    and not lines[j + 1].lstrip().startswith(b'File "'):
                line = line.rstrip() + b" " + lines[j + 1].rstrip(b"\r").strip()
                out[j + 1] = b""
                j += 1
            out[i] = line
        if line.strip():
            prev = line
        i = j + 1
    return b"\n".join(out)


def _opened(code: bytes) -> bool:
    """True when ``code`` (a source line) leaves a bracket open: more ``(``/``[``/``{`` than closers."""
    return code.count(b"(") + code.count(b"[") + code.count(b"{") > code.count(b")") + code.count(b"]") + code.count(b"}")


_BOX_ROW = re.compile(rb"^\s*\|(.*)\|\s*$")
_BOX_RULE = re.compile(rb"^\s*\+[-=+]{3,}\+\s*$")


def boxed(body: bytes) -> bytes:
    """``body`` with a two-column box table's rows read as text (``dcgmi diag``'s view: a ``+---+---+`` rule,
    rows ``| Warning: GPU0 | Detected 2 volatile double-bit ECC error(s) in |``, a long message carried on in
    the next rows under an empty first cell; NVIDIA/DCGM dcgmi/Diag.cpp ``DisplayVerboseInfo``): a row becomes
    ``FIRST: SECOND`` and a carried row joins the row above it (blank in its place, so the line numbers stay
    the file's). Other text is kept as it is."""
    if b"+-" not in body and b"+=" not in body:
        return body
    lines = body.split(b"\n")
    if len(lines) > 4000 or not any(_BOX_RULE.match(ln) for ln in lines):
        return body
    out = list(lines)
    last = -1  # the row a carried row joins
    for i, ln in enumerate(lines):
        m = _BOX_ROW.match(ln.rstrip(b"\r"))
        cells = [c.strip() for c in m.group(1).split(b"|")] if m else []
        if len(cells) != 2:
            last = -1
            continue
        first, second = cells
        if not first and second and last >= 0:
            out[last] = out[last] + b" " + second
            out[i] = b""
        elif first:
            out[i] = first + (b": " + second if second else b"")
            last = i
        else:
            last = -1
    return b"\n".join(out)


def cut_unwrapped(body: bytes, state: Callable[[bytes], str]) -> bytes:
    """``body`` with a known message a wrap of any width split over lines joined again: ``state(text)``
    says whether a text is a known message (``"whole"``), one cut short (``"cut"``) or neither (``""``; the caller
    asks the catalog). A line that ends in a word, a number or a comma and is a cut message takes the next lines (at most
    :data:`CUT_JOIN_MAX`, each without a record head of its own: :func:`_continues`) until they make it whole,
    each joined with a blank (a word wrap) or without (a hard wrap inside a word), whichever keeps it a message;
    the rest of a joined line becomes blank, so the line numbers stay the file's."""
    lines = body.split(b"\n")
    if len(lines) > 4000:
        return body
    out = list(lines)
    for i in range(len(lines) - 1):
        a = out[i].rstrip(b"\r")
        end = a.rstrip()[-1:]  # a message a wrap cut ends in a word, a number or a comma, not a sentence's end
        if not (end.isalnum() or end == b",") or len(a.strip()) < 20 or not lines[i + 1].strip() or \
                not _continues(lines[i + 1].rstrip(b"\r")) or state(a) != "cut":  # (the next line first: it is cheap)
            continue
        accs, j = [a.rstrip()], i + 1
        while j < len(lines) and j - i <= CUT_JOIN_MAX and (b := lines[j].rstrip(b"\r")).strip() and _continues(b):
            # a word wrap fell on a blank; a hard wrap may have cut a word: try both joins
            tried = [(acc, state(acc)) for acc in dict.fromkeys(x + sep + b.strip() for x in accs for sep in (b" ", b""))]
            whole = [acc for acc, now in tried if now == "whole"]
            if whole:
                out[i] = whole[0]
                out[i + 1:j + 1] = [b""] * (j - i)
                break
            accs = [acc for acc, now in tried if now == "cut"][:CUT_JOIN_WAYS]
            if not accs:
                break
            j += 1
    return b"\n".join(out)


CUT_JOIN_MAX = 4
"""Most lines :func:`cut_unwrapped` joins to a cut message."""
CUT_JOIN_WAYS = 4
"""Most joins :func:`cut_unwrapped` carries on at once (with a blank where a word wrap fell on one, without where a
hard wrap cut a word)."""


def unescaped(data: bytes) -> bytes:
    """A log stored as one escaped string (a JSON or Python string's ``\\n``, ``\\t``, ``\\"``: an API's field, a
    ``repr`` printed) with its escapes undone; text with lines of its own is left as it is (its ``\\n`` are the log's)."""
    if data.count(b"\n") > 2 or data.count(b"\\n") < 3:
        return data
    return data.replace(b"\\r\\n", b"\n").replace(b"\\n", b"\n").replace(b"\\t", b"\t").replace(b'\\"', b'"')


def repaired(data: bytes, catalog: Catalog) -> bytes:
    """A small file's bytes with what a paste did undone, in order: a log stored as one escaped string, terminal colours, a quote or a code block's
    indentation (first: a wrap's width is the text's), a box table, a fixed-width hard wrap, a wrapped traceback,
    a word wrap (never around a line that is a catalog message on its own), a known message split over lines."""
    data = dedented(strip_ansi_bytes(unescaped(data)))
    data = soft_unwrapped(frames_unwrapped(unwrapped(boxed(data))), lambda b: _known(catalog, b))
    return cut_unwrapped(data, lambda b: _cut_state(catalog, b))


def _cut_state(catalog: Catalog, line: bytes) -> str:
    """``"whole"`` when ``line``'s message is a catalog message, ``"cut"`` when it is only the start of one
    (:meth:`Catalog.match_cut`), else ``""`` (for :func:`~.paste.cut_unwrapped`)."""
    text = parse_line(line.decode("utf-8", "replace").strip()).text
    if len(text) < 20:
        return ""
    if catalog.search(text) is not None:
        return "whole"
    tails = [text] + [text[m.end():] for m in islice(re.finditer(r":\s+", text), 3)]  # behind an unknown "Warning: "
    return "cut" if any(len(t) >= 20 and catalog.match_cut(t) is not None for t in tails) else ""


def _known(catalog: Catalog, line: bytes) -> bool:
    """True when ``line`` on its own is a catalog message (a word wrap is not undone around it: a program that
    writes a message over several lines, as Open MPI's help texts, has an entry per line)."""
    return catalog.search(parse_line(line.decode("utf-8", "replace").strip()).text) is not None
