"""NicerTrace: trace the calls and lines of *your* code, one file per process/rank.

Standard library only, and it never imports hangdbg: it is meant to be dropped into any
training script::

    import tracer
    tracer.NicerTrace(packages_to_include=["mypkg"], outdir="traces").start()
    main()

Durability: every traced line is stored, *before* the line runs, into a ``MAP_SHARED`` memory
mapping of the trace file (one ``mmap.write``: a copy into the kernel page cache, no syscall
and no Python-level buffer). The bytes belong to the file as soon as they are stored, so a
process frozen in C code (a hung collective, a SIGSTOP) or killed with SIGKILL still leaves its
last traced line in the file. The file is grown 4 MiB at a time (``posix_fallocate``, so a full
disk shows up when growing, not as a SIGBUS) and truncated to its real length by ``stop()``.
While the process runs, and after a crash, the file is padded with NUL bytes up to the next
chunk: strip them (``hangdbg traces`` does; by hand: ``tr -d '\\0' < file``). If the file cannot
be mapped or grown (odd filesystem, disk full), tracing falls back to one ``os.write`` per line.
What is lost on a *node* crash (kernel panic, power loss, VM killed) is whatever the kernel
still had in its page cache and had not yet written to disk -- typically the last few seconds
of lines. Pass ``fsync=True`` to flush the mapping to disk (``msync``) after every line so not
even that is lost, at a large cost (a disk flush per traced line: expect 100x-1000x slower
traced code).
"""

from __future__ import annotations

import errno
import functools
import mmap
import os
import shlex
import sys
import threading
import time
import weakref
from collections.abc import Iterable

from .entry import Entry as _Entry
from .files import open_trace
from .format import (
    default_filename,
    format_count,
    format_end,
    format_header,
    rank_from_env,
    sanitize_host,
    utc_now_iso,
)

_OWN_DIR = os.path.dirname(os.path.realpath(__file__)) + os.sep
_USE_MONITORING = sys.version_info >= (3, 12)
# The optional C trace function (tracer/_ctrace.c, CPython 3.11 only; setup.py builds it when
# a compiler is there). Without it, 3.11 uses the pure-Python sys.settrace path.
_ctrace = None
if sys.version_info[:2] == (3, 11):
    try:
        from . import _ctrace
    except ImportError:
        pass
_ACTIVE: weakref.WeakSet[NicerTrace] = weakref.WeakSet()
# The trace file is a MAP_SHARED mapping grown by this much at a time (tests lower it).
_CHUNK = 4 << 20


@functools.lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[str, ...]:
    import sysconfig

    dirs = set()
    for key in ("stdlib", "platstdlib"):
        try:
            dirs.add(sysconfig.get_paths()[key])
        except (KeyError, OSError):
            pass
    dirs.add(os.path.dirname(os.__file__))
    return tuple(sorted({os.path.realpath(d) + os.sep for d in dirs if d}))


def _reserve(fd: int, offset: int, length: int) -> None:
    """Extend the file to ``offset + length`` with the blocks allocated (so that a store into
    the mapping can never hit ENOSPC, which would be a SIGBUS); plain ftruncate if the
    filesystem cannot allocate."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        os.ftruncate(fd, offset + length)
    except AttributeError:
        os.ftruncate(fd, offset + length)


def backend() -> str:
    """Which tracing path ``NicerTrace.start()`` will use in this process:

    - ``"monitoring"``: Python 3.12+, ``sys.monitoring`` (PEP 669), excluded code disabled.
    - ``"ctrace"``: Python 3.11 with the C extension ``tracer._ctrace`` built: a C-level trace
      function (``PyEval_SetTrace``) that answers excluded code without calling Python, and a
      PEP 523 frame hook that runs excluded frames outside 3.11's tracing mode
      (``TRACER_FRAME_HOOK=0`` leaves the hook out); traced code goes through the same Python
      functions as ``"settrace"``.
    - ``"settrace"``: pure Python ``sys.settrace`` (3.11 without the extension, older Pythons,
      or ``TRACER_PURE=1`` in the environment, read at each ``start()``).
    """
    if _USE_MONITORING:
        return "monitoring"
    if _ctrace is not None and os.environ.get("TRACER_PURE", "") in ("", "0"):
        return "ctrace"
    return "settrace"


def _mod_matches(modname: str, prefixes: tuple[str, ...]) -> bool:
    """True if ``modname`` is one of ``prefixes`` or inside one (``a.b`` matches ``a.b.c``)."""
    for p in prefixes:
        if modname == p or modname.startswith(p + "."):
            return True
    return False


class NicerTrace:
    """Trace calls (``>`` lines) and executed lines of the code you care about to a file.

    packages_to_include
        Module-name prefixes (``["torch.distributed", "mypkg"]``; ``"a.b"`` matches ``a.b`` and
        ``a.b.c``) traced even though they live in site-packages. Besides those, code is traced
        when its file is outside site-packages/dist-packages and outside the standard library
        (your own code). Everything else is excluded.
    ignoredirs, ignoremods
        Exclude further, whatever the above says: files under these path prefixes, modules with
        these names (or inside these packages), as the stdlib ``trace`` module's options.
    trace
        Write call and line events (``False`` with ``count=True``: counts only).
    count
        Keep per-(file, line) counts, written at ``stop()`` as ``#count file:line N`` lines.
    timing
        Print the seconds since ``start()`` on every line, else ``-``.
    outdir, filename
        The file is ``outdir/trace-{host}-{rank}-{pid}.txt``; ``filename`` replaces the
        basename (an absolute ``filename`` ignores ``outdir``).
    fsync
        ``msync`` the mapping (``fsync`` in the os.write fallback) after every line: survives a
        node crash, at a large cost (see module doc).

    Whether a code object is traced is decided once and cached (:func:`backend` says which
    path runs):

    - Python 3.12+: ``sys.monitoring`` and ``DISABLE`` for excluded code, which then costs
      nothing at all.
    - Python 3.11 with the optional C extension ``tracer._ctrace`` (built by ``pip install``
      when a compiler is there): a C trace function plus a PEP 523 frame hook that runs the
      frames of excluded code outside the interpreter's tracing mode, so excluded code costs
      about 15 ns per call; traced code goes through the same Python functions as below.
      ``TRACER_FRAME_HOOK=0`` keeps the C trace function but not the hook (excluded code then
      runs in tracing mode, about 2x slower than bare); while another frame hook is installed
      (TorchDynamo's, a debugger's) it is not taken, and past 3000 nested frames it is removed.
    - Python 3.11 without it (or ``TRACER_PURE=1``): ``sys.settrace``; an excluded function
      still costs a call of the Python global trace function each time it is called, and runs
      in tracing mode.

    ``stop()`` puts back the trace function that was set before ``start()``.

    Use ``start()``/``stop()``, ``with NicerTrace(...):``, or ``NicerTrace(...).run(f, *a)``.
    Threads started after ``start()`` are traced too (all threads on 3.12+). A process forked
    while tracing continues in its own file (its own pid); its elapsed times count from the
    parent's ``start()``.
    """

    def __init__(self, packages_to_include: Iterable[str] | None = None,
                 ignoredirs: Iterable[str] = (), ignoremods: Iterable[str] = (),
                 trace: bool = True, count: bool = False, timing: bool = True,
                 outdir: str | os.PathLike = ".", filename: str | os.PathLike | None = None,
                 fsync: bool = False):
        if isinstance(packages_to_include, str):
            packages_to_include = [packages_to_include]
        self.packages_to_include = tuple(p.strip(".") for p in (packages_to_include or ()) if p)
        self.ignoredirs = tuple(os.path.realpath(os.path.expanduser(os.fspath(d))).rstrip(os.sep) + os.sep
                                for d in ignoredirs)
        self.ignoremods = tuple(m.strip(".") for m in ignoremods if m)
        self.trace = bool(trace)
        self.count = bool(count)
        self.timing = bool(timing)
        self.outdir = os.fspath(outdir)
        self.filename = None if filename is None else os.fspath(filename)
        self.fsync = bool(fsync)
        self.path: str | None = None
        self._fd = -1
        self._mm: mmap.mmap | None = None
        self._w: list = [None]        # [writer(bytes)]: the mapping's write(); shared by all closures
        self._wlock = threading.Lock()  # taken only to grow/swap the mapping (the slow path)
        self._active = False
        self._stdlib = _stdlib_dirs()
        self._cache: dict = {}       # code object -> _Entry or None (excluded)
        self._counts: dict[str, dict[int, int]] = {}
        self._t0 = 0.0
        self._start_iso = ""
        self._tool_id: int | None = None
        self._prev_threading_trace = None
        self._prev_trace = None
        self._walked: list = []      # (frame, its f_trace before start(), ours) for stop()
        self._ct = None              # the tracer._ctrace.CTracer while the C path runs
        self.backend: str | None = None   # backend() as of start()

    # ------------------------------------------------------------------ decision (once per code)
    def wants(self, filename: str, modname: str | None) -> bool:
        """Would code from ``filename`` in module ``modname`` be traced? (the cached decision)"""
        modname = modname or ""
        if filename.startswith("<"):
            real = filename
        else:
            real = os.path.realpath(os.path.abspath(filename))
            if real.startswith(_OWN_DIR):
                return False
        if self.ignoremods and _mod_matches(modname, self.ignoremods):
            return False
        if self.ignoredirs and real.startswith(self.ignoredirs):
            return False
        if self.packages_to_include and _mod_matches(modname, self.packages_to_include):
            return True
        if real.startswith("<"):
            return False            # <frozen importlib...>, <string>, ...
        parts = real.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        if real.startswith(self._stdlib):
            return False
        return True

    def _decide(self, code, frame):
        """Cache and return the per-code writer for ``code``, or None if it is excluded."""
        return self._decide_in(code, frame.f_globals if frame is not None else None)

    def _decide_in(self, code, globals_):
        """``_decide`` from the frame's globals (the C path calls it before a frame exists)."""
        modname = globals_.get("__name__") if globals_ is not None else None
        entry = None
        if modname != "tracer" and not (modname or "").startswith("tracer."):
            if self.wants(code.co_filename, modname):
                entry = _Entry(self, code, modname)
        self._cache[code] = entry
        return entry

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> NicerTrace:
        """Open the file, write the header and start tracing (this thread, and new threads)."""
        if self._active:
            return self
        host = sanitize_host()
        rank = rank_from_env(os.environ)
        pid = os.getpid()
        name = self.filename or default_filename(host, rank, pid)
        self.path = os.path.join(self.outdir, name)
        if self.outdir:
            os.makedirs(self.outdir, exist_ok=True)
        self._open(os.O_CLOEXEC if hasattr(os, "O_CLOEXEC") else 0)
        self._start_iso = utc_now_iso()
        self._host, self._rank = host, rank
        self._cache = {}
        self._counts = {}
        self._write_header(pid)
        self._t0 = time.perf_counter()
        self._active = True
        _ACTIVE.add(self)
        self.backend = backend()
        if self.backend == "monitoring":
            self._start_monitoring()
        else:
            self._start_settrace(sys._getframe(1), self.backend == "ctrace")
        return self

    def stop(self) -> None:
        """Stop tracing, write the ``#count`` lines (count mode) and the end line, close."""
        if not self._active:
            return
        if self.backend == "monitoring":
            self._stop_monitoring()
        else:
            self._stop_settrace()
        self._active = False          # the closures still installed in other threads go quiet
        _ACTIVE.discard(self)
        elapsed = time.perf_counter() - self._t0
        out = []
        if self.count:
            for filename in sorted(self._counts):
                per = self._counts[filename]
                out.extend(format_count(filename, ln, per[ln]) for ln in sorted(per) if per[ln])
        out.append(format_end(elapsed))
        try:
            self._put("".join(out).encode("utf-8", "replace"))
            if self.fsync:
                self._sync()
        finally:
            self._close()

    def __enter__(self) -> NicerTrace:
        return self.start()   # traces the ``with`` block's frame too (start() walks callers)

    def __exit__(self, *exc) -> None:
        self.stop()

    def run(self, func, /, *args, **kwargs):
        """Trace ``func(*args, **kwargs)`` and return its result."""
        self.start()
        try:
            return func(*args, **kwargs)
        finally:
            self.stop()

    runfunc = run

    @property
    def active(self) -> bool:
        return self._active

    # ------------------------------------------------------------------ writing
    # Lines are stored into a MAP_SHARED mapping of the file with ``mmap.write`` (a memcpy into
    # the kernel page cache: no syscall, and the bytes are the file's as soon as it returns, so
    # they survive SIGKILL/SIGSTOP). ``mmap.write`` copies the bytes and advances the mapping's
    # position in one C call that never releases the GIL, so lines from several threads never
    # interleave. The file is pre-sized (and ``posix_fallocate``d, so a full disk is an OSError
    # when growing, never a SIGBUS on a store) a chunk at a time; ``stop()`` truncates it to the
    # bytes written. All closures call ``self._w[0]`` so a forked child can swap in its mapping.
    def _open(self, flags: int = 0) -> None:
        """Create/truncate ``self.path`` (owner-only, no link followed: :func:`tracer.files.open_trace`),
        map its first chunk, install the writer."""
        fd, self.path = open_trace(self.path, flags)
        self._fd, self._mm = fd, None
        try:
            _reserve(fd, 0, _CHUNK)
            mm = mmap.mmap(fd, _CHUNK, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError, AttributeError):
            # No shared mapping here (odd filesystem, no mmap): one os.write per line, as before.
            os.ftruncate(fd, 0)
            self._w[0] = functools.partial(os.write, fd)
            return
        self._mm = mm
        self._w[0] = mm.write

    def _put(self, data: bytes) -> None:
        """Write ``data`` (whole lines) at the end of the trace; never raises."""
        try:
            self._w[0](data)
        except (ValueError, OSError):
            self._slow_put(data)

    def _slow_put(self, data: bytes) -> None:
        """The mapping is full (ValueError), or closed by stop(), or os.write failed: under the
        lock, grow the mapping by a chunk and write, or drop the line if tracing is over."""
        try:
            with self._wlock:
                while self._fd >= 0:
                    mm = self._mm
                    if mm is None:           # the os.write fallback
                        try:
                            os.write(self._fd, data)
                        except OSError:
                            pass             # e.g. disk full: the line is lost, the program goes on
                        return
                    try:
                        mm.write(data)
                        return
                    except ValueError:       # full: grow it
                        pass
                    size = len(mm)
                    more = max(_CHUNK, len(data))
                    try:
                        _reserve(self._fd, size, more)
                        mm.resize(size + more)
                    except Exception:        # noqa: BLE001 - no space, no mremap: go on with os.write
                        self._unmap()
        except Exception:                    # noqa: BLE001 - a trace function must not raise
            pass

    def _unmap(self) -> None:
        """(lock held) Drop the mapping, truncate the file to what was written, use os.write."""
        mm, self._mm = self._mm, None
        fd = self._fd
        self._w[0] = functools.partial(os.write, fd)
        end = mm.tell()
        mm.close()
        os.ftruncate(fd, end)
        os.lseek(fd, end, os.SEEK_SET)

    def _sync(self) -> None:
        """``fsync=True``: push the lines written so far to the disk (msync of the mapping)."""
        try:
            mm = self._mm
            if mm is not None:
                mm.flush()
            elif self._fd >= 0:
                os.fsync(self._fd)
        except (OSError, ValueError):
            pass

    def _close(self) -> None:
        """Unmap, truncate the file to the bytes written (no NUL padding) and close it."""
        with self._wlock:
            mm, self._mm = self._mm, None
            fd, self._fd = self._fd, -1
            self._w[0] = len                 # a no-op writer for a thread still in a callback
        if fd < 0:
            return
        try:
            if mm is not None:
                end = mm.tell()
                mm.close()
                os.ftruncate(fd, end)
                if self.fsync:
                    os.fsync(fd)
        finally:
            os.close(fd)

    def _write_header(self, pid: int) -> None:
        argv = shlex.join(str(a) for a in sys.argv)
        header = format_header(self._host, self._rank, pid, self._start_iso, argv)
        self._put(header.encode("utf-8", "replace"))

    def _after_fork_in_child(self) -> None:
        """A forked child gets its own file and mapping (the closures call ``self._w[0]``)."""
        if not self._active or self._fd < 0:
            return
        pid = os.getpid()
        name = self.filename or default_filename(self._host, self._rank, pid)
        if self.filename:
            root, ext = os.path.splitext(name)
            name = f"{root}-{pid}{ext}"
        self.path = os.path.join(self.outdir, name)
        old_mm, old_fd = self._mm, self._fd
        self._wlock = threading.Lock()       # another parent thread may have held it at fork
        self._w[0] = len                     # never write into the parent's file from here on
        try:
            if old_mm is not None:
                old_mm.close()               # unmaps in this process only
            os.close(old_fd)
        except OSError:
            pass
        self._fd, self._mm = -1, None
        try:
            self._open(os.O_CLOEXEC if hasattr(os, "O_CLOEXEC") else 0)
            for per in self._counts.values():
                per.clear()
            self._write_header(pid)
        except OSError:
            pass

    # ------------------------------------------------------------------ Python <= 3.11: settrace
    def _start_settrace(self, caller, use_c: bool) -> None:
        cache = self._cache
        decide = self._decide

        def _global(frame, event, arg):
            try:
                entry = cache[frame.f_code]
            except KeyError:
                entry = decide(frame.f_code, frame)
            if entry is None:
                return None
            return entry.enter()

        self._global = _global
        self._prev_threading_trace = getattr(threading, "gettrace", lambda: None)()
        self._prev_trace = sys.gettrace()
        if use_c:
            # The C function answers call events of excluded code itself (a decision cached
            # in the code object) and calls _global for the rest, like sys.settrace would; its
            # frame hook runs excluded frames outside the tracing mode. TRACER_FRAME_HOOK=0: no
            # hook (excluded code then runs in 3.11's tracing mode, about 2x slower than bare).
            # threading.settrace(ct): a new thread's sys.settrace(ct) calls ct once, which
            # installs the C function in that thread.
            ct = _ctrace.CTracer(cache, self._decide_in, _global,
                                 frame_hook=os.environ.get("TRACER_FRAME_HOOK", "1") != "0")
            self._ct = ct
            threading.settrace(ct)
            ct.install()
        else:
            threading.settrace(_global)
            sys.settrace(_global)
        # Trace the rest of the frames already running (the caller of start(), and its callers)
        # from their next line, like pdb.set_trace does.
        # stop() gives those frames their old local trace function back (an enclosing tracer's).
        self._walked = []
        frame = caller
        while frame is not None:
            code = frame.f_code
            entry = cache[code] if code in cache else decide(code, frame)
            if entry is not None:
                self._walked.append((frame, frame.f_trace, entry.local))
                frame.f_trace_lines = True
                frame.f_trace = entry.local
            frame = frame.f_back

    def _stop_settrace(self) -> None:
        """Put back the trace functions that were there at start() (this thread, new threads)."""
        ct, self._ct = self._ct, None
        if ct is not None:
            ct.disable()         # other threads running it drop it at their next event
        prev = self._prev_trace
        if _ctrace is not None and isinstance(prev, _ctrace.CTracer) and prev.enabled:
            prev.install()       # an enclosing NicerTrace on the C path: its C function again
        else:
            sys.settrace(prev)
        threading.settrace(self._prev_threading_trace)
        self._prev_trace = self._prev_threading_trace = None
        walked, self._walked = self._walked, []
        for frame, old, ours in walked:
            if frame.f_trace is ours:
                frame.f_trace = old
        if ct is not None:
            _restore_trace_lines()

    # ------------------------------------------------------------------ Python >= 3.12: monitoring
    def _start_monitoring(self) -> None:
        mon = sys.monitoring
        for tid in (4, 3, 2, 1, 0, 5):
            if mon.get_tool(tid) is None:
                mon.use_tool_id(tid, "hangdbg-tracer")
                break
        else:
            raise RuntimeError("tracer: no free sys.monitoring tool id (6 tools already in use)")
        self._tool_id = tid
        cache = self._cache
        decide = self._decide
        DISABLE = mon.DISABLE
        getframe = sys._getframe

        def py_start(code, offset):
            try:
                entry = cache[code]
            except KeyError:
                entry = decide(code, getframe(1))
            if entry is None:
                return DISABLE
            entry.enter()

        def line(code, lineno):
            try:
                entry = cache[code]
            except KeyError:
                entry = decide(code, getframe(1))
            if entry is None:
                return DISABLE
            entry.line(lineno)

        E = mon.events
        mon.register_callback(tid, E.PY_START, py_start)
        mon.register_callback(tid, E.LINE, line)
        mon.set_events(tid, E.PY_START | E.LINE)

    def _stop_monitoring(self) -> None:
        mon = sys.monitoring
        tid, self._tool_id = self._tool_id, None
        if tid is None:
            return
        E = mon.events
        mon.set_events(tid, 0)
        mon.register_callback(tid, E.PY_START, None)
        mon.register_callback(tid, E.LINE, None)
        mon.free_tool_id(tid)
        mon.restart_events()


Tracer = NicerTrace


def _restore_trace_lines() -> None:
    """The C path turns line events off (``f_trace_lines = False``) in a frame of excluded code
    from its call event to its return event; put back the default (True) in every frame still
    on a thread's stack so that a debugger or tracer installed later sees their lines."""
    try:
        frames = list(sys._current_frames().values())
    except Exception:  # noqa: BLE001 - best effort
        return
    for frame in frames:
        while frame is not None:
            if not frame.f_trace_lines:
                frame.f_trace_lines = True
            frame = frame.f_back


def _after_fork() -> None:
    for tr in list(_ACTIVE):
        tr._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def run(func, /, *args, **kwargs):
    """Trace ``func(*args, **kwargs)`` with a default :class:`NicerTrace`; return its result."""
    return NicerTrace().run(func, *args, **kwargs)
