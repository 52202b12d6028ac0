"""Every reader, registered by import: the order is the order of display in ``hangdbg report``."""

from __future__ import annotations

from typing import Any

from ..headline import source_headline
from ..model import SourceKind, SourceReport
from .core import reader as core, json_reader as core_json
from .flight_recorder import reader as flight_recorder
from .nccl import reader as nccl
from .nccl_ras import reader as nccl_ras
from .last_stacks import reader as last_stacks
from .stacks import reader as pyspy, text_reader as stack_text
from .torch_log import reader as torch_log
from .traces import reader as traces
from .gpu import reader as xid
from .error_lines import reader as error_lines
from .base import Reader

__all__ = ["READERS", "reader_for", "headline_of"]

READERS: tuple[Reader[Any], ...] = (
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
    error_lines.READER,
    last_stacks.READER,
)
"""One reader per :class:`~hangdbg.model.SourceKind` that files can hold (a test checks)."""

_BY_KIND = {r.kind: r for r in READERS}


def reader_for(kind: SourceKind) -> Reader[Any]:
    """The registered reader of ``kind``.

    Raises:
        KeyError: no reader reads that kind (``nodes`` is not read from files).
    """
    return _BY_KIND[kind]


def headline_of(rep: SourceReport[Any]) -> str:
    """The headline of a report of one kind: its findings, or its reader's all-clear
    (:func:`hangdbg.headline.source_headline`)."""
    return source_headline(rep, reader_for(rep.kind).all_clear(rep))
