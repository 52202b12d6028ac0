"""The command line's :class:`~hangdbg.events.Events`: rich progress bars and spinners on stderr
(only on a terminal), warnings as ``warning:`` lines, ``-v`` decision lines dimmed."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..events import Advance, Events
from ..report.safetext import escape, visible

__all__ = ["ConsoleEvents", "progress_bar"]


def progress_bar(console: Console, label: str, total: int, pending: bool = False) -> Progress:
    """A transient rich progress bar on ``console`` (stderr), shown only on a terminal when there
    is more than one item; tasks carry a ``failed`` field."""
    status = "{task.fields[failed]} failed" + (", {task.remaining:.0f} pending" if pending else "")
    return Progress(
        TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(), TextColumn(status),
        TimeElapsedColumn(), console=console, transient=True, disable=not (console.is_terminal and total > 1),
    )


class ConsoleEvents(Events):
    """Events shown on ``err`` (stderr).

    Args:
        err: the console of stderr.
        verbose: show :meth:`log` lines (``-v``).
        quiet: drop :meth:`note` lines (``--json`` runs print only the document and warnings).
        prefix: the start of note and log lines (``hangdbg``, ``hangdbg watch``).
    """

    def __init__(self, err: Console, verbose: bool = False, quiet: bool = False, prefix: str = "hangdbg") -> None:
        self.err = err
        self.verbose = verbose
        self.quiet = quiet
        self.prefix = prefix
        self._lock = threading.Lock()

    def warn(self, text: str) -> None:
        with self._lock:
            self.err.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False)

    def note(self, text: str) -> None:
        if not self.quiet:
            with self._lock:
                self.err.print(f"{self.prefix}: {visible(text)}", style="dim", markup=False, highlight=False)

    def log(self, text: str) -> None:
        if self.verbose:
            with self._lock:
                self.err.print(f"{self.prefix}: {visible(text)}", style="dim", markup=False, highlight=False)

    @contextmanager
    def progress(self, label: str, total: int, pending: bool = False) -> Iterator[Advance]:
        with progress_bar(self.err, label, total, pending) as bar:
            task = bar.add_task(label, total=total, failed=0)
            failed = 0
            lock = threading.Lock()

            def advance(bad: bool) -> None:
                nonlocal failed
                with lock:
                    failed += bool(bad)
                    bar.update(task, advance=1, failed=failed)

            yield advance

    @contextmanager
    def busy(self, text: str) -> Iterator[None]:
        with self.err.status(text):
            yield
