"""One catalog entry (frozen, no I/O) and its vocabularies.

The fields are those of ``docs/catalog.md``: an upstream message with its placeholders, what it
means, whose fault it is (:class:`Blame`), whether it can be a first failure (:class:`Role`), the
severity of the line read on its own, the action and the upstream source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

__all__ = ["Blame", "Role", "Syntax", "CatalogEntry", "ID_RE"]

ID_RE = re.compile(r"^[a-z0-9]+(?:\.[a-z0-9_-]+)+$")
"""The form of an entry id: the domain first, dotted (``nccl.duplicate-gpu``)."""


class Blame(str, Enum):
    """Whose fault a message like this usually is."""

    SELF = "self"  # the rank / process / host / GPU that printed it
    PEER = "peer"  # the printer is a victim: a peer or remote failed
    LAUNCH = "launch"  # the launch configuration (no rank, no node)
    ENVIRONMENT = "environment"  # a host's resource or setup (/dev/shm, limits, disk, libraries)
    HARDWARE = "hardware"  # a GPU, NIC or link fault
    NONE = "none"  # context only


class Role(str, Enum):
    """Where a message stands in a chain of failures."""

    ROOT = "root"  # can be the first failure
    CONSEQUENCE = "consequence"  # an echo of an earlier failure (timeouts, SIGTERM from the agent, aborts)
    CONTEXT = "context"  # not an error by itself (init complete, versions)


class Syntax(str, Enum):
    """How :attr:`CatalogEntry.format` is written (:mod:`hangdbg.catalog.pattern`)."""

    PRINTF = "printf"  # C conversions: %d %s %lx ...
    PYTHON = "python"  # str.format / f-string placeholders: {} {name} {x:.2f}
    LITERAL = "literal"  # plain text
    REGEX = "regex"  # a regular expression (needs an example)


class EntryPattern(Protocol):
    """What the catalog uses of an entry's regex: a compiled ``re.Pattern`` or the loader's
    :class:`~hangdbg.catalog.pattern.LazyPattern` (compiled on first use)."""

    @property
    def pattern(self) -> str: ...

    def match(self, text: str) -> re.Match[str] | None: ...


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One upstream message.

    Attributes:
        id: unique dotted id, domain first (:data:`ID_RE`).
        domain: the data file it came from (``nccl``, ``pytorch``, ``cuda``, ``system``, ``frameworks``).
        syntax: how ``format`` is written.
        format: the message as in the upstream source, with its placeholders (no line prefixes).
        source: ``owner/repo TAG path:LINE`` or an https documentation URL.
        meaning: what it means, one sentence.
        blame: whose fault it usually is.
        role: root, consequence or context.
        severity: ``suspect``, ``warning`` or ``info`` for the line read on its own.
        action: what to do ("" for context).
        versions: the upstream versions it was seen in (``first..last``), "" when not known.
        example: one line as printed (required for :attr:`Syntax.REGEX`).
        pattern: the regex, matched at the start of a message (set by the loader; a regex entry's is
            compiled at load, a format's on its first use).
        literal: the number of literal characters of ``format`` (its specificity).
        code: the enum value the entry's name stands for (``CUDA_ERROR_OUT_OF_MEMORY`` is 2), None for a message;
            lines that print only the number (``CUresult error result=2``) are looked up by it.
        rank_field: which captured placeholder (0-based) is the rank of the process the message is about, None
            when none is (torch.multiprocessing.spawn's ``process {} terminated with signal {}``: the index
            mp.spawn gave the process, its rank on one node in the ``mp.spawn(fn, nprocs=N)`` idiom).
        msgcode: the code the program prints in front of the message (Ascend CANN's ``EI0006: ``), "" when none:
            a line that carries the code is looked up by it (:meth:`~hangdbg.catalog.catalog.Catalog.match_code`).
        stall: for a progress message, the step that starts with it and can wait forever, and what it usually waits
            for ("" for other messages): a log without an error line that ends with this message is read with it.
    """

    id: str
    domain: str
    syntax: Syntax
    format: str
    source: str
    meaning: str
    blame: Blame
    role: Role
    severity: str
    action: str
    versions: str = ""
    example: str = ""
    pattern: EntryPattern = field(default=re.compile(""), compare=False, repr=False)
    literal: int = 0
    code: int | None = None
    rank_field: int | None = None
    msgcode: str = ""
    stall: str = ""
