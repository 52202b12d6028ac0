"""The writer of one traced code object: its call line and a per-line bytes cache (the hot path).

Every traced line goes through the closures built here: ``line`` (``sys.monitoring`` and the C
path), ``local`` (the ``sys.settrace`` local trace function) and ``enter`` (a call). They read
the tracer's settings once, when the code object is first seen, into closure cells, so that a
traced line costs a dict lookup, one formatted timestamp and one store into the mapped file.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import NicerTrace

__all__ = ["Entry", "NOTIME"]

NOTIME = b"%12s" % b"-"
"""The timestamp column of a line written without timing."""


class Entry:
    """The writer for one traced code object: the call line and a per-line bytes cache."""

    __slots__ = ("enter", "line", "local")

    def __init__(self, tr: NicerTrace, code, modname: str) -> None:
        filename = code.co_filename
        qualname = getattr(code, "co_qualname", code.co_name)
        base = os.path.basename(filename)
        timing = tr.timing
        do_trace = tr.trace
        do_fsync = tr.fsync
        W = tr._w                 # [writer]: the mapping's write(), swapped on fork
        slow = tr._slow_put       # full mapping (grow), closed (stopped), os.write failed
        sync = tr._sync
        t0 = tr._t0
        perf = time.perf_counter
        counts = tr._counts.setdefault(filename, {}) if tr.count else None
        prefix = b"" if timing else NOTIME
        call_bytes = prefix + f" > {modname}:{code.co_firstlineno} {qualname}\n".encode("utf-8", "replace")
        lines: dict[int, bytes] = {}

        def make(ln: int) -> bytes:
            import linecache
            text = linecache.getline(filename, ln).strip()
            b = prefix + f" {base}:{ln} | {text}\n".encode("utf-8", "replace")
            lines[ln] = b
            return b

        def line(ln):
            if not tr._active:
                return
            if counts is not None:
                counts[ln] = counts.get(ln, 0) + 1
            if do_trace:
                try:
                    s = lines[ln]
                except KeyError:
                    s = make(ln)
                if timing:
                    s = b"%12.6f" % (perf() - t0) + s
                try:
                    W[0](s)
                except (ValueError, OSError):
                    slow(s)
                if do_fsync:
                    sync()

        def local(frame, event, arg):
            # The settrace local function (3.11); the default configuration gets the inlined
            # version below, so this one may pay the extra call into ``line``.
            if event == "line":
                if not tr._active:
                    return None
                line(frame.f_lineno)
            return local

        if do_trace and timing and counts is None and not do_fsync:
            # The default configuration, specialised: the least Python work per traced line.
            def local(frame, event, arg):
                if event == "line":
                    if not tr._active:
                        return None
                    try:
                        s = lines[frame.f_lineno]
                    except KeyError:
                        s = make(frame.f_lineno)
                    s = b"%12.6f" % (perf() - t0) + s
                    try:
                        W[0](s)
                    except (ValueError, OSError):
                        slow(s)
                return local

        def enter():
            if not tr._active:
                return None
            if do_trace:
                s = b"%12.6f" % (perf() - t0) + call_bytes if timing else call_bytes
                try:
                    W[0](s)
                except (ValueError, OSError):
                    slow(s)
                if do_fsync:
                    sync()
            return local

        self.enter = enter
        self.local = local
        self.line = line
