"""The one result of a stack analysis command (``dump``, ``analyze``, ``demo``): :class:`StacksResult`.

The use case builds it once (:func:`hangdbg.api.dump`, :func:`hangdbg.api.analyze`); the report
layer renders both the console view and the JSON document from it
(:func:`hangdbg.report.console.render_stacks`, :func:`hangdbg.report.build.stacks_document`), so
the two always say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..evidence.flight_recorder.grammar import FrDump
from ..evidence.nccl_ras.facts import RasQuery
from ..model import Analysis, Finding, Kind, suspects_of
from ..outdir import NotSaved, not_saved_finding, not_saved_note
from ..sources import RankSource
from .fanout import NodeResult
from .gcore import GcoreResult

__all__ = ["StacksResult", "CollectResult"]


@dataclass(frozen=True, slots=True)
class StacksResult:
    """What one ``dump``/``analyze``/``demo`` found, and what it wrote.

    Attributes:
        command: ``dump``, ``analyze`` or ``demo`` (the document's ``command``).
        analysis: the stack analysis (classes, tree, waits, the analysis' own findings).
        base_headline: the analysis' headline, with the nodes that could not be read
            (:attr:`headline` adds the files that could not be saved).
        base_findings: the analysis' findings, then the nodes' (``node-failed``); :attr:`findings`
            adds ``not-saved``.
        out_dir: the output directory, None when nothing was written (``analyze`` without ``-o``).
        inputs: the paths read (``analyze``).
        nodes: what became of each node of a fan-out (``dump --jobid/--hosts``).
        cores: the core files ``dump --core`` wrote.
        garbled_lines: lines of py-spy or agent output that could not be read (counted, skipped).
        complete: every node named was read (False: the job was not seen whole, never an all-clear).
        not_saved: files of the output directory that could not be written.
        ras: what ``dump`` did with NCCL RAS (:mod:`hangdbg.collect.ras`), None when not asked about.
        sources: per rank and source (py-spy, the debug server's stacks and flight recorder, the
            FR pipe) what ``dump`` got (:class:`~hangdbg.sources.RankSource`); empty for ``analyze``.
        fr_dumps: the flight-recorder dumps ``dump`` collected (``OUT/fr``), for an analysis that
            joins them with the stacks (their own findings are in :attr:`base_findings`, source
            ``flight-recorder``: :func:`hangdbg.evidence.fr_live.fr_findings`).
    """

    command: str
    analysis: Analysis
    base_headline: str
    base_findings: tuple[Finding, ...]
    out_dir: str | None = None
    inputs: tuple[str, ...] = ()
    nodes: tuple[NodeResult, ...] = ()
    cores: tuple[GcoreResult, ...] = ()
    garbled_lines: int = 0
    complete: bool = True
    not_saved: tuple[NotSaved, ...] = ()
    ras: RasQuery | None = None
    sources: tuple[RankSource, ...] = ()
    fr_dumps: tuple[FrDump, ...] = ()

    @property
    def headline(self) -> str:
        """The one sentence on top (with a note when files could not be saved)."""
        return self.base_headline + not_saved_note(self.not_saved)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every finding: the analysis', the nodes', then ``not-saved`` when files were not saved."""
        lost = not_saved_finding(self.not_saved)
        return self.base_findings + ((lost,) if lost is not None else ())

    @property
    def suspects(self) -> tuple[Finding, ...]:
        """The findings of severity ``suspect``, in their order."""
        return suspects_of(self.findings)

    @property
    def found(self) -> bool:
        """True when a suspect was named (the CLI exits 3)."""
        return bool(self.suspects)

    @property
    def decided(self) -> bool:
        """False when the stacks could not decide between a hang and a slow step (no all-clear)."""
        return not any(f.kind is Kind.UNDECIDED for f in self.analysis.findings)

    @property
    def read_anything(self) -> bool:
        """At least one stack was read (False: the CLI exits 1)."""
        return self.analysis.readable and bool(self.analysis.ranks)

    @property
    def status(self) -> int:
        """The exit status of ``hangdbg dump``: 3 a suspect was named; 1 a node could not be read
        (the job was not seen whole), no stack could be read, or the stacks cannot decide (no
        all-clear); else 0."""
        if self.found:
            return 3
        return 0 if self.complete and self.read_anything and self.decided else 1

    def with_not_saved(self, lost: Sequence[NotSaved]) -> "StacksResult":
        """This result noting the files of its output directory that could not be written."""
        return replace(self, not_saved=tuple(lost))


@dataclass(frozen=True, slots=True)
class CollectResult:
    """What ``collect`` brought home.

    Attributes:
        out_dir: the directory the nodes' files were written to (``OUT/<host>/...``).
        nodes: what became of each node (its files, or why it could not be read).
        headline: the one sentence (the files and nodes, or the nodes that failed).
        findings: ``node-failed`` for every node that could not be read.
        garbled_lines: agent output lines that could not be read.
        not_saved: files that could not be written.
    """

    out_dir: str
    nodes: tuple[NodeResult, ...]
    headline: str
    findings: tuple[Finding, ...]
    garbled_lines: int
    not_saved: tuple[NotSaved, ...] = ()

    @property
    def files(self) -> int:
        """Files the nodes sent."""
        return sum(len(n.files) for n in self.nodes)

    @property
    def complete(self) -> bool:
        """Every node answered."""
        return not self.findings
