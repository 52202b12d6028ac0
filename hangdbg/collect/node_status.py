"""The nodes of a fan-out (``dump --jobid/--hosts``, ``collect``) that could not be read, as findings.

A node that did not answer is never blamed by itself (the transport, the node or hangdbg's
install there may be at fault): it is a ``node-failed`` warning with the transport's reason, and
the command's exit status says the job was not seen whole.
"""

from __future__ import annotations

from typing import Sequence

from ..model import Evidence, Finding, Kind, Severity, SourceKind
from ..enums import NodeStatus

__all__ = ["node_findings"]


def node_findings(nodes: Sequence[tuple[str, NodeStatus, str | None]]) -> list[Finding]:
    """One ``node-failed`` warning per node ``(host, status, reason)`` that could not be read
    (``status.failed``)."""
    return [Finding(Kind.NODE_FAILED, f"node {host} could not be read: {status}" + (f": {reason}" if reason else ""),
                    hosts=(host,), severity=Severity.WARNING, source=SourceKind.NODES,
                    evidence=(Evidence(f"nodes/{host}.json", None, reason or status),),
                    action="check the node (is it up, is hangdbg installed there, can this host ssh/srun to it?)")
            for host, status, reason in nodes if status.failed]
