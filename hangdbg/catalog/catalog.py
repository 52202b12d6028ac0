"""Loading the catalog's package data and looking messages up in it.

:func:`load` reads ``data/*.toml`` once (``tomllib``; a broken file raises
:class:`CatalogError`, which the tests catch: shipped data is never broken at run time).
:meth:`Catalog.match` finds the most specific entry whose pattern matches a message from its
start, then offers the text its placeholders captured to the catalog again, so that
``NCCL error: unhandled cuda error`` is read as PyTorch's wrapper around NCCL's
``ncclUnhandledCudaError`` text (:attr:`Match.inner`).
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from itertools import islice
from typing import Any, Iterable, Iterator

from .entry import ID_RE, Blame, CatalogEntry, EntryPattern, Role, Syntax
from .literals import cut_pattern as _cut_pattern
from .literals import head as _head
from .literals import head_needed as _head_needed
from .literals import lead_cut_pattern as _lead_cut_pattern
from .literals import literal_parts as _literal_parts
from .literals import longest_run as _longest_run
from .literals import shared_words as _shared_words
from .pattern import FormatError, LazyPattern, compile_format, literal_length

__all__ = ["Catalog", "CatalogError", "Match", "cuda_named", "load", "parse_entries", "SEVERITIES", "MIN_LITERAL"]

SEVERITIES = ("suspect", "warning", "info")
MIN_LITERAL = 10
"""Fewest literal characters an entry's format may have (``WARN("%s", msg)`` says nothing)."""
WHOLE_LINE_MIN_LITERAL = 6
"""Fewest for a regex entry marked ``whole_line`` that ends in ``$``: it matches only a message that is
all of it (the shell's bare ``Killed``), never the start of a longer one."""
_REQUIRED = ("id", "syntax", "format", "source", "meaning", "blame", "role", "severity", "action")
_WORD = re.compile(r"[a-z0-9]+")
_MAX_DEPTH = 3


class CatalogError(ValueError):
    """A catalog data file that does not follow ``docs/catalog.md`` (names the file and entry)."""


@dataclass(frozen=True, slots=True)
class Match:
    """An entry that matched a message.

    Attributes:
        entry: the entry whose pattern matched.
        fields: the texts its ``%s`` / ``{}`` placeholders captured, in order.
        inner: the match of a captured text, when one is itself a catalog message (the most
            specific reading: ``CUDA error: {}`` -> ``an illegal memory access was encountered``).
    """

    entry: CatalogEntry
    fields: tuple[str, ...] = ()
    inner: "Match | None" = None

    @property
    def innermost(self) -> CatalogEntry:
        """The most specific entry of the chain (the inner one when there is one)."""
        m = self
        while m.inner is not None:
            m = m.inner
        return m.entry

    @property
    def chain(self) -> tuple[CatalogEntry, ...]:
        """Every entry of the chain, outermost first."""
        out = []
        m: Match | None = self
        while m is not None:
            out.append(m.entry)
            m = m.inner
        return tuple(out)


_LEAD = " \t[('\"`<"


def _needed(e: CatalogEntry) -> str:
    """The longest run of literal text (lowercase) that every message of ``e`` holds, "" when none
    can be told (a regex with alternatives): a cheap substring test before the regex."""
    if e.syntax is Syntax.REGEX:
        if "|" in e.format or "?" in e.format or "*" in e.format or "{0" in e.format:
            return ""
        parts = re.split(r"\\.|[\[\]().+^$]", e.format)
    else:
        parts = _literal_parts(e)
    best = _longest_run(parts)
    return best if len(best) >= 4 else ""


def _first_word(text: str) -> str:
    """The first word (lowercase letters and digits) of ``text`` after leading brackets and
    quotes; "" when it starts with something else (a placeholder)."""
    m = _WORD.match(text[:80].lstrip(_LEAD).lower())
    return m.group(0) if m is not None else ""


_NCCL_TAG = re.compile(r"([A-Za-z][A-Za-z0-9_/]*) ?: (?=[A-Za-z])")
"""The subsystem or function tag that leads many NCCL ``WARN`` formats (``NET/IB : ``,
``ncclSocketInit: ``): NCCL renames it between releases while the text after it stays
(``Net : Socket creation failed : %s`` in 2.3-2.15 src/include/socket.h and misc/socket.cc,
``ncclSocketInit: Socket creation failed : %s`` in 2.16-2.23, neither tag in some builds)."""


def _untagged(e: CatalogEntry) -> CatalogEntry | None:
    """``e`` read without its NCCL subsystem tag (:data:`_NCCL_TAG`): the same entry (id, meaning,
    source) whose pattern is the format's text after the tag, when that text still has
    :data:`MID_LINE_LITERAL` literal characters; None for other entries."""
    if e.domain != "nccl" or e.syntax is Syntax.REGEX:
        return None
    m = _NCCL_TAG.match(e.format)
    if m is None:
        return None
    tail = e.format[m.end():]
    lit = literal_length(tail, e.syntax)
    if lit < MID_LINE_LITERAL:
        return None
    return replace(e, format=tail, pattern=LazyPattern(tail, e.syntax), literal=lit)


_REGEX_HEAD = re.compile(r"([A-Za-z][A-Za-z0-9]*)(?: |:(?:\\s|\s|\\t|\t))")  # a word, then a blank or ":\s" (a row's label)
_ESCAPED = re.compile(r"\\.")


def _regex_word(fmt: str) -> str:
    """The first word of a regex format that starts with a plain word and a blank (or a colon and white space: a
    report row's label) and has no alternative at its top level (``Using IP address of  for node ...``), lowercase;
    "" otherwise."""
    m = _REGEX_HEAD.match(fmt)
    if m is None:
        return ""
    depth = 0
    for ch in _ESCAPED.sub("", fmt):  # escaped characters are literals: no group, no alternative
        depth += (ch == "(") - (ch == ")")
        if ch == "|" and depth == 0:
            return ""
    return m.group(1).lower()


class Catalog:
    """The entries, indexed by the first word of their literal text.

    An NCCL entry is also indexed without its subsystem tag (:func:`_untagged`), so a line of a
    release that tagged the message otherwise (or not at all) still finds it; the tagged format has
    more literal characters, so it wins where both match."""

    def __init__(self, entries: Iterable[CatalogEntry]) -> None:
        self.entries: tuple[CatalogEntry, ...] = tuple(entries)
        self._by_word: dict[str, list[CatalogEntry]] = {}
        self._always: list[CatalogEntry] = []
        by_tail: dict[str, list[CatalogEntry]] = {}
        for e in self.entries:
            if (a := _untagged(e)) is not None:
                by_tail.setdefault(a.format, []).append(a)
        # a text that several tags print with different meanings says nothing without its tag
        aliases = [a for same in by_tail.values() if len({a.meaning for a in same}) == 1 for a in same]
        for e in (*self.entries, *aliases):
            key = _first_word(e.format) if e.syntax is not Syntax.REGEX else _regex_word(e.format)
            rest = e.format.lstrip(_LEAD)[len(key):len(key) + 1]
            if key and (rest in ("%", "{") or (e.syntax is Syntax.PRINTF and rest == "_")):
                key = ""  # a placeholder glued to the first word (nvmlInit%s): no first word to index by
            (self._by_word.setdefault(key, []) if key else self._always).append(e)
        for lst in (*self._by_word.values(), self._always):
            lst.sort(key=lambda e: -e.literal)
        self._names = {e.format: e for e in self.entries if e.syntax is Syntax.LITERAL and _NAME.fullmatch(e.format)}
        self._need = {id(e): _needed(e) for e in (*self.entries, *aliases)}  # by object: an alias shares its id
        self._codes = {(e.id.rsplit(".", 1)[0], e.code): e for e in self.entries if e.code is not None}
        self._heads: dict[int, str] = {}  # id(entry) -> _head_needed(entry), filled on first use
        self._inside: dict[str, list[CatalogEntry]] | None = None  # filled on first use (match_inside)
        self._msgcodes: dict[str, list[CatalogEntry]] = {}
        for e in self.entries:
            if e.msgcode:
                self._msgcodes.setdefault(e.msgcode, []).append(e)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, entry_id: str) -> CatalogEntry:
        """The entry of ``entry_id``.

        Raises:
            KeyError: no such entry.
        """
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise KeyError(entry_id)

    def by_code(self, family: str, code: int) -> Match | None:
        """The entry of an enum's value: ``by_code("cuda.curesult", 2)`` is ``CUDA_ERROR_OUT_OF_MEMORY``'s, for
        a line that prints the number only. ``family`` is the entry id without its last part; None when
        no entry of that family has the value."""
        e = self._codes.get((family, code))
        return Match(e, (), None) if e is not None else None

    def search(self, message: str) -> Match | None:
        """:meth:`match` at the start of ``message``, else after each of its first separators
        (``: ``, `` - ``, ``; ``, a quote, a bracket), for an entry of at least
        :data:`MID_LINE_LITERAL` literal characters: an upstream message behind an unknown prefix
        (``THCudaCheck FAIL file=... line=66 error=35 : CUDA driver version is insufficient ...``)."""
        return _search(self, message)

    def match_code(self, msgcode: str, message: str) -> Match | None:
        """The entry of a message printed with its code (``msgcode``: Ascend CANN's ``EI0006``): among the entries
        of that code, the one whose format matches ``message`` (or ``CODE: message``), else the code's first
        entry (its documented meaning, from a release that worded the message otherwise); None for a code no
        entry has."""
        entries = self._msgcodes.get(msgcode)
        if not entries:
            return None
        text = message.strip()
        for e in sorted(entries, key=lambda e: -e.literal):
            m = e.pattern.match(text) or e.pattern.match(f"{msgcode}: {text}")
            if m is not None:
                return Match(e, tuple(v for k, v in sorted(m.groupdict().items()) if k.startswith("s") and v), None)
        return Match(entries[0], (), None)

    def match_cut(self, message: str) -> Match | None:
        """The entry a message cut where an excerpt ended matches as far as it goes: the last line
        of a paste (``Unable to resolve hostname to a (local) address. Using the loopback``,
        ``Cuda failure 999 'unknown error``). Either the format's literal head starts with
        ``message``, or ``message`` is a start of a message of the format (:func:`~hangdbg.catalog.
        pattern.compile_cut`), whose captured text is looked up again as :meth:`match` does.
        ``message`` needs :data:`CUT_MIN` characters; the most literal characters win."""
        text = " ".join(message.split())
        if len(text) < CUT_MIN:
            return None
        best: CatalogEntry | None = None
        fields: tuple[str, ...] = ()
        for e in self._by_word.get(_first_word(text), []):
            if best is not None and e.literal <= best.literal:
                break
            if e.syntax is Syntax.REGEX:
                continue
            head = _head(e)
            if len(head) > len(text) and head.startswith(text):
                best, fields = e, ()
                continue
            if len(head) < CUT_HEAD_MIN or not text.lstrip("'\"`").startswith(
                    head.replace("{{", "{").replace("}}", "}") if e.syntax is Syntax.PYTHON else head):
                continue  # the cut pattern starts with the whole head (quotes aside): no need to compile it
            m = _cut_pattern(e).fullmatch(text)
            if m is not None:
                best = e
                fields = tuple(v for k, v in sorted(m.groupdict().items()) if k.startswith("s") and v)
        if best is None:
            return None
        inner = next((i for f in fields for t in dict.fromkeys((f.strip(), f.strip(" '\"`()[]")))
                      if (i := self.match(t, 1)) is not None and i.entry is not best), None)
        return Match(best, fields, inner)

    def match_inside(self, message: str) -> Match | None:
        """The entry whose message starts inside ``message`` at no separator: its literal head of
        :data:`INSIDE_MIN` characters or more is in the text, glued to what comes before it (processes that
        wrote into one line at once: ``OutOfMemoryErrorOutOfMemoryError.: : OutOfMemoryErrorCUDA out of memory.
        Tried to allocate ...``), and its pattern matches from there. Candidates come from the words of
        ``message`` (each entry is indexed by its head's second word, the first being the one a glue hides); the
        most literal characters win; never an info entry. A last resort for an error line no other lookup reads."""
        text = " ".join(message.split())
        if len(text) < INSIDE_MIN:
            return None
        if self._inside is None:  # entries by the second word of their head: the first may be glued in a line
            self._inside = {}
            for e in self.entries:
                words = _WORD.findall(_head(e).lower())
                if e.severity != "info" and len(words) >= 2 and len(_head(e)) >= INSIDE_MIN:
                    self._inside.setdefault(words[1], []).append(e)
        best: tuple[CatalogEntry, re.Match[str]] | None = None
        for word in dict.fromkeys(_WORD.findall(text.lower())):
            for e in self._inside.get(word, []):
                if best is not None and e.literal <= best[0].literal:
                    continue
                at = text.find(_head(e))
                if at > 0 and (m := e.pattern.match(text[at:])) is not None:
                    best = (e, m)
        if best is None:
            return None
        e, m = best
        return Match(e, tuple(v for k, v in sorted(m.groupdict().items()) if k.startswith("s") and v), None)

    def match_head(self, message: str) -> Match | None:
        """The entry whose literal head (its text before the first placeholder) and ``message`` start with the same
        :data:`HEAD_MIN` characters or more, up to a word's end, when what follows differs: a paste that shortened
        or reworded the rest (``Failed to bind NVLink SHARP (NVLS) Multicast memory: CUDA error 401`` for NCCL's
        ``... memory of size %ld : CUDA error %d '%s'``). The longest shared start wins; no field is captured. A
        last resort for an error line no other lookup reads."""
        text = " ".join(message.split())
        if len(text) < HEAD_MIN:
            return None
        best: CatalogEntry | None = None
        most = HEAD_MIN - 1
        for e in self._by_word.get(_first_word(text), []):
            if e.severity == "info":
                continue  # an error line read this loosely is never taken for a harmless one
            n = _shared_words(text, _head(e))
            if n > most or (n == most and best is not None and e.literal > best.literal):
                best, most = e, n
        return Match(best) if best is not None else None

    def match_hidden(self, message: str) -> Match | None:
        """The entry whose message starts with ``message``, the part of a line before a value the paste hid
        (``... at node (...) over the last time period``: the caller cuts at the ``(...)``). Like
        :meth:`match_cut`, but formats that start with a placeholder count too (``%d Workers (tasks / actors)
        killed due to memory pressure (OOM), ...``), so ``message`` must show :data:`HIDDEN_MIN` characters
        that are not captured by a placeholder, and the entry must have :data:`MID_LINE_LITERAL` literal ones."""
        text = " ".join(message.split())
        if len(text) < HIDDEN_MIN:
            return None
        best: CatalogEntry | None = None
        low = text.lower()
        for e in (*self._by_word.get(_first_word(text), []), *self._always):
            if e.syntax is Syntax.REGEX or e.literal < MID_LINE_LITERAL or (best is not None and e.literal <= best.literal):
                continue
            head = self._heads.get(id(e))
            if head is None:
                head = self._heads[id(e)] = _head_needed(e)
            if head not in low:  # the head's literal must be there whole: a cheap test first
                continue
            m = _lead_cut_pattern(e).fullmatch(text)
            if m is not None and len(text) - sum(len(v) for v in m.groupdict().values() if v) >= HIDDEN_MIN:
                best = e
        return Match(best, (), None) if best is not None else None

    def match(self, message: str, _depth: int = 0, indexed_only: bool = False) -> Match | None:
        """The most specific entry matching ``message`` from its start, with its inner match.

        Among the entries that match, the one with the most literal characters wins (a longer
        format says more). Returns None when none matches. ``indexed_only``: only the entries
        whose format starts with the message's first word (a quick look at a line that holds no
        error word; the formats that start with a placeholder or are regexes are skipped).
        """
        text = message.strip()
        if not text:
            return None
        cands = self._by_word.get(_first_word(text), [])
        best: tuple[CatalogEntry, re.Match[str]] | None = None
        low = text.lower()
        need = self._need
        for group in ((cands,) if indexed_only else (cands, self._always)):
            for e in group:
                if best is not None and e.literal <= best[0].literal:
                    break
                if need[id(e)] not in low:  # a text the message must hold (a C substring test first)
                    continue
                m = e.pattern.match(text)
                if m is not None:
                    best = (e, m)
                    break
        if best is None:
            return None
        e, m = best
        fields = tuple(v for k, v in sorted(m.groupdict().items()) if k.startswith("s") and v)
        inner = None
        if _depth < _MAX_DEPTH:
            for f in fields:
                for text in dict.fromkeys((f.strip(), f.strip(" '\"`()[]"))):
                    inner = self.match(text, _depth + 1)
                    if inner is not None and inner.entry is not e and (_may_nest(e, inner.entry) or (
                            inner.inner is not None and _chain_literal(inner) >= MID_LINE_LITERAL)):
                        # (a short wrapper read through to a specific message: "CUDA error: {}" -> an illegal access)
                        break
                    inner = None
                if inner is not None:
                    break
        return Match(e, fields, inner)


def _may_nest(outer: CatalogEntry, inner: CatalogEntry) -> bool:
    """Whether ``inner`` may be the reading of a text ``outer`` captured: a message specific enough to be
    told anywhere (:data:`MID_LINE_LITERAL` literal characters), or a shorter one of a domain the outer
    format names (``CUDA error: {}`` -> ``unknown error`` is CUDA's; a network plugin's ``Error: %s`` ->
    ``unknown error`` is libfabric's, not CUDA's); never a ``whole_line`` entry, shorter than any other
    (mpirun's ``exited on signal %d (%s)`` -> ``Killed`` is strsignal's text, not the shell's report)."""
    if inner.literal < MIN_LITERAL:  # a whole_line entry (the shell's bare "Killed"): a whole line, never a field
        return False
    return inner.literal >= MID_LINE_LITERAL or inner.domain == outer.domain or inner.domain in outer.format.lower()


_SEPARATORS = re.compile(r"(?::|\s-|;|\]|\)|,)\s+|\s['\"`(\[]|\.\s+(?=[A-Z])|=['\"]")  # also a sentence's end, a quoted value
INSIDE_MIN = 24
"""Fewest literal characters of an entry's head that :meth:`Catalog.match_inside` finds glued inside a line."""
CUT_MIN = 20
"""Fewest characters of a cut line that :meth:`Catalog.match_cut` looks up."""
HIDDEN_MIN = 30
"""Fewest characters a message cut where a paste hid a value must show of its format's literal text
(:meth:`Catalog.match_hidden`)."""
CUT_HEAD_MIN = 8
"""Fewest characters of literal head a format needs before a cut message is matched past it."""


HEAD_MIN = 40
"""Fewest characters of a format's literal head that :meth:`Catalog.match_head` takes as the message."""
MID_LINE_LITERAL = 16
"""Fewest literal characters of an entry matched after the start of a message (:meth:`Catalog.search`)."""
_MAX_TRIES = 8
_ERROR_COLON = re.compile(r"\b(?:error|Error|ERROR|fatal|FATAL|Fatal)\b:\s+")
"""An error word and its colon: a message starts after it (argparse's ``prog: error: MSG``, glibc's ``error()``, Slurm's
``srun: error: MSG``), looked for beyond the first separators of a line that lost its newlines."""


_QUOTED = re.compile(r"'([^'\n]{16,400})'|\"([^\"\n]{16,400})\"")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{9,}")
"""An entry whose whole format is one identifier (an enum name: ``CUDA_ERROR_OUT_OF_MEMORY``,
``cudaErrorIllegalAddress``) is found anywhere in a message, as a whole word."""


_HIP = re.compile(r"\bHIP\b|\bhip(?=[A-Z])|(?<=[a-z])Hip(?=[A-Z])")
_CUDA_OF = {"HIP": "CUDA", "hip": "cuda", "Hip": "Cuda"}


def cuda_named(message: str) -> str:
    """``message`` with the names hipify gave CUDA's undone (``HIP initialization``, ``hipGetDeviceCount``,
    ``NumHipDevices``): a ROCm build of PyTorch prints CUDA's messages so renamed (the HIPIFY tool's mapping,
    cuda -> hip in identifiers and texts; HIP's ``hipError_t`` mirrors ``cudaError_t`` name for name, ROCm HIP
    include/hip/hip_runtime_api.h, so ``hipErrorNoDevice`` is read as ``cudaErrorNoDevice``); ``message`` itself
    when it names no HIP."""
    return _HIP.sub(lambda h: _CUDA_OF[h.group(0)], message) if "ip" in message else message


def _chain_literal(m: Match) -> int:
    """The literal characters a match and the matches of its fields hold together: a short head read through to a
    specific message ("...: CUDA error: out of memory" is "CUDA error: " and "out of memory") is as specific as one
    entry of that length."""
    n, cur = 0, m  # type: int, Match | None
    while cur is not None:
        n, cur = n + cur.entry.literal, cur.inner
    return n


def _search(cat: "Catalog", message: str) -> Match | None:
    m = _search_once(cat, message)
    if m is None and (renamed := cuda_named(message)) != message:  # a ROCm build's message
        m = _search_once(cat, renamed)
    return m


def _after_marks(cat: "Catalog", message: str, marks: Iterator[re.Match[str]]) -> Match | None:
    """The first long enough entry (:data:`MID_LINE_LITERAL`) matching right after one of the first ``marks``."""
    for mark in islice(marks, _MAX_TRIES):
        m = cat.match(message[mark.end():])
        if m is not None and _chain_literal(m) >= MID_LINE_LITERAL:
            return m
    return None


def _search_once(cat: "Catalog", message: str) -> Match | None:
    m = cat.match(message)
    if m is not None:
        return m
    m = _after_marks(cat, message, _SEPARATORS.finditer(message[:2000])) or _after_marks(
        cat, message, _ERROR_COLON.finditer(message[:4000]))  # "prog: error: MSG" deep in a glued line
    if m is not None:
        return m
    for q in _QUOTED.finditer(message[:2000]):  # a message quoted inside another (a repr: message='...')
        m = cat.match(q.group(1) or q.group(2))
        if m is not None and m.entry.literal >= MID_LINE_LITERAL:
            return m
    if cat._names:
        for word in _NAME.finditer(message[:2000]):
            e = cat._names.get(cuda_named(word.group(0)))
            if e is not None and not message[word.end():word.end() + 1].isalnum():
                return Match(e)
    return None


def parse_entries(doc: dict[str, Any], name: str, checked: bool = True) -> list[CatalogEntry]:
    """The entries of one parsed data file.

    ``checked=False`` (the JSON twin, written only from data that passed every check) skips building the
    formats' regexes and matching the regex entries' examples: both happen on first use.

    Raises:
        CatalogError: a missing key, an unknown blame/role/severity/syntax, a bad id, a format
            that does not compile or has fewer than :data:`MIN_LITERAL` literal characters, a
            regex entry without an example its pattern matches.
    """
    domain = str(doc.get("domain") or name)
    out = []
    for i, raw in enumerate(doc.get("entry", [])):
        where = f"{name}: entry {i} ({raw.get('id', '?')})"
        missing = [k for k in _REQUIRED if k not in raw]
        if missing:
            raise CatalogError(f"{where}: missing {', '.join(missing)}")
        try:
            syntax, blame, role = Syntax(raw["syntax"]), Blame(raw["blame"]), Role(raw["role"])
        except ValueError as exc:
            raise CatalogError(f"{where}: {exc}") from exc
        if raw["severity"] not in SEVERITIES:
            raise CatalogError(f"{where}: severity {raw['severity']!r} not in {SEVERITIES}")
        if not ID_RE.match(raw["id"]):
            raise CatalogError(f"{where}: id {raw['id']!r} is not of the form domain.name")
        fmt = str(raw["format"]).rstrip("\n")
        pattern: EntryPattern = LazyPattern(fmt, syntax)
        try:  # checked: a regex is compiled now (its example is checked), a format's regex written now
            if checked and syntax is Syntax.REGEX:
                pattern = compile_format(fmt, syntax)
            elif checked:
                pattern.pattern  # writing it raises FormatError for a malformed format
        except FormatError as exc:
            raise CatalogError(f"{where}: {exc}") from exc
        lit = literal_length(fmt, syntax)
        whole = bool(raw.get("whole_line")) and syntax is Syntax.REGEX and fmt.endswith("$")
        if lit < (WHOLE_LINE_MIN_LITERAL if whole else MIN_LITERAL):
            raise CatalogError(f"{where}: only {lit} literal characters (at least {MIN_LITERAL}; "
                               f"{WHOLE_LINE_MIN_LITERAL} for a whole_line regex ending in $)")
        example = str(raw.get("example", ""))
        if checked and syntax is Syntax.REGEX and not (example and pattern.match(example)):
            raise CatalogError(f"{where}: a regex entry needs an example its pattern matches")
        out.append(CatalogEntry(id=raw["id"], domain=domain, syntax=syntax, format=fmt, source=str(raw["source"]),
                                meaning=str(raw["meaning"]), blame=blame, role=role, severity=raw["severity"],
                                action=str(raw["action"]), versions=str(raw.get("versions", "")), example=example,
                                pattern=pattern, literal=lit, code=_code(raw.get("code"), where),
                                rank_field=_code(raw.get("rank_field"), where), msgcode=str(raw.get("msgcode", "")),
                                stall=str(raw.get("stall", ""))))
    return out


def _code(raw: Any, where: str) -> int | None:
    """An entry's ``code`` or ``rank_field`` (an int), None when absent.

    Raises:
        CatalogError: it is not an integer.
    """
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise CatalogError(f"{where}: {raw!r} is not an integer (code, rank_field)")
    return raw


TWIN = "catalog.json"
"""The JSON twin of the data files: ``{"toml_sha256": ..., "files": {name: parsed document}}``, written by
``scripts/catalog/json_twin.py``. The TOML files stay the source; the twin is used only while its hash is
theirs (``json`` reads the 1.2 MB in a tenth of ``tomllib``'s time), else the TOML files are parsed."""


def data_files() -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every ``data/*.toml`` file, by name."""
    return [(res.name, res.read_bytes()) for res in sorted(resources.files(__package__).joinpath("data").iterdir(),
                                                             key=lambda r: r.name) if res.name.endswith(".toml")]


def toml_digest(files: list[tuple[str, bytes]]) -> str:
    """The SHA-256 of the data files' names and bytes (what the twin is checked against)."""
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def _documents() -> list[tuple[str, dict[str, Any], bool]]:
    """The parsed data files, and whether they came from the twin (checked when it was written)."""
    files = data_files()
    try:
        twin = json.loads(resources.files(__package__).joinpath("data").joinpath(TWIN).read_bytes())
    except (OSError, ValueError):
        twin = None
    if isinstance(twin, dict) and twin.get("toml_sha256") == toml_digest(files) and \
            set(twin.get("files", {})) == {n for n, _ in files}:
        return [(name, twin["files"][name], True) for name, _ in files]
    out: list[tuple[str, dict[str, Any], bool]] = []
    for name, data in files:
        try:
            out.append((name, tomllib.loads(data.decode("utf-8")), False))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise CatalogError(f"{name}: {exc}") from exc
    return out


@lru_cache(maxsize=1)
def load() -> Catalog:
    """The catalog of every ``hangdbg/catalog/data/*.toml`` file (read once per process; through the
    JSON twin :data:`TWIN` while it is current).

    Raises:
        CatalogError: a data file is broken or two entries share an id.
    """
    entries: list[CatalogEntry] = []
    for name, doc, from_twin in _documents():
        entries.extend(parse_entries(doc, name.removesuffix(".toml"), checked=not from_twin))
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise CatalogError(f"two entries have the id {e.id!r}")
        seen.add(e.id)
    return Catalog(entries)


def with_pattern(e: CatalogEntry) -> CatalogEntry:
    """``e`` with its pattern and specificity computed (for entries built in code, e.g. tests)."""
    return replace(e, pattern=compile_format(e.format, e.syntax), literal=literal_length(e.format, e.syntax))
