"""``-`` as a path: standard input, for the commands that read files (``journalctl -k | hangdbg
gpu -``, ``kubectl logs POD | hangdbg logs -``).

Readers open regular files only (:func:`hangdbg.text.lines.open_input`: a FIFO could block
forever, ``/dev/zero`` never end). ``-`` is the one way to read a pipe: standard input is copied,
as it arrives, into a private temporary file that the readers then read like any log (bounded
lines, sniffing by content), and the file is removed when the command ends. A pipe that never
ends is read until it does (or Ctrl-C), as ``cat`` would.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

from ..errors import HangdbgError, UsageError

__all__ = ["STDIN", "spooled_stdin"]

STDIN = "-"
"""The path that names standard input."""

_PATH_ARGUMENTS = ("paths", "cores")
_CHUNK = 1 << 20


@contextmanager
def spooled_stdin(args: argparse.Namespace, stream: BinaryIO | None = None) -> Iterator[None]:
    """While the context is open, ``-`` among ``args.paths`` (or ``args.cores``) names a regular
    file holding all of ``stream`` (default: ``sys.stdin.buffer``); nothing changes when no ``-``
    was given.

    Raises:
        UsageError: ``-`` given twice, or standard input is a terminal (nothing was piped in).
        HangdbgError: the temporary file cannot be written (``TMPDIR`` full or read-only).
    """
    attr = next((a for a in _PATH_ARGUMENTS if isinstance(getattr(args, a, None), list)), None)
    paths = getattr(args, attr) if attr else []
    if attr is None or STDIN not in map(str, paths):
        yield
        return
    if sum(str(p) == STDIN for p in paths) > 1:
        raise UsageError("- (standard input) given more than once")
    src = stream if stream is not None else sys.stdin.buffer
    if _is_terminal(src):
        raise UsageError("- reads standard input, but it is a terminal: pipe the text in "
                         "(e.g. `journalctl -k | hangdbg gpu -`)")
    tmp = tempfile.mkdtemp(prefix="hangdbg-stdin-")
    try:
        path = Path(tmp) / "stdin"
        try:
            with open(path, "wb") as f:
                shutil.copyfileobj(src, f, _CHUNK)
        except OSError as exc:
            raise HangdbgError(f"cannot keep standard input in {tmp}: {exc.strerror or exc}",
                               help="set TMPDIR to a directory with free space") from None
        setattr(args, attr, [str(path) if str(p) == STDIN else p for p in paths])
        yield
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _is_terminal(stream: BinaryIO) -> bool:
    try:
        return os.isatty(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
