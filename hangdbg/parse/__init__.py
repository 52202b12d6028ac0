"""Read py-spy ``dump`` text output (py-spy 0.3/0.4) and saved dump files into hangdbg's model.

* :func:`parse_pyspy_dump` - pure text parsing into :class:`ParsedProcess` blocks.
* :func:`load_dumps` - files and directories given to ``hangdbg analyze`` into ``RankDump``.
"""

from .pyspy_text import ParsedProcess, parse_pyspy_dump, rank_from_filename, sample_from_filename
from .saved import LoadStats, load_dumps

__all__ = [
    "ParsedProcess",
    "parse_pyspy_dump",
    "rank_from_filename",
    "sample_from_filename",
    "LoadStats",
    "load_dumps",
]
