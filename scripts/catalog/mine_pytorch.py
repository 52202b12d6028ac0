#!/usr/bin/env python3
"""Mine PyTorch's and the CUDA runtime's error messages into hangdbg's catalog.

Writes ``hangdbg/catalog/data/pytorch.toml`` and ``hangdbg/catalog/data/cuda.toml`` (the format is
that of the catalog spec: one ``[[entry]]`` per upstream message). Standard library only.

Where the texts come from
-------------------------
* PyTorch: the files of pytorch/pytorch at release tags, read with ``git --git-dir DIR show
  TAG:path`` (``--git-dir``, a bare clone or mirror; no work tree needed), or from directory trees
  holding a tag's files (``--tree TAG=DIR``: an unpacked release source tarball, or an unpacked
  wheel, whose ``torch/**/*.py`` are the tag's files verbatim and whose ``torch/include/`` holds
  the tag's C/C++ headers; the .cpp files are not in a wheel). For every tag the git directory is
  tried first, then the trees of that tag.
  The script *extracts* each message from the source (C++ ``TORCH_CHECK`` / ``c10::str`` /
  ``LOG(...) <<`` / ``+`` concatenations and ``C10D_*``/``fmt::format`` formats; Python
  f-strings, ``str.format``, ``%`` and logging calls, via :mod:`ast`), renders it as a format
  (C++ concatenations as Python ``{}`` formats), and looks every row of the :data:`PYTORCH` table
  up by an *anchor* (a piece of its literal text) in a named file. The newest tag holding the
  message is cited (``source``), and ``versions`` is the first..last tag of those read that hold
  it. Only the classification (meaning, blame, role, severity, action) is hand-written; rows
  that need a hand-written format carry it (a message composed of two upstream pieces, such as
  ``NCCL error: {}`` + ncclGetErrorWithVersion's ``{}, NCCL version {}``; or a specific value
  written into the format, such as ``exitcode  : -9 (pid: {pid})``, which is more specific than
  the generic entry and so wins the match) and are still located in the source for their citation.
* Gloo (PyTorch's CPU/TCP collective library, a submodule of pytorch/pytorch): the same way from
  a git directory of pytorch/gloo (``--gloo-git-dir``, at ``--gloo-ref``; gloo has no tags, so
  the commit is cited).
* CUDA: the strings ``cudaGetErrorString`` returns are those of NVIDIA's closed libcudart; the
  :data:`CUDA` table below holds them with the enum name and value (cited: the CUDA Runtime API
  documentation of ``cudaError``). ``--cudart [VERSION=]PATH`` (repeatable; a ``libcudart.so`` such
  as the one in the ``nvidia-cuda-runtime-cu12`` wheel) checks every string, and the version range
  each row claims, against that library through :mod:`ctypes` (``cudaGetErrorString`` needs no GPU
  and no driver) and fails on a difference.

Formats start after the line decorations hangdbg peels off (``logPrefix()``'s ``[PG ID .. Rank N]``,
``WARNING: ``, ``- ``, ``[Rank 0]: ``; hangdbg's own ``parse_line`` decides when it can be imported).
Every cited ``path:LINE`` is re-read at its tag and must hold the message's text; the written
files are loaded back with :mod:`tomllib` and checked (required keys, unique ids, formats that
compile, at least 12 literal characters), also by hangdbg's own loader when it can be imported.

Usage::

    python scripts/catalog/mine_pytorch.py --git-dir /path/to/pytorch.git \
        --gloo-git-dir /path/to/gloo.git [--cudart 12.9.79=.../libcudart.so.12] [--tags v2.4.0 v2.6.0 v2.9.0]
    python scripts/catalog/mine_pytorch.py --tree v2.6.0=/tmp/src/pytorch-v2.6.0 \
        --tree v2.9.0=/tmp/whl/torch-2.9.0 ... --gloo-git-dir ...
    python scripts/catalog/mine_pytorch.py --dump /tmp/messages.txt ...   # every extracted message

Only message texts, their placeholders and file:line citations go into the catalog, never code.
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "hangdbg" / "catalog" / "data"
DEFAULT_TAGS = ("v2.4.0", "v2.6.0", "v2.9.0", "v2.14.1")
MIN_LITERAL = 10
CUDA_DOC = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"


# ---------------------------------------------------------------------------------------------
# Reading upstream files
# ---------------------------------------------------------------------------------------------

class Upstream:
    """The files of one upstream repository at its tags (git directory first, then trees)."""

    def __init__(self, repo: str, git_dir: str | None, trees: dict[str, list[str]], tags: list[str]) -> None:
        self.repo = repo
        self.git_dir = git_dir
        self.trees = trees
        self.tags = tags  # oldest first
        self._cache: dict[tuple[str, str], str | None] = {}

    def read(self, tag: str, path: str) -> str | None:
        key = (tag, path)
        if key not in self._cache:
            self._cache[key] = self._read(tag, path)
        return self._cache[key]

    def _read(self, tag: str, path: str) -> str | None:
        if self.git_dir:
            r = subprocess.run(["git", "--git-dir", self.git_dir, "show", f"{tag}:{path}"],
                               capture_output=True, check=False)
            if r.returncode == 0:
                return r.stdout.decode("utf-8", "replace")
        for d in self.trees.get(tag, []):
            for cand in (Path(d) / path, Path(d) / "torch" / "include" / path):
                if cand.is_file():
                    return cand.read_text(encoding="utf-8", errors="replace")
        return None


# ---------------------------------------------------------------------------------------------
# Messages: pieces of literal text and placeholders, split into lines (segments)
# ---------------------------------------------------------------------------------------------

@dataclass
class Piece:
    kind: str   # "lit" (plain text), "ph" (a placeholder), "fmt" (text that already is a format)
    text: str
    line: int


@dataclass
class Segment:
    """One printed line of a message."""

    syntax: str   # python | printf | literal
    format: str
    line: int     # the source line of its first literal text
    path: str = ""
    lo: int = 0   # the source lines the message spans
    hi: int = 0


def _py_escape(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def segments_of(pieces: list[Piece], syntax: str, path: str) -> list[Segment]:
    """Split pieces at newlines into segments and render each as a format."""
    lines: list[list[Piece]] = [[]]
    for p in pieces:
        if p.kind == "ph":
            lines[-1].append(p)
            continue
        parts = p.text.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append(Piece(p.kind, part, p.line))
    out = []
    for ps in lines:
        if not any(p.kind != "ph" and p.text.strip() for p in ps):
            continue
        has_ph = any(p.kind == "ph" for p in ps) or (syntax != "python" and any(p.kind == "fmt" for p in ps))
        if syntax == "printf":
            fmt = "".join(p.text if p.kind != "ph" else "%s" for p in ps)
            syn = "printf"
        elif has_ph or any(p.kind == "fmt" and re.search(r"\{[^{}]*\}", p.text) for p in ps):
            fmt = "".join("{}" if p.kind == "ph" else (p.text if p.kind == "fmt" else _py_escape(p.text)) for p in ps)
            syn = "python"
        else:
            fmt = "".join(p.text.replace("{{", "{").replace("}}", "}") if p.kind == "fmt" else p.text for p in ps)
            syn = "literal"
        first = next(p for p in ps if p.kind != "ph" and p.text.strip())
        out.append(Segment(syn, fmt.strip(), first.line, path, min(p.line for p in ps), max(p.line for p in ps)))
    return out


# ---------------------------------------------------------------------------------------------
# C++ extraction
# ---------------------------------------------------------------------------------------------

_ESC = {"n": "\n", "t": "\t", "r": "", "\\": "\\", '"': '"', "'": "'", "0": "", "a": "", "b": "", "e": ""}


@dataclass
class Tok:
    kind: str   # str ident num punct
    text: str
    line: int


_CPP_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+|\\\n)
  | (?P<nl>\n)
  | (?P<lc>//[^\n]*)
  | (?P<bc>/\*.*?\*/)
  | (?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\ ]{0,16})\((?P<rawbody>.*?)\)(?P=delim)")
  | (?P<str>(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")
  | (?P<chr>'(?:[^'\\\n]|\\.){1,4}')
  | (?P<ident>[A-Za-z_]\w*(?:\s*::\s*~?[A-Za-z_]\w*)*)
  | (?P<num>\.?\d(?:[\w.']|[eEpP][+-])*)
  | (?P<punct><<=|>>=|<<|>>|::|->|\+\+|--|&&|\|\||==|!=|<=|>=|\+=|-=|[-+*/%&|^!~=<>?:;,.(){}\[\]#\\@$`])
""", re.VERBOSE | re.DOTALL)


def _unescape_c(body: str) -> str:
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n in "xX":
                m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
                out.append(chr(int(m.group(0), 16)) if m else "")
                i += 2 + (len(m.group(0)) if m else 0)
                continue
            if n.isdigit():
                m = re.match(r"[0-7]{1,3}", body[i + 1:])
                i += 1 + (len(m.group(0)) if m else 1)
                continue
            out.append(_ESC.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def lex_cpp(src: str) -> list[Tok]:
    toks: list[Tok] = []
    line = 1
    pos = 0
    while pos < len(src):
        m = _CPP_TOKEN.match(src, pos)
        if m is None:
            pos += 1
            continue
        kind = m.lastgroup if m.lastgroup != "delim" and m.lastgroup != "rawbody" else "raw"
        text = m.group(0)
        if m.group("raw") is not None:
            toks.append(Tok("str", m.group("rawbody"), line))
        elif m.group("str") is not None:
            body = text[text.index('"') + 1:-1]
            toks.append(Tok("str", _unescape_c(body), line))
        elif m.group("ident") is not None:
            toks.append(Tok("ident", re.sub(r"\s+", "", text), line))
        elif m.group("num") is not None or m.group("chr") is not None:
            toks.append(Tok("num", text, line))
        elif m.group("punct") is not None:
            toks.append(Tok("punct", text, line))
        line += text.count("\n")
        pos = m.end()
        del kind
    return toks


# call name -> number of leading arguments that are not message parts
_CPP_CALLS = {
    "TORCH_CHECK": 1, "TORCH_CHECK_WITH": 2, "TORCH_CHECK_VALUE": 1, "TORCH_CHECK_TYPE": 1,
    "TORCH_CHECK_INDEX": 1, "TORCH_CHECK_NOT_IMPLEMENTED": 1, "TORCH_INTERNAL_ASSERT": 1,
    "TORCH_INTERNAL_ASSERT_DEBUG_ONLY": 1, "C10_THROW_ERROR": 1, "C10D_THROW_ERROR": 1, "C10_BUILD_ERROR": 1,
    "TORCH_WARN": 0, "TORCH_WARN_ONCE": 0, "TORCH_WARN_DEPRECATION": 0, "CAFFE_THROW": 0, "CAFFE_ENFORCE": 1,
    "c10::str": 0, "::c10::str": 0, "str": 0,
    "std::runtime_error": 0, "std::invalid_argument": 0, "std::logic_error": 0,
    "std::out_of_range": 0, "SocketError": 0, "TimeoutError": 0, "DistNetworkError": 0,
    "REDUCER_CHECK": 2, "GLOO_ENFORCE": 1, "GLOO_ENFORCE_EQ": 2, "GLOO_ENFORCE_NE": 2, "GLOO_ENFORCE_LE": 2,
    "GLOO_ENFORCE_LT": 2, "GLOO_ENFORCE_GE": 2, "GLOO_ENFORCE_GT": 2, "GLOO_THROW": 0,
    "GLOO_THROW_IO_EXCEPTION": 0, "GLOO_THROW_INVALID_OPERATION_EXCEPTION": 0, "GLOO_ERROR_MSG": 0,
    "GLOO_ERROR": 0, "GLOO_WARN": 0, "GLOO_INFO": 0, "GLOO_DEBUG": 0, "MakeString": 0,
    "::gloo::MakeString": 0, "gloo::MakeString": 0, "IoException": 0, "::gloo::IoException": 0,
}
# fmt-style: the first argument is already a {} format; a prefix the macro prints before it
_CPP_FMT_CALLS = {"C10D_ERROR": "[c10d] ", "C10D_WARNING": "[c10d] ", "C10D_INFO": "[c10d] ",
                  "C10D_DEBUG": "[c10d] ", "fmt::format": "", "c10d::detail::formatLogMessage": "",
                  "recordError": ""}


# macros that print a location before their arguments (gloo's GLOO_ERROR_MSG: "[file:line] ...")
_CPP_PREFIX = {name: ("[", None, ":", None, "] ") for name in (
    "GLOO_ERROR_MSG", "GLOO_THROW", "GLOO_THROW_IO_EXCEPTION", "GLOO_THROW_INVALID_OPERATION_EXCEPTION")}


# calls whose text is a line prefix hangdbg strips ("[PG ID 0 PG GUID 0(default_pg) Rank 3] "): left out of a
# format when a message starts with them
_LINE_PREFIX_CALLS = {"logPrefix", "this->logPrefix", "pg->logPrefix"}
_LINE_PREFIX = "<line prefix>"


def _prefix_pieces(name: str, line: int) -> list[Piece]:
    return [Piece("ph", "", line) if p is None else Piece("lit", p, line) for p in _CPP_PREFIX.get(name, ())]


def _matching(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing the one at ``toks[i]``."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind == "punct" and t.text in pairs:
            depth += 1
        elif t.kind == "punct" and t.text in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def _split_top(toks: list[Tok], sep: str) -> list[list[Tok]]:
    out: list[list[Tok]] = [[]]
    depth = 0
    for t in toks:
        if t.kind == "punct" and t.text in "([{":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
        if depth == 0 and t.kind == "punct" and t.text == sep:
            out.append([])
            continue
        out[-1].append(t)
    return out


def _has_top(toks: list[Tok], what: set[str]) -> bool:
    depth = 0
    for t in toks:
        if t.kind == "punct" and t.text in "([{":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
        elif depth == 0 and t.kind == "punct" and t.text in what:
            return True
    return False


class CppExtractor:
    def __init__(self, src: str, path: str) -> None:
        self.toks = lex_cpp(src)
        self.path = path
        self.used: set[int] = set()
        self.messages: list[list[Segment]] = []

    def _mark(self, a: int, b: int) -> None:
        self.used.update(range(a, b + 1))

    def render(self, toks: list[Tok]) -> list[Piece]:
        """Pieces of one message part (an argument, a stream operand, a ``+`` expression)."""
        toks = [t for t in toks if not (t.kind == "punct" and t.text == "\\")]
        while len(toks) >= 2 and toks[0].text == "(" and _matching(toks, 0) == len(toks) - 1:
            toks = toks[1:-1]
        if not toks:
            return []
        if _has_top(toks, {"?"}):
            return [Piece("ph", "", toks[0].line)]
        if all(t.kind == "str" for t in toks):
            return [Piece("lit", t.text, t.line) for t in toks]
        terms = _split_top(toks, "+")
        if len(terms) > 1 and any(any(t.kind == "str" for t in term) for term in terms):
            out: list[Piece] = []
            for term in terms:
                out.extend(self.render(term))
            return out
        head = toks[0]
        if head.kind == "ident" and len(toks) >= 3 and toks[1].text == "(" and _matching(toks, 1) == len(toks) - 1:
            name = head.text
            inner = toks[2:-1]
            if name in _LINE_PREFIX_CALLS and not inner:
                return [Piece("ph", _LINE_PREFIX, head.line)]
            if name in ("std::string", "string", "std::string_view"):
                return self.render(inner)
            if name in _CPP_PREFIX or (name in _CPP_CALLS and _CPP_CALLS[name] == 0
                                       and (name.endswith(("str", "MakeString")))):
                out = _prefix_pieces(name, head.line)
                for arg in _split_top(inner, ","):
                    out.extend(self.render(arg))
                return out
            if name in _CPP_FMT_CALLS:
                args = _split_top(inner, ",")
                if args and args[0] and all(t.kind == "str" for t in args[0]):
                    return ([Piece("lit", _CPP_FMT_CALLS[name], head.line)] if _CPP_FMT_CALLS[name] else []) + \
                        [Piece("fmt", t.text, t.line) for t in args[0]]
        return [Piece("ph", "", toks[0].line)]

    def _emit(self, pieces: list[Piece]) -> None:
        while pieces and pieces[0].kind == "ph" and pieces[0].text == _LINE_PREFIX:
            pieces = pieces[1:]  # hangdbg peels the text of logPrefix() off the line
        if any(p.kind != "ph" and p.text.strip() for p in pieces):
            self.messages.append(segments_of(pieces, "python", self.path))

    def run(self) -> list[list[Segment]]:
        toks = self.toks
        n = len(toks)
        # 1. calls whose arguments are a message
        for i, t in enumerate(toks):
            if i in self.used or t.kind != "ident" or i + 1 >= n or toks[i + 1].text != "(":
                continue
            name = t.text
            if name in _CPP_FMT_CALLS:
                j = _matching(toks, i + 1)
                args = _split_top(toks[i + 2:j], ",")
                if args and args[0] and all(x.kind == "str" for x in args[0]):
                    pre = [Piece("lit", _CPP_FMT_CALLS[name], t.line)] if _CPP_FMT_CALLS[name] else []
                    self._emit(pre + [Piece("fmt", x.text, x.line) for x in args[0]])
                    self._mark(i, j)
                continue
            skip = _CPP_CALLS.get(name)
            if skip is None:
                continue
            if name == "str" and not (i > 0 and toks[i - 1].text == "::"):
                continue
            j = _matching(toks, i + 1)
            args = _split_top(toks[i + 2:j], ",")[skip:]
            pieces: list[Piece] = _prefix_pieces(name, t.line)
            for arg in args:
                pieces.extend(self.render(arg))
            if any(p.kind != "ph" for p in pieces):
                self._emit(pieces)
                self._mark(i, j)
        # 2. statements: stream chains (LOG(ERROR) << ...), assignments of + expressions
        start = 0
        depth = 0
        for k, t in enumerate(toks):
            if t.kind == "punct" and t.text in "([":
                depth += 1
            elif t.kind == "punct" and t.text in ")]":
                depth -= 1
            if t.kind == "punct" and (t.text in ";{}" and depth <= 0):
                self._statement(start, k)
                start = k + 1
                depth = 0
        # 3. every other string literal on its own
        k = 0
        while k < n:
            if toks[k].kind == "str" and k not in self.used:
                m = k
                while m + 1 < n and toks[m + 1].kind == "str":
                    m += 1
                self._emit([Piece("lit", x.text, x.line) for x in toks[k:m + 1]])
                self._mark(k, m)
                k = m + 1
            else:
                k += 1
        return self.messages

    def _statement(self, a: int, b: int) -> None:
        toks = self.toks[a:b]
        if not any(t.kind == "str" and (a + i) not in self.used for i, t in enumerate(toks)):
            return
        parts = _split_top(toks, "<<")
        if len(parts) > 1:
            pieces: list[Piece] = []
            for part in parts[1:]:
                pieces.extend(self.render(part))
            if any(p.kind != "ph" for p in pieces):
                self._emit(pieces)
                self._mark(a, b)
            return
        # x = <expr>;  return <expr>;  throw <expr>;
        idx = None
        for i, t in enumerate(toks):
            if t.kind == "punct" and t.text in ("=", "+="):
                idx = i + 1
                break
        if idx is None and toks and toks[0].text in ("return", "throw"):
            idx = 1
        if idx is None:
            return
        rhs = toks[idx:]
        if _has_top(rhs, {"+"}) and any(t.kind == "str" for t in rhs):
            pieces = self.render(rhs)
            if any(p.kind != "ph" for p in pieces):
                self._emit(pieces)
                self._mark(a, b)


def cpp_messages(src: str, path: str) -> list[list[Segment]]:
    return CppExtractor(src, path).run()


# ---------------------------------------------------------------------------------------------
# Python extraction
# ---------------------------------------------------------------------------------------------

_LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}


def _locate(lines: list[str], lo: int, hi: int, fmt: str, syntax: str) -> int:
    """The source line in [lo, hi] that holds the longest literal chunk of ``fmt``."""
    if syntax == "printf":
        chunks = re.split(r"%[-+ #0]*\d*(?:\.\d+)?[hlLqjzt]*[diouxXeEfFgGcsp%]", fmt)
    elif syntax == "python":
        chunks = re.split(r"\{[^{}]*\}", fmt)
    else:
        chunks = [fmt]
    best = max((c.strip() for c in chunks), key=len, default="")
    for size in (len(best), 24, 12, 6):
        probes = [best[i:i + size] for i in range(max(1, len(best) - size + 1))] if size < len(best) else [best]
        for probe in probes:
            if not probe.strip() or "\\" in probe or '"' in probe or "'" in probe:
                continue
            for ln in range(lo, min(hi, len(lines)) + 1):
                if probe in lines[ln - 1]:
                    return ln
    return lo


class PyExtractor:
    def __init__(self, src: str, path: str) -> None:
        self.src = src
        self.lines = src.splitlines()
        self.path = path
        self.done: set[int] = set()
        self.messages: list[list[Segment]] = []

    def _consume(self, node: ast.AST) -> None:
        for sub in ast.walk(node):
            self.done.add(id(sub))

    def pieces(self, node: ast.AST) -> list[Piece] | None:
        """Pieces of a string expression (None: not one)."""
        ln = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [Piece("lit", node.value, ln)]
        if isinstance(node, ast.JoinedStr):
            out = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out.append(Piece("lit", str(v.value), ln))
                else:
                    out.append(Piece("ph", "", ln))
            return out
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
            return [Piece("fmt", node.func.value.value, ln)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.pieces(node.left), self.pieces(node.right)
            if left is None and right is None:
                return None
            return (left or [Piece("ph", "", ln)]) + (right or [Piece("ph", "", ln)])
        return None

    def _emit(self, node: ast.AST, pieces: list[Piece], syntax: str) -> None:
        if not any(p.kind != "ph" and p.text.strip() for p in pieces):
            return
        segs = segments_of(pieces, syntax, self.path)
        lo: int = getattr(node, "lineno", 1)
        hi: int = getattr(node, "end_lineno", None) or lo
        for s in segs:
            s.line = _locate(self.lines, lo, hi, s.format, s.syntax)
            s.lo, s.hi = lo, hi
        self.messages.append(segs)

    def run(self) -> list[list[Segment]]:
        try:
            tree = ast.parse(self.src)
        except SyntaxError:
            return []
        for node in ast.walk(tree):
            if id(node) in self.done:
                continue
            # logger.warning("... %s ...", x)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _LOG_METHODS and node.args):
                first = node.args[0] if node.func.attr != "log" else (node.args[1] if len(node.args) > 1 else None)
                rest = len(node.args) - (1 if node.func.attr != "log" else 2)
                if isinstance(first, ast.Constant) and isinstance(first.value, str) and rest > 0 and "%" in first.value:
                    self._emit(first, [Piece("fmt", first.value, first.lineno)], "printf")
                    self._consume(first)
                    continue
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                    and isinstance(node.left.value, str):
                self._emit(node, [Piece("fmt", node.left.value, node.lineno)], "printf")
                self._consume(node)
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                self._consume(node)  # a docstring
                continue
            ps = self.pieces(node)
            if ps is not None:
                self._emit(node, ps, "python")
                self._consume(node)
        return self.messages


def py_messages(src: str, path: str) -> list[list[Segment]]:
    return PyExtractor(src, path).run()


def messages(src: str, path: str) -> list[Segment]:
    """Every line of every message of one file."""
    msgs = py_messages(src, path) if path.endswith(".py") else cpp_messages(src, path)
    return [s for m in msgs for s in m]


# ---------------------------------------------------------------------------------------------
# The table: which messages become entries, and what they mean
# ---------------------------------------------------------------------------------------------

@dataclass
class Row:
    """One catalog entry to build from an upstream message.

    ``anchor`` is a piece of the message's literal text, looked up in the messages extracted from
    ``path``. ``cut`` keeps the format up to the end of that text (long messages whose tail
    changes between versions: the head is what identifies them). ``syntax`` relabels an
    extracted plain string that is itself a format (a constant formatted later); ``template``
    turns ``string.Template`` fields ``${x}`` into ``{x}``. ``format`` (with ``syntax``, and
    ``example`` for a regex) replaces the extracted format where the table must say more than
    the source can (a composed message, a specific value written in); the anchor then only cites it.
    ``optional`` rows may be absent from every tag read (they are skipped with a note).
    """

    id: str
    path: str
    anchor: str
    blame: str
    role: str
    severity: str
    meaning: str
    action: str
    cut: str = ""
    syntax: str = ""
    format: str = ""
    example: str = ""
    template: bool = False
    optional: bool = False
    repo: str = "pytorch"
    rank_field: int | None = None  # the placeholder that is the printing process's rank (see entry.py)
    stall: str = ""  # a progress message: the step it starts, that can wait forever (see entry.py)


PYTORCH: list[Row] = []
GLOO: list[Row] = []


def R(id: str, path: str, anchor: str, blame: str, role: str, severity: str, meaning: str, action: str,
      **kw) -> None:
    """Add a row of the PyTorch table (``repo="gloo"`` for the gloo table)."""
    row = Row("pytorch." + id, path, anchor, blame, role, severity, meaning, action, **kw)
    (GLOO if row.repo == "gloo" else PYTORCH).append(row)


C10D = "torch/csrc/distributed/c10d/"
PGN = C10D + "ProcessGroupNCCL.cpp"
NU = C10D + "NCCLUtils.cpp"
NUH = C10D + "NCCLUtils.hpp"
PGG = C10D + "ProcessGroupGloo.cpp"
PGW = C10D + "ProcessGroupWrapper.cpp"
TCPS = C10D + "TCPStore.cpp"
UVB = C10D + "TCPStoreLibUvBackend.cpp"
SOCK = C10D + "socket.cpp"
RED = C10D + "reducer.cpp"
TRACE = C10D + "TraceUtils.h"
ELA = "torch/distributed/elastic/"
AGENT = ELA + "agent/server/api.py"
MPAPI = ELA + "multiprocessing/api.py"
ERRS = ELA + "multiprocessing/errors/__init__.py"
DRDZV = ELA + "rendezvous/dynamic_rendezvous.py"
C10DPY = "torch/distributed/distributed_c10d.py"
STALL_RDZV = ("the rendezvous waits until --nnodes nodes joined: nodes are missing (torchrun not started on them, another "
              "--rdzv-id or --rdzv-endpoint, or the endpoint unreachable from them)")
STALL_INIT = ("init_process_group waits for every rank of the world to join: ranks are missing (not started, failed "
              "before init_process_group, or pointed at another MASTER_ADDR / MASTER_PORT)")
CCA = "c10/cuda/CUDACachingAllocator.cpp"
CFUN = "c10/cuda/CUDAFunctions.cpp"
DSA = "c10/cuda/CUDADeviceAssertionHost.cpp"
DLC = "torch/csrc/DataLoader.cpp"
DLPY = "torch/utils/data/dataloader.py"
CUDAPY = "torch/cuda/__init__.py"

FIND_UNRESPONSIVE = ("find the rank that never reached this collective (hangdbg dump / flight recorder, or the "
                     "earliest error in the other ranks' logs); raise the timeout only if the work is really that slow")

# --- ProcessGroupNCCL: the watchdog, the heartbeat monitor, the flight recorder -------------
R("nccl-watchdog-timeout", PGN, "Watchdog caught collective operation timeout", "peer", "consequence", "warning",
  "a collective of this rank did not finish within the process group timeout: this rank waits, usually for "
  "a rank that crashed, hangs or called a different collective", FIND_UNRESPONSIVE)
R("nccl-ops-failed-or-timed-out", PGN, "Some NCCL operations have failed or timed out", "peer", "consequence",
  "warning", "the watchdog found a failed or timed-out NCCL collective and is about to abort the process",
  "look for the collective timeout or NCCL/CUDA error printed just before, and for the rank that failed first",
  cut="have failed or timed out.")
R("nccl-taking-process-down", PGN, "To avoid data inconsistency, we are taking the entire process down",
  "peer", "consequence", "warning",
  "the NCCL watchdog aborts this process (SIGABRT) after a collective failed or timed out",
  "find the first failure (a timeout waiting for a peer, a CUDA or NCCL error) in this and the other ranks' logs")
R("nccl-blocking-wait-timeout", PGN, "timed out in blocking wait", "peer", "consequence", "warning",
  "with TORCH_NCCL_BLOCKING_WAIT a collective did not finish within the timeout: this rank waits for a peer",
  FIND_UNRESPONSIVE)
R("nccl-dump-signal-received", PGN, "Received a dump signal due to a collective timeout from", "peer",
  "consequence", "warning",
  "another rank (or this one) hit a collective timeout and asked every rank to dump its flight recorder; the "
  "line names the last enqueued and completed NCCL work of this rank",
  "compare the last completed work across ranks (hangdbg fr / the flight recorder dumps): the rank that is "
  "behind is the one to look at", cut="last completed NCCL work: {}.")
R("nccl-terminating-after-dump", PGN, "Terminating the process after attempting to dump debug info, due to",
  "peer", "consequence", "warning",
  "the heartbeat monitor kills this process after a collective timeout or a stuck watchdog",
  "look at the reason given and at the earlier timeout or error lines of every rank")
R("nccl-monitor-disabled-would-terminate", PGN, "ProcessGroupNCCL monitor thread is disabled, but would have",
  "peer", "consequence", "warning",
  "the heartbeat monitor found a timeout or a stuck watchdog but is disabled (TORCH_NCCL_ENABLE_MONITORING=0), "
  "so the process is left running", "look at the reason given; the process may stay hung until it is killed",
  cut="monitor thread is disabled, but would have")
R("nccl-watchdog-stuck", PGN, "watchdog got stuck for", "self", "root", "warning",
  "the NCCL watchdog thread of this rank made no progress for the heartbeat timeout: a CUDA or NCCL call hangs "
  "(often a GPU fault or a GIL deadlock), so the heartbeat monitor will kill the process",
  "take native stacks of this rank (hangdbg dump --native, py-spy --native) and check the GPU (nvidia-smi, "
  "dmesg for Xid); raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only if the watchdog is merely slow",
  cut="without making progress in monitoring enqueued collectives.")
R("nccl-heartbeat-monitor-timed-out", PGN, "Heartbeat monitor timed out!", "self", "root", "warning",
  "older wording of the stuck-watchdog message: the NCCL watchdog thread made no progress for the heartbeat "
  "timeout and the process will be terminated", "take native stacks of this rank and check the GPU (Xid); "
  "raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only if the watchdog is merely slow",
  cut="after dumping debug info.", optional=True)
R("nccl-watchdog-terminated", PGN, "Process group watchdog thread terminated with exception: {}", "self",
  "consequence", "warning",
  "the NCCL watchdog thread raised and the process will abort; the text after the colon is the real error "
  "(a collective timeout, an NCCL error, a CUDA error)", "read the error after the colon and find the first "
  "failure across ranks")
R("nccl-failure-detected-by-watchdog", PGN, "failure detected by watchdog at work sequence id", "peer",
  "consequence", "warning",
  "the watchdog found a timed-out or failed collective; the line gives the sequence ids of the last enqueued "
  "and completed work of this process group", "compare the sequence ids across ranks: the rank whose last "
  "completed work is lowest is behind")
R("nccl-async-exception", C10D + "ProcessGroupNCCL.cpp", "raised the following async exception", "self",
  "consequence", "warning",
  "a collective ended with an error found asynchronously by the watchdog; the exception text says which",
  "read the exception text (an NCCL error, a CUDA error or a timeout) and find the first failure across ranks")
R("nccl-stack-of-failed-collective", PGN, "Stack trace of the failed collective:", "none", "context", "info",
  "the Python stack of the collective that failed follows (from the flight recorder)", "")
R("nccl-stack-of-failed-collective-missing", PGN, "Stack trace of the failed collective not found", "none",
  "context", "info", "no stack of the failed collective because the flight recorder is off",
  "set TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value (e.g. 2000) to record collectives",
  cut="because FlightRecorder is disabled.")
R("nccl-future-timeout", PGN, "Future for {} timed out after", "peer", "consequence", "warning",
  "waiting for the future of a collective timed out", FIND_UNRESPONSIVE)
R("nccl-cuda-destroyed-before-watchdog", PGN, "main process destroyed cuda before watchdog loop exited",
  "self", "consequence", "info",
  "at exit the CUDA context went away while the watchdog still ran (an exit without destroy_process_group)",
  "call torch.distributed.destroy_process_group() before the program exits")
R("nccl-no-destroy-process-group", PGN, "destroy_process_group() was not called before program exit",
  "none", "context", "info", "the program exited without destroying its process group",
  "call torch.distributed.destroy_process_group() at the end of the program", cut="which can leak resources.")
R("nccl-dump-broadcast", PGN, "Broadcasting flight recorder dump signal to other processes via TCPStore",
  "none", "context", "info", "this rank detected a timeout and asks every rank to dump its flight recorder", "")
R("nccl-dump-signal-observed", PGN, "Observed flight recorder dump signal from another rank via TCPStore",
  "peer", "consequence", "warning", "another rank detected a collective timeout and asked this rank to dump",
  "look for the rank that broadcast the dump signal and for the collective it timed out on")
R("nccl-dump-flag-check-failed", PGN, "Failed to check the \"should dump\" flag on TCPStore", "peer",
  "consequence", "warning",
  "the heartbeat monitor could not reach the TCPStore (its server, on rank 0 or the agent, is gone)",
  "check whether rank 0 / the launcher's store exited first", cut="on TCPStore")
R("nccl-dump-set-signal-failed", PGN, "Failed to set dump signal in tcpstore", "peer", "consequence", "warning",
  "this rank could not tell the others to dump (the TCPStore server is gone)",
  "check whether rank 0 / the launcher's store exited first")
R("nccl-fr-dump-done", PGN, "Finished flight recorder successfully", "none", "context", "info",
  "this rank wrote its flight recorder dump", "")
R("nccl-fr-dump-wait-timed-out", PGN, "timed out after waiting for {}ms flight recorder dumps to finish", "none", "context", "info",
  "the monitor stopped waiting for the flight recorder dumps of the other ranks", "")
R("nccl-dumping-trace", PGN, "ProcessGroupNCCL dumping nccl trace to", "none", "context", "info",
  "this rank writes its flight recorder trace to the named file", "")
R("nccl-gil-hang-on-exit", PGN, "Could not acquire GIL within 300 ms on exit, possible GIL induced hang", "self",
  "root", "suspect", "the monitor could not take the Python GIL: a thread of this process holds it while "
  "blocked (often in a CUDA or NCCL call)", "take Python and native stacks of this rank (hangdbg dump "
  "--native) to see which thread holds the GIL")
R("nccl-desync-report-failed", PGN, "Failed to retrieve TORCH_NCCL_DESYNC_DEBUG report", "none", "context", "info",
  "the desync debug report could not be built (the store may be gone)", "")
R("nccl-blocking-wait-no-watchdog", PGN, "TORCH_NCCL_BLOCKING_WAIT is enabled, NO watchdog thread is created",
  "none", "context", "info", "blocking wait mode: collectives time out in wait(), no watchdog runs", "")
R("nccl-comm-error-set", PGN, "NCCL communicator encountered error set by ProcessGroupNCCL", "self",
  "consequence", "warning", "the communicator was marked failed after an earlier error on this rank",
  "find the earlier NCCL/CUDA error or timeout of this rank")
R("nccl-async-error", PGN, "NCCL error: ", "self", "root", "warning",
  "NCCL reported an asynchronous error on this rank's communicator; the NCCL error text and the detail line "
  "that follows say whether it was a CUDA failure, a system/network error or a peer that went away",
  "read the NCCL error and the detail line below it; rerun with NCCL_DEBUG=WARN (or INFO) for NCCL's own reason",
  syntax="python", format="NCCL error: {}, NCCL version {}")
R("nccl-error-in", NUH, "NCCL error in: ", "self", "root", "warning",
  "an NCCL call of this rank returned an error (file:line of the PyTorch call site, then NCCL's error text); "
  "the detail line that follows names the class of error",
  "read the NCCL error text and the detail line; rerun with NCCL_DEBUG=WARN (or INFO) for NCCL's own reason",
  syntax="python", format="NCCL error in: {}:{}, {}, NCCL version {}")
R("nccl-timeout-in", NUH, "NCCL timeout in: ", "peer", "consequence", "warning",
  "a non-blocking NCCL call (communicator init or abort) did not finish within the timeout", FIND_UNRESPONSIVE)
R("nccl-detail-unhandled-cuda", NU, "ncclUnhandledCudaError: Call to CUDA function failed.", "self", "root",
  "suspect", "the NCCL error was a failing CUDA call on this rank (the CUDA error is in NCCL's WARN line)",
  "read the CUDA error (NCCL_DEBUG=WARN shows it); check the GPU with nvidia-smi and dmesg (Xid)")
R("nccl-detail-system-error", NU, "ncclSystemError: System call (e.g. socket, malloc) or external library call",
  "environment", "root", "warning",
  "the NCCL error was a failed system call or library call (socket, memory, IB verbs), or a peer exited",
  "rerun with NCCL_DEBUG=INFO to see which call failed; check the network interfaces (NCCL_SOCKET_IFNAME), "
  "IB ports, /dev/shm and ulimits, and whether a peer died first", cut="failed or device error.")
R("nccl-detail-remote-peer-exit", NU, "It can be also caused by unexpected exit of a remote peer.", "peer",
  "context", "warning", "the NCCL system error may also come from a peer process that exited",
  "check whether another rank crashed before this error")
R("nccl-detail-internal-error", NU, "ncclInternalError: Internal check failed.", "self", "root", "warning",
  "NCCL hit an internal check (a bug, or memory corruption)", "rerun with NCCL_DEBUG=INFO and report it with "
  "the NCCL version")
R("nccl-detail-invalid-argument", NU, "ncclInvalidArgument: Invalid value for an argument.", "self", "root",
  "suspect", "an NCCL call got an invalid argument (a tensor or count that does not fit the communicator)",
  "check the tensors passed to the collective (device, dtype, size) on every rank")
R("nccl-detail-invalid-usage", NU, "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
  "self", "root", "suspect", "NCCL was used wrongly: e.g. two ranks on one GPU, or mismatched collectives",
  "rerun with NCCL_DEBUG=WARN to see the reason; give each rank its own GPU "
  "(torch.cuda.set_device(local_rank))")
R("nccl-detail-remote-error", NU, "ncclRemoteError: A call failed possibly due to a network error or a remote",
  "peer", "consequence", "warning", "the NCCL error came from the network or from a peer process that exited",
  "find the peer that failed first; check the network (IB/RoCE counters, link state) if no peer died",
  cut="exiting prematurely.")
R("nccl-comm-aborted", NU, "NCCL communicator was aborted on rank", "self", "consequence", "warning",
  "the communicator of this rank had been aborted (after an error or timeout) before this call",
  "find the original failure (the line says it when known)")
R("nccl-comm-initialized", NU, "NCCL communicator {} is initialized.", "none", "context", "info",
  "an NCCL communicator of this rank finished initialization", "", cut="is initialized.")
R("nccl-comm-created", PGN, "ProcessGroupNCCL created ncclComm_", "none", "context", "info",
  "an NCCL communicator was created on the named CUDA device", "")
R("nccl-uniqueid-broadcast-time", PGN, "ProcessGroupNCCL broadcast unique ID through store took", "none",
  "context", "info", "how long rank 0's NCCL unique id took to reach this rank through the store", "")
R("nccl-pg-options", PGN, "ProcessGroupNCCL initialization options:", "none", "context", "info",
  "the options of a new NCCL process group (size, rank, timeout)", "", cut="TIMEOUT(ms): {}")
R("nccl-pg-environment", PGN, "ProcessGroupNCCL environments: NCCL version:", "none", "context", "info",
  "the NCCL version and TORCH_NCCL_* settings of this process group", "", cut="NCCL version: {}")
R("nccl-work-update", PGN, "NCCL Work update periodically", "none", "context", "info",
  "periodic progress report: last enqueued and last completed NCCL work", "")
R("nccl-uniqueid-store-error", PGN, "is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '{}', but store->get(",
  "peer", "consequence", "warning",
  "this rank could not get rank 0's NCCL unique id from the store: rank 0 crashed or never got there, or the "
  "store is unreachable", "check rank 0's log and whether the store address (MASTER_ADDR:MASTER_PORT) is "
  "reachable from this node")
R("nccl-uniqueid-store-unknown-error", PGN, "Unknown exception while [", "peer", "consequence", "warning",
  "this rank could not get rank 0's NCCL unique id from the store", "check rank 0's log and the store address",
  cut="via c10d key-value store by key '{}'.")
R("nccl-barrier-unknown-device", PGN, "to perform barrier as devices used by this process are currently unknown",
  "launch", "context", "warning",
  "barrier() guesses the GPU of this rank; a wrong guess makes ranks use different GPUs and can hang",
  "pass device_id to init_process_group (or device_ids to barrier) and call torch.cuda.set_device(local_rank)",
  cut="are currently unknown.")
R("nccl-no-gpus", PGN, "ProcessGroupNCCL is only supported with GPUs, no GPUs found!", "launch", "root",
  "suspect", "the NCCL backend was requested in a process that sees no GPU",
  "check CUDA_VISIBLE_DEVICES and the scheduler's GPU allocation, or use the gloo backend on CPU")
R("nccl-tensor-wrong-device", PGN, "Attempt to perform collective on tensor not on device passed to", "self",
  "root", "suspect", "a collective got a tensor on another GPU than the one the process group was bound to",
  "move the tensor to the rank's device (torch.cuda.current_device()) or fix device_id")
R("nccl-comm-not-destroyed", NUH, "WARNING: NCCL communicator hasn't been destroyed", "none", "context", "info",
  "an NCCL communicator was still alive at exit", "call destroy_process_group() at the end of the program",
  cut="This may cause memory leaks.")
R("nccl-aborting-comm", NUH, "Aborting ncclComm_", "self", "consequence", "warning",
  "this rank aborts an NCCL communicator; the reason follows", "read the reason and find the first failure")

# --- flight recorder / desync report ------------------------------------------------------------
R("fr-debug-info-written", C10D + "FlightRecorder.cpp", "Finished writing NCCLPG debug info to", "none", "context",
  "info", "the flight recorder dump of this rank was written to the named file", "")
R("fr-debug-info-open-failed", C10D + "FlightRecorder.cpp", "Error opening file for writing NCCLPG debug info",
  "environment", "root", "warning", "the flight recorder dump could not be written",
  "point TORCH_NCCL_DEBUG_INFO_TEMP_FILE to a writable directory with free space")
R("desync-lagging-ranks", TRACE, "are the lagging ranks that caused this timeout", "peer", "root", "suspect",
  "the desync report (TORCH_NCCL_DESYNC_DEBUG=1) names ranks that never joined the timed-out collective",
  "look at the named ranks: what they were doing instead (stacks, logs)", cut="caused this timeout.")
R("desync-culprits-header", TRACE, "the lagging/dead/mismatched ranks that caused the desync are:", "peer",
  "context", "warning", "the desync report lists the ranks it blames on the next lines", "look at the listed ranks")
R("desync-joined-not-finished", TRACE, "joined but didn't finish collective", "peer", "root", "suspect",
  "desync report: the named ranks entered a collective but did not finish it",
  "look at the named ranks (a GPU hang, a crash or a network problem)")
R("desync-finished-not-joined", TRACE, "finished collective #", "peer", "root", "suspect",
  "desync report: the named ranks finished a collective but never joined the next one",
  "look at what the named ranks did instead (their Python stacks)", cut="(count from 1)")
R("desync-timeout-at", TRACE, "Timeout at collective:", "peer", "context", "warning",
  "desync report: the collective this rank timed out on", "compare it with the other ranks' last collectives")
R("desync-snapshot", TRACE, "Snapshot of ranks' latest states:", "none", "context", "info",
  "desync report: the states of the ranks follow", "")
R("desync-store-down", TRACE, "Store is down while updating", "peer", "consequence", "warning",
  "the desync tracer could not reach the store (its server is gone)", "check whether rank 0 exited first")

# --- ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) ---------------------------------------
R("collective-mismatch", PGW, "Detected mismatch between collectives on ranks", "self", "root", "suspect",
  "ranks called different collectives (or with different shapes/dtypes) at the same point: the program diverged",
  "compare the two collectives named and make every rank call the same collectives in the same order")
R("collective-mismatch-aspects", PGW, "Collectives differ in the following aspects:", "none", "context", "info",
  "the fields in which the mismatched collectives differ follow", "")
R("collective-running", PGW, "Running collective:", "none", "context", "info",
  "TORCH_DISTRIBUTED_DEBUG=DETAIL trace of a collective this rank enters", "")
R("monitored-barrier-error", PGW, "Monitored Barrier encountered error running collective", "peer",
  "consequence", "warning",
  "the debug wrapper's monitored barrier failed before a collective: some rank did not reach it",
  "read the error (it names the ranks that did not arrive)")

# --- gloo process group --------------------------------------------------------------------------
R("gloo-monitored-barrier-rank-timeout", PGG, "timed out in monitoredBarrier after", "peer", "root", "suspect",
  "monitored_barrier: the named rank did not reach the barrier in time", "look at the named rank")
R("gloo-monitored-barrier-rank-failed", PGG, "Rank {} failed to pass monitoredBarrier in", "peer", "root", "suspect",
  "rank 0's monitored_barrier names the rank(s) that did not reach the barrier", "look at the named rank(s)")
R("gloo-monitored-barrier-ranks-failed", PGG, "Ranks {} failed to pass monitoredBarrier in", "peer", "root",
  "suspect", "rank 0's monitored_barrier names the ranks that did not reach the barrier", "look at the named ranks")
R("gloo-monitored-barrier-rank0-errors", PGG, "successfully reached monitoredBarrier, but received errors",
  "peer", "consequence", "warning", "this rank reached monitored_barrier but rank 0 failed or went away",
  "check rank 0's log", cut="from rank 0.")
R("gloo-connect-full-mesh-failed", PGG, "Gloo connectFullMesh failed with", "environment", "root", "warning",
  "gloo could not connect to every peer (network, firewall, wrong interface, or a peer that died)",
  "set GLOO_SOCKET_IFNAME to an interface the nodes share; check firewalls and that every rank started")
R("gloo-hostname-loopback", PGG, "Unable to resolve hostname to a (local) address", "environment", "root",
  "warning", "gloo fell back to the loopback address: ranks on other nodes will not reach this one",
  "set GLOO_SOCKET_IFNAME to the interface to use, or fix the host's name resolution",
  cut="as fallback.")
R("gloo-cannot-resolve", PGG, "Cannot resolve {} to a (local) address", "environment", "root", "suspect",
  "gloo could not resolve this host's name to a local address", "set GLOO_SOCKET_IFNAME or fix /etc/hosts / DNS",
  cut="to a (local) address")

# --- TCPStore / sockets ------------------------------------------------------------------------
R("store-clients-timeout", TCPS, "seconds waiting for clients.", "launch", "root", "warning",
  "the store server waited in vain for every rank to connect: some ranks did not start, or the world size is "
  "wrong", "check that every node launched and that nnodes x nproc_per_node matches the world size")
R("store-connect-timed-out", TCPS, "to host {}:{} - timed out", "launch", "root", "warning",
  "this rank could not connect to the store server (MASTER_ADDR:MASTER_PORT) before the timeout",
  "check MASTER_ADDR/MASTER_PORT, that rank 0 (or the rendezvous host) is up, and firewalls between the nodes",
  cut="- timed out")
R("store-send-failed", TCPS, "sendBytes failed on", "peer", "consequence", "warning",
  "sending to the store server failed: the server (rank 0 or the agent) is gone", "check whether rank 0 exited "
  "first")
R("store-recv-vector-failed", TCPS, "recvVector failed on", "peer", "consequence", "warning",
  "receiving from the store server failed: the server (rank 0 or the agent) is gone",
  "check whether rank 0 exited first")
R("store-recv-value-failed", TCPS, "recvValue failed on", "peer", "consequence", "warning",
  "receiving from the store server failed: the server (rank 0 or the agent) is gone",
  "check whether rank 0 exited first")
R("store-stop-waiting-expected", TCPS, "Stop_waiting response is expected", "peer", "consequence", "warning",
  "a store wait() got an unexpected reply, usually because the store connection broke or timed out",
  "check whether the store server (rank 0) is alive and the waited key is ever set")
R("store-wait-timeout", TCPS, "wait timeout after", "peer", "consequence", "warning",
  "a store wait() for keys timed out: the rank that should set them never did", "find the rank that did not "
  "reach this point")
R("store-server-started", TCPS, "The server has started on port", "none", "context", "info",
  "the TCPStore server is listening", "")
R("store-somaxconn", TCPS, "workers but somaxconn is", "environment", "root", "warning",
  "the kernel's listen backlog is smaller than the number of workers: connections to the store may fail",
  "raise net.core.somaxconn (sysctl) on the store host", cut="might cause instability during bootstrap,")
R("store-socket-timeout", C10D + "Utils.hpp", "Socket Timeout", "peer", "consequence", "warning",
  "a socket read or write of the store timed out", "check whether the store server is alive and reachable")
R("store-recv-zero-bytes", C10D + "Utils.hpp", "failed to recv, got 0 bytes", "peer", "consequence", "warning",
  "the store connection was closed by the other side (the store server or client exited)",
  "check whether rank 0 / the launcher exited first")
R("store-send-zero-bytes", C10D + "Utils.hpp", "failed to send, sent 0 bytes", "peer", "consequence", "warning",
  "the store connection was closed by the other side", "check whether rank 0 / the launcher exited first")
R("store-uv-read-callback-failed", UVB, "Read callback failed.", "peer", "consequence", "info",
  "the libuv store server lost a client connection (the client exited)", "")
R("store-uv-listen-failed", UVB, "The server socket has failed to listen on any local network address. port:",
  "launch", "root", "suspect", "the store server could not listen on its port (often: address already in use)",
  "choose a free MASTER_PORT or stop the old job that still holds the port")
R("store-uv-bind-failed", UVB, "The server socket has failed to bind. port:", "launch", "root", "suspect",
  "the store server could not bind its port (often: address already in use)",
  "choose a free MASTER_PORT or stop the old job that still holds the port")
R("socket-listen-any-failed", SOCK, "The server socket has failed to listen on any local network address.",
  "launch", "root", "suspect", "the store server could not listen on its port (often: address already in use)",
  "choose a free MASTER_PORT or stop the old job that still holds the port")
R("socket-bind-failed", SOCK, "The server socket has failed to bind to", "launch", "root", "suspect",
  "the store server could not bind its address (often: address already in use)",
  "choose a free MASTER_PORT or stop the old job that still holds the port")
R("socket-listen-failed", SOCK, "The server socket has failed to listen on {} {}", "launch", "root", "suspect",
  "the store server could not listen on the address", "choose a free MASTER_PORT")
R("socket-connect-timeout", SOCK, "The client socket has timed out after", "launch", "root", "warning",
  "this rank could not connect to the store (MASTER_ADDR:MASTER_PORT, or torchrun's --rdzv-endpoint) before the "
  "timeout: nothing was listening there - the process that hosts the store (rank 0, or the torchrun agent on the "
  "endpoint's host, which hosts it only when it recognises that address as its own) was not up, or the address is "
  "wrong or blocked",
  "check MASTER_ADDR/MASTER_PORT or --rdzv-endpoint: it must name the store's node by an address that node knows as "
  "its own (its hostname or one of its IPs), that node must be up, and firewalls must let the port through")
R("socket-connect-any-failed", SOCK, "The client socket has failed to connect to any network address of", "launch",
  "root", "warning", "this rank could not connect to the store address", "check MASTER_ADDR/MASTER_PORT and that "
  "the store host is up and reachable")
R("socket-connect-failed", SOCK, "The client socket has failed to connect to {} {}", "peer", "consequence", "warning",
  "a connection attempt to the store failed and the client retries until its timeout (C10D_WARNING in the retry "
  "loop): nothing answered at that address yet - the store's host is not up, or the address or port is wrong",
  "check MASTER_ADDR/MASTER_PORT (or --rdzv-endpoint) and that the store's host is up; the timeout that ends the "
  "retries is the failure")
R("socket-gai-failed", SOCK, "network addresses of ({}, {}) cannot be retrieved", "launch", "root", "suspect",
  "the store host name could not be resolved", "check MASTER_ADDR (or --rdzv-endpoint) and name resolution on "
  "this node")
R("socket-not-listening-retry", SOCK, "is listening yet, will retry", "none", "context", "info",
  "the store server is not up yet; the client retries", "")
R("socket-server-timed-out-retry", SOCK, "has timed out, will retry", "none", "context", "info",
  "a connection attempt to the store timed out; the client retries", "")
R("socket-accept-failed", SOCK, "has failed to accept a connection", "environment", "root", "warning",
  "the store server failed to accept a connection", "check file descriptor limits (ulimit -n) and the network")
R("filestore-timeout", C10D + "FileStore.cpp", "Timeout waiting for key:", "peer", "consequence", "warning",
  "a FileStore wait for a key timed out: the rank that should write it never did",
  "find the rank that did not reach this point; check that every rank sees the same shared file")
R("address-in-use", ELA + "utils/distributed.py", "Address already in use", "launch", "root", "suspect",
  "the store port is taken (another job, or a previous run still alive)",
  "choose a free MASTER_PORT / --rdzv-endpoint port, or stop the process that holds it")
R("store-port-in-use-retry", ELA + "utils/distributed.py", "already in use, attempt:", "launch", "root", "warning",
  "the store port is taken; the launcher retries", "choose a free port")
R("store-port-in-use", ELA + "utils/distributed.py", ", port: ", "launch", "root", "suspect",
  "the store port is taken", "choose a free MASTER_PORT or stop the process that holds it")
R("store-members-join-timeout", ELA + "utils/distributed.py", "timed out waiting for all", "launch", "root",
  "warning", "the store server waited in vain for every member to join",
  "check that every node started and that the world size is right")
R("store-barrier-timeout", ELA + "utils/store.py", "Timed out waiting on barrier on rank", "peer", "consequence",
  "warning", "a store barrier timed out; the line names the missing ranks", "look at the missing ranks")
R("env-var-deprecated", C10D + "Utils.hpp", "is deprecated; use", "launch", "context", "info",
  "an old environment variable name is used", "rename the variable as the line says")

# --- DDP reducer -----------------------------------------------------------------------------------
R("ddp-reduction-not-finished", RED, "Expected to have finished reduction in the prior iteration", "self",
  "root", "suspect",
  "DDP: the previous backward did not reduce every parameter (unused parameters, or a graph that changed)",
  "pass find_unused_parameters=True or make every forward output take part in the loss; "
  "TORCH_DISTRIBUTED_DEBUG=INFO names the parameters", cut="before starting a new one.")
R("ddp-marked-ready-twice", RED, "Expected to mark a variable ready only once", "self", "root", "suspect",
  "DDP: a parameter's gradient hook fired twice in one iteration (reentrant checkpointing, shared parameters)",
  "use static_graph=True / _set_static_graph(), or checkpointing with use_reentrant=False",
  cut="ready only once.")
R("ddp-param-ready-twice", RED, "has been marked as ready twice", "self", "root", "suspect",
  "DDP: the named parameter was marked ready twice in one iteration", "see the DDP error text; avoid reusing "
  "the parameter across reentrant backward passes", cut="has been marked as ready twice.")
R("ddp-model-param-count-mismatch", RED, "DDP expects same model across all ranks", "launch", "root", "suspect",
  "DDP: the ranks built models with different numbers of parameters (the code, config or checkpoint differs by "
  "rank or node); the line pairs the printing rank with the first rank whose count differs, so it names no odd rank",
  "make every rank build the same model (the same code, config and checkpoint on every node); compare each rank's "
  "parameter count")
R("ddp-param-size-mismatch", RED, "appears not to match sizes of the same param in process 0", "self", "root",
  "suspect", "DDP: a parameter's shape differs from rank 0's", "make every rank build the same model")
R("ddp-param-stride-mismatch", RED, "appears not to match strides of the same param in process 0", "self", "root",
  "suspect", "DDP: a parameter's strides differ from rank 0's", "make every rank build the same model")
R("ddp-params-without-grad", RED, "Parameters which did not receive grad for rank", "self", "context",
  "warning", "DDP names the parameters that got no gradient on this rank", "make them take part in the loss or "
  "use find_unused_parameters=True")
R("ddp-param-indices-without-grad", RED, "Parameter indices which did not receive grad for rank", "self",
  "context", "warning", "DDP names the parameter indices that got no gradient on this rank",
  "set TORCH_DISTRIBUTED_DEBUG=INFO to get their names")
R("ddp-graph-changed", RED, "Your training graph has changed in this iteration", "self", "root", "suspect",
  "DDP with static_graph=True: the set of used parameters changed between iterations",
  "drop static_graph=True or keep the used parameters the same every iteration", cut="in this iteration,")

# --- c10d Python -----------------------------------------------------------------------------------
R("store-based-barrier-timeout", C10DPY, "Timed out initializing process group in store based barrier", "peer",
  "consequence", "warning", "init_process_group's store barrier timed out: some ranks never called it",
  "check that every rank started and reached init_process_group (compare num_workers_joined with world_size)")
R("store-based-barrier-waiting", C10DPY, "Waiting in store based barrier to initialize process group for",
  "peer", "consequence", "info", "init_process_group waits for the other ranks", "", cut="seconds", stall=STALL_INIT)
R("store-based-barrier-done", C10DPY, "Completed store-based barrier for key", "none", "context", "info",
  "every rank passed init_process_group's barrier", "")
R("default-pg-not-initialized", C10DPY, "Default process group has not been initialized", "self", "root",
  "suspect", "a torch.distributed call (SyncBatchNorm, DDP, barrier, get_world_size) ran in a process that never "
  "joined a process group: init_process_group was not called, or the script was started as a plain single "
  "process instead of under the distributed launcher",
  "start the script with the distributed launcher (torchrun / python -m torch.distributed.launch) and call "
  "init_process_group before any collective, or drop SyncBatchNorm/DDP for a single-GPU run")
R("default-pg-init-twice", C10DPY, "trying to initialize the default process group twice!", "self", "root",
  "suspect", "init_process_group was called twice", "call init_process_group once per process")
R("nccl-not-built", C10DPY, "Distributed package doesn't have NCCL built in", "environment", "root", "suspect",
  "this PyTorch build has no NCCL", "install a CUDA build of PyTorch, or use the gloo backend")
R("rank-not-in-group", C10DPY, "which does not belong to the given group", "self", "root", "warning",
  "a collective was called on a group this rank is not part of", "call group collectives only on member ranks")
R("rendezvous-env-missing", "torch/distributed/rendezvous.py", "expected, but not set", "launch", "root",
  "suspect", "env:// initialization misses an environment variable (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)",
  "launch with torchrun/srun that sets them, or export them")
R("rendezvous-init-error", "torch/distributed/rendezvous.py", "Error initializing torch.distributed using",
  "launch", "root", "warning", "the init_method URL could not be used", "check the init_method URL")

# --- torchelastic: agent ---------------------------------------------------------------------------
R("elastic-death-signal", AGENT, "death signal, shutting down workers", "peer", "consequence", "warning",
  "the launcher (torchrun agent) got a termination signal (from the scheduler: a failure elsewhere, a "
  "cancellation, a time limit or preemption) and stops its workers",
  "look for the first failure on the other nodes, or at the scheduler's reason (time limit, scancel, preemption)")
# the signal the agent got, as logging's %s prints signal.Signals (Python >= 3.11: the number; before: the name)
for _sig, _name in ((1, "SIGHUP"),):
    for _text in (str(_sig), f"Signals.{_name}"):
        R(f"elastic-death-signal-{_name.lower()}-{'num' if _text.isdigit() else 'name'}", AGENT,
          "death signal, shutting down workers", "launch", "root", "suspect",
          "the launcher (torchrun agent) got SIGHUP: the terminal or ssh session it ran in went away (closed, logged "
          "out, disconnected; nohup alone does not protect a process the shell still owns) and it stopped its workers",
          "run the launcher detached from the terminal: under tmux/screen, with setsid/disown, or as a batch job",
          syntax="python", format=f"Received {_text} death signal, shutting down workers",
          example=f"Received {_text} death signal, shutting down workers")
R("elastic-worker-group-restart", AGENT, "attempts left; will restart worker group", "peer", "consequence",
  "warning", "a worker failed and the agent restarts the whole worker group", "find the worker that failed first")
R("elastic-new-nodes", AGENT, "new nodes from group_rank", "none", "context", "info",
  "new nodes joined; the agent restarts the worker group", "")
R("elastic-waiting-other-agents", AGENT, "Local worker group finished (", "none", "context", "info",
  "this node's workers finished; the agent waits at the exit barrier for the other nodes", "")
R("elastic-group-finished", AGENT, "worker group successfully finished.", "none", "context", "info",
  "this node's workers finished successfully", "", cut="worker group successfully finished.")
R("elastic-exit-barrier-error", AGENT, "Error waiting on exit barrier.", "peer", "consequence", "warning",
  "the other agents did not reach the exit barrier in time (a node failed or hangs)", "check the other nodes")
R("elastic-rendezvous-complete", AGENT, "Rendezvous complete for workers. Result:", "none", "context", "info",
  "the agent finished rendezvous; the ranks follow", "")
R("elastic-rendezvousing", AGENT, "Rendezvous'ing worker group", "none", "context", "info",
  "the agent starts rendezvous with the other nodes", "", stall=STALL_RDZV)
R("elastic-starting-workers", AGENT, "Starting worker group", "none", "context", "info",
  "the agent starts its workers", "")
R("elastic-stopping-workers", AGENT, "Stopping worker group", "none", "consequence", "info",
  "the agent stops its workers (before a restart or after a failure)", "")
R("elastic-rendezvous-graceful-exit", AGENT, "Rendezvous gracefully exited", "none", "context", "info",
  "rendezvous ended without error", "")

# --- torchelastic: multiprocessing -----------------------------------------------------------------
R("elastic-worker-failed-binary", MPAPI, "local_rank: %s (pid: %s) of binary:", "self", "root", "warning",
  "the agent saw this worker exit with a non-zero code (negative: killed by that signal); the worker's own "
  "log says why", "read the worker's error (error_file / its stderr); -9 often means the OOM killer (dmesg)")
R("elastic-worker-failed-fn", MPAPI, "local_rank: %s (pid: %s) of fn:", "self", "root", "warning",
  "the agent saw this worker function exit with a non-zero code", "read the worker's error (its stderr)")
R("elastic-sending-closing-signal", MPAPI, "Sending process %s closing signal", "peer", "consequence", "warning",
  "the agent terminates its remaining workers after one failed (or after it was told to stop)",
  "find the worker that failed first (the 'failed (exitcode' line or the root cause block)")
R("elastic-unable-to-shutdown", MPAPI, "Unable to shutdown process %s via %s, forcefully exiting via", "self",
  "consequence", "warning", "a worker did not exit after SIGTERM and is killed (it is stuck, often in a CUDA or "
  "NCCL call or in uninterruptible I/O)", "take native stacks of such workers next time (hangdbg dump --native)")
R("elastic-closing-process", MPAPI, "Closing process %s via signal", "none", "consequence", "info",
  "the agent stops a worker", "")
R("elastic-signal-handlers-thread", MPAPI, "Failed to register signal handlers since torchelastic is running on",
  "launch", "context", "warning", "the elastic agent runs off the main thread: a killed launcher may leave "
  "orphaned workers", "run the launcher on the main thread", cut="on a child thread.")
R("elastic-process-got-signal", MPAPI, "got signal:", "peer", "consequence", "warning",
  "the launcher process received a termination signal", "look for who sent it (scheduler, a failure elsewhere)")

# --- torchelastic: the ChildFailedError block -------------------------------------------------------
R("elastic-root-cause", ERRS, "Root Cause (first observed failure):", "none", "context", "info",
  "the failure block of torchrun: the next lines describe the first worker that failed", "")
R("elastic-failure-rank", ERRS, "rank      : ${rank}", "none", "context", "info",
  "the failure block: the global and local rank of the failed worker", "", template=True)
R("elastic-failure-exitcode", ERRS, "exitcode  : ${exitcode}", "self", "root", "warning",
  "the failure block: the failed worker's exit code (a negative number is the signal that killed it)",
  "read the worker's error file / log; a signal means it was killed (see the traceback line)", template=True,
  cut="(pid: {pid})")
R("elastic-failure-exitcode-sigkill", ERRS, "exitcode  : ${exitcode}", "environment", "root", "warning",
  "the failed worker was killed by SIGKILL (-9): most often the host's out-of-memory killer, or the scheduler",
  "check dmesg / journalctl -k for 'Out of memory: Killed process', and the job's memory limit (cgroup); "
  "lower host memory use (dataloader workers, pinned memory)",
  syntax="python", format="exitcode  : -9 (pid: {pid})", example="exitcode  : -9 (pid: 4242)")
R("elastic-failure-exitcode-sigabrt", ERRS, "exitcode  : ${exitcode}", "self", "consequence", "warning",
  "the failed worker aborted (SIGABRT, -6): often the NCCL watchdog taking the process down after a timeout",
  "look for a watchdog timeout or a CUDA/NCCL error in this worker's log",
  syntax="python", format="exitcode  : -6 (pid: {pid})", example="exitcode  : -6 (pid: 4242)")
R("elastic-failure-exitcode-sigsegv", ERRS, "exitcode  : ${exitcode}", "self", "root", "suspect",
  "the failed worker crashed with a segmentation fault (SIGSEGV, -11)",
  "get the native stack (core dump, faulthandler, hangdbg core) of the worker",
  syntax="python", format="exitcode  : -11 (pid: {pid})", example="exitcode  : -11 (pid: 4242)")
R("elastic-failure-exitcode-sigbus", ERRS, "exitcode  : ${exitcode}", "environment", "root", "suspect",
  "the failed worker died of SIGBUS (-7): usually /dev/shm is too small (DataLoader workers, NCCL)",
  "enlarge /dev/shm (docker --shm-size / --ipc=host) or reduce shared memory use",
  syntax="python", format="exitcode  : -7 (pid: {pid})", example="exitcode  : -7 (pid: 4242)")
R("elastic-failure-exitcode-sigterm", ERRS, "exitcode  : ${exitcode}", "peer", "consequence", "warning",
  "the worker was terminated by SIGTERM (-15): the agent or the scheduler stopped it",
  "find why the job was stopped (another worker's failure, the scheduler's time limit or cancellation)",
  syntax="python", format="exitcode  : -15 (pid: {pid})", example="exitcode  : -15 (pid: 4242)")
R("elastic-signal-received", ERRS, "received by PID", "self", "root", "warning",
  "the failure block: the worker was killed by the named signal (the traceback line is this message)",
  "see the entries for the signal (SIGKILL: OOM killer; SIGABRT: watchdog abort; SIGSEGV: crash)",
  syntax="python", format="traceback : Signal {} ({}) received by PID {}")
R("elastic-traceback-sigkill", ERRS, "received by PID", "environment", "root", "warning",
  "the failed worker was killed by SIGKILL: most often the host's out-of-memory killer, or the scheduler",
  "check dmesg / journalctl -k for 'Out of memory: Killed process' and the job's memory limit",
  syntax="python", format="traceback : Signal 9 (SIGKILL) received by PID {}",
  example="traceback : Signal 9 (SIGKILL) received by PID 4242")
R("elastic-traceback-sigabrt", ERRS, "received by PID", "self", "consequence", "warning",
  "the failed worker aborted (SIGABRT): often the NCCL watchdog taking the process down after a timeout",
  "look for a watchdog timeout or a CUDA/NCCL error in this worker's log",
  syntax="python", format="traceback : Signal 6 (SIGABRT) received by PID {}",
  example="traceback : Signal 6 (SIGABRT) received by PID 4242")
R("elastic-traceback-sigterm", ERRS, "received by PID", "peer", "consequence", "warning",
  "the worker was terminated by SIGTERM: the agent or the scheduler stopped it",
  "find why the job was stopped (another worker's failure, a time limit, a cancellation)",
  syntax="python", format="traceback : Signal 15 (SIGTERM) received by PID {}",
  example="traceback : Signal 15 (SIGTERM) received by PID 4242")
R("elastic-enable-traceback", ERRS, "To enable traceback see:", "none", "context", "info",
  "the worker's error file holds no traceback", "decorate the entrypoint with "
  "@torch.distributed.elastic.multiprocessing.errors.record")
R("elastic-no-error-file", ERRS, "FAILED with no error file.", "none", "context", "info",
  "the failed worker wrote no error file", "decorate the entrypoint with @record", syntax="printf",
  cut="FAILED with no error file.")

# --- torchelastic: rendezvous ------------------------------------------------------------------------
R("rdzv-nodes-removed-no-heartbeat", DRDZV, "have been removed from the rendezvous", "peer", "root", "suspect",
  "rendezvous dropped nodes that stopped sending keep-alive heartbeats (they died or hang)",
  "look at the named nodes")
R("rdzv-dead-node", DRDZV, "Detected dead node", "peer", "root", "suspect",
  "rendezvous found a node without heartbeat and removes it", "look at the named node")
R("rdzv-keepalive-failed", DRDZV, "has failed to send a keep-alive heartbeat to the rendezvous", "peer",
  "consequence", "warning", "this node could not reach the rendezvous store (its host died or the network broke)",
  "check the rendezvous endpoint host (--rdzv-endpoint) and the network")
R("rdzv-shutdown-failed", DRDZV, "has failed to shutdown the rendezvous", "peer", "consequence", "warning",
  "this node could not close the rendezvous (the store is gone)", "check the rendezvous endpoint host")
R("rdzv-closed-terminating", DRDZV, "is closed, terminating pending rendezvous", "peer", "consequence", "warning",
  "another node closed the rendezvous (it failed or finished), so this node stops", "look at the other nodes")
R("rdzv-node-closed", DRDZV, "has closed the rendezvous", "none", "consequence", "info",
  "this node closed the rendezvous", "")
R("rdzv-joined-round", DRDZV, "has joined round", "none", "context", "info",
  "this node joined a rendezvous round with the given rank and world size", "")
R("rdzv-attempts-join", DRDZV, "attempts to join the next round of the rendezvous", "none", "context", "info",
  "this node starts rendezvous", "", stall=STALL_RDZV)
R("rdzv-store-connection-failed", ELA + "rendezvous/c10d_rendezvous_backend.py",
  "The connection to the C10d store has failed.", "launch", "root", "warning",
  "the c10d rendezvous backend could not reach its store", "check --rdzv-endpoint (host:port), that its host is "
  "up, and firewalls", cut="has failed.")
R("rdzv-hosts-store", ELA + "rendezvous/c10d_rendezvous_backend.py", "hosts the TCP store for the C10d", "none",
  "context", "info", "this process serves the rendezvous store", "")
R("rdzv-port-absent", ELA + "rendezvous/static_tcp_rendezvous.py", "Port is absent in endpoint", "launch", "root",
  "suspect", "the static rendezvous endpoint has no port", "pass --master-port")
RU = ELA + "rendezvous/utils.py"
RAPI = ELA + "rendezvous/api.py"
FIX_RDZV = ("pass --rdzv-endpoint HOST:PORT (or --master-addr/--master-port) with a reachable host and a free port, "
            "the same on every node")
R("rdzv-endpoint-bad-port", RU, "The port number of the rendezvous endpoint", "launch", "root", "suspect",
  "the rendezvous endpoint has no valid port (an endpoint of None:None means the launcher got no address: a "
  "mis-parsed launch command or an unset MASTER_ADDR/MASTER_PORT)", FIX_RDZV)
R("rdzv-endpoint-bad-host", RU, "The hostname of the rendezvous endpoint", "launch", "root", "suspect",
  "the rendezvous endpoint's host is not a valid hostname or IP address", FIX_RDZV)
R("rdzv-config-string-format", RU, "The rendezvous configuration string must be in format", "launch", "root",
  "suspect", "--rdzv-conf is not a comma-separated key=value list", "write --rdzv-conf as key1=value1,key2=value2")
R("rdzv-config-option-no-value", RU, "must have a value specified.", "launch", "root", "suspect",
  "a --rdzv-conf option has no value", "write --rdzv-conf as key1=value1,key2=value2")
R("rdzv-config-option-not-int", RAPI, "does not represent a valid integer", "launch", "root", "suspect",
  "a --rdzv-conf option that must be an integer is not one", "fix the value in --rdzv-conf")
R("rdzv-min-nodes", RAPI, "The minimum number of rendezvous nodes", "launch", "root", "suspect",
  "--nnodes gives a minimum of nodes that is not above zero", "pass --nnodes N or MIN:MAX with 0 < MIN <= MAX")
R("rdzv-max-nodes", RAPI, "The maximum number of rendezvous nodes", "launch", "root", "suspect",
  "--nnodes gives a maximum below its minimum", "pass --nnodes N or MIN:MAX with 0 < MIN <= MAX")
R("rdzv-backend-not-registered", RAPI, "is not registered. Did you forget", "launch", "root", "suspect",
  "--rdzv-backend names a rendezvous backend this PyTorch does not have (a typo, or etcd without its package)",
  "use --rdzv-backend c10d (or static), or install the backend's package")
R("rdzv-static-rank-absent", ELA + "rendezvous/static_tcp_rendezvous.py", "rank is absent in RendezvousParameters",
  "launch", "root", "suspect", "the static rendezvous got no node rank", "pass --node-rank on every node")
R("rdzv-static-endpoint-absent", ELA + "rendezvous/static_tcp_rendezvous.py",
  "endpoint is absent in RendezvousParameters", "launch", "root", "suspect",
  "the static rendezvous got no master address", "pass --master-addr and --master-port on every node")
R("launcher-endpoint-missing", "torch/distributed/launcher/api.py", "Endpoint is missing in endpoint", "launch",
  "root", "suspect", "the launcher got no rendezvous endpoint", "pass --master-addr and --master-port (or "
  "--rdzv-endpoint)")
R("launcher-port-missing", "torch/distributed/launcher/api.py", "port is missing in endpoint", "launch", "root",
  "suspect", "the launcher's endpoint has no port", "pass --master-port (or HOST:PORT in --rdzv-endpoint)")
R("run-nnodes-format", "torch/distributed/run.py", "is not in \"MIN:MAX\" format", "launch", "root", "suspect",
  "--nnodes is neither a number nor MIN:MAX", "pass --nnodes N or --nnodes MIN:MAX")
R("run-nproc-unsupported", "torch/distributed/run.py", "Unsupported nproc_per_node value", "launch", "root",
  "suspect", "--nproc-per-node is not a number, gpu, cpu, xpu or auto", "give --nproc-per-node a number of processes")

R("elastic-signal-received-by-pid", ELA + "multiprocessing/errors/__init__.py", " received by PID ", "self", "root",
  "warning", "torchelastic's message for a worker that a signal ended (it wrote no error file): SIGKILL is the OOM "
  "killer or the scheduler, SIGBUS usually /dev/shm, SIGSEGV/SIGABRT a native crash, SIGTERM a stop from outside",
  "read the worker's own output before it; for SIGKILL check dmesg for the OOM killer, for SIGBUS df -h /dev/shm")

R("stream-writer-cannot-open", "caffe2/serialize/inline_container.cc", " cannot be opened.", "environment", "root",
  "suspect", "torch.save could not create the checkpoint file in a directory that exists (its parent directory is "
  "checked first): no write permission, a read-only filesystem, a full disk or quota (blocks or inodes), or no file "
  "handle left", "check free space, inodes and quota on the checkpoint path (df -h, df -i, quota -s), its "
  "permissions and that the filesystem is mounted read-write")
R("stream-writer-no-parent-dir", "caffe2/serialize/inline_container.cc", "Parent directory ", "launch", "root",
  "suspect", "torch.save was given a path whose directory does not exist (on this node: a node-local path, or a "
  "directory made only by rank 0)", "create the checkpoint directory before saving (on every node that saves, or "
  "on a shared filesystem)", optional=True)
R("stream-writer-failed", "caffe2/serialize/inline_container.cc", "PytorchStreamWriter failed ", "environment", "root",
  "suspect", "torch.save could not write the checkpoint archive: 'file write failed' means a write came back short - "
  "the disk or the quota is full, or the (network) filesystem went away",
  "check free space and quota on the checkpoint path (df -h, quota -s) and the filesystem's health; remove old "
  "checkpoints", cut="PytorchStreamWriter failed {}")
R("stream-reader-failed", "caffe2/serialize/inline_container.cc", "PytorchStreamReader failed ", "environment", "root",
  "suspect", "torch.load could not read the checkpoint archive: the file is truncated or corrupt (a save that was "
  "interrupted or ran out of disk, a partial copy or download)",
  "re-create or re-download the checkpoint; check that its save finished (size, free disk at save time)",
  cut="PytorchStreamReader failed {}")

R("cpu-allocator-cannot-allocate", "c10/core/impl/alloc_cpu.cpp", "DefaultCPUAllocator: can't allocate memory",
  "environment", "root", "suspect", "PyTorch could not allocate host (CPU) memory: the node's RAM or the job's "
  "memory limit (cgroup, Slurm --mem) is exhausted", "cut host memory (DataLoader workers, pinned buffers, per-rank "
  "model copies, CPU offload) or give the job more RAM; check the job's memory limit",
  cut="DefaultCPUAllocator: can't allocate memory: you tried to allocate {} bytes.")

# --- torch.multiprocessing.spawn -----------------------------------------------------------------
R("mp-process-terminated-error", "torch/multiprocessing/spawn.py", "terminated with the following error:",
  "self", "root", "suspect", "a process started by torch.multiprocessing.spawn raised; its traceback follows",
  "read the traceback that follows", rank_field=0)
R("mp-terminating-process", "torch/multiprocessing/spawn.py", "via signal SIGTERM", "peer", "consequence",
  "info", "spawn stops the other processes after one failed", "", cut="via signal SIGTERM")
R("mp-process-exit-code", "torch/multiprocessing/spawn.py", "terminated with exit code", "self", "root",
  "warning", "a process started by torch.multiprocessing.spawn exited with a non-zero code",
  "read that process's output", rank_field=0)
R("mp-process-signal", "torch/multiprocessing/spawn.py", "terminated with signal", "self", "root", "warning",
  "a process started by torch.multiprocessing.spawn was killed by a signal (SIGKILL: likely the OOM killer)",
  "check dmesg for the OOM killer; get a core dump for SIGSEGV", rank_field=0)

# --- DataLoader ------------------------------------------------------------------------------------
R("dataloader-worker-killed", DLC, "is killed by signal:", "environment", "root", "suspect",
  "a DataLoader worker process was killed by a signal (Killed: usually the OOM killer; Bus error: /dev/shm full)",
  "check dmesg for the OOM killer and the size of /dev/shm; lower num_workers or prefetch_factor")
R("dataloader-worker-exited", DLC, ") exited unexpectedly with exit code", "self", "root", "suspect",
  "a DataLoader worker process exited with an error", "rerun with num_workers=0 to see the error of the "
  "dataset code", cut="exited unexpectedly with exit code {}.")
R("dataloader-out-of-shm", DLC, "workers are out of shared memory", "environment", "context", "warning",
  "the DataLoader suggests the workers ran out of shared memory", "enlarge /dev/shm (docker --shm-size / "
  "--ipc=host) or reduce num_workers")
R("dataloader-bus-error", DLC, "Unexpected bus error encountered in worker", "environment", "root", "suspect",
  "a DataLoader worker got SIGBUS, usually because /dev/shm is full", "enlarge /dev/shm (docker --shm-size / "
  "--ipc=host) or use fewer workers")
R("dataloader-segfault", DLC, "Unexpected segmentation fault encountered in worker", "self", "root", "suspect",
  "a DataLoader worker crashed (a native library used by the dataset code)", "rerun with num_workers=0 and get "
  "the native stack of the crash")
R("dataloader-fpe", DLC, "Unexpected floating-point exception encountered in worker", "self", "root", "suspect",
  "a DataLoader worker got SIGFPE", "rerun with num_workers=0 to find the failing sample")
R("dataloader-workers-exited", DLPY, "DataLoader worker (pid(s) {}) exited unexpectedly", "self", "consequence", "warning",
  "the main process found DataLoader workers gone; the worker's own error was printed before",
  "look at the worker's error above (killed by signal, exception)")
R("dataloader-timeout", DLPY, "DataLoader timed out after", "self", "root", "warning",
  "no batch arrived within the DataLoader timeout: the workers are stuck or too slow (storage, a deadlock)",
  "take stacks of the worker processes (py-spy dump) and check the storage the dataset reads")
R("dataloader-pin-memory-exited", DLPY, "Pin memory thread exited unexpectedly", "self", "consequence",
  "warning", "the pin-memory thread of the DataLoader died", "look for the error printed before it")
R("dataloader-too-many-open-files", DLPY, "Too many open files.", "environment", "root", "suspect",
  "the process ran out of file descriptors talking to the DataLoader workers", "raise ulimit -n or call "
  "torch.multiprocessing.set_sharing_strategy('file_system')",
  cut="Communication with the workers is no longer possible.")
R("dataloader-worker-exception", "torch/_utils.py", "Caught ", "self", "root", "suspect",
  "the dataset code raised in a DataLoader worker; the original traceback follows (ExceptionWrapper's "
  "'Caught {} {}.' with where = 'in DataLoader worker process {}' of torch/utils/data/_utils/worker.py)",
  "fix the dataset code "
  "(the traceback that follows names the line)", syntax="python",
  format="Caught {} in DataLoader worker process {}.", cut="")

# --- CUDA: caching allocator, device init, device-side asserts ------------------------------------
R("cuda-oom", CCA, "CUDA out of memory. Tried to allocate {}.", "self", "root", "suspect",
  "this rank's GPU ran out of memory (the line says how much PyTorch holds and whether other processes use "
  "the GPU)", "reduce the batch size or activation memory (checkpointing); check nvidia-smi for other "
  "processes on this GPU; if much memory is reserved but unallocated set "
  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", cut="of which {} is free.")
R("cuda-oom-process-usage", CCA, "has {} memory in use.", "launch", "context", "warning",
  "the OOM message lists another process using this GPU (two ranks on one GPU, or a foreign process)",
  "give each rank its own GPU and make sure nothing else runs on it", syntax="python",
  format="Process {} has {} memory in use.")
R("cuda-oom-huge", CCA, "CUDA out of memory. Tried to allocate more than 1EB memory.", "self", "root", "suspect",
  "an allocation of an absurd size was requested (a wrong shape or an overflow)", "check the tensor shapes")
R("cuda-no-driver", CFUN, "Found no NVIDIA driver on your system", "environment", "root", "suspect",
  "no NVIDIA driver is loaded (or the container does not see it)", "install the driver / run the container "
  "with the NVIDIA runtime (--gpus all)", cut="Found no NVIDIA driver on your system.")
R("cuda-driver-too-old", CFUN, "The NVIDIA driver on your system is too old", "environment", "root", "suspect",
  "the installed driver is older than this PyTorch build's CUDA needs",
  "update the driver or install a PyTorch build for an older CUDA", cut="(found version {}).")
R("cuda-driver-init-failed", CFUN, "CUDA driver initialization failed, you might not have a CUDA gpu.",
  "environment", "root", "suspect", "the CUDA driver could not initialize (no GPU visible, driver or device "
  "problem)", "check nvidia-smi, dmesg (Xid) and that the process can see a GPU")
R("cuda-unknown-error-env", CFUN, "CUDA unknown error - this may be due to an incorrectly set up environment",
  "environment", "root", "suspect", "cudaGetDeviceCount failed with an unknown error (often a broken driver "
  "state, fabric manager not running, or CUDA_VISIBLE_DEVICES changed after start)",
  "check nvidia-smi and dmesg; set CUDA_VISIBLE_DEVICES before the process starts",
  cut="after program start.")
R("cuda-device-count-error", CFUN, "Unexpected error from cudaGetDeviceCount()", "environment", "root",
  "suspect", "CUDA could not count the GPUs; the CUDA error is at the end of the line (e.g. 802: fabric manager "
  "not running, 804: forward compatibility unsupported; 100 no device, and on ROCm 101 hipErrorInvalidDevice, which "
  "older HIP releases return for the same: no GPU visible to this process)", "check nvidia-smi "
  "(rocm-smi), the driver and nvidia-fabricmanager on NVSwitch systems; for no visible GPU the devices the "
  "container or scheduler gives the process (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES)", cut="Unexpected error from cudaGetDeviceCount().")
R("cuda-no-gpus-available", CFUN, "No CUDA GPUs are available", "launch", "root", "suspect",
  "the process sees no GPU", "check CUDA_VISIBLE_DEVICES and the GPUs the scheduler allocated")
R("cuda-dsa-compile-hint", DSA, "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", "none",
  "context", "info", "the trailer of every CUDA error message", "")
R("cuda-dsa-failures-found", DSA, "CUDA device-side assertion failures were found on GPU", "self", "root",
  "suspect", "a kernel's device-side assertion failed on this rank (e.g. an index out of range)",
  "run with CUDA_LAUNCH_BLOCKING=1 to find the failing op; check indices and labels (e.g. class ids >= "
  "num_classes)", cut="were found on GPU #{}!")
R("cuda-async-errors-hint", "c10/cuda/CUDAMiscFunctions.cpp", "CUDA kernel errors might be asynchronously",
  "none", "context", "info", "the trailer of a CUDA error: the Python stack may not be where the kernel failed",
  "rerun with CUDA_LAUNCH_BLOCKING=1 to get the failing call", cut="might be incorrect.")
R("cuda-launch-blocking-hint", "c10/cuda/CUDAMiscFunctions.cpp", "For debugging consider passing", "none",
  "context", "info", "the trailer of a CUDA error", "rerun with CUDA_LAUNCH_BLOCKING=1 to get the failing call")
R("cuda-driver-error", "c10/cuda/driver_api.h", "CUDA driver error: {}", "self", "root", "suspect",
  "a CUDA driver API call failed on this rank; the driver's error string follows",
  "read the error string (an illegal address or ECC error points at the kernel or the GPU)")
R("cuda-reinit-in-fork", CUDAPY, "Cannot re-initialize CUDA in forked subprocess", "self", "root", "suspect",
  "CUDA was used in a process forked after CUDA was initialized (DataLoader workers, multiprocessing)",
  "use the 'spawn' start method, or keep CUDA out of worker processes", cut="in forked subprocess.")
R("cuda-not-compiled", CUDAPY, "Torch not compiled with CUDA enabled", "environment", "root", "suspect",
  "this PyTorch build has no CUDA", "install a CUDA build of PyTorch")
R("cuda-lazy-init-failed", CUDAPY, "CUDA call failed lazily at initialization with error:", "environment",
  "root", "warning", "a CUDA call queued before initialization failed; the error follows",
  "read the error that follows (driver, device visibility)")
R("cuda-device-not-visible", CUDAPY, "is not visible (CUDA_VISIBLE_DEVICES=", "launch", "root", "suspect",
  "the requested GPU is not in CUDA_VISIBLE_DEVICES", "use an index below the number of visible GPUs "
  "(local_rank) or fix CUDA_VISIBLE_DEVICES")
R("cuda-capability-unsupported", CUDAPY, "with CUDA capability sm_", "environment", "root", "suspect",
  "the GPU's compute capability is not in this PyTorch build", "install a PyTorch build that supports this GPU",
  syntax="python", cut="is not compatible with the current PyTorch installation.")
R("cuda-gpu-too-old", CUDAPY, "which is of cuda capability", "environment", "root", "suspect",
  "the GPU is too old for this PyTorch build", "use a newer GPU or an older PyTorch build", syntax="printf")
R("cuda-expandable-segments-ipc", CCA, "cannot be shared between processes", "self", "root", "suspect",
  "tensors from expandable segments cannot be shared with other processes (DataLoader workers)",
  "set expandable_segments:False in the data loading workers", cut="cannot be shared between processes.")
R("cuda-nccl-nonblocking-timeout", "torch/csrc/cuda/nccl.cpp", "NCCL timeout when waiting for nonblocking call",
  "peer", "consequence", "warning", "a non-blocking NCCL call did not complete in time", FIND_UNRESPONSIVE)

# --- torchrun banners -------------------------------------------------------------------------------
R("torchrun-omp-threads", "torch/distributed/run.py", "Setting OMP_NUM_THREADS environment variable", "none",
  "context", "info", "torchrun's start banner", "", cut="for each process to be %s in default,")

# --- gloo (pytorch/gloo; its text reaches PyTorch logs as "[file:line] message") ---------------------
GPAIR = "gloo/transport/tcp/pair.cc"
GUNB = "gloo/transport/tcp/unbound_buffer.cc"
R("gloo-connection-closed", GPAIR, "Connection closed by peer", "peer", "consequence", "warning",
  "gloo: the TCP connection to the named peer was closed: that process exited or crashed",
  "look at the named peer's log for its first error", cut="Connection closed by peer {}", repo="gloo")
R("gloo-read-error", GPAIR, "Read error", "peer", "consequence", "warning",
  "gloo: reading from the named peer failed (connection reset, the peer died or hangs)",
  "look at the named peer's log; check the network if it is alive", cut="Read error {}: {}", repo="gloo")
R("gloo-socket-closed", GPAIR, "Socket closed", "peer", "consequence", "warning",
  "gloo: the socket to the named peer is closed", "look at the named peer's log", repo="gloo")
R("gloo-socket-unexpectedly-closed", GPAIR, "Socket unexpectedly closed", "peer", "consequence", "warning",
  "gloo: the socket to the named peer closed unexpectedly", "look at the named peer's log", repo="gloo")
R("gloo-write-timeout", GPAIR, "Write timeout", "peer", "consequence", "warning",
  "gloo: a write to the named peer timed out (the peer is stuck or the network dropped)",
  "look at the named peer (stacks) and the network", repo="gloo")
R("gloo-read-timeout", GPAIR, "Read timeout", "peer", "consequence", "warning",
  "gloo: a read from the named peer timed out", "look at the named peer (stacks) and the network", repo="gloo")
R("gloo-connect-timeout", "gloo/transport/tcp/pair.h", "Connect timeout", "peer", "consequence", "warning",
  "gloo: connecting to the named peer timed out (it did not start, or a firewall blocks it)",
  "check that the peer started; set GLOO_SOCKET_IFNAME to an interface the nodes share", repo="gloo")
R("gloo-recv-timeout", GUNB, "ms for recv operation to complete", "peer", "consequence", "warning",
  "gloo: a receive did not complete within the timeout: the sending rank never sent (it hangs, crashed, or "
  "called another collective)", FIND_UNRESPONSIVE, repo="gloo")
R("gloo-send-timeout", GUNB, "ms for send operation to complete", "peer", "consequence", "warning",
  "gloo: a send did not complete within the timeout: the receiving rank never received", FIND_UNRESPONSIVE,
  repo="gloo")
R("gloo-application-timeout", GUNB, "Application timeout caused pair closure", "peer", "consequence", "warning",
  "gloo closed its connections because an operation timed out elsewhere in this process",
  "look for the 'Timed out waiting' line that caused it", repo="gloo")
R("gloo-size-mismatch", GPAIR, "Received data size doesn't match expected size.", "self", "root", "suspect",
  "gloo received a message of the wrong size: the ranks ran different collectives or shapes",
  "make every rank call the same collectives with the same shapes (TORCH_DISTRIBUTED_DEBUG=DETAIL checks it)",
  cut="doesn't match expected size.", repo="gloo")
R("gloo-no-address", "gloo/transport/tcp/device.cc", "Unable to find address for:", "environment", "root",
  "suspect", "gloo could not find the address of the named interface or host",
  "check GLOO_SOCKET_IFNAME (an interface that exists on every node) and name resolution", repo="gloo")
R("gloo-no-interface", "gloo/transport/tcp/device.cc", "Unable to find interface for:", "environment", "root",
  "suspect", "gloo could not find a local network interface holding the address it was given (the host name "
  "resolves to an address of no interface of this node: /etc/hosts, a container's network, MASTER_ADDR)",
  "set GLOO_SOCKET_IFNAME to an interface of every node, or make the host name resolve to a local address",
  repo="gloo")


# ---------------------------------------------------------------------------------------------
# CUDA runtime error strings (cudaGetErrorString)
# ---------------------------------------------------------------------------------------------

@dataclass
class CudaRow:
    code: int
    enum: str
    text: str
    blame: str
    role: str
    severity: str
    meaning: str
    action: str
    versions: str = "11.8.89..13.5.37"


CUDA: list[CudaRow] = []
_CUDART_SEEN = ("11.8.89", "12.9.79", "13.0.96", "13.5.37")
"""The libcudart versions (PyPI: nvidia-cuda-runtime-cu11, -cu12, nvidia-cuda-runtime) the strings were read
from with ``--cudart``; ``versions`` of a row is the first..last of them that returns its string."""


def C(code: int, enum: str, text: str, blame: str, role: str, severity: str, meaning: str, action: str,
      versions: str = "11.8.89..13.5.37") -> None:
    CUDA.append(CudaRow(code, enum, text, blame, role, severity, meaning, action, versions))


BUG = "a programming error in the kernel or the calls of this rank"
FIX_CALL = "check the arguments of the failing CUDA call (rerun with CUDA_LAUNCH_BLOCKING=1 to find it)"
FIX_DEVICE = ("every process must use its own GPU before its first CUDA or NCCL call (PyTorch: "
              "torch.cuda.set_device(local_rank) before init_process_group / the first collective; a handle made on "
              "another device is invalid here); otherwise check the arguments of the failing CUDA call (rerun with "
              "CUDA_LAUNCH_BLOCKING=1)")
"""A handle from another device: a process whose current device is not the one its stream, event or communicator
was made on (cudaErrorInvalidResourceHandle's documented 'from another device')."""
FIX_KERNEL = ("rerun with CUDA_LAUNCH_BLOCKING=1 (and compute-sanitizer) to find the kernel; check indices and "
              "shapes; the process must restart, the CUDA context is unusable")
DRIVER = "update the NVIDIA driver or use a PyTorch/CUDA build that the installed driver supports"

C(1, "cudaErrorInvalidValue", "invalid argument", "self", "root", "suspect",
  "a CUDA API call got an argument out of range", FIX_CALL)
C(3, "cudaErrorInitializationError", "initialization error", "environment", "root", "suspect",
  "the CUDA driver and runtime could not be initialized (often: CUDA used in a forked child, or a broken driver)",
  "do not fork after CUDA init (use the spawn start method); check nvidia-smi and dmesg")
C(4, "cudaErrorCudartUnloading", "driver shutting down", "none", "consequence", "info",
  "a CUDA call ran during process shutdown, after the driver unloaded", "")
C(5, "cudaErrorProfilerDisabled", "profiler disabled while using external profiling tool", "none", "context", "info",
  "the CUDA profiler API was called while an external profiler runs", "")
C(6, "cudaErrorProfilerNotInitialized", "profiler not initialized: call cudaProfilerInitialize()", "self", "root",
  "info", "deprecated profiler error", "")
C(7, "cudaErrorProfilerAlreadyStarted", "profiler already started", "self", "context", "info",
  "deprecated profiler error", "")
C(8, "cudaErrorProfilerAlreadyStopped", "profiler already stopped", "self", "context", "info",
  "deprecated profiler error", "")
C(9, "cudaErrorInvalidConfiguration", "invalid configuration argument", "self", "root", "suspect",
  "a kernel launch had an invalid grid/block configuration (often a tensor too large or empty for the kernel)",
  FIX_KERNEL)
C(10, "cudaErrorVersionTranslation", "Driver is newer than runtime and returned parameters the runtime cannot process",
  "environment", "root", "suspect", "the driver returned data this (older) CUDA runtime cannot read", DRIVER,
  versions="13.5.37..13.5.37")
C(12, "cudaErrorInvalidPitchValue", "invalid pitch argument", "self", "root", "suspect",
  "a pitched memory call got an invalid pitch", FIX_CALL)
C(13, "cudaErrorInvalidSymbol", "invalid device symbol", "self", "root", "suspect",
  "a device symbol name or address is invalid", FIX_CALL)
C(16, "cudaErrorInvalidHostPointer", "invalid host pointer", "self", "root", "suspect",
  "a host pointer argument is invalid", FIX_CALL)
C(17, "cudaErrorInvalidDevicePointer", "invalid device pointer", "self", "root", "suspect",
  "a device pointer argument is invalid (freed memory, or memory of another context)", FIX_CALL)
C(18, "cudaErrorInvalidTexture", "invalid texture reference", "self", "root", "suspect",
  "a texture argument is invalid", FIX_CALL)
C(19, "cudaErrorInvalidTextureBinding", "texture is not bound to a pointer", "self", "root", "suspect",
  "a texture binding is invalid", FIX_CALL)
C(20, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor", "self", "root", "suspect",
  "a channel descriptor is invalid", FIX_CALL)
C(21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy", "self", "root", "suspect",
  "a memcpy got an invalid direction", FIX_CALL)
C(22, "cudaErrorAddressOfConstant", "invalid address of constant", "self", "root", "suspect",
  "deprecated: the address of a constant variable was taken", FIX_CALL)
C(23, "cudaErrorTextureFetchFailed", "fetch from texture failed", "self", "root", "suspect",
  "deprecated texture fetch error", FIX_KERNEL)
C(24, "cudaErrorTextureNotBound", "cannot fetch from a texture that is not bound", "self", "root", "suspect",
  "deprecated texture error", FIX_KERNEL)
C(25, "cudaErrorSynchronizationError", "incorrect use of __syncthreads()", "self", "root", "suspect",
  "deprecated synchronization error", FIX_KERNEL)
C(26, "cudaErrorInvalidFilterSetting", "linear filtering not supported for non-float type", "self", "root",
  "suspect", "a texture filter setting is invalid for its type", FIX_CALL)
C(27, "cudaErrorInvalidNormSetting", "read as normalized float not supported for data type", "self", "root",
  "suspect", "a texture normalization setting is invalid for its type (CUDA 11 words it differently)", FIX_CALL,
  versions="12.9.79..13.5.37")
C(28, "cudaErrorMixedDeviceExecution", "device emulation mode and device execution mode cannot be mixed", "self",
  "root", "suspect", "deprecated emulation error", FIX_CALL)
C(31, "cudaErrorNotYetImplemented", "feature not yet implemented", "environment", "root", "suspect",
  "the called CUDA feature is not implemented by this driver/runtime", DRIVER)
C(32, "cudaErrorMemoryValueTooLarge", "memory size or pointer value too large to fit in 32 bit", "self", "root",
  "suspect", "deprecated 32-bit emulation error", FIX_CALL)
C(34, "cudaErrorStubLibrary", "CUDA driver is a stub library", "environment", "root", "suspect",
  "the process loaded the libcuda.so stub (from the toolkit's stubs directory) instead of the real driver",
  "remove the CUDA stubs directory from LD_LIBRARY_PATH; run with the NVIDIA container runtime")
C(35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version", "environment",
  "root", "suspect", "the installed NVIDIA driver is older than the CUDA runtime this program uses", DRIVER)
C(36, "cudaErrorCallRequiresNewerDriver", "API call is not supported in the installed CUDA driver", "environment",
  "root", "suspect", "the CUDA runtime called an API the installed driver lacks", DRIVER)
C(37, "cudaErrorInvalidSurface", "invalid surface reference", "self", "root", "suspect",
  "a surface argument is invalid", FIX_CALL)
C(43, "cudaErrorDuplicateVariableName", "duplicate global variable looked up by string name", "self", "root",
  "suspect", "two global variables share a name", FIX_CALL)
C(44, "cudaErrorDuplicateTextureName", "duplicate texture looked up by string name", "self", "root", "suspect",
  "two textures share a name", FIX_CALL)
C(45, "cudaErrorDuplicateSurfaceName", "duplicate surface looked up by string name", "self", "root", "suspect",
  "two surfaces share a name", FIX_CALL)
C(46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable", "launch", "root",
  "suspect", "the GPU is in exclusive-process compute mode and already used by another process (or was made "
  "unavailable)", "give each rank its own GPU; check nvidia-smi for other processes and the compute mode")
C(49, "cudaErrorIncompatibleDriverContext", "incompatible driver context", "self", "root", "suspect",
  "the current driver context was not created by a compatible runtime", FIX_CALL)
C(52, "cudaErrorMissingConfiguration", "__global__ function call is not configured", "self", "root", "suspect",
  "a kernel was launched without a launch configuration", FIX_CALL)
C(53, "cudaErrorPriorLaunchFailure", "unspecified launch failure in prior launch", "self", "consequence", "warning",
  "deprecated: an earlier kernel launch failed", FIX_KERNEL)
C(65, "cudaErrorLaunchMaxDepthExceeded", "launch would exceed maximum depth of nested launches", "self", "root",
  "suspect", "dynamic parallelism nested too deep", FIX_KERNEL)
C(66, "cudaErrorLaunchFileScopedTex", "launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)",
  "self", "root", "suspect", "a kernel uses file-scoped textures, unsupported with device-side launches", FIX_KERNEL)
C(67, "cudaErrorLaunchFileScopedSurf", "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)",
  "self", "root", "suspect", "a kernel uses file-scoped surfaces, unsupported with device-side launches", FIX_KERNEL)
C(68, "cudaErrorSyncDepthExceeded",
  "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth", "self", "root",
  "suspect", "device-side synchronization nested too deep", FIX_KERNEL)
C(69, "cudaErrorLaunchPendingCountExceeded",
  "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount", "self", "root", "suspect",
  "too many pending device-side launches", FIX_KERNEL)
C(98, "cudaErrorInvalidDeviceFunction", "invalid device function", "environment", "root", "suspect",
  "the kernel does not exist for this GPU (the binary was not built for its architecture)",
  "install a build (PyTorch, extension) compiled for this GPU's compute capability")
C(100, "cudaErrorNoDevice", "no CUDA-capable device is detected", "launch", "root", "suspect",
  "the process sees no GPU", "check CUDA_VISIBLE_DEVICES, the scheduler's GPU allocation and the container's "
  "GPU access (--gpus)")
C(101, "cudaErrorInvalidDevice", "invalid device ordinal", "launch", "root", "suspect",
  "a GPU index beyond the visible GPUs was used (more ranks per node than GPUs, or a wrong local rank)",
  "make nproc_per_node match the GPUs per node and use torch.cuda.set_device(local_rank)")
C(102, "cudaErrorDeviceNotLicensed", "device doesn't have valid Grid license", "environment", "root", "suspect",
  "the vGPU has no valid GRID license", "check the vGPU licensing of the host")
C(103, "cudaErrorSoftwareValidityNotEstablished", "integrity checks failed", "environment", "root", "suspect",
  "the CUDA software's integrity checks failed", "reinstall the driver and CUDA runtime")
C(127, "cudaErrorStartupFailure", "startup failure in cuda runtime", "environment", "root", "suspect",
  "the CUDA runtime failed to start", "check the driver installation (nvidia-smi) and dmesg")
C(200, "cudaErrorInvalidKernelImage", "device kernel image is invalid", "environment", "root", "suspect",
  "a kernel image is invalid for this device (a corrupt or mismatched binary; cudaErrorInvalidSource = 300 "
  "has the same string)", "reinstall the package that "
  "holds the kernel, built for this GPU")
C(201, "cudaErrorDeviceUninitialized", "invalid device context", "self", "root", "suspect",
  "no valid CUDA context is bound (destroyed, or used from the wrong process)", FIX_CALL)
C(205, "cudaErrorMapBufferObjectFailed", "mapping of buffer object failed", "self", "root", "suspect",
  "a graphics buffer object could not be mapped", FIX_CALL)
C(206, "cudaErrorUnmapBufferObjectFailed", "unmapping of buffer object failed", "self", "root", "suspect",
  "a graphics buffer object could not be unmapped", FIX_CALL)
C(207, "cudaErrorArrayIsMapped", "array is mapped", "self", "root", "suspect",
  "the array is mapped and cannot be destroyed", FIX_CALL)
C(208, "cudaErrorAlreadyMapped", "resource already mapped", "self", "root", "suspect",
  "the resource is already mapped", FIX_CALL)
C(209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device",
  "environment", "root", "suspect",
  "the binary has no kernel for this GPU's architecture (PyTorch or an extension built for other GPUs)",
  "install a build compiled for this GPU (check torch.cuda.get_arch_list() against the GPU's capability)")
C(210, "cudaErrorAlreadyAcquired", "resource already acquired", "self", "root", "suspect",
  "the resource was already acquired", FIX_CALL)
C(211, "cudaErrorNotMapped", "resource not mapped", "self", "root", "suspect", "the resource is not mapped",
  FIX_CALL)
C(212, "cudaErrorNotMappedAsArray", "resource not mapped as array", "self", "root", "suspect",
  "the resource is not mapped as an array", FIX_CALL)
C(213, "cudaErrorNotMappedAsPointer", "resource not mapped as pointer", "self", "root", "suspect",
  "the resource is not mapped as a pointer", FIX_CALL)
C(214, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered", "hardware", "root", "suspect",
  "the GPU's memory had an uncorrectable ECC error", "take the GPU out of service: check nvidia-smi -q -d ECC and "
  "dmesg (Xid 48/63/64/94/95), reset it or have it replaced")
C(215, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture", "self", "root", "suspect",
  "a cudaLimit is not supported on this GPU", FIX_CALL)
C(216, "cudaErrorDeviceAlreadyInUse", "exclusive-thread device already in use by a different thread", "launch",
  "root", "suspect", "the GPU is in exclusive mode and used by another thread/process",
  "give each rank its own GPU; check the compute mode")
C(217, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices", "environment",
  "root", "warning", "the two GPUs cannot access each other's memory directly (no P2P path, or P2P disabled)",
  "check nvidia-smi topo -m and the IOMMU/ACS settings; NCCL_P2P_DISABLE=1 avoids P2P")
C(218, "cudaErrorInvalidPtx", "a PTX JIT compilation failed", "environment", "root", "suspect",
  "the driver could not JIT-compile the PTX of a kernel", DRIVER)
C(219, "cudaErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context", "self", "root", "suspect",
  "a graphics interop context is invalid", FIX_CALL)
C(220, "cudaErrorNvlinkUncorrectable", "uncorrectable NVLink error detected during the execution", "hardware",
  "root", "suspect", "an NVLink had an uncorrectable error", "check nvidia-smi nvlink -s / -e and dmesg (Xid 74); "
  "reset the GPUs or have the link serviced")
C(221, "cudaErrorJitCompilerNotFound", "PTX JIT compiler library not found", "environment", "root", "suspect",
  "the driver's PTX JIT library (libnvidia-ptxjitcompiler) is missing", "install the complete driver (also in "
  "the container)")
C(222, "cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain.",
  "environment", "root", "suspect", "the PTX is newer than the driver supports", DRIVER)
C(223, "cudaErrorJitCompilationDisabled", "PTX JIT compilation was disabled", "environment", "root", "suspect",
  "PTX JIT is disabled (CUDA_DISABLE_PTX_JIT) and no binary fits this GPU", "unset CUDA_DISABLE_PTX_JIT or use a "
  "build for this GPU")
C(224, "cudaErrorUnsupportedExecAffinity", "the provided execution affinity is not supported", "self", "root",
  "suspect", "an execution affinity is unsupported on this device", FIX_CALL)
C(225, "cudaErrorUnsupportedDevSideSync", "the provided PTX contains unsupported call to cudaDeviceSynchronize",
  "self", "root", "suspect", "device-side cudaDeviceSynchronize is not supported", FIX_KERNEL,
  versions="12.9.79..13.5.37")
C(226, "cudaErrorContained", "Invalid access of peer GPU memory over nvlink or a hardware error", "hardware",
  "root", "suspect", "a contained error: an invalid NVLink peer access or a GPU hardware error",
  "check dmesg for Xid errors and nvidia-smi; the process must restart", versions="12.9.79..13.5.37")
C(227, "cudaErrorInsufficientLoaderVersion", "Loader version is insufficient for fatbin", "environment", "root",
  "suspect", "the driver's loader is too old for this fat binary", DRIVER, versions="13.5.37..13.5.37")
C(301, "cudaErrorFileNotFound", "file not found", "environment", "root", "suspect",
  "a file CUDA needed was not found", "check the installation of the CUDA libraries")
C(302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found", "environment", "root", "suspect",
  "a shared object symbol could not be resolved (mismatched CUDA libraries)", "use matching CUDA library versions")
C(303, "cudaErrorSharedObjectInitFailed", "shared object initialization failed", "environment", "root", "suspect",
  "a shared object failed to initialize", "check the CUDA library installation")
C(304, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS", "environment", "root",
  "suspect", "an OS call made by CUDA failed (limits, permissions, IPC)", "check ulimits, /dev/shm and the "
  "container's IPC settings")
C(400, "cudaErrorInvalidResourceHandle", "invalid resource handle", "self", "root", "suspect",
  "a stream, event or graph handle is invalid (destroyed, or from another device)", FIX_DEVICE)
C(401, "cudaErrorIllegalState", "the operation cannot be performed in the present state", "self", "root",
  "suspect", "the resource is in a state that forbids this operation", FIX_CALL)
C(402, "cudaErrorLossyQuery", "attempted introspection would be semantically lossy", "self", "root", "suspect",
  "an introspection call cannot return its answer without losing information", FIX_CALL,
  versions="12.9.79..13.5.37")
C(500, "cudaErrorSymbolNotFound", "named symbol not found", "self", "root", "suspect",
  "a named symbol was not found", FIX_CALL)
C(600, "cudaErrorNotReady", "device not ready", "none", "context", "info",
  "an asynchronous operation has not finished yet (a query result, not an error)", "")
C(700, "cudaErrorIllegalAddress", "an illegal memory access was encountered", "self", "root", "suspect",
  "a kernel of this rank read or wrote an invalid address (out-of-bounds index, use after free); the CUDA "
  "context is now unusable", FIX_KERNEL)
C(701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch", "self", "root", "suspect",
  "a kernel asked for more registers or shared memory than the GPU has", FIX_KERNEL)
C(702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated", "environment", "root", "suspect",
  "a kernel ran longer than the display watchdog allows", "do not run long kernels on a GPU that drives a display; "
  "disable the watchdog or use a compute GPU")
C(703, "cudaErrorLaunchIncompatibleTexturing", "launch uses incompatible texturing mode", "self", "root", "suspect",
  "a kernel uses an incompatible texturing mode", FIX_KERNEL)
C(704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled", "self", "root", "warning",
  "peer access between the two GPUs was enabled twice", FIX_CALL)
C(705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled", "self", "root", "suspect",
  "peer access was used or disabled without being enabled", FIX_CALL)
C(708, "cudaErrorSetOnActiveProcess", "cannot set while device is active in this process", "self", "root",
  "suspect", "a device flag was set after the device became active", FIX_CALL)
C(709, "cudaErrorContextIsDestroyed", "context is destroyed", "self", "consequence", "warning",
  "the CUDA context was destroyed (often during shutdown, or after a fatal error)",
  "find the earlier CUDA error, or the exit that destroyed the context")
C(710, "cudaErrorAssert", "device-side assert triggered", "self", "root", "suspect",
  "a kernel's assertion failed on this rank (e.g. an index or class label out of range); the CUDA context is "
  "now unusable", "rerun with CUDA_LAUNCH_BLOCKING=1 (or on CPU) to see which op asserted; check indices and labels")
C(711, "cudaErrorTooManyPeers", "peer mapping resources exhausted", "environment", "root", "suspect",
  "too many peer mappings", "reduce the number of peers a GPU maps")
C(712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped",
  "self", "root", "suspect", "host memory was registered twice", FIX_CALL)
C(713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region", "self",
  "root", "suspect", "host memory was unregistered without being registered", FIX_CALL)
C(714, "cudaErrorHardwareStackError", "hardware stack error", "self", "root", "suspect",
  "a kernel corrupted or overflowed its call stack", FIX_KERNEL)
C(715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered", "self", "root", "suspect",
  "a kernel executed an illegal instruction (a miscompiled or mismatched binary, or memory corruption)",
  FIX_KERNEL)
C(716, "cudaErrorMisalignedAddress", "misaligned address", "self", "root", "suspect",
  "a kernel accessed memory at a misaligned address", FIX_KERNEL)
C(717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space", "self", "root",
  "suspect", "a kernel used an address in the wrong address space", FIX_KERNEL)
C(718, "cudaErrorInvalidPc", "invalid program counter", "self", "root", "suspect",
  "a kernel jumped to an invalid program counter", FIX_KERNEL)
C(719, "cudaErrorLaunchFailure", "unspecified launch failure", "self", "root", "suspect",
  "a kernel failed on the device (an invalid pointer, or a GPU fault); the CUDA context is now unusable",
  FIX_KERNEL + "; check dmesg for Xid errors if the code is known good")
C(720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch", "self", "root", "suspect",
  "a cooperative launch has more blocks than can run at once", FIX_KERNEL)
C(721, "cudaErrorTensorMemoryLeak", "tensor memory not completely freed", "self", "root", "warning",
  "a kernel exited without freeing its tensor memory", FIX_KERNEL, versions="12.9.79..13.5.37")
C(800, "cudaErrorNotPermitted", "operation not permitted", "self", "root", "suspect",
  "the operation is not permitted (e.g. during stream capture or on this device)", FIX_CALL)
C(801, "cudaErrorNotSupported", "operation not supported", "environment", "root", "suspect",
  "the operation is not supported on this system or device", "check that the GPU, the driver version and the "
  "OS support the feature used (a feature of a newer CUDA may need a newer driver)")
C(802, "cudaErrorSystemNotReady", "system not yet initialized", "environment", "root", "suspect",
  "the system is not ready for CUDA (on NVSwitch systems: nvidia-fabricmanager not running)",
  "start nvidia-fabricmanager (matching the driver version) and check nvidia-smi")
C(803, "cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination",
  "environment", "root", "suspect", "the kernel driver and the user-space CUDA driver (libcuda) versions differ",
  "reboot after a driver update, or make the container's libcuda match the host driver")
C(804, "cudaErrorCompatNotSupportedOnDevice", "forward compatibility was attempted on non supported HW",
  "environment", "root", "suspect",
  "the CUDA forward-compatibility libraries were used on a GPU that does not support them (a container's CUDA "
  "newer than the host driver)", "update the host driver, or use a container/CUDA that the host driver supports")
C(805, "cudaErrorMpsConnectionFailed", "MPS client failed to connect to the MPS control daemon or the MPS server",
  "environment", "root", "suspect", "the MPS client could not reach the MPS daemon", "check the MPS daemon "
  "(nvidia-cuda-mps-control) and CUDA_MPS_PIPE_DIRECTORY")
C(806, "cudaErrorMpsRpcFailure", "the remote procedural call between the MPS server and the MPS client failed",
  "environment", "root", "suspect", "MPS client/server communication failed", "restart the MPS daemon")
C(807, "cudaErrorMpsServerNotReady", "MPS server is not ready to accept new MPS client requests", "environment",
  "root", "suspect", "the MPS server is not ready", "wait for or restart the MPS server")
C(808, "cudaErrorMpsMaxClientsReached", "the hardware resources required to create MPS client have been exhausted",
  "environment", "root", "suspect", "too many MPS clients", "run fewer processes per GPU under MPS")
C(809, "cudaErrorMpsMaxConnectionsReached",
  "the hardware resources required to support device connections have been exhausted", "environment", "root",
  "suspect", "too many MPS device connections", "run fewer processes per GPU under MPS")
C(810, "cudaErrorMpsClientTerminated", "the MPS client has been terminated by the server", "environment",
  "consequence", "warning", "the MPS server terminated this client (after a fault in some client)",
  "look for the client that faulted first")
C(811, "cudaErrorCdpNotSupported",
  "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it",
  "environment", "root", "suspect", "dynamic parallelism is not supported in this configuration (e.g. MPS)",
  "run without MPS or avoid dynamic parallelism", versions="12.9.79..13.5.37")
C(812, "cudaErrorCdpVersionMismatch", "unsupported interaction between different versions of CUDA Dynamic Parallelism",
  "environment", "root", "suspect", "kernels built with different dynamic parallelism versions interact",
  "rebuild the kernels with one toolkit", versions="12.9.79..13.5.37")
C(900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing", "self", "root",
  "suspect", "a forbidden call (a sync, an allocation) ran while a CUDA graph was being captured",
  "keep synchronizing calls out of the captured region (torch.cuda.graph / torch.compile mode=reduce-overhead)")
C(901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture", "self",
  "consequence", "warning", "the stream capture was invalidated by an earlier error", "find the first error "
  "of the capture")
C(902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences", "self",
  "root", "suspect", "two separate captures would merge", FIX_CALL)
C(903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began", "self", "root",
  "suspect", "a capture ended on another stream", FIX_CALL)
C(904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work", "self", "root", "suspect",
  "work forked during capture was not joined back", FIX_CALL)
C(905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream", "self",
  "root", "suspect", "a captured stream waited on uncaptured work", FIX_CALL)
C(906, "cudaErrorStreamCaptureImplicit",
  "operation would make the legacy stream depend on a capturing blocking stream", "self", "root", "suspect",
  "the legacy default stream would depend on a capture", FIX_CALL)
C(907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream",
  "self", "root", "suspect", "an event recorded during capture was queried or synchronized", FIX_CALL)
C(908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread",
  "self", "root", "suspect", "a thread-local capture was ended by another thread", FIX_CALL)
C(909, "cudaErrorTimeout", "wait operation timed out", "peer", "consequence", "warning",
  "a CUDA wait operation timed out", "find what the waited work depends on (another stream, process or GPU)")
C(910, "cudaErrorGraphExecUpdateFailure",
  "the graph update was not performed because it included changes which violated constraints specific to "
  "instantiated graph update", "self", "root", "suspect", "a CUDA graph update was rejected", FIX_CALL)
C(911, "cudaErrorExternalDevice", "an async error has occured in external entity outside of CUDA", "hardware",
  "root", "suspect", "an external device (e.g. a NIC doing GPUDirect) reported an asynchronous error",
  "check the external device (NIC) and dmesg")
C(912, "cudaErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration",
  "self", "root", "suspect", "a kernel launch used an invalid thread block cluster size", FIX_KERNEL)
C(913, "cudaErrorFunctionNotLoaded",
  "the function handle is not loaded when calling an API that requires a loaded function", "self", "root",
  "suspect", "a kernel handle was used before being loaded", FIX_CALL, versions="12.9.79..13.5.37")
C(914, "cudaErrorInvalidResourceType", "one or more resources passed in are not valid resource types for the operation",
  "self", "root", "suspect", "a resource of the wrong type was passed", FIX_CALL, versions="12.9.79..13.5.37")
C(915, "cudaErrorInvalidResourceConfiguration",
  "one or more resources are insufficient or non-applicable for the operation", "self", "root", "suspect",
  "a resource configuration does not fit the operation", FIX_CALL, versions="12.9.79..13.5.37")
C(917, "cudaErrorStreamDetached",
  "API call not permitted since the green context associated with the stream has been destroyed", "self", "root",
  "suspect", "a stream of a destroyed green context was used", FIX_CALL, versions="13.5.37..13.5.37")
C(918, "cudaErrorGraphRecaptureFailure", "recapturing to the source graph failed and had to be terminated", "self",
  "root", "suspect", "a graph recapture failed", FIX_CALL, versions="13.5.37..13.5.37")
C(919, "cudaErrorFabricNotReady", "GPU fabric is not ready within the probe wait budget; application may retry "
  "(see CUDA_FABRIC_INIT_TIMEOUT_MS)", "environment", "root",
  "suspect", "the GPU fabric (NVLink/NVSwitch) was not ready in time", "check nvidia-fabricmanager and the fabric "
  "state (nvidia-smi -q); the call may be retried", versions="13.5.37..13.5.37")
C(999, "cudaErrorUnknown", "unknown error", "environment", "root", "warning",
  "an unknown CUDA error (often a driver or GPU problem)", "check dmesg for Xid errors and nvidia-smi")


# ---------------------------------------------------------------------------------------------
# Building the entries
# ---------------------------------------------------------------------------------------------

class MiningError(RuntimeError):
    """A table row that cannot be built or checked (names the row)."""


@dataclass
class Entry:
    id: str
    syntax: str
    format: str
    source: str
    meaning: str
    blame: str
    role: str
    severity: str
    action: str
    versions: str = ""
    example: str = ""
    # for the citation check
    repo: str = ""
    ref: str = ""
    path: str = ""
    line: int = 0
    anchor: str = ""
    notes: list[str] = field(default_factory=list)
    code: int | None = None  # the enum value a message names (a CUresult / cudaError name), for lines that print only the number
    rank_field: int | None = None  # the placeholder that is the rank of the process the message is about
    stall: str = ""  # a progress message: the step it starts, that can wait forever


# Line decorations hangdbg peels off before matching (its hangdbg/catalog/message.py), which some upstream
# messages print as their own first words: a format must start after them. When hangdbg can be imported its
# own parser decides (see _strip_line_prefix); this list is the fallback.
_LINE_DECORATIONS = re.compile(r"^(?:(?:WARNING|ERROR|INFO|DEBUG|CRITICAL):\s+|-\s+|\[Rank \d+\]:\s*)+")


def _strip_line_prefix(fmt: str, syntax: str) -> str:
    """``fmt`` without the leading decorations hangdbg strips from a line ("WARNING: ", "- ", "[Rank 0]: ")."""
    if syntax == "regex":
        return fmt
    field = _PRINTF if syntax == "printf" else _PYFIELD if syntax == "python" else None
    head = fmt if field is None else fmt[:m.start()] if (m := field.search(fmt)) else fmt
    cut = 0
    parse = _hangdbg_parse_line()
    if parse is not None:
        sample = head + "\u2063"  # the literal head, then a character no prefix rule knows
        text = parse(sample).text
        if text.endswith("\u2063") and sample.endswith(text) and len(text) < len(sample):
            cut = len(sample) - len(text)
            while cut > 0 and not fmt[:cut].endswith((" ", ":")):
                cut -= 1  # stop at the end of a decoration
    else:
        m2 = _LINE_DECORATIONS.match(head)
        cut = m2.end() if m2 else 0
    return fmt[cut:].lstrip() if cut else fmt


_PARSE_LINE: list = []


def _hangdbg_parse_line():
    if not _PARSE_LINE:
        sys.path.insert(0, str(ROOT))
        try:
            from hangdbg.catalog.message import parse_line
            _PARSE_LINE.append(parse_line)
        except ImportError:
            _PARSE_LINE.append(None)
        finally:
            sys.path.pop(0)
    return _PARSE_LINE[0]


def _display(fmt: str, syntax: str) -> str:
    return fmt.replace("{{", "{").replace("}}", "}") if syntax == "python" else fmt


_TEMPLATE_FIELD = re.compile(r"\$\{(\w+)\}|\$(\w+)|\$\$")


def _from_template(text: str) -> str:
    """A ``string.Template`` text as a Python format (``${x}`` -> ``{x}``, other braces doubled)."""
    out, pos = [], 0
    for m in _TEMPLATE_FIELD.finditer(text):
        out.append(text[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        out.append("$" if m.group(0) == "$$" else "{" + (m.group(1) or m.group(2)) + "}")
        pos = m.end()
    out.append(text[pos:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def _anchor_chunks(anchor: str) -> list[str]:
    """The pieces of the anchor's literal text (placeholders left out), longest first."""
    chunks = [c.strip() for c in re.split(r"\$\{\w+\}|\{[^{}]*\}|%[sd]", anchor)]
    return sorted((c for c in chunks if c), key=len, reverse=True)


def _cite_line(src: str, seg: Segment, anchor: str) -> int:
    """The line of the message that holds the anchor's text (the longest piece of it found there)."""
    lines = src.splitlines()
    lo, hi = max(1, seg.lo or seg.line), max(seg.hi, seg.line)
    for text in _anchor_chunks(anchor):
        for size in range(len(text), min(len(text), 6) - 1, -1):
            for start in range(len(text) - size + 1):
                probe = text[start:start + size]
                if "\\" in probe or '"' in probe or not probe.strip():
                    continue
                for ln in range(lo, min(hi, len(lines)) + 1):
                    if probe in lines[ln - 1]:
                        return ln
    return seg.line


def line_holds(src: str, line: int, anchor: str) -> bool:
    """Whether source line ``line`` holds 8 characters (or all of a shorter piece) of the anchor's text."""
    lines = src.splitlines()
    if not 1 <= line <= len(lines):
        return False
    for text in _anchor_chunks(anchor):
        size = min(len(text), 8)
        if any(text[i:i + size] in lines[line - 1] for i in range(len(text) - size + 1)):
            return True
    return False


class Miner:
    def __init__(self, pytorch: Upstream, gloo: Upstream | None) -> None:
        self.ups = {"pytorch": pytorch, "gloo": gloo}
        self._msgs: dict[tuple[str, str, str], list[Segment]] = {}
        self.skipped: list[str] = []
        self.ambiguous: list[str] = []

    def segments(self, repo: str, tag: str, path: str) -> list[Segment] | None:
        up = self.ups[repo]
        if up is None:
            return None
        key = (repo, tag, path)
        if key not in self._msgs:
            src = up.read(tag, path)
            self._msgs[key] = messages(src, path) if src is not None else None  # type: ignore[assignment]
        return self._msgs[key]

    def build(self, row: Row) -> Entry | None:
        up = self.ups[row.repo]
        if up is None:
            self.skipped.append(f"{row.id}: no {row.repo} source given")
            return None
        hits: list[tuple[str, Segment]] = []
        for tag in up.tags:
            segs = self.segments(row.repo, tag, row.path)
            if not segs:
                continue
            cands = [s for s in segs if row.anchor in _display(s.format, s.syntax)]
            if len({c.format for c in cands}) > 1:
                self.ambiguous.append(f"{row.id}: {row.anchor!r} is in {len({c.format for c in cands})} "
                                      f"different messages of {row.path} at {tag}")
            if cands:
                hits.append((tag, min(cands, key=lambda s: s.line)))
        if not hits:
            if row.optional:
                self.skipped.append(f"{row.id}: {row.anchor!r} not in {row.path} at any tag read")
                return None
            raise MiningError(f"{row.id}: {row.anchor!r} not found in {row.path} at {', '.join(up.tags)}")
        tag, seg = hits[-1]
        src = up.read(tag, row.path) or ""
        line = _cite_line(src, seg, row.anchor)
        syntax, fmt = seg.syntax, seg.format
        if row.template:
            fmt, syntax = _from_template(_display(fmt, syntax)), "python"
        if row.syntax and not row.format:
            syntax = row.syntax
        if row.cut:
            shown = fmt
            i = shown.find(row.cut)
            if i < 0:
                raise MiningError(f"{row.id}: cut {row.cut!r} not in {fmt!r}")
            fmt = shown[:i + len(row.cut)].rstrip()
            if syntax == "python" and not re.search(r"(?<!\{)\{[^{}]*\}(?!\})", fmt):
                syntax = "literal"
                fmt = _display(fmt, "python")
        if row.format:
            fmt, syntax = row.format, row.syntax or "regex"
        if syntax == "printf":
            fmt = re.sub(r"%\((\w+)\)", "%", fmt)  # logging's %(name)s mapping keys: the catalog's printf has none
        fmt = _strip_line_prefix(fmt, syntax)
        if syntax == "python" and not re.search(r"\{[^{}]*\}", fmt.replace("{{", "").replace("}}", "")):
            fmt, syntax = _display(fmt, "python"), "literal"
        ref = tag
        source = f"{up.repo} {ref} {row.path}:{line}"
        versions = ""
        if row.repo == "pytorch":
            versions = hits[0][0] if hits[0][0] == hits[-1][0] else f"{hits[0][0]}..{hits[-1][0]}"
        return Entry(row.id, syntax, fmt, source, row.meaning, row.blame, row.role, row.severity, row.action,
                     versions, row.example, row.repo, ref, row.path, line, row.anchor, rank_field=row.rank_field,
                     stall=row.stall)

    def check_citation(self, e: Entry) -> None:
        up = self.ups[e.repo]
        assert up is not None
        src = up.read(e.ref, e.path)
        if src is None:
            raise MiningError(f"{e.id}: {e.path} does not exist at {e.ref}")
        if not line_holds(src, e.line, e.anchor):
            raise MiningError(f"{e.id}: {e.path}:{e.line} at {e.ref} does not hold {e.anchor!r}")


def cuda_entries(libs: list[str]) -> list[Entry]:
    """The CUDA table as entries, checked against each ``libcudart`` given."""
    def ver(text: str) -> tuple[int, int]:
        major, minor = text.split(".")[:2]
        return int(major), int(minor)

    for spec in libs:
        given, _, lib_path = spec.rpartition("=")
        lib = ctypes.CDLL(lib_path)
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        lib.cudaGetErrorName.restype = ctypes.c_char_p
        if given:
            have = ver(given)
        else:  # cudaRuntimeGetVersion needs a driver before CUDA 12
            rt = ctypes.c_int()
            if lib.cudaRuntimeGetVersion(ctypes.byref(rt)) != 0:
                raise SystemExit(f"{lib_path}: cudaRuntimeGetVersion failed here; give --cudart VERSION={lib_path}")
            have = (rt.value // 1000, (rt.value % 1000) // 10)
        for row in CUDA:
            first, last = (ver(v) for v in row.versions.split(".."))
            said = lib.cudaGetErrorString(row.code).decode() if lib.cudaGetErrorName(row.code).decode() == row.enum else None
            if (first <= have <= last) != (said == row.text):
                raise MiningError(f"cuda {row.enum}: libcudart {have[0]}.{have[1]} ({lib_path}) says {said!r}; "
                                  f"the table has {row.text!r} for {row.versions}")
    out = []
    seen: set[str] = set()
    for row in CUDA:
        slug = re.sub(r"(?<!^)(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])", "-", row.enum.removeprefix("cudaError")).lower()
        eid = f"cuda.{slug}"
        if eid in seen:
            raise MiningError(f"duplicate id {eid}")
        seen.add(eid)
        meaning = f"{row.meaning} ({row.enum} = {row.code})"
        out.append(Entry(eid, "literal", row.text, CUDA_DOC, meaning, row.blame, row.role, row.severity,
                         row.action, row.versions))
    return out


# ---------------------------------------------------------------------------------------------
# Writing and checking the TOML files
# ---------------------------------------------------------------------------------------------

def toml_str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_KEYS = ("id", "syntax", "format", "source", "versions", "meaning", "blame", "role", "severity", "action", "example")


def render(domain: str, header: list[str], entries: list[Entry]) -> str:
    lines = [f"# {h}" if h else "#" for h in header]
    lines += ["", f"domain = {toml_str(domain)}", ""]
    for e in entries:
        lines.append("[[entry]]")
        for k in _KEYS:
            v = getattr(e, k)
            if k in ("versions", "example") and not v:
                continue
            lines.append(f"{k} = {toml_str(v)}")
        if e.code is not None:
            lines.append(f"code = {e.code}")
        if e.rank_field is not None:
            lines.append(f"rank_field = {e.rank_field}")
        if e.stall:
            lines.append(f"stall = {toml_str(e.stall)}")
        lines.append("")
    return "\n".join(lines)


_ID = re.compile(r"^[a-z0-9]+(\.[a-z0-9-]+)+$")
_PRINTF = re.compile(r"%(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                     r"(?P<len>hh|h|ll|l|L|q|j|z|Z|t)?(?P<conv>[diouxXeEfFgGaAcspn%])")
_PYFIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_REQUIRED = ("id", "syntax", "format", "source", "meaning", "blame", "role", "severity", "action")


def literal_chars(fmt: str, syntax: str) -> int:
    if syntax == "printf":
        fmt = _PRINTF.sub("", fmt)
    elif syntax == "python":
        fmt = _PYFIELD.sub("", fmt)
    elif syntax == "regex":
        fmt = re.sub(r"\\.|[\[\](){}?*+|^$.]", "", fmt)
    return len(re.sub(r"\s+", "", fmt))


def _check_entry(raw: dict, where: str, prefix: str, ids: set[str]) -> None:
    for k in _REQUIRED:
        if not isinstance(raw.get(k), str) or (k != "action" and not raw[k]):
            raise MiningError(f"{where}: missing {k}")
    if not _ID.match(raw["id"]) or not raw["id"].startswith(prefix + "."):
        raise MiningError(f"{where}: bad id")
    if raw["id"] in ids:
        raise MiningError(f"{where}: duplicate id")
    ids.add(raw["id"])
    if raw["blame"] not in ("self", "peer", "launch", "environment", "hardware", "none"):
        raise MiningError(f"{where}: blame {raw['blame']}")
    if raw["role"] not in ("root", "consequence", "context"):
        raise MiningError(f"{where}: role {raw['role']}")
    if raw["severity"] not in ("suspect", "warning", "info"):
        raise MiningError(f"{where}: severity {raw['severity']}")
    if raw["severity"] != "info" and not raw["action"]:
        raise MiningError(f"{where}: an action is needed for a {raw['severity']}")
    fmt, syn = raw["format"], raw["syntax"]
    if syn == "printf":
        if "%" in _PRINTF.sub("", fmt):
            raise MiningError(f"{where}: stray % in {fmt!r}")
    elif syn == "python":
        if "{" in _PYFIELD.sub("", fmt) or "}" in _PYFIELD.sub("", fmt):
            raise MiningError(f"{where}: unbalanced brace in {fmt!r}")
        if not _PYFIELD.search(fmt.replace("{{", "").replace("}}", "")):
            raise MiningError(f"{where}: a python format without a field (write it as literal)")
    elif syn == "regex":
        pat = re.compile(fmt)
        if not raw.get("example") or not pat.match(raw["example"]):
            raise MiningError(f"{where}: a regex needs an example it matches")
    elif syn != "literal":
        raise MiningError(f"{where}: syntax {syn}")
    if fmt != fmt.strip() or fmt.endswith("\n"):
        raise MiningError(f"{where}: blanks around the format")
    if literal_chars(fmt, syn) < MIN_LITERAL:
        raise MiningError(f"{where}: fewer than {MIN_LITERAL} literal characters in {fmt!r}")
    src = raw["source"]
    if not (src.startswith("https://") or re.match(r"^[\w.-]+/[\w.-]+ \S+ \S+:\d+$", src)):
        raise MiningError(f"{where}: source {src!r}")


def validate(path: Path, prefix: str, ids: set[str]) -> list[dict]:
    """Load a written file back and check every entry; returns the entries."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    if doc.get("domain") != prefix:
        raise MiningError(f"{path.name}: domain {doc.get('domain')!r}")
    out = doc.get("entry", [])
    errors = []
    for raw in out:
        try:
            _check_entry(raw, f"{path.name}: {raw.get('id')}", prefix, ids)
        except MiningError as exc:
            errors.append(str(exc))
    if errors:
        raise MiningError("\n".join(errors))
    return out


def validate_with_hangdbg(path: Path) -> int:
    """Load the file with hangdbg's own loader when it can be imported (the project's rules)."""
    sys.path.insert(0, str(ROOT))
    try:
        from hangdbg.catalog.catalog import parse_entries
    except ImportError:  # pragma: no cover - the script runs without the project installed too
        return -1
    finally:
        sys.path.pop(0)
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    return len(parse_entries(doc, path.stem))


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def _trees(specs: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for spec in specs:
        tag, _, d = spec.partition("=")
        if not d or not os.path.isdir(d):
            raise SystemExit(f"--tree wants TAG=DIR with an existing DIR: {spec!r}")
        out.setdefault(tag, []).append(d)
    return out


def _cudart_name(spec: str) -> str:
    given, _, path = spec.rpartition("=")
    return f"{Path(path).name} {given}".strip()


def _git_ref(git_dir: str, ref: str) -> str:
    r = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "--verify", f"{ref}^{{commit}}"],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{git_dir}: no commit {ref!r}")
    return r.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--git-dir", help="git directory of pytorch/pytorch (read with git show TAG:path)")
    ap.add_argument("--tree", action="append", default=[], metavar="TAG=DIR",
                    help="a directory holding pytorch/pytorch's files at TAG (source tarball or unpacked wheel)")
    ap.add_argument("--tags", nargs="+", default=list(DEFAULT_TAGS), help="tags to read, oldest first")
    ap.add_argument("--gloo-git-dir", help="git directory of pytorch/gloo")
    ap.add_argument("--gloo-ref", default="HEAD", help="the gloo commit to read (cited by its hash)")
    ap.add_argument("--cudart", action="append", default=[], metavar="[VERSION=]LIB",
                    help="a libcudart.so to check the CUDA strings against (repeatable; VERSION such as 11.8.89 "
                         "where the library cannot tell it without a driver)")
    ap.add_argument("--out-dir", default=str(DATA))
    ap.add_argument("--dump", metavar="FILE", help="also write every extracted message of the table's files")
    args = ap.parse_args(argv)

    trees = _trees(args.tree)
    if not args.git_dir and not trees:
        raise SystemExit("give --git-dir or --tree")
    pytorch = Upstream("pytorch/pytorch", args.git_dir, trees, args.tags)
    gloo = None
    if args.gloo_git_dir:
        sha = _git_ref(args.gloo_git_dir, args.gloo_ref)
        gloo = Upstream("pytorch/gloo", args.gloo_git_dir, {}, [sha])
    miner = Miner(pytorch, gloo)

    entries: list[Entry] = []
    errors: list[str] = []
    for row in PYTORCH + GLOO:
        try:
            e = miner.build(row)
            if e is not None:
                miner.check_citation(e)
                entries.append(e)
        except MiningError as exc:
            errors.append(str(exc))
    if errors:
        for err in errors:
            print("error:", err, file=sys.stderr)
        return 1
    read = [t for t in args.tags if any(pytorch.read(t, p) is not None for p in (PGN, AGENT))]
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    how = []
    if args.git_dir:
        how.append("git show TAG:path on a pytorch/pytorch git directory")
    for tag, dirs in sorted(trees.items()):
        how.append(f"{tag}: {', '.join(Path(d).name for d in dirs)}")
    header = [
        "PyTorch's error messages, generated by scripts/catalog/mine_pytorch.py - do not edit by hand.",
        f"Upstream: pytorch/pytorch at {', '.join(args.tags)} (tags read: {', '.join(read)});"
        + (f" pytorch/gloo at {gloo.tags[0]}." if gloo else ""),
        "Formats are extracted from the source (C++ c10::str / TORCH_CHECK / LOG << concatenations as {} formats,",
        "Python f-strings, str.format, % and logging formats); source = the newest tag read that has the message,",
        "versions = the first..last tag read that has it. Long messages are cut after their identifying head.",
        "Read from: " + "; ".join(how) + ".",
    ]
    pt = out_dir / "pytorch.toml"
    pt.write_text(render("pytorch", header, entries), encoding="utf-8")

    cuda = cuda_entries(args.cudart)
    cheader = [
        "CUDA runtime error strings (cudaGetErrorString), generated by scripts/catalog/mine_pytorch.py - do not edit.",
        "They follow 'CUDA error: ' in PyTorch and 'Cuda failure ' in NCCL. source = the CUDA Runtime API",
        "documentation of enum cudaError (the value is in meaning); the strings are those of libcudart",
        f"{', '.join(_CUDART_SEEN)} (PyPI nvidia-cuda-runtime-cu11/-cu12, nvidia-cuda-runtime), read with ctypes;"
        " versions = the first..last of those that return the string."
        + (f" Checked this run against: {', '.join(_cudart_name(p) for p in args.cudart)}." if args.cudart else ""),
        ("Not included: 'no error' (success) and 'out of memory' (cudaErrorMemoryAllocation: under 12 literal "
        "characters)."),
    ]
    ct = out_dir / "cuda.toml"
    ct.write_text(render("cuda", cheader, cuda), encoding="utf-8")

    ids: set[str] = set()
    got = {name: validate(path, name, ids) for name, path in (("pytorch", pt), ("cuda", ct))}
    for name, path in (("pytorch", pt), ("cuda", ct)):
        n = validate_with_hangdbg(path)
        print(f"{path}: {len(got[name])} entries" + (f" (hangdbg's loader: {n})" if n >= 0 else ""))
        for key in ("blame", "role", "severity"):
            counts: dict[str, int] = {}
            for raw in got[name]:
                counts[raw[key]] = counts.get(raw[key], 0) + 1
            print(f"  {key}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    for note in miner.skipped:
        print("skipped:", note)
    for note in sorted(set(miner.ambiguous)):
        print("ambiguous anchor:", note)
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as fh:
            for repo, rows in (("pytorch", PYTORCH), ("gloo", GLOO)):
                up = miner.ups[repo]
                if up is None:
                    continue
                for rel in sorted({r.path for r in rows}):
                    for tag in up.tags:
                        fh.writelines(f"{tag}\t{rel}:{s.line}\t{s.syntax}\t{s.format}\n"
                                      for s in miner.segments(repo, tag, rel) or [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
