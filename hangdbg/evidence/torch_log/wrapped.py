"""Undo hard wraps: a log message cut into several lines by a terminal, a pager, a web page or an
editor (at a fixed width, ``WorkNCCL(SeqNum=1, OpT`` / ``ype=ALLREDUCE``, or mid-number,
``NumelOut=5`` / ``164000``), seen in logs pasted into issue threads.

The rule: a line that starts a message which does not parse (``incomplete``) is joined with the
lines that follow, one at a time, only while each following line does not parse on its own and
does not start a new record (a launcher prefix, a glog header, a timestamp); the join is kept only
when the joined text parses (``complete``). Otherwise every line is passed on unchanged. The pieces
are concatenated as they are (a fixed-width wrap keeps every character, spaces included); a
terminal border (``│``) in front of a continuation is dropped.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator

__all__ = ["Joiner"]

MAX_PIECES = 5
"""Lines one message may be wrapped into at most."""

MAX_CHARS = 8192
"""Longest line considered as the start of a wrapped message, and longest joined text."""

_RECORD_START = re.compile(
    r"\s{0,8}(?:\[rank\d{1,9}\]:|\[default\d{1,6}\]:|\[\d{1,9},\d{1,9}\]<std(?:out|err)>:"
    r"|\[[EWIF]\s?\d{0,4}[\d :.]{0,24}\S{1,64}:\d{1,6}\]|[EWIF]\d{3,4} \d\d:\d\d"
    r"|\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\S{1,128} \[(?:stdout|stderr)\] |terminate called|\s*what\(\):"
    r"|Traceback \(most recent call last\)|\S{1,128}:\d{1,9}:\d{1,9} \[\d{1,4}\] NCCL )")
_BORDER = re.compile(r"[│┃]\s?")


class Joiner:
    """Join hard-wrapped messages in a stream of ``(line_number, text)``.

    Args:
        incomplete: ``text -> bool``, the line starts a message that does not parse alone.
        complete: ``text -> bool``, the (joined) text parses as a whole message.
    """

    def __init__(self, incomplete: Callable[[str], bool], complete: Callable[[str], bool]) -> None:
        self.incomplete = incomplete
        self.complete = complete
        self.pending = False
        """True while a head line waits for its continuation (a reader must not skip ahead)."""
        self.joined = 0
        """Physical lines folded into earlier ones (for line counts)."""

    def _continues(self, text: str) -> bool:
        return not _RECORD_START.match(text) and not self.complete(text)

    def __call__(self, lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        """The lines, with each wrapped message joined into its first line's number."""
        todo: deque[tuple[int, str]] = deque()
        it = iter(lines)
        buf: list[tuple[int, str]] = []
        while True:
            if todo:
                n, raw = todo.popleft()
            else:
                nxt = next(it, None)
                if nxt is None:
                    break
                n, raw = nxt
            if buf:
                cont = _BORDER.sub("", raw, count=1) if raw[:1] in "│┃" else raw
                if self._continues(cont) and sum(len(t) for _, t in buf) + len(cont) <= MAX_CHARS:
                    buf.append((n, cont))
                    text = "".join(t for _, t in buf)
                    if self.complete(text):
                        self.joined += len(buf) - 1
                        yield buf[0][0], text
                        buf, self.pending = [], False
                        continue
                    if len(buf) < MAX_PIECES:
                        continue
                    todo.extendleft(reversed(buf[1:]))  # give up: re-read the pieces after the head
                else:
                    todo.appendleft((n, raw))
                    todo.extendleft(reversed(buf[1:]))
                yield buf[0]
                buf, self.pending = [], False
                continue
            if len(raw) <= MAX_CHARS and self.incomplete(raw):
                buf, self.pending = [(n, raw)], True
                continue
            yield n, raw
        if buf:
            yield buf[0]
            yield from buf[1:]
        self.pending = False
