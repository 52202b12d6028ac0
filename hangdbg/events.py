"""What a use case tells its caller while it runs: progress, warnings, decisions (:class:`Events`).

The use cases (:mod:`hangdbg.api`) never print: they call these methods, whose defaults do
nothing, so a Python caller may pass no events at all. The command line passes an implementation
that draws rich progress bars and prints the warnings on stderr (``hangdbg.cli.events``); a test
may pass one that records the calls.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["Events", "Advance"]

Advance = Callable[[bool], None]
"""``advance(failed)``: one more item of a progress bar done (``failed``: it did not succeed)."""


class Events:
    """The sink of a use case's progress; every method may be called from worker threads."""

    def warn(self, text: str) -> None:
        """Something the user should know, that does not stop the work (plain text)."""

    def note(self, text: str) -> None:
        """A status line (what the use case is doing now: ``watching ...``, ``dumping into ...``)."""

    def log(self, text: str) -> None:
        """A decision line, for ``-v`` (``adaptive: --native pass on 2 ranks``)."""

    def output(self, text: str) -> None:
        """What another program printed for the user (``watch``'s ``--on-hang`` hook), as it is."""

    def result(self, value: object) -> None:
        """A finished part of the work the caller may show (``watch``: each stall's dump result)."""

    @contextmanager
    def progress(self, label: str, total: int, pending: bool = False) -> Iterator[Advance]:
        """A bar of ``total`` items named ``label`` (``pending``: show how many are left); yields
        the function to call as each item finishes."""
        yield lambda _failed: None

    @contextmanager
    def busy(self, text: str) -> Iterator[None]:
        """A spinner with ``text`` while a step of unknown length runs."""
        yield
