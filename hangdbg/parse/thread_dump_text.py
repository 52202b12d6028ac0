"""Parse the thread dumps that Python programs print themselves (no py-spy), no I/O.

The common recipe walks ``sys._current_frames()`` and prints each thread's
``traceback.extract_stack(frame)`` (CPython ``traceback`` module, outermost frame first):

* a thread header: ``-- Thread ID: 139870071547712 ---`` (any number of dashes either side,
  optionally ``(name)`` after the id), ``# ThreadID: 1398...`` (the ActiveState "stacktraces"
  recipe) or ``# Thread: MainThread(1398...)``;
* frames: ``File "/path/x.py", line 281, in <module>`` (also ``File: "..."``, and indented as
  ``traceback.print_stack`` prints them), each usually followed by its source line.

Frames before the first thread header belong to no thread and are counted as garbled; source
lines are skipped. The recipe prints no thread state: every thread is read as ``idle`` (the
recipe is run on a process thought to hang, whose threads wait; a single dump cannot tell).
"""

from __future__ import annotations

import re

from ..model import Frame, Thread
from .pyspy_text import ParsedProcess

__all__ = ["parse_thread_dump", "HEADER"]

HEADER = re.compile(r"^(?:-+ ?Thread ?ID: ?(\d{1,20})(?: ?\(([^)]*)\))? ?-*|# ?ThreadID: ?(\d{1,20})"
                    r"|# ?Thread: ?([^()]{0,200})\((\d{1,20})\))\s*$")
"""A thread header of the recipes above (also used to sniff a file)."""

_FILE = re.compile(r'^File:? "([^"]{1,4096})", line (\d{1,9}), in (\S.{0,1000}?)\s*$')


def parse_thread_dump(text: str) -> tuple[list[ParsedProcess], int]:
    """Parse a self-printed thread dump (see the module docstring) into one process.

    Args:
        text (str): the dump, possibly with other lines around it.

    Returns:
        ``([process], garbled)`` with the threads in order (frames innermost first, status
        ``idle``, name from ``# Thread: name(id)`` else None), or ``([], garbled)`` when the text
        holds no thread header; ``garbled`` counts the frame lines outside any thread.

    Raises:
        Nothing.
    """
    threads: list[tuple[int, str | None, list[Frame]]] = []
    garbled = 0
    current: list[Frame] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := HEADER.match(line):
            ident = m.group(1) or m.group(3) or m.group(5)
            name = (m.group(2) or m.group(4) or "").strip() or None
            current = []
            threads.append((int(ident), name, current))
        elif m := _FILE.match(line):
            if current is None:
                garbled += 1
            else:
                current.append(Frame(m.group(3), m.group(1), int(m.group(2))))
    if not threads:
        return [], garbled
    built = tuple(Thread(tid, name, "idle", tuple(reversed(frames))) for tid, name, frames in threads)
    return [ParsedProcess(threads=built)], garbled
