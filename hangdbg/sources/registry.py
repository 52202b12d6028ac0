"""Every reader, registered by import: the order is the order of display in ``hangdbg report``."""

from __future__ import annotations

from ..model import SourceKind
from . import core, core_json, flight_recorder, nccl, nccl_ras, pyspy, stack_text, torch_log, traces, xid
from .base import Reader

__all__ = ["READERS", "reader_for"]

READERS: tuple[Reader, ...] = (
    pyspy.READER,
    core.READER,
    core_json.READER,
    stack_text.READER,
    nccl.READER,
    torch_log.READER,
    flight_recorder.READER,
    nccl_ras.READER,
    xid.READER,
    traces.READER,
)
"""One reader per :class:`~hangdbg.model.SourceKind` that files can hold (a test checks)."""

_BY_KIND = {r.kind: r for r in READERS}


def reader_for(kind: SourceKind) -> Reader:
    """The registered reader of ``kind``.

    Raises:
        KeyError: no reader reads that kind (``nodes`` is not read from files).
    """
    return _BY_KIND[kind]
