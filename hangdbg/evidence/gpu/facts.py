"""The typed facts of kernel logs and nvidia-smi: what this kind of evidence says beyond its findings and
per-rank states (``SourceReport.facts``, the ``facts`` of the JSON documents). Frozen dataclasses,
no I/O, nothing imported from the project."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ['XidCount', 'EccFacts', 'GpuState', 'GpuFacts']


@dataclass(frozen=True, slots=True)
class XidCount:
    """How many times an Xid code was logged for one GPU."""

    code: int
    count: int


@dataclass(frozen=True, slots=True)
class EccFacts:
    """ECC and remapping state of one GPU (``nvidia-smi -q``; ``None``: not printed or N/A)."""

    volatile_uncorrectable: int | None
    aggregate_uncorrectable: int | None
    remapped_uncorrectable: int | None
    remap_pending: bool
    remap_failed: bool
    retired_pending: bool


@dataclass(frozen=True, slots=True)
class GpuState:
    """One GPU (``host:0000:3b:00``) as the logs describe it."""

    gpu: str
    xids: tuple[XidCount, ...]
    uuid: str
    serial: str
    fallen_off_bus: bool
    ecc: EccFacts | None


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """The GPU reader's facts: every GPU seen, the Xid lines, the hosts named."""

    gpus: tuple[GpuState, ...] = ()
    xid_events: int = 0
    hosts: tuple[str, ...] = ()
