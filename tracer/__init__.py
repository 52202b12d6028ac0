"""tracer: a NicerTrace-style call tracer writing one trace file per process/rank.

Standard library only; it never imports hangdbg (it goes into any training script)::

    import tracer
    tracer.NicerTrace(packages_to_include=["mypkg"], outdir="traces").start()

See ``tracer/README.md`` for the file format (v1), the options and the overhead figures.
"""

from .core import NicerTrace, Tracer, backend, run
from .format import FORMAT_VERSION, format_header, format_line

__all__ = ["FORMAT_VERSION", "NicerTrace", "Tracer", "backend", "format_header", "format_line", "run"]
