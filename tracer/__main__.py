"""``python -m tracer [options] script.py args...`` (or ``-m module args...``): run a script as
``__main__`` under :class:`tracer.NicerTrace`, like ``python -m trace``."""

from __future__ import annotations

import argparse
import os
import runpy
import sys

from .core import NicerTrace


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tracer",
        description="Run a Python script under NicerTrace; one trace-{host}-{rank}-{pid}.txt per process.")
    p.add_argument("--include", action="append", default=[], metavar="PKG",
                   help="also trace this package (dotted prefix), even from site-packages; repeatable")
    p.add_argument("--ignore-module", action="append", default=[], metavar="MOD",
                   help="never trace this module/package; repeatable")
    p.add_argument("--ignore-dir", action="append", default=[], metavar="DIR",
                   help="never trace files under this directory; repeatable")
    p.add_argument("--outdir", default=".", help="directory for the trace file (default: .)")
    p.add_argument("--filename", default=None, help="trace file name instead of trace-{host}-{rank}-{pid}.txt")
    p.add_argument("--count", action="store_true", help="write per-line counts at the end")
    p.add_argument("--no-trace", action="store_true", help="do not write call/line events (use with --count)")
    p.add_argument("--no-timing", action="store_true", help="write '-' instead of elapsed seconds")
    p.add_argument("--fsync", action="store_true", help="fsync after every line (survives node crash; slow)")
    p.add_argument("-m", dest="module", default=None, help="run a module as __main__ instead of a script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="script.py and its arguments")
    ns = p.parse_args(argv)
    if ns.module is None and not ns.args:
        p.error("a script (or -m module) to run is required")

    tr = NicerTrace(packages_to_include=ns.include, ignoredirs=ns.ignore_dir, ignoremods=ns.ignore_module,
                    trace=not ns.no_trace, count=ns.count, timing=not ns.no_timing,
                    outdir=ns.outdir, filename=ns.filename, fsync=ns.fsync)
    if ns.module is not None:
        sys.argv = [ns.module, *ns.args]
        sys.path.insert(0, os.getcwd())
        tr.start()
        try:
            runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
        finally:
            tr.stop()
    else:
        script = ns.args[0]
        sys.argv = list(ns.args)
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        tr.start()
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            tr.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
