"""Tee this rank's stdout and stderr, line by line and prefixed, into ``dir/rank-0003.log``.

    from hangdbg.hooks.capture import capture
    cap = capture("logs")               # or: with capture("logs"): ...
    ...
    cap.close()                          # optional: restores fds 1 and 2

It works at the *file descriptor* level: fds 1 and 2 are replaced (``dup2``) by the write ends of
two pipes, and a daemon reader thread forwards every chunk unchanged to the saved original fds and
writes every complete line, prefixed, to the log file with one ``os.write`` (O_APPEND) as soon as
it has it. So output of C extensions, NCCL/gloo and subprocesses (``os.system``) is captured too.
``sys.stdout`` is switched to line buffering so Python prints reach the pipe at each newline.

Not losing the last line:

* uncaught exception: ``sys.excepthook`` is wrapped (the traceback is printed, then Python's
  streams are flushed and the reader drained), and an ``atexit`` handler closes the capture: fds
  restored, pipe drained to EOF, a partial last line (no newline) written at the end;
* ``sys.exit`` / normal end: the ``atexit`` handler, as above;
* ``os._exit`` (multiprocessing children, some launchers): while capturing, ``os._exit`` is
  wrapped to flush and drain first (at most ``drain_timeout`` seconds);
* SIGKILL, or a fatal signal in C code (segfault): the process and its reader thread die at once;
  what was still in the pipe (not yet read by the thread) is lost; the log then ends at the last
  line the thread had got to -- usually all but the last few milliseconds.

Other limits: a subprocess still running when we close holds the pipe open, so the drain waits at
most ``drain_timeout``; output after ``close()`` goes to the original streams only.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import select
import sys
import termios
import threading
from typing import NoReturn
import time

from .rank_logging import format_prefix
from .rankinfo import rank_info

__all__ = ["DEFAULT_PREFIX", "Capture", "capture"]

DEFAULT_PREFIX = "[rank {rank}] "


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:  # original stream gone (closed pipe, EPIPE): keep logging anyway
            return
        view = view[n:]


def _pending(fd: int) -> int:
    try:
        import array
        buf = array.array("i", [0])
        fcntl.ioctl(fd, termios.FIONREAD, buf, True)
        return buf[0]
    except OSError:
        return 0


class Capture:
    def __init__(self, dir: str, prefix: str | None = None, drain_timeout: float = 2.0):
        self.prefix_fmt = DEFAULT_PREFIX if prefix is None else prefix
        self.drain_timeout = drain_timeout
        os.makedirs(dir, exist_ok=True)
        rank = rank_info().rank
        name = f"rank-{rank:04d}.log" if rank is not None else f"rank-unknown-{os.getpid()}.log"
        self.path = os.path.join(dir, name)
        self.closed = False
        self._pid = os.getpid()  # a forked child inherits this object but not the reader thread
        self._busy = 0  # chunks read but not yet written
        self._lock = threading.Lock()
        self._partial = {1: b"", 2: b""}
        self._log = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)  # owner-only, as hangdbg's outputs

        for s in (sys.stdout, sys.stderr):
            self._flush(s)
        self._saved = {1: os.dup(1), 2: os.dup(2)}
        for fd in self._saved.values():
            os.set_inheritable(fd, False)
        self._read = {}
        for fd in (1, 2):
            r, w = os.pipe()
            os.set_inheritable(r, False)
            os.dup2(w, fd)  # fds 1/2 stay inheritable: subprocesses write into the pipe
            os.close(w)
            self._read[r] = fd
        self._line_buffered = None
        try:
            self._line_buffered = sys.stdout.line_buffering
            sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a TextIOWrapper, or AttributeError
        except (AttributeError, ValueError):
            pass

        self._thread = threading.Thread(target=self._reader, name="hangdbg-capture", daemon=True)
        self._thread.start()

        self._orig_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        self._orig_exit = os._exit
        os._exit = self._os_exit  # type: ignore[assignment]  # a bound method in place of the function
        atexit.register(self.close)

    # -- reader thread -------------------------------------------------------------------------
    def _prefix(self) -> bytes:
        try:
            return format_prefix(self.prefix_fmt).encode()
        except Exception:
            return b""

    def _log_lines(self, fd: int, data: bytes, final: bool = False) -> None:
        buf = self._partial[fd] + data
        *lines, rest = buf.split(b"\n")
        if lines:
            prefix = self._prefix()
            _write_all(self._log, b"".join(prefix + line + b"\n" for line in lines))
        if final and rest:
            _write_all(self._log, self._prefix() + rest + b"\n")
            rest = b""
        self._partial[fd] = rest

    def _reader(self) -> None:
        open_fds = set(self._read)
        while open_fds:
            try:
                ready, _, _ = select.select(list(open_fds), [], [])
            except InterruptedError:
                continue
            except OSError:
                break
            for r in ready:
                with self._lock:
                    self._busy += 1
                try:
                    try:
                        data = os.read(r, 65536)
                    except InterruptedError:
                        continue
                    except OSError:
                        data = b""
                    fd = self._read[r]
                    if not data:
                        open_fds.discard(r)
                        with self._lock:
                            self._log_lines(fd, b"", final=True)
                        continue
                    _write_all(self._saved[fd], data)
                    with self._lock:
                        self._log_lines(fd, data)
                finally:
                    with self._lock:
                        self._busy -= 1

    # -- draining ------------------------------------------------------------------------------
    @staticmethod
    def _flush(stream) -> None:
        try:
            if stream is not None:
                stream.flush()
        except (AttributeError, ValueError, OSError):
            pass

    def drain(self, timeout: float | None = None, final: bool = True) -> None:
        """Flush Python's streams and wait until the reader has written everything in the pipes.

        With ``final`` a partial last line (no newline yet) is written to the log too.
        """
        if self.closed or os.getpid() != self._pid:
            return
        self._flush(sys.stdout)
        self._flush(sys.stderr)
        deadline = time.monotonic() + (self.drain_timeout if timeout is None else timeout)
        while time.monotonic() < deadline and self._thread.is_alive():
            with self._lock:
                busy = self._busy
            if not busy and not any(_pending(r) for r in self._read):
                break
            time.sleep(0.002)
        if final:
            with self._lock:
                for fd in (1, 2):
                    self._log_lines(fd, b"", final=True)

    def _excepthook(self, *args) -> None:
        try:
            self._orig_excepthook(*args)
        finally:
            self.drain()

    def _os_exit(self, code: int) -> NoReturn:
        try:
            self.drain()
        finally:
            self._orig_exit(code)

    # -- closing -------------------------------------------------------------------------------
    def close(self) -> None:
        """Restore fds 1 and 2, drain the pipes to EOF (bounded), close the log."""
        if self.closed or os.getpid() != self._pid:
            return
        self._flush(sys.stdout)
        self._flush(sys.stderr)
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)  # drops our write ends: the reader sees EOF once children let go
        self._thread.join(self.drain_timeout)
        self.closed = True
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._orig_excepthook
        if os._exit == self._os_exit:
            os._exit = self._orig_exit
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        if self._line_buffered is not None:
            try:
                sys.stdout.reconfigure(line_buffering=self._line_buffered)  # type: ignore[union-attr]
            except (AttributeError, ValueError):
                pass
        with self._lock:
            for fd in (1, 2):
                self._log_lines(fd, b"", final=True)
        if not self._thread.is_alive():  # else it may still use them: leave them open
            for fd in [*self._read, *self._saved.values(), self._log]:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def capture(dir: str, prefix: str | None = None, drain_timeout: float = 2.0) -> Capture:
    """Start teeing fds 1 and 2 into ``dir/rank-NNNN.log``; returns a handle (also a context manager).

    ``prefix`` is a format string with fields host, rank, local_rank, world_size (default
    ``"[rank {rank}] "``; ``rank_logging.DEFAULT_FMT`` gives ``"[host rank r/n] "``).
    """
    return Capture(dir, prefix, drain_timeout)
