"""Format strings to anchored, bounded regexes (and back to sample lines, for the tests).

A printf format (C ``printf`` conversions, as NCCL's ``WARN(...)`` and the kernel write them), a
Python format (``str.format`` / f-string fields, as PyTorch and the frameworks write them) or a
literal becomes a regex matched at the start of a message (``re.match``): each conversion becomes a
bounded class (a number, a hex number, a pointer, at most :data:`MAX_FIELD` characters of text),
each run of blanks matches one or more blanks, and text placeholders are captured as ``s0``,
``s1``, ... so that their content can be looked up again (``NCCL error: unhandled cuda error``).
Nothing is unbounded, so no message can make a pattern backtrack without end.
"""

from __future__ import annotations

import re

from .entry import Syntax

__all__ = ["compile_format", "compile_cut", "format_regex", "literal_length", "sample", "LazyPattern", "MAX_FIELD",
           "FormatError"]

MAX_FIELD = 400
"""Longest text a ``%s`` / ``{}`` placeholder matches (characters)."""

# C99 printf conversion: %[flags][width][.precision][length]conversion
_PRINTF = re.compile(r"%(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                     r"(?P<len>hh|h|ll|l|L|q|j|z|Z|t)?(?P<conv>[diouxXeEfFgGaAcspn%])")
_PY_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_BLANKS = re.compile(r"\s+")

_NUM = r"[-+]?\d+"
_CLASSES = {
    "d": _NUM, "i": _NUM, "u": r"\d+", "o": r"[0-7]+",
    "x": r"(?:0[xX])?[0-9a-fA-F]+", "X": r"(?:0[xX])?[0-9a-fA-F]+",
    "e": r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)", "E": r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|INF|NAN)",
    "f": r"[-+]?(?:\d+(?:\.\d*)?|inf|nan)", "F": r"[-+]?(?:\d+(?:\.\d*)?|INF|NAN)",
    "g": r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)", "G": r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|INF|NAN)",
    "a": r"[-+]?0x[0-9a-fA-F.p+-]+", "A": r"[-+]?0X[0-9A-F.P+-]+",
    "c": r".", "p": r"(?:0x[0-9a-fA-F]+|\(nil\)|0)", "n": "", "%": "%",
}
_SAMPLES = {"d": "3", "i": "3", "u": "7", "o": "17", "x": "1f", "X": "1F", "e": "1.5e+00", "E": "1.5E+00",
            "f": "2.50", "F": "2.50", "g": "2.5", "G": "2.5", "a": "0x1p+1", "A": "0X1P+1", "c": "c",
            "p": "0x7f12ab00", "n": "", "%": "%", "s": "text"}


class FormatError(ValueError):
    """A format string that cannot be compiled (a stray ``%``, an unbalanced ``{``, a bad regex)."""


def _text(s: str) -> str:
    """A literal piece: escaped, each run of blanks as one-or-more blanks."""
    return r"\s+".join(re.escape(p) for p in _BLANKS.split(s))


def _field(n: int, token: bool = False) -> str:
    """The regex of text field ``n``: any text of at most :data:`MAX_FIELD` characters, or one blank-free token
    (``token``: a host before ``:PORT``)."""
    return f"(?P<s{n}>\\S{{1,{MAX_FIELD}}}?)" if token else f"(?P<s{n}>.{{0,{MAX_FIELD}}}?)"


_ADDRESS_NEXT = re.compile(r":%")
"""What follows a printf ``%s`` that is a host: ``%s:%d`` / ``%s:%s`` print an address (a host and its port), which
has no blank."""


def compile_format(fmt: str, syntax: Syntax) -> re.Pattern[str]:
    """The anchored, bounded regex of ``fmt`` (to be used with ``match``), compiled.

    Args:
        fmt: the upstream format string.
        syntax: how it is written.

    Returns:
        a compiled pattern; text fields are the named groups ``s0``, ``s1``, ...

    Raises:
        FormatError: ``fmt`` is not a well-formed format of ``syntax``.
    """
    body = format_regex(fmt, syntax)
    try:
        return re.compile(body)
    except re.error as exc:
        raise FormatError(f"bad regex: {exc}") from exc


class LazyPattern:
    """The regex of a format, written and compiled on its first use (the catalog's patterns are mostly
    never needed: a cheap substring test turns a message away first). Offers what the catalog calls of a
    pattern."""

    __slots__ = ("_fmt", "_syntax", "_src", "_rx")

    def __init__(self, fmt: str, syntax: Syntax) -> None:
        self._fmt, self._syntax = fmt, syntax
        self._src: str | None = None
        self._rx: re.Pattern[str] | None = None

    @property
    def pattern(self) -> str:
        """The regex source (:func:`format_regex`).

        Raises:
            FormatError: the format is not a well-formed format of its syntax (the loader asks for it
                at once when it checks a file; the catalog's tests build every entry's).
        """
        if self._src is None:
            self._src = format_regex(self._fmt, self._syntax)
        return self._src

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled regex.

        Raises:
            re.error: the pattern does not compile (the catalog's tests compile every entry).
        """
        if self._rx is None:
            self._rx = re.compile(self.pattern)
        return self._rx

    def match(self, text: str) -> re.Match[str] | None:
        return self.compiled.match(text)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.compiled.fullmatch(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled.search(text)


def format_regex(fmt: str, syntax: Syntax) -> str:
    """The source of :func:`compile_format`'s regex, not compiled (a regex entry's own text).

    Raises:
        FormatError: ``fmt`` is not a well-formed format of ``syntax``.
    """
    if syntax is Syntax.REGEX:
        return fmt
    lead = re.match(r"""['"`]+""", fmt)
    if lead is not None:  # a quote a paste or a log prefix may have taken: optional
        return f"['\"`]{{0,{lead.end()}}}" + format_regex(fmt[lead.end():], syntax)
    if syntax is Syntax.LITERAL:
        return _text(fmt.strip())
    out: list[str] = []
    pos = n = 0
    fields = _PRINTF if syntax is Syntax.PRINTF else _PY_FIELD
    for m in fields.finditer(fmt):
        out.append(_text(fmt[pos:m.start()]))
        tok = m.group(0)
        if syntax is Syntax.PRINTF:
            conv = m.group("conv")
            if conv == "s":
                out.append(_field(n, token=_ADDRESS_NEXT.match(fmt, m.end()) is not None))
                n += 1
            else:
                out.append(_CLASSES[conv])
        elif tok in ("{{", "}}"):
            out.append(re.escape(tok[0]))
        else:
            out.append(_field(n))
            n += 1
        pos = m.end()
    rest = fmt[pos:]
    if out and not rest.strip() and out[-1].endswith("}?)"):  # a field that ends the message takes the rest
        out[-1] = out[-1][:-2] + ")"
        if len(out) >= 2 and out[-2].endswith(r"\s+"):  # and may be empty: "... on rank 3." when the format is
            out[-2], out[-1] = out[-2][:-3], rf"(?:\s+{out[-1]})?"  # "... on rank {}. {}" (the blank goes too)
    if syntax is Syntax.PRINTF and "%" in rest:
        raise FormatError(f"stray % in {rest!r}")
    if syntax is Syntax.PYTHON and ("{" in rest or "}" in rest):
        raise FormatError(f"unbalanced brace in {rest!r}")
    out.append(_text(rest))
    body = "".join(out)
    # a text field between blanks may be empty ("on node  exited" when the host name was empty or a paste removed
    # it): its blanks collapse to one run
    body = _BLANK_FIELD.sub(r"\\s+(?:\g<f>\\s+)?", body)
    # a text field that starts the message before a blank may be empty too (a paste that kept only the words
    # after it: DeepSpeed's "%s exits with return code = %d" pasted as "exits with return code = -9")
    body = _LEAD_FIELD.sub(r"(?:\g<f>\\s+)?", body, count=1)
    # a trailing blank run must not demand a blank after the message
    return re.sub(r"(\\s\+)+$", "", body)


_BLANK_FIELD = re.compile(r"\\s\+(?P<f>\(\?P<s\d+>\.\{0,\d+\}\?\))\\s\+")
_LEAD_FIELD = re.compile(r"^(?P<f>\(\?P<s0>\.\{0,\d+\}\?\))\\s\+")


def _pieces(fmt: str, syntax: Syntax) -> list[tuple[bool, str]]:
    """``fmt`` as ``(is_placeholder, regex-or-literal)`` pieces, in order."""
    if syntax is Syntax.LITERAL:
        return [(False, fmt)]
    out: list[tuple[bool, str]] = []
    pos = n = 0
    fields = _PRINTF if syntax is Syntax.PRINTF else _PY_FIELD
    for m in fields.finditer(fmt):
        if m.start() > pos:
            out.append((False, fmt[pos:m.start()]))
        tok = m.group(0)
        if syntax is Syntax.PRINTF and m.group("conv") != "s":
            out.append((False, "%") if tok.endswith("%%") else (True, _CLASSES[m.group("conv")]))
        elif syntax is Syntax.PYTHON and tok in ("{{", "}}"):
            out.append((False, tok[0]))
        else:
            out.append((True, _field(n)))
            n += 1
        pos = m.end()
    if pos < len(fmt):
        out.append((False, fmt[pos:]))
    return out


def _prefixes(lit: str) -> str:
    """A regex for the non-empty proper prefixes of the literal ``lit`` (a line cut inside it)."""
    cuts = sorted({_text(lit[:i].rstrip()) for i in range(1, len(lit)) if lit[:i].strip()}, key=len, reverse=True)
    return "|".join(cuts)


CUT_LONG_HEAD = 40
"""Literal characters of a format's head from which a message cut inside the field right after it is still that
format's (``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3,`` cut by a wrap): such a head is
specific on its own."""


def compile_cut(fmt: str, syntax: Syntax, lead_field: bool = False) -> re.Pattern[str] | None:
    """The regex of a message cut anywhere after the literal head of ``fmt`` (to be used with
    ``fullmatch`` on the last line of an excerpt: ``Cuda failure 999 'unknown error`` where the
    format is ``Cuda failure %d '%s'``). Each piece after the head may be missing, and a literal
    piece may be cut inside itself. None for a regex entry, or for one that starts with a placeholder
    unless ``lead_field`` (then the placeholder and the literal piece after it make the head).

    Raises:
        FormatError: ``fmt`` is not a well-formed format of ``syntax``.
    """
    if syntax is Syntax.REGEX:
        return None
    pieces = _pieces(fmt.strip(), syntax)
    if not pieces or (pieces[0][0] and not (lead_field and len(pieces) > 1 and not pieces[1][0])):
        return None
    first = 2 if pieces[0][0] else 1  # the pieces of the head
    # rest = the message from piece i on, with piece i at least partly there. A text field may end
    # the cut when it is the format's last piece or when a literal piece after the head came before
    # it (the message was cut inside the field); right after the head it must be followed by (part
    # of) the next piece, or it would take any text at all after the head.
    rest = ""
    long_head = first == 1 and len(pieces[0][1].strip()) >= CUT_LONG_HEAD  # the head alone names the message
    for i in range(len(pieces) - 1, first - 1, -1):
        is_field, text = pieces[i]
        nxt = f"(?:{rest})?" if rest else ""
        if is_field and text.startswith("(?P<s"):
            anchored = long_head or any(not f for f, _ in pieces[1:i])
            rest = (f"{text}{nxt}" if anchored else f"{text}{rest}") if rest else text
        elif is_field:
            rest = f"{text}{nxt}"
        else:
            cut = _prefixes(text)
            rest = f"{_text(text)}{nxt}" + (f"|{cut}" if cut else "")
            rest = f"(?:{rest})"
    head = pieces[0][1] + _text(pieces[1][1]) if first == 2 else _text(pieces[0][1].lstrip())
    try:
        return re.compile(f"['\"`]{{0,2}}{head}" + (f"(?:{rest})?" if rest else ""), re.S)
    except re.error as exc:  # pragma: no cover - every piece is escaped or a fixed class
        raise FormatError(f"bad cut pattern from {fmt!r}: {exc}") from exc


def literal_length(fmt: str, syntax: Syntax) -> int:
    """The number of non-blank literal characters of ``fmt`` (its specificity)."""
    if syntax is Syntax.PRINTF:
        fmt = _PRINTF.sub("", fmt)
    elif syntax is Syntax.PYTHON:
        fmt = _PY_FIELD.sub("", fmt)
    elif syntax is Syntax.REGEX:
        fmt = re.sub(r"\\.|[\[\](){}?*+|^$.]", "", fmt)
    return len(_BLANKS.sub("", fmt))


def sample(fmt: str, syntax: Syntax, text: str = "text") -> str:
    """A line as the upstream program could print it: every placeholder replaced by a value of
    its conversion (``%d`` -> ``3``, ``%s`` / ``{}`` -> ``text``). Not for :attr:`Syntax.REGEX`.

    Raises:
        FormatError: for a regex entry (it has an ``example`` instead).
    """
    if syntax is Syntax.REGEX:
        raise FormatError("a regex has no sample; use the entry's example")
    if syntax is Syntax.LITERAL:
        return fmt
    if syntax is Syntax.PRINTF:
        return _PRINTF.sub(lambda m: text if m.group("conv") == "s" else _SAMPLES[m.group("conv")], fmt)
    return _PY_FIELD.sub(lambda m: m.group(0)[0] if m.group(0) in ("{{", "}}") else text, fmt)
