"""Where each rank's evidence of a ``dump`` came from: :class:`RankSource` (no I/O).

Sources (``source``): ``py-spy`` (the stacks py-spy read), ``debug-server-stacks`` (the torch debug
server's ``dump_traceback``: :mod:`hangdbg.tools.debug_server`), ``debug-server-fr`` (its
``fr_trace_json``) and ``fr-pipe`` (the flight recorder's dump pipe: :mod:`hangdbg.tools.fr_pipe`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RankSource", "SOURCES"]

SOURCES = ("py-spy", "debug-server-stacks", "debug-server-fr", "fr-pipe")


@dataclass(frozen=True, slots=True)
class RankSource:
    """One source of one rank in a ``dump``.

    Attributes:
        rank: the global rank.
        source: one of :data:`SOURCES`.
        status: ``ok`` (it gave its part), or why not: ``denied``, ``unreadable``, ``gone`` (py-spy);
            ``http-error``, ``timeout``, ``unresolved``, ``refused``, ``no-url``, ``no-server``,
            ``error`` (the debug server); ``no-reader``, ``no-pipe``, ``no-dump`` (the pipe);
            ``unparsed`` (an answer that holds no stack or no flight-recorder dump).
        detail: one line for a human (the HTTP status, the error).
        path: the file of ``OUT`` it was written to, if any.
        used: True when this source gave the rank's stack in the analysis.
    """

    rank: int
    source: str
    status: str
    detail: str = ""
    path: str | None = None
    used: bool = False
