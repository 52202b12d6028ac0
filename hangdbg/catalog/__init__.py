"""The error catalog: what upstream programs can print when a distributed job fails.

Entries are package data (``data/*.toml``, one file per domain: NCCL, PyTorch, CUDA, the system,
the frameworks), each with its upstream format string, what it means, whose fault it is, the action
that fixes it and the source it was read from (a file:line at a tag, or a documentation URL).
:mod:`.entry` holds the frozen entry, :mod:`.pattern` turns a format string into an anchored,
bounded regex, :mod:`.message` peels a log line's prefixes off and keeps its context (time, host,
pid, rank, GPU), :mod:`.catalog` looks a message up. No I/O but reading the package data.
"""
