"""The one interface of every evidence reader: ``sniff(head) -> bool``, ``read(paths) -> SourceReport``.

Modelled on pystack's data flow (source -> threads -> frames -> formatter): a reader turns files of
one kind of evidence into a :class:`~hangdbg.model.SourceReport` (findings, per-rank states and
its own typed facts); it never prints, never raises for bad content (a garbled line is skipped
and counted, an unreadable file is listed with the reason) and never needs to know about the
other readers. Readers of stacks also hand their :class:`~hangdbg.model.RankDump` objects over, so
that ``hangdbg report`` analyzes the stacks of py-spy dumps, core files and backtrace texts
together.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Generic, Protocol, Sequence, TypeVar, runtime_checkable

from ..model import RankDump, SourceKind, SourceReport

__all__ = ["Reader", "StackReader", "ReaderBase", "with_source"]

F = TypeVar("F")


@runtime_checkable
class Reader(Protocol[F]):
    """A reader of one kind of evidence.

    Attributes:
        kind: the kind of evidence it reads.
    """

    kind: ClassVar[SourceKind]

    def sniff(self, head: bytes) -> bool:
        """True when ``head`` (the first 64 KiB of a file, :data:`hangdbg.text.lines.HEAD_BYTES`)
        is this kind of evidence.

        Content, not names: a NCCL log named ``slurm-1234.out`` is still a NCCL log. Never raises.
        """
        ...

    def takes(self, name: str, head: bytes) -> bool:
        """True when a file met while walking a directory given to this reader's own command is
        to be read (``sniff``, or for some readers a telling name, so that a garbled file of this
        kind is reported rather than skipped)."""
        ...

    def read(self, paths: Sequence[str]) -> SourceReport[F]:
        """Read ``paths`` (regular files) into one report; never raises for bad content."""
        ...

    def all_clear(self, rep: SourceReport[F]) -> str:
        """The sentence for a report of this kind with neither a suspect nor a warning: what was
        read and that nothing stands out (never an all-clear for what was not read)."""
        ...


@runtime_checkable
class StackReader(Reader[F], Protocol[F]):
    """A reader whose evidence holds stacks: it also returns one :class:`RankDump` per rank."""

    def read_dumps(self, paths: Sequence[str]) -> tuple[SourceReport[F], list[RankDump]]:
        """The report (without the findings of the joint stack analysis) and the rank dumps."""
        ...


def with_source(rep: SourceReport[F]) -> SourceReport[F]:
    """``rep`` with every finding's ``source`` set to the report's kind (where not set)."""
    if all(f.source is not None for f in rep.findings):
        return rep
    return replace(rep, findings=tuple(f if f.source is not None else replace(f, source=rep.kind) for f in rep.findings))


class ReaderBase(Generic[F]):
    """What readers share: ``takes`` defaults to ``sniff``, and ``read`` stamps each finding
    with the reader's kind (subclasses implement ``sniff`` and ``_read``)."""

    kind: ClassVar[SourceKind]

    def sniff(self, head: bytes) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def takes(self, name: str, head: bytes) -> bool:
        return self.sniff(head)

    def read(self, paths: Sequence[str]) -> SourceReport[F]:
        return with_source(self._read([str(p) for p in paths]))

    def all_clear(self, rep: SourceReport[F]) -> str:
        return f"nothing abnormal in {rep.records} {rep.kind} records"

    def _read(self, paths: list[str]) -> SourceReport[F]:  # pragma: no cover - abstract
        raise NotImplementedError
