"""Parse the thread dumps that Python programs print themselves (no py-spy), no I/O.

The common recipe walks ``sys._current_frames()`` and prints each thread's
``traceback.extract_stack(frame)`` (CPython ``traceback`` module, outermost frame first):

* a thread header: ``-- Thread ID: 139870071547712 ---`` (any number of dashes either side,
  optionally ``(name)`` after the id), ``# ThreadID: 1398...`` (the ActiveState "stacktraces"
  recipe) or ``# Thread: MainThread(1398...)``;
* frames: ``File "/path/x.py", line 281, in <module>`` (also ``File: "..."``, and indented as
  ``traceback.print_stack`` prints them), each usually followed by its source line.

``faulthandler.dump_traceback`` (CPython Python/traceback.c ``_Py_DumpTracebackThreads``) is read
too: ``Thread 0x00007f.. (most recent call first):`` / ``Current thread 0x.. (most recent call
first):`` (3.13+ may add `` [name]`` after the id) or ``Stack (most recent call first):``, then
``File "x.py", line 3 in f`` (no comma), innermost frame first; ``<no Python frame>`` and the
``...`` of a truncated stack are skipped, and a thread without any Python frame (the thread that
called faulthandler from C++) is left out.

Frames before the first thread header belong to no thread and are counted as garbled, unless the
caller says the text may be one bare ``traceback.format_stack`` (then they are one thread); source
lines are skipped. Of faulthandler's threads and a bare stack (which print no thread names), an
unnamed thread whose outermost frame is ``<module>`` (the script's top level; threads started by
:mod:`threading` begin in ``_bootstrap``) is named ``MainThread`` when it is the only such thread. These dumps print no thread state: every thread is read as ``idle`` (they are
taken of a process thought to hang, whose threads wait; a single dump cannot tell).
"""

from __future__ import annotations

import re

from ..model import Thread
from ..frames import Frame
from ..enums import ThreadStatus
from .pyspy_text import ParsedProcess

__all__ = ["parse_thread_dump", "HEADER"]

HEADER = re.compile(r"^(?:-+ ?Thread ?ID: ?(\d{1,20})(?: ?\(([^)]*)\))? ?-*|# ?ThreadID: ?(\d{1,20})"
                    r"|# ?Thread: ?([^()]{0,200})\((\d{1,20})\))\s*$")
"""A thread header of the recipes above (also used to sniff a file)."""

_FAULTHANDLER = re.compile(r"^(?:(?:Current thread|Thread) (0x[0-9a-fA-F]{1,16})(?: \[([^\]]{0,200})\])?|Stack)"
                           r" \(most recent call first\):\s*$")
_FILE = re.compile(r'^File:? "([^"]{1,4096})", line (\d{1,9}),? in (\S.{0,1000}?)\s*$')
_NOISE = ("<no Python frame>", "...")


def parse_thread_dump(text: str, headerless: bool = False) -> tuple[list[ParsedProcess], int]:
    """Parse a self-printed or faulthandler thread dump (see the module docstring) into one process.

    Args:
        text (str): the dump, possibly with other lines around it.
        headerless (bool): frames before any thread header are one thread (a bare
            ``traceback.format_stack``, outermost first) instead of garbled lines.

    Returns:
        ``([process], garbled)`` with the threads in order (frames innermost first, status
        ``idle``, name from ``# Thread: name(id)`` or faulthandler's ``[name]``, else None), or
        ``([], garbled)`` when the text holds no thread; ``garbled`` counts the frame lines
        outside any thread.

    Raises:
        Nothing.
    """
    # (thread id, name, frames in printed order, printed innermost first, anonymous: faulthandler or bare)
    threads: list[tuple[int, str | None, list[Frame], bool, bool]] = []
    loose: list[Frame] = []
    current: list[Frame] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line in _NOISE:
            continue
        if m := HEADER.match(line):
            ident = m.group(1) or m.group(3) or m.group(5)
            name = (m.group(2) or m.group(4) or "").strip() or None
            current = []
            threads.append((int(ident), name, current, False, False))
        elif m := _FAULTHANDLER.match(line):
            current = []
            threads.append((int(m.group(1), 16) if m.group(1) else 0, (m.group(2) or "").strip() or None, current, True, True))
        elif m := _FILE.match(line):
            (loose if current is None else current).append(Frame(m.group(3), m.group(1), int(m.group(2))))
    garbled = len(loose)
    if headerless and loose:
        threads.insert(0, (0, None, loose, False, True))
        garbled = 0
    threads = [t for t in threads if t[2] or not t[3]]  # faulthandler's thread without a Python frame
    if not threads:
        return [], garbled
    stacks = [(tid, name, tuple(frames) if innermost_first else tuple(reversed(frames)), anonymous)
              for tid, name, frames, innermost_first, anonymous in threads]
    named_main = any(name == "MainThread" for _, name, _, _ in stacks)
    mains = [] if named_main else [i for i, (_, name, frames, anonymous) in enumerate(stacks)
                                   if anonymous and name is None and frames and frames[-1].function == "<module>"]
    built = tuple(Thread(tid, "MainThread" if mains == [i] else name, ThreadStatus.IDLE, frames)
                  for i, (tid, name, frames, _) in enumerate(stacks))
    return [ParsedProcess(threads=built)], garbled
