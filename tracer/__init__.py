"""tracer: a NicerTrace-style call tracer writing one trace file per rank (standard library only).

Placeholder package: the tracer itself is built in its own issue. It never imports hangdbg.
"""

__all__: list[str] = []
