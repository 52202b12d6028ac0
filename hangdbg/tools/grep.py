"""GNU/BSD ``grep -F -i`` as a fast first pass over large logs.

Python's ``re`` tries each branch of an alternation at every position (about 3 MB/s for forty
words), and a loop over every line costs microseconds each; ``grep -F`` with several fixed strings
runs a multi-string search in C (about 250 MB/s here, bench/logs_rate.py). The error-lines reader
gives it the stems of error words and reads back only the lines that hold one; the caller decides
what each line means. Started through :class:`hangdbg.tools.subproc.Popen` (logged, ``-v``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Iterator, Sequence

from .subproc import Popen, kill_group

__all__ = ["find_grep", "grep_lines"]


def find_grep() -> str | None:
    """The path of ``grep``, or None when there is none (the caller reads every line itself)."""
    return shutil.which("grep")


def grep_lines(grep: str, path: str, stems: Sequence[str], max_line: int) -> Iterator[tuple[int, bytes]]:
    """``(line_number, raw_line)`` of every line of ``path`` that holds one of ``stems`` (any case).

    Args:
        grep: the grep executable (:func:`find_grep`).
        path: a regular file (passed after ``--``: never read as an option).
        stems: fixed strings (``-F``), matched case-insensitively (``-i``), as separate ``-e`` arguments.
        max_line: bytes of a line kept (the rest is cut).

    Raises:
        OSError: grep could not be started, or it failed (exit status 2: the file cannot be read).
    """
    argv = [grep, "-a", "-n", "-i", "-F"]
    for s in stems:
        argv += ["-e", s]
    argv += ["--", path]
    proc = Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"),
                 start_new_session=True)
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            no, _, text = raw.partition(b":")
            if no.isdigit():
                yield int(no), text.rstrip(b"\r\n")[:max_line]
    finally:
        if proc.poll() is None:
            kill_group(proc)
        err = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
        proc.wait()
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    if proc.returncode not in (0, 1):
        raise OSError(f"grep failed ({proc.returncode}): {err[:200]}")
