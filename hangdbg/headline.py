"""The headlines of hangdbg: the one sentence a command puts on top.

* :func:`headline`: findings of any kind (``report``, ``nccl``, ``logs``, ``fr``, ``gpu``,
  ``traces``, ``collect``): the most likely cause first, what else points at it, how many more
  suspects, the action; with no suspect, the first warning; else the all-clear sentence, which
  says what was read (never an all-clear when nothing was);
* :func:`source_headline`: :func:`headline` with the all-clear sentence of one reader (each
  reader says its own: ``Reader.all_clear``, in its kind's package under :mod:`hangdbg.evidence`);
* :func:`unread_headline`: nothing could be read;
* the sentences of the documents of ``dump`` (processes, nodes), ``collect`` and ``nccl split``.

The stack analysis makes its own (:func:`hangdbg.stacks.headline.stacks_headline`). Ground floor:
nothing here reads a file or imports a domain package; the command line only renders these sentences.
"""

from __future__ import annotations

from typing import Any, Sequence

from .model import Finding, Severity, SourceReport, suspects_of
from .enums import NodeStatus
from .rankset import rank_set, ranks_text

__all__ = ["headline", "source_headline", "unread_headline", "who", "cores_headline",
           "verdict_all_clear", "fanout_headline", "collect_headline", "split_headline", "processes_headline",
           "node_headline"]


def who(f: Finding) -> str:
    """``rank 3 on node2`` for a headline's first words; what the summary already says is left out."""
    low = f.summary.lower()
    parts = []
    if f.ranks and not low.startswith("rank"):
        parts.append(ranks_text(f.ranks))
    hosts = [h for h in f.hosts if h.lower() not in low]
    if hosts:
        parts.append("on " + ", ".join(hosts[:4]) + (" ..." if len(hosts) > 4 else ""))
    return " ".join(parts)


def headline(findings: Sequence[Finding], all_clear: str) -> str:
    """The sentence for ``findings`` ordered most likely cause first.

    Args:
        findings: suspects first (as :func:`hangdbg.evidence.verdict.build_verdict` or a reader
            orders them), then the others.
        all_clear: what to say when there is neither a suspect nor a warning; it must say what was
            read (``"no suspect in 12 NCCL records of 8 processes: ..."``).
    """
    suspects = suspects_of(findings)
    if not suspects:
        warnings = [f for f in findings if f.severity is Severity.WARNING]
        if warnings:
            n = len(warnings)
            return f"no suspect, but {n} warning{'s' if n != 1 else ''}; first: {warnings[0].summary}"
        return all_clear
    top = suspects[0]
    lead = who(top)
    text = f"{lead}: {top.summary}" if lead else top.summary
    # other kinds of evidence (another source) that name the same ranks or hosts
    others = [f for f in suspects[1:] if (set(f.ranks) & set(top.ranks) or set(f.hosts) & set(top.hosts))
              and (f.source is None or f.source != top.source)]
    if others:
        text += f" (also pointed at by: {', '.join(sorted({str(f.kind) for f in others}))})"
    rest = len(suspects) - 1 - len(others)
    if rest > 0:
        text += f"; {rest} more suspect finding{'s' if rest > 1 else ''}"
    if top.action:
        text += f". Action: {top.action}"
    return text


def source_headline(rep: SourceReport[Any], all_clear: str) -> str:
    """The headline of a command that reads one kind of evidence (``nccl summary``, ``logs``,
    ``fr``, ``gpu``, ``traces``); ``all_clear``: its reader's sentence for a report with no
    suspect and no warning (``Reader.all_clear``)."""
    if not rep.records:
        return unread_headline(len(rep.files), str(rep.kind))
    return headline(rep.findings, all_clear)


def unread_headline(n_files: int, what: str = "") -> str:
    """Nothing could be read: no file was recognised (the command exits 1)."""
    if not n_files:
        return "nothing could be read: no file under the paths given"
    kind = f" as {what}" if what else " by any reader"
    return f"nothing could be read: none of the {n_files} file{'s' if n_files != 1 else ''} was recognised{kind}"


def verdict_all_clear(n_files: int, stacks_headline_text: str | None) -> str:
    """``hangdbg report``'s all-clear: how many files, and the stack analysis' own sentence."""
    tail = stacks_headline_text or "nothing abnormal found"
    return f"no suspect in {n_files} files: {tail}"


def cores_headline(findings: Sequence[Finding], n_cores: int, n_files: int, stacks_headline_text: str) -> str:
    """``hangdbg core``: the cores' findings and their joint stack analysis (``n_cores`` read of
    ``n_files``)."""
    if not n_cores:
        return unread_headline(n_files, "a core file")
    return headline(findings, f"no crash in {n_cores} core file{'s' if n_cores != 1 else ''}: {stacks_headline_text}")


def processes_headline(host: str, ranks: Sequence[int]) -> str:
    """``OUT/processes.json`` of ``dump``: the processes taken for ranks."""
    return f"{len(ranks)} process{'es' if len(ranks) != 1 else ''} on {host} taken for {ranks_text(ranks)}"


def node_headline(host: str, status: NodeStatus, reason: str | None, ranks: Sequence[int], files: int) -> str:
    """``OUT/nodes/HOST.json``: what became of one node of the fan-out."""
    if status == NodeStatus.OK:
        what = f"{ranks_text(ranks)} dumped" if ranks else f"{files} file{'s' if files != 1 else ''} sent"
        return f"node {host}: {what}"
    return f"node {host}: {status}" + (f": {reason}" if reason else "")


def _nodes_note(failed: Sequence[tuple[str, NodeStatus]]) -> str:
    """`` (2 nodes could not be read: node3 unreachable, node4 timeout)``."""
    if not failed:
        return ""
    shown = ", ".join(f"{h} {status}" for h, status in failed[:4]) + (" ..." if len(failed) > 4 else "")
    return f" ({len(failed)} node{'s' if len(failed) != 1 else ''} could not be read: {shown})"


def fanout_headline(stacks_headline_text: str, failed: Sequence[tuple[str, NodeStatus]]) -> str:
    """``dump --jobid/--hosts``: the stack analysis' sentence and the nodes that could not be read
    (``(host, status)``): a job not seen whole never reads as an all-clear."""
    return stacks_headline_text + _nodes_note(failed)


def collect_headline(findings: Sequence[Finding], files: int, nodes: int, out: str) -> str:
    """``collect``: what came back, or the nodes that could not be read."""
    return headline(findings, f"{files} file{'s' if files != 1 else ''} from {nodes} node{'s' if nodes != 1 else ''} "
                              f"in {out}")


def split_headline(files: int, out: str, ranks: Sequence[int], without_rank: int, unattributed: int) -> str:
    """``nccl split``: the files written."""
    text = f"wrote {files} files to {out}: ranks {rank_set(ranks) if ranks else '-'}"
    if without_rank:
        text += f", {without_rank} processes without a rank (HOST.PID.log)"
    if unattributed:
        text += f", {unattributed} unattributed lines"
    return text


