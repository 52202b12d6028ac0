"""One stack frame (:class:`Frame`) and how its file is shown (ground floor: imports nothing).

Re-exported by :mod:`hangdbg.model`, where the rest of the data lives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Frame", "shorten_path", "is_python_file", "bare_name", "is_library_file"]

_PY_SUFFIXES = (".py", ".pyx", ".pyw", ".pyi")


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame.

    Attributes:
        function: the function name as py-spy prints it (``step``, ``<module>``,
            ``_exception_logger.<locals>.wrapper``, ``c10d::Work::wait``).
        file: the source file (Python frames) or the shared library (native frames,
            e.g. ``libc.so.6``), as printed by py-spy (short or full path).
        line: the line number, or ``None`` for native frames without debug information.
        native: True for frames of C/C++ code (py-spy ``--native``).
        locals: ``(name, repr)`` pairs from py-spy ``--locals`` (arguments first), else ``()``.
    """

    function: str
    file: str
    line: int | None = None
    native: bool = False
    locals: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple[str, str, int | None]:
        """The identity of a frame for merging stacks: (function, file, line), locals ignored."""
        return (self.function, self.file, self.line)

    @property
    def bare(self) -> str:
        """The function's last dotted component: :func:`bare_name` of :attr:`function`."""
        return bare_name(self.function)

    @property
    def location(self) -> str:
        """``file:line`` (or just the library for native frames without a line)."""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    @property
    def short_file(self) -> str:
        """The file with site-packages / standard-library prefixes stripped (display only)."""
        return shorten_path(self.file)

    def __str__(self) -> str:
        loc = f"{self.short_file}:{self.line}" if self.line is not None else self.short_file
        return f"{self.function} ({loc})"


def bare_name(function: str) -> str:
    """The last dotted component of a function name: ``Popen.communicate`` -> ``communicate``.

    py-spy prints a Python frame's ``co_qualname`` on CPython 3.11+ (``Condition.wait``,
    ``Queue.get``, ``Outer.<locals>.inner``) and its ``co_name`` before (``wait``, ``get``); rules
    that name a standard-library function compare this bare name, so they hold for both. C++
    names (``c10d::Work::wait``) have no dot and are returned unchanged.
    """
    return function.rsplit(".", 1)[-1]


def shorten_path(path: str) -> str:
    """Strip the parts of a path that do not help a reader.

    ``/venv/lib/python3.11/site-packages/torch/distributed/x.py`` -> ``torch/distributed/x.py``;
    ``/usr/lib/python3.11/threading.py`` -> ``threading.py``; other absolute paths keep their
    last two components. Short names as py-spy prints them by default are returned unchanged.
    """
    if not path.startswith("/"):
        return path
    for marker in ("/site-packages/", "/dist-packages/"):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker):]
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].startswith("python3") and parts[i - 1] in ("lib", "lib64"):
            return "/".join(parts[i + 1:])
    return "/".join(parts[-2:])


def is_python_file(file: str) -> bool:
    """True when ``file`` names Python source (``.py``) or a pseudo-file like ``<string>``."""
    return file.endswith(_PY_SUFFIXES) or file.startswith("<")


_LIBRARY_FILE = re.compile(r"/(?:site-packages|dist-packages)/|/lib(?:64)?/python\d[\d.]*/|^<frozen ")


def is_library_file(file: str) -> bool:
    """True when ``file`` belongs to an installed package or the standard library: under
    ``site-packages``/``dist-packages`` (pip's and Debian's install dirs), ``lib[64]/pythonX.Y/``
    (CPython's ``sysconfig`` ``stdlib`` path), or a frozen module (``<frozen importlib._bootstrap>``:
    CPython's frozen standard-library modules). Full paths, as py-spy and gdb print them."""
    return bool(_LIBRARY_FILE.search(file))
