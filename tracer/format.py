"""The trace file format, version 1 (one file per process; parsed by ``hangdbg traces``).

Standard library only; never imports hangdbg.
"""

from __future__ import annotations

import re
import socket
import time

FORMAT_VERSION = 1
_HOST_BAD = re.compile(r"[^A-Za-z0-9._-]")


def format_line(elapsed: float | None, kind: str, name: str, lineno: int, text: str) -> str:
    """Format one traced event as a line of a v1 trace file (this function IS the format).

    ``elapsed`` is seconds since the tracer started, or None when timing is off; it is
    right-aligned in 12 columns with 6 decimals, or ``-`` right-aligned in 12 columns.

    ``kind`` is ``"call"`` (a traced function is entered)::

        {elapsed:>12.6f} > {module}:{firstlineno} {qualname}
            0.000123 > train:30 compute
                   - > __main__:5 Greeter.greet

    or ``"line"`` (a line of traced code is about to run)::

        {elapsed:>12.6f} {basename}:{lineno} | {source line .strip()ped, "" if unavailable}
            0.000150 train.py:31 | acc = 0
                   - train.py:31 | acc = 0

    Every line ends with ``\\n``. The hot path in :mod:`tracer.core` produces the same bytes
    (pinned by the golden test and ``test_hot_path_matches_format_line``).
    """
    stamp = f"{elapsed:>12.6f}" if elapsed is not None else f"{'-':>12}"
    if kind == "call":
        return f"{stamp} > {name}:{lineno} {text}\n"
    return f"{stamp} {name}:{lineno} | {text}\n"


def format_header(host: str, rank: str, pid: int, start: str, argv: str) -> str:
    """The first line: ``# tracer v1 host=H rank=R pid=P start=T argv=REST_OF_LINE``.

    ``start`` is ISO-8601 UTC to the second (``2026-11-22T03:20:00Z``); ``argv`` is
    ``shlex.join(sys.argv)`` and is the last field: it runs to the end of the line (it may
    contain spaces, never a newline: newlines are replaced by a space).
    """
    argv = argv.replace("\r", " ").replace("\n", " ")
    return f"# tracer v{FORMAT_VERSION} host={host} rank={rank} pid={pid} start={start} argv={argv}\n"


def format_count(filename: str, lineno: int, n: int) -> str:
    """A count trailer line (``count=True``): ``#count <file>:<line> <n>``."""
    return f"#count {filename}:{lineno} {n}\n"


def format_end(elapsed: float) -> str:
    """The last line, written by ``stop()``: ``# tracer end elapsed=<seconds>`` (6 decimals)."""
    return f"# tracer end elapsed={elapsed:.6f}\n"


def sanitize_host(host: str | None = None) -> str:
    """``socket.gethostname()`` with characters outside ``[A-Za-z0-9._-]`` replaced by ``_``."""
    return _HOST_BAD.sub("_", socket.gethostname() if host is None else host) or "_"


def rank_from_env(environ) -> str:
    """``RANK``, else ``SLURM_PROCID``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, else ``na``."""
    for var in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        val = environ.get(var, "").strip()
        if val:
            return _HOST_BAD.sub("_", val)
    return "na"


def default_filename(host: str, rank: str, pid: int) -> str:
    """``trace-{host}-{rank}-{pid}.txt``."""
    return f"trace-{host}-{rank}-{pid}.txt"


def utc_now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
