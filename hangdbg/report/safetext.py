"""Text from users, logs and nodes made safe for a terminal view: never markup, no control codes.

Every view (``report/console.py``, ``verdict_console.py``, ``evidence.py`` and the cli's
messages) passes each string that did not come from hangdbg itself - a path, a host name, a log
line, a node's ssh error, a frame of a stack - through one of these:

* :func:`visible`: control characters (C0 but newline and tab, DEL, C1) and the Unicode
  direction overrides are written out as ``\\x1b``, ``\\x07``, ``\\u202e``, so a clear-screen,
  a window-title or a clipboard-write (OSC 52) sequence from a log reaches the terminal as
  readable text and does nothing;
* :func:`escape`: :func:`visible`, then :func:`rich.markup.escape`, for text spliced into a
  markup string (``[/yellow]`` in a host name is shown, never read as a closing tag);
* :func:`safe_text`: a :class:`rich.text.Text` of :func:`visible` text (never parsed as markup).

The JSON documents keep the raw text: it is data, and ``json`` escapes control characters itself.
"""

from __future__ import annotations

import re

from rich.markup import escape as _rich_escape
from rich.text import Text

__all__ = ["visible", "escape", "safe_text", "SHOWN_MAX"]

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _show(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


SHOWN_MAX = 8192
"""Characters of one string a view shows (a 10 MB function name from a garbled or hostile dump
cost rich minutes and a GB to wrap); the rest is said as ``... (+N characters)``."""


def visible(text: str, limit: int = SHOWN_MAX) -> str:
    """``text`` with every control character (but ``\\n`` and ``\\t``) and direction override
    written out as ``\\xNN`` / ``\\uNNNN``, cut to its first ``limit`` characters (the rest
    counted); plain short text comes back unchanged. Linear in ``len(text)``."""
    if len(text) > limit:
        text = f"{text[:limit]}... (+{len(text) - limit:,} characters)"
    return _UNSAFE.sub(_show, text)


def escape(text: str) -> str:
    """``text`` for a rich markup string: control characters made visible (:func:`visible`) and
    every ``[`` that could open a tag escaped (:func:`rich.markup.escape`)."""
    return _rich_escape(visible(text))


def safe_text(text: str, style: str = "") -> Text:
    """A :class:`rich.text.Text` of ``text`` made visible (:func:`visible`), never read as markup."""
    return Text(visible(text), style=style)
