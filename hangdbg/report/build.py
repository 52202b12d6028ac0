"""From the model to the documents of :mod:`hangdbg.report.document` (the JSON twin of every view).

Builders only: no I/O, no printing. The headline of each document comes from
:mod:`hangdbg.headline` (through the analysis, the verdict or :func:`hangdbg.evidence.registry.headline_of`).
"""

from __future__ import annotations

import socket
from dataclasses import fields, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

from .._version import __version__
from ..headline import cores_headline, node_headline, processes_headline
from ..outdir import NotSaved, not_saved_finding, not_saved_note
from ..model import (SCHEMA_VERSION, Analysis, Kind, Severity, Finding, Place, RankProcess, SourceReport, TreeNode,
    Verdict, by_severity)
from ..frames import Frame
from .document import (CollectDocument, CoreDocument, CoreEntry, CoreWritten, FrDocument, GpuDocument, ClassEntry,
    LogsDocument, NcclDocument, NodeDocument, NodeEntry, PlaceEntry, ProcessList, RankEntry, ReportDocument,
    SourceSection, SplitDocument, SplitRow, StacksDocument, StacksSection, ThreadEntry, TracesDocument, TreeEntry,
    WatchDocument)

if TYPE_CHECKING:  # annotations only: importing check/ and collect.fanout costs a command that needs neither ~0.1 s
    from ..check.plan import CheckResult
    from ..collect.fanout import NodeResult
    from ..collect.result import CollectResult, StacksResult
    from ..evidence.core.reader import CoreReading
    from ..watch.plan import WatchResult

__all__ = ["with_not_saved", "header", "stacks_section", "source_section", "stacks_document", "analysis_document", "report_document", "source_document",
           "core_document", "collect_document", "split_document", "process_list", "node_document", "watch_document",
           "check_document"]

_SOURCE_DOCUMENTS = {"nccl summary": NcclDocument, "logs": LogsDocument, "fr": FrDocument, "gpu": GpuDocument,
                     "traces": TracesDocument}


def header(command: str, findings: Sequence[Finding], headline: str) -> dict[str, Any]:
    """The fields every document starts with (``found`` from the findings)."""
    return {
        "schema_version": SCHEMA_VERSION, "tool": "hangdbg", "version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": command,
        "found": any(f.is_suspect for f in findings), "headline": headline, "findings": tuple(findings),
    }


def _place(p: Place | None) -> PlaceEntry | None:
    if p is None:
        return None
    return PlaceEntry(p.kind, p.collective, p.call_site, p.thread, p.describe(), p.phase)


def _tree(root: TreeNode) -> tuple[TreeEntry, ...]:
    """The tree as a flat list in depth-first order (iterative: stacks can be thousands deep)."""
    out: list[TreeEntry] = []
    todo: list[tuple[TreeNode, int | None, int]] = [(root, None, 0)]
    while todo:
        n, parent, depth = todo.pop()
        me = len(out)
        out.append(TreeEntry(me, parent, depth, tuple(sorted(n.ranks)), len(n.ranks), n.frame))
        todo.extend((c, me, depth + 1) for c in reversed(n.children))
    return tuple(out)


class _StackTable:
    """Distinct stacks, numbered in order of first use. Looked up by the identity of the frames
    tuple first (the parser shares one tuple per distinct thread body), then by value."""

    def __init__(self) -> None:
        self.stacks: list[tuple[Frame, ...]] = []
        self._by_id: dict[int, int] = {}
        self._by_value: dict[tuple[Frame, ...], int] = {}

    def index(self, frames: tuple[Frame, ...]) -> int:
        i = self._by_id.get(id(frames))
        if i is None:
            i = self._by_value.get(frames)
            if i is None:
                i = self._by_value[frames] = len(self.stacks)
                self.stacks.append(frames)
            self._by_id[id(frames)] = i  # the analysis keeps every frames tuple alive meanwhile
        return i


def stacks_section(a: Analysis) -> StacksSection:
    """The stack analysis as a document section."""
    progressing = set(a.progressing)
    waits = a.waits
    edges_of: dict[int, tuple[int, ...]] = {}
    for i, e in enumerate(a.edges):
        single = (i,)
        for w in e.waiters:
            edges_of[w] = (*edges_of[w], i) if w in edges_of else single
    table = _StackTable()
    entries: dict[int, PlaceEntry | None] = {}  # one entry per Place object (ranks of a class share theirs)

    def place(p: Place | None) -> PlaceEntry | None:
        got = entries.get(id(p), entries)
        if got is entries:
            got = entries[id(p)] = _place(p)
        return got  # type: ignore[return-value]

    ranks = tuple(RankEntry(d.rank, d.host, d.pid, d.local_rank, d.world_size, d.rank_source, d.error,
                            place(a.places.get(d.rank)), d.rank in progressing, len(d.samples), d.steps,
                            waits.get(d.rank), edges_of.get(d.rank, ()),
                            tuple(ThreadEntry(t.thread_id, t.name, t.status, table.index(t.frames)) for t in d.threads),
                            d.proc,
                            tuple(round(t, 3) for t in d.sample_times))
                  for d in a.ranks)
    classes = tuple(ClassEntry(c.ranks, len(c.ranks), c.thread, _place(c.place), c.frames)  # type: ignore[arg-type]
                    for c in a.classes)
    return StacksSection(a.headline, a.missing_ranks, a.progressing, a.unreadable, classes, ranks, _tree(a.tree), a.edges,
                         tuple(table.stacks))


def stacks_document(result: StacksResult) -> StacksDocument:
    """The document of ``dump``, ``analyze`` or ``demo``: the same result the console view shows
    (:func:`hangdbg.report.console.render_stacks`)."""
    return StacksDocument(**header(result.command, result.findings, result.headline),
                          collector_host=socket.gethostname(), out_dir=result.out_dir, inputs=result.inputs,
                          garbled_lines=result.garbled_lines, stacks=stacks_section(result.analysis),
                          nodes=tuple(node_entry(n) for n in result.nodes),
                          cores=tuple(CoreWritten(c.rank, c.pid, c.path, c.size, c.seconds, c.error) for c in result.cores),
                          ras=result.ras, sources=result.sources)


def analysis_document(a: Analysis, command: str) -> StacksDocument:
    """The document of a bare analysis (what it says, nothing the command added)."""
    from ..collect.result import StacksResult  # imported where used: the reader commands need none of collect/
    return stacks_document(StacksResult(command, a, a.headline, a.findings))


def source_section(rep: SourceReport) -> SourceSection:
    """A reader's report without its findings (those are the document's)."""
    return SourceSection(rep.kind, rep.files, rep.records, rep.lines_read, rep.lines_skipped, rep.errors, rep.ranks,
                         rep.facts)


def source_document(rep: SourceReport, command: str, inputs: Sequence[str], headline: str | None = None) -> Any:
    """The document of a command that reads one kind of evidence (``nccl summary``, ``logs``,
    ``fr``, ``gpu``, ``traces``); ``headline``: the report's (default: from its kind's reader, which imports
    every reader - a command that holds its reader passes it, and starts faster)."""
    if headline is None:
        from ..evidence.registry import headline_of  # every reader: only the commands that read evidence import them

        headline = headline_of(rep)
    cls = _SOURCE_DOCUMENTS[command]
    return cls(**header(command, rep.findings, headline), inputs=tuple(inputs), source=source_section(rep))


def report_document(v: Verdict, inputs: Sequence[str], out_dir: str | None = None) -> ReportDocument:
    """The document of ``hangdbg report``."""
    return ReportDocument(**header("report", v.findings, v.headline), inputs=tuple(inputs), out_dir=out_dir,
                          sources=tuple(source_section(s) for s in v.sources), ranks=v.rank_states, files=v.files,
                          unparsed=v.unparsed, stacks=stacks_section(v.analysis) if v.analysis is not None else None)


def core_document(readings: Sequence[CoreReading], report: SourceReport, analysis: Analysis,
                  inputs: Sequence[str]) -> CoreDocument:
    """The document of ``hangdbg core`` (what ``collect`` brings back per core file): the cores'
    own findings (``source`` ``core``) and those of their joint stack analysis (``source``
    ``stacks``; made with ``live=False``: a rank without a core is not missing, it left no core),
    most important first."""
    findings = by_severity(list(report.findings) + list(analysis.findings))
    from ..evidence.core.reader import core_fact  # imported where used: the reader commands need no core reader
    headline = cores_headline(findings, report.records, len(readings), analysis.headline)
    cores = []
    for c in readings:
        d, fact = c.dump, core_fact(c)
        cores.append(CoreEntry(**{f.name: getattr(fact, f.name) for f in fields(fact)},
                               local_rank=d.local_rank, world_size=d.world_size, python=d.python, cmdline=d.cmdline,
                               error=d.error, threads=d.threads))
    return CoreDocument(**header("core", findings, headline), inputs=tuple(inputs), source=source_section(report),
                        cores=tuple(cores), stacks=stacks_section(analysis))


def collect_document(result: CollectResult) -> CollectDocument:
    """The document of ``hangdbg collect``."""
    return CollectDocument(**header("collect", result.findings, result.headline), out_dir=result.out_dir,
                           nodes=tuple(node_entry(n) for n in result.nodes), garbled_lines=result.garbled_lines)


def split_document(inputs: Sequence[str], out_dir: str, files: Sequence[SplitRow], unattributed: int,
                   headline: str) -> SplitDocument:
    """The document of ``hangdbg nccl split``."""
    return SplitDocument(**header("nccl split", (), headline), inputs=tuple(inputs), out_dir=out_dir,
                         files=tuple(files), unattributed_lines=unattributed)


def process_list(command: str, processes: Sequence[RankProcess]) -> ProcessList:
    """``OUT/processes.json``."""
    host = socket.gethostname()
    return ProcessList(**header(command, (), processes_headline(host, [p.rank for p in processes])),
                       collector_host=host, processes=tuple(processes))


def node_entry(n: NodeResult) -> NodeEntry:
    """A node's result as it appears in the documents."""
    return NodeEntry(n.host, n.status, n.reason, tuple(n.ranks), tuple(n.files), n.seconds, n.raw_dir)


def node_document(command: str, node: NodeEntry) -> NodeDocument:
    """``OUT/nodes/HOST.json``: one node of the fan-out."""
    from ..collect.node_status import node_findings
    findings = node_findings([(node.host, node.status, node.reason)])
    return NodeDocument(**header(command, findings, node_headline(node.host, node.status, node.reason, node.ranks,
                                                                  len(node.files))), node=node)


def watch_document(result: WatchResult) -> WatchDocument:
    """The document of ``hangdbg watch``: one ``stall`` finding per stall, naming the ranks its
    dump blamed (a suspect) or, when the dump named none, a warning saying what the dump said."""
    stalls = result.stalls
    findings = []
    for st in stalls:
        said = st.headline or "the dump could not be taken"
        findings.append(Finding(
            Kind.STALL, f"stall detected at {st.detected} ({st.reason}); its dump: {said}", ranks=tuple(st.suspects),
            severity=Severity.SUSPECT if st.suspects else Severity.WARNING,
            action=f"read {st.dump_dir}/hangdbg.json (or `hangdbg analyze {st.dump_dir}`)"))
    strag = result.stragglers
    findings += list(strag.findings) if strag is not None else []
    if stalls:
        last = stalls[-1]
        headline = (("watch interrupted after " if result.ended == "interrupted" else "")
                    + f"{len(stalls)} stall(s); the last at {last.detected} ({last.reason}): "
                    f"{last.headline or 'the dump could not be taken'}")
        if result.ended == "max-stalls":
            headline += f"; the watch ended at the cap of {len(stalls)} stall(s) (--max-stalls)"
    else:
        headline = {"job-ended": "the job ended without a stall", "interrupted": "watch interrupted; no stall seen",
                    "running": "watching; no stall so far", "once": "no stall", "max-stalls": "no stall"}[result.ended]
    if strag is not None and strag.findings:
        headline += f"; {strag.summary}"
    return WatchDocument(**header("watch", by_severity(findings), headline), targets=result.targets,
                         out_dir=result.out_dir, signals=result.signals, stall_seconds=result.stall,
                         interval_seconds=result.interval, observations=result.observations,
                         ended=result.ended,
                         stalls=stalls, stragglers=strag, warnings=result.warnings)


def check_document(result: CheckResult) -> Any:
    """The document of ``hangdbg check`` from its trials (:class:`hangdbg.check.blame.Trial`,
    the first on every node) and its verdict (:func:`hangdbg.check.verdict.check_verdict`)."""
    from ..check.blame import blame, slots_text
    from .document import CheckDocument, TrialEntry

    trials, verdict = result.trials, result.verdict
    first = trials[0]
    entries = []
    for t in trials:
        name = f"{t.number:02d}-{t.purpose.replace(' ', '-')}"
        entries.append(TrialEntry(t.number, t.purpose, tuple(f"{h}:{slots_text(s)}" for h, s in t.layout), t.ifname,
                                  t.master, t.passed, t.failed_step, blame(t).why, round(t.seconds, 3),
                                  f"trials/{name}/messages.jsonl"))
    return CheckDocument(**header("check", verdict.findings, verdict.headline), targets=result.targets,
                         backend=result.backend, out_dir=result.out_dir, world_size=len(first.ranks), bad_nodes=verdict.bad_nodes,
                         bad_gpus=verdict.bad_gpus, exclude=verdict.exclude, bandwidth=verdict.bandwidth,
                         nodes=first.nodes, ranks=first.ranks, trials=tuple(entries))


def with_not_saved(doc: Any, lost: Sequence[NotSaved]) -> Any:
    """``doc`` with a ``not-saved`` warning (and a headline note) when files of ``lost`` could not
    be written; unchanged otherwise, or when it has one already. ``found`` (the exit status) is
    not changed."""
    finding = not_saved_finding(lost)
    if finding is None or any(f.kind is Kind.NOT_SAVED for f in doc.findings):
        return doc
    return replace(doc, findings=tuple(doc.findings) + (finding,), headline=doc.headline + not_saved_note(lost))
