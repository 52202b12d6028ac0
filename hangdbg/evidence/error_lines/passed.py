"""The error-looking lines of a file that held no error line: an excerpt cut down to context is still reported.

Issue 26: an error-looking line (:func:`~hangdbg.catalog.message.looks_like_error`) is never dropped, and "nothing
could be read" is said only of a file without one. The scan (:mod:`.grammar`) passes over context on purpose: a
launcher banner's rows are read with its head, ``Last error:`` with the line after it, a frame's ``Exception raised
from ...`` with its exception. A paste cut down to those lines alone would then say nothing; this module reads them
as events when the file gave no other.
"""

from __future__ import annotations

import io
from dataclasses import replace

from ...catalog.catalog import Catalog
from ...catalog.message import looks_like_error, parse_line
from ...model import Evidence
from ...text.lines import iter_lines_from, strip_prefix
from .context import BANNER_ROW, FILE_LINE, header_row, is_code
from .log import LOOKED_AT, ErrorEvent, ErrorLog

__all__ = ["MAX_PASSED", "passed_over"]

MAX_PASSED = 3
"""Distinct lines read from one such file."""


def passed_over(log: ErrorLog, path: str, data: bytes, catalog: Catalog) -> bool:
    """Add to ``log`` up to :data:`MAX_PASSED` error-looking lines of ``data`` (the bytes of ``path``, a small file
    the scan found no error line in) that are neither source code (the line after a frame, an assignment, an open
    call) nor a table's header row; a banner row is looked up by its value, a line no entry knows stays unrecognised.

    Returns:
        True when a line was added (the file is then not quiet).
    """
    seen: list[str] = []
    after_frame = False
    for no, line in iter_lines_from(io.BytesIO(data)):
        if len(seen) >= MAX_PASSED:
            break
        body = strip_prefix(line).text if line[:1] == "[" else line
        source, after_frame = after_frame and bool(line.strip()), FILE_LINE.match(body) is not None
        if source or not looks_like_error(line) or header_row(body) or line.strip() in seen:
            continue
        msg = parse_line(line[:LOOKED_AT])
        if is_code(msg.text, catalog) or is_code(body.strip(), catalog):
            continue
        if (row := BANNER_ROW.match(msg.text)) is not None and msg.text[row.end():].strip():
            msg = replace(msg, text=msg.text[row.end():].strip())
        if not msg.text.strip():  # the line is all prefix (a class and a location only): quote it after the class
            text = line.strip()
            cls = text.find(f"{msg.exception}:") if msg.exception else -1
            msg = replace(msg, text=text[cls + len(msg.exception) + 1:].strip() if cls >= 0 else text)
        seen.append(line.strip())
        log.error_lines += 1
        log.add(ErrorEvent(Evidence(path, no, line), msg, catalog.search(msg.text), log.error_lines))
    return bool(seen)
