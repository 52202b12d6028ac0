#!/usr/bin/env python3
"""Mine NCCL's log messages into hangdbg's error catalog (``hangdbg/catalog/data/nccl.toml``).

Stdlib only. Reads a bare git directory of https://github.com/NVIDIA/nccl with ``git ls-tree`` and
``git cat-file`` (no work tree needed); only the format strings, enum texts and their file:line
citations go into the catalog, never NCCL's code.

Usage::

    mine_nccl.py GITDIR TAG [TAG ...]                  [-o OUT] [--rdma-core GITDIR]
    mine_nccl.py GITDIR --latest-per-minor 2.18 2.28   [-o OUT] [--rdma-core GITDIR]
    mine_nccl.py GITDIR --check [-o OUT]               validate OUT against GITDIR, exit 1 on a problem
    mine_nccl.py GITDIR TAG ... --dump FILE.json       the raw extraction, before classification

OUT defaults to hangdbg/catalog/data/nccl.toml; writing it also runs the check. ``--rdma-core`` (a git
directory of linux-rdma/rdma-core) adds verbs.h / enum_strs.c citations to the IB status entries and
cross-checks the enum and its strings.

What is extracted (per tag, from src/**/*.{cc,cu,h,cuh,cpp,c,hpp}):

* every ``WARN(fmt, ...)`` format: backslash-newline splices, comments, multi-line calls and adjacent
  string literals are handled; ``PRIu64``-style macros and ``#define NAME "literal"`` string macros
  are expanded; a format built from a macro parameter (``"Call to " name " failed"`` in SYSCHECK,
  ``#name "() failed: %s"`` in NVMLCHECK, the ibvwrap.cc IBV_*CHECK* family) gives one entry per
  invocation of the macro, cited at the invocation; a WARN inside a macro that does not use its
  parameters (CUDACHECK's ``"Cuda failure '%s'"``) is one entry, cited at the macro's line. A format
  with an embedded newline keeps its first line (what one log line shows);
* ``INFO(flags, fmt, ...)`` formats that say something failed (word list ``_INFO_FAILURE``, minus
  ``_INFO_NOT_FAILURE``), and the init/teardown lines (``_INFO_CONTEXT``: Init START/COMPLETE,
  Destroy/Abort/Revoke START/COMPLETE, cudaDriverVersion); the ``"%s:%d -> %d"`` NCCLCHECK back-trace
  chain is never an entry;
* the RAS client's report lines (``rasOutAppend`` in src/ras/client_support.cc), split at ``\\n``,
  leading blanks removed (hangdbg matches a line after stripping its indentation), table headers
  (column layouts) and the JSON output left out; and the ``fprintf(stderr, ...)`` lines of the
  ``ncclras`` client (src/ras/client.cc);
* ``ncclGetErrorString``'s texts (src/init.cc), the NCCL version banner (``VERSION_STRING``, a regex);
* one regex entry per ``ibv_wc_status`` value 1..21 (0 is success and never printed; names from NCCL's
  copy of the enum in src/include/ibvcore.h, which is rdma-core's libibverbs/verbs.h, texts of
  rdma-core's ibv_wc_status_str) for the ``NET/IB : Got completion from peer ...`` WARN in all its
  wordings (``with error N,`` up to 2.19, ``status=N`` 2.20-2.27, ``status=NAME(N)`` 2.28), each with
  an example built from one real wording;
* regex entries for NCCL's ``Cuda failure '%s'`` / ``Cuda failure %d '%s'`` with the most telling CUDA
  error texts (``_CUDA_ERRORS``: out of memory, illegal memory access, invalid device ordinal, ECC...).

A format is kept when it has at least 12 non-blank literal characters besides its placeholders.
Identical formats are grouped across tags: ``source`` = the newest tag that has it (first
occurrence there by path, line), ``versions`` = first..last tag seen among the tags read. A format
printed as WARN in some versions and as INFO in others is one entry, classified as a WARN.

Classification (``classify``): the first layer that has an answer wins, field by field over the
file default:

1. ``_OVERRIDES``: explicit (regex on the format -> fields) for the important messages: Duplicate
   GPU, connection closed by remote peer, /dev/shm segment creation/extension, the IB completion
   WARN, async IB events, Cuda failure, version mismatches, bootstrap/interface/rank mistakes,
   NVLS/MNNVL, missing transports, CUDA/NVML library problems, ... (``_RAS_RULES`` for RAS lines).
2. Rules computed from the call a message names: ``_ibv_rule`` (``Call to ibv_reg_mr/create_qp/
   modify_qp/query_*/destroy_* ...``: memory registration and QP resources -> environment, queries ->
   hardware, teardown -> consequence), ``_syscall_rule`` (``Call to socket/bind/pthread_*/...`` ->
   environment, with an action by call), NVML queries.
3. ``_KEYWORD_RULES``: regexes on the format text (first match wins, some only for one path): NCCL
   internal consistency checks -> self (an NCCL bug), teardown failures -> consequence, version
   mismatches -> launch, timeouts and closed connections -> peer/consequence, out of memory ->
   self/root, ``/dev/shm`` -> environment, API misuse -> self/root/suspect, topology inconsistencies
   (graph/) -> environment, NIC fusion / link-layer mismatches -> launch, plugin look-ups -> context,
   out-of-range NCCL_* settings -> launch, fallbacks ("falling back", "ignoring") -> context.
4. ``_FILE_RULES``: defaults by source file / subsystem (first matching path regex): the subsystem's
   name (used in generated meanings), blame, role, action. E.g. transport/net_ib*, misc/ibvwrap.cc ->
   InfiniBand on this host, environment; misc/socket.cc, bootstrap.cc -> the network / a peer, peer
   consequence; misc/shmutils.cc -> /dev/shm, environment; init.cc -> launch; include/alloc.h,
   checks.h, cudawrap -> this rank's CUDA / memory, self; proxy.cc -> the proxy thread, peer
   consequence; graph/ -> environment; argcheck.cc, enqueue.cc, group.cc -> the program's calls, self.

Severity: ``suspect`` only where a rule says the line names a cause by itself; ``warning`` by default
for WARN lines; ``info`` for context. INFO lines become role context / severity info unless their
rule is marked ``info=True`` (timeouts, dead peers, bad NCCL_* values...): NCCL logs many recoverable
failures at INFO level and goes on.

Meanings come from the rule; where no rule has one, a sentence built from the subsystem, the
enclosing C function and what the code does after the WARN (``result_after``: the ncclResult_t it
returns, or that it goes on). Actions likewise fall back to the subsystem's.
"""
from __future__ import annotations

import argparse
import bisect
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

SRC_EXT = (".cc", ".cu", ".h", ".cuh", ".cpp", ".c", ".hpp")
REPO = "NVIDIA/nccl"
MIN_LITERAL = 12


# ----------------------------------------------------------------------------------------------
# git access
# ----------------------------------------------------------------------------------------------

class Git:
    """A bare git directory read through one ``git cat-file --batch`` process."""

    def __init__(self, gitdir: str) -> None:
        self.gitdir = gitdir
        self._batch = subprocess.Popen(["git", "--git-dir", gitdir, "cat-file", "--batch"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._cache: dict[str, str] = {}

    def run(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", self.gitdir, *args], check=True,
                              capture_output=True, text=True).stdout

    def tags(self) -> list[str]:
        return self.run("tag", "--list").split()

    def tree(self, tag: str, under: str = "src") -> list[tuple[str, str]]:
        """(path, blob id) of every file under ``under`` at ``tag``."""
        out = []
        for line in self.run("ls-tree", "-r", tag, "--", under).splitlines():
            meta, path = line.split("\t", 1)
            _, kind, blob = meta.split()
            if kind == "blob":
                out.append((path, blob))
        return out

    def blob(self, ref: str) -> str:
        """Text of a blob id or ``TAG:path`` (``""`` when missing)."""
        if ref in self._cache:
            return self._cache[ref]
        assert self._batch.stdin and self._batch.stdout
        self._batch.stdin.write(ref.encode() + b"\n")
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().decode().split()
        if len(header) < 3 or header[1] == "missing":
            text = ""
        else:
            size = int(header[2])
            data = self._batch.stdout.read(size)
            self._batch.stdout.read(1)
            text = data.decode("utf-8", "replace")
        self._cache[ref] = text
        return text

    def show(self, tag: str, path: str) -> str:
        return self.blob(f"{tag}:{path}")


def _vkey(tag: str) -> tuple[int, ...]:
    m = re.match(r"v(\d+)\.(\d+)\.(\d+)-(\d+)$", tag)
    return tuple(int(x) for x in m.groups()) if m else (0,)


def latest_per_minor(tags: list[str], lo: str, hi: str) -> list[str]:
    """The newest ``vMAJ.MIN.PATCH-N`` tag of each minor version from ``lo`` to ``hi`` (``2.18``)."""
    lo_k = tuple(int(x) for x in lo.split("."))
    hi_k = tuple(int(x) for x in hi.split("."))
    best: dict[tuple[int, int], str] = {}
    for t in tags:
        k = _vkey(t)
        if len(k) != 4 or not lo_k <= k[:2] <= hi_k:
            continue
        if k[:2] not in best or _vkey(best[k[:2]]) < k:
            best[k[:2]] = t
    return [best[m] for m in sorted(best)]


# ----------------------------------------------------------------------------------------------
# C source lexing
# ----------------------------------------------------------------------------------------------

_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_ARG_TOKENS = re.compile(r'(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[()\[\]{},]|[^"\'()\[\]{},]+')
_PRI = {"PRId64": "ld", "PRIi64": "li", "PRIu64": "lu", "PRIx64": "lx", "PRIX64": "lX", "PRIo64": "lo",
        "PRId32": "d", "PRIi32": "i", "PRIu32": "u", "PRIx32": "x", "PRIX32": "X",
        "PRId16": "d", "PRIu16": "u", "PRIx16": "x", "PRId8": "d", "PRIu8": "u", "PRIx8": "x",
        "PRIuPTR": "lu", "PRIxPTR": "lx", "PRIdPTR": "ld"}


@dataclass
class Source:
    """One file's text after splicing and comment removal, with a map back to physical lines."""
    path: str
    code: str                      # spliced, comments blanked
    starts: list[int]              # offsets (in code) where a physical line starts
    lines: list[int]               # its physical line number
    strings: list[tuple[int, int]]  # spans of string/char literals in code
    defines: list[tuple[int, int, str, list[str]]] = field(default_factory=list)  # span, name, params

    def line_of(self, off: int) -> int:
        i = bisect.bisect_right(self.starts, off) - 1
        return self.lines[i]

    def in_string(self, off: int) -> bool:
        i = bisect.bisect_right(self.strings, (off, 1 << 60)) - 1
        return i >= 0 and self.strings[i][0] <= off < self.strings[i][1]

    def define_at(self, off: int) -> tuple[int, int, str, list[str]] | None:
        for d in self.defines:
            if d[0] <= off < d[1]:
                return d
        return None


def lex(path: str, text: str) -> Source:
    """Splice backslash-newlines (C translation phase 2), blank comments, note strings and #defines."""
    pieces: list[str] = []
    starts: list[int] = []
    lines: list[int] = []
    pos = 0
    for i, phys in enumerate(text.split("\n")):
        starts.append(pos)
        lines.append(i + 1)
        stripped = phys.rstrip(" \t\r")
        if stripped.endswith("\\"):
            piece = stripped[:-1]
        else:
            piece = phys + "\n"
        pieces.append(piece)
        pos += len(piece)
    spliced = "".join(pieces)
    out: list[str] = []
    strings: list[tuple[int, int]] = []
    last = 0
    for m in _TOKENS.finditer(spliced):
        tok = m.group(0)
        out.append(spliced[last:m.start()])
        if tok.startswith("/"):
            out.append(re.sub(r"[^\n]", " ", tok))
        else:
            out.append(tok)
            strings.append((m.start(), m.end()))
        last = m.end()
    out.append(spliced[last:])
    code = "".join(out)
    src = Source(path, code, starts, lines, strings)
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\(([^)]*)\))?[^\n]*", code, re.M):
        params = [p.strip() for p in m.group(3).split(",")] if m.group(2) else []
        src.defines.append((m.start(), m.end(), m.group(1), params))
    return src


def call_args(code: str, open_paren: int) -> tuple[list[str], int] | None:
    """Top-level arguments of the call whose ``(`` is at ``open_paren``, and the offset after ``)``."""
    depth = 0
    args: list[str] = []
    cur: list[str] = []
    for m in _ARG_TOKENS.finditer(code, open_paren):
        tok = m.group(0)
        if tok in "([{" and len(tok) == 1:
            depth += 1
            if depth == 1:
                continue
        elif tok in ")]}" and len(tok) == 1:
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, m.end()
        elif tok == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(tok)
        if m.end() - open_paren > 20000:
            return None
    return None


_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b",
        "f": "\f", "v": "\v", "?": "?", "e": "\x1b"}


def c_unescape(body: str) -> str:
    def rep(m: re.Match[str]) -> str:
        s = m.group(1)
        if s[0] in "01234567":
            return chr(int(s, 8))
        if s[0] == "x":
            return chr(int(s[1:], 16))
        return _ESC.get(s, s)
    return re.sub(r"\\([0-7]{1,3}|x[0-9a-fA-F]+|.)", rep, body)


_FMT_PIECES = re.compile(r'(?:u8|[uUL])?"((?:\\.|[^"\\\n])*)"|(#\s*)?([A-Za-z_]\w*)|(\S)')


def format_pieces(arg: str) -> list[tuple[str, str]] | None:
    """A format argument as ('lit', text) / ('id', name) / ('str', name for #name) pieces; None when
    it is not a concatenation of literals and identifiers (a variable, a ternary, a call...)."""
    pieces: list[tuple[str, str]] = []
    for m in _FMT_PIECES.finditer(arg):
        if m.group(4) is not None:
            return None
        if m.group(3) is not None:
            pieces.append(("str" if m.group(2) else "id", m.group(3)))
        else:
            pieces.append(("lit", c_unescape(m.group(1))))
    if not any(k == "lit" for k, _ in pieces):
        return None
    return pieces


_FUNC_DEF = re.compile(
    r"^(?!(?:if|for|while|switch|return|else|do|case|typedef|struct|class|enum|union|namespace|extern|"
    r"using|static_assert|NCCL_PARAM)\b)[A-Za-z_][^;\n(=]*?\b([A-Za-z_~][\w:~]*)\s*\([^;{}]*\)\s*"
    r"(?:const\s*)?(?:noexcept\s*)?(?:->[^{;]*)?\{", re.M)


def functions(src: Source) -> tuple[list[int], list[str]]:
    offs, names = [], []
    for m in _FUNC_DEF.finditer(src.code):
        offs.append(m.start())
        names.append(m.group(1).split("::")[-1])
    return offs, names


# ----------------------------------------------------------------------------------------------
# extraction
# ----------------------------------------------------------------------------------------------

@dataclass
class Hit:
    """One message format found at one tag."""
    kind: str      # warn | info | ras | rasclient
    fmt: str
    tag: str
    path: str
    line: int
    func: str      # enclosing C function, or the macro that wraps the WARN
    via: str = ""  # the wrapping macro, when the format came from expanding one
    result: str = ""  # what the code does next: an ncclResult_t name, "fails" or "continues"


@dataclass
class Template:
    """A WARN/INFO inside a #define whose format uses the macro's parameters."""
    macro: str
    params: list[str]
    pieces: list[tuple[str, str]]
    kind: str
    path: str
    line: int
    result: str


_RESULT_NEXT = re.compile(r"\breturn\s+([A-Za-z_]\w*)|\b\w+\s*=\s*(nccl(?:UnhandledCudaError|SystemError|InternalError|"
                          r"InvalidArgument|InvalidUsage|RemoteError))\b|\bgoto\s+\w+|[{}]")


def result_after(code: str, start: int) -> str:
    """What the code does right after a WARN at ``start``: the ncclResult_t it returns or assigns,
    ``"fails"`` (returns something else or jumps to a label) or ``"continues"``."""
    depth = 0
    for m in _RESULT_NEXT.finditer(code, start, min(len(code), start + 800)):
        tok = m.group(0)
        if tok == "{":
            depth += 1
        elif tok == "}":
            if depth == 0:
                return "continues"
            depth -= 1
        elif m.group(1):
            v = m.group(1)
            if v == "ncclSuccess":
                return "continues"
            return v if v.startswith("nccl") and v[4:5].isupper() else "fails"
        elif m.group(2):
            return m.group(2)
        else:
            return "fails"
    return "continues"


_CALLS = re.compile(r"(?<![\w.>])(WARN|INFO|rasOutAppend|fprintf)\s*\(")
_INFO_CONTEXT = re.compile(r"\b(?:Init|Destroy|Abort|Revoke) (?:START|COMPLETE)|- %s COMPLETE$|\bCommRevokeAsync START|"
                           r"^cudaDriverVersion %d$")
_INFO_FAILURE = re.compile(r"\b(?:fail(?:ed|ure|s)?|errors?|unable|cannot|can't|could not|couldn't|timed out|"
                           r"timeout|refused|abort(?:ed|ing)?|mismatch(?:ed)?|dead|closed|invalid|"
                           r"exceeded|corrupt(?:ed|ion)?|lost)\b", re.I)
_INFO_NOT_FAILURE = re.compile(r"-> %d|\bnot supported\b|\bunsupported\b|\berror injection\b", re.I)


def literal_chars(fmt: str, syntax: str = "printf") -> int:
    if syntax == "regex":
        return MIN_LITERAL
    text = strip_placeholders(fmt) if syntax == "printf" else fmt
    return len(re.sub(r"\s", "", text))


_CONV = re.compile(r"%(?:%|[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|j|t|L|q)?[diouxXcspfFgGeEaAn])")


def strip_placeholders(fmt: str) -> str:
    return _CONV.sub("", fmt)


def bad_conversions(fmt: str) -> list[str]:
    """The ``%`` sequences of ``fmt`` that are not well-formed printf conversions."""
    rest = _CONV.sub("", fmt)
    return re.findall(r"%.{0,4}", rest)


class Extractor:
    def __init__(self, git: Git) -> None:
        self.git = git
        self._lexed: dict[str, Source] = {}
        self._funcs: dict[str, tuple[list[int], list[str]]] = {}
        self.unresolved: list[str] = []   # formats skipped because an identifier had no known value

    def source(self, path: str, blob: str) -> Source:
        if blob not in self._lexed:
            self._lexed[blob] = lex(path, self.git.blob(blob))
            self._funcs[blob] = functions(self._lexed[blob])
        return self._lexed[blob]

    def func_at(self, blob: str, off: int) -> str:
        offs, names = self._funcs[blob]
        i = bisect.bisect_right(offs, off) - 1
        return names[i] if i >= 0 else ""

    def tag_hits(self, tag: str) -> list[Hit]:
        files = [(p, b) for p, b in self.git.tree(tag) if p.endswith(SRC_EXT)]
        srcs = [(p, b, self.source(p, b)) for p, b in files]
        strmacros = self._string_macros(srcs)
        hits: list[Hit] = []
        templates: dict[str, list[Template]] = {}
        for path, blob, src in srcs:
            for m in _CALLS.finditer(src.code):
                if src.in_string(m.start()):
                    continue
                name = m.group(1)
                kind, idx = {"WARN": ("warn", 0), "INFO": ("info", 1), "rasOutAppend": ("ras", 0),
                             "fprintf": ("rasclient", 1)}[name]
                if kind == "ras" and not path.startswith("src/ras/client_support"):
                    continue
                parsed = call_args(src.code, m.end() - 1)
                if parsed is None or len(parsed[0]) <= idx:
                    continue
                args = parsed[0]
                if kind == "rasclient" and (not path.startswith("src/ras/client") or args[0] != "stderr"):
                    continue
                if kind == "ras" and path.startswith("src/ras/client_support") and \
                        self.func_at(blob, m.start()).startswith("json"):
                    continue
                pieces = format_pieces(args[idx])
                if pieces is None:
                    continue
                line = src.line_of(m.start())
                d = src.define_at(m.start())
                result = result_after(src.code, parsed[1])
                if d is not None and any(k in ("id", "str") and v in d[3] for k, v in pieces):
                    templates.setdefault(d[2], []).append(Template(d[2], d[3], pieces, kind, path, line, result))
                    continue
                fmt = self._resolve(pieces, strmacros, {}, f"{tag}:{path}:{line}")
                if fmt is None:
                    continue
                func = d[2] if d is not None else self.func_at(blob, m.start())
                hits.append(Hit(kind, fmt, tag, path, line, func, result=result))
        hits.extend(self._expand(tag, srcs, templates, strmacros))
        return hits

    def _string_macros(self, srcs: list[tuple[str, str, Source]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for _, _, src in srcs:
            for start, end, name, params in src.defines:
                if params or "(" in src.code[start:end].split(name, 1)[1][:1]:
                    continue
                body = src.code[start:end].split(name, 1)[1].strip()
                pieces = format_pieces(body) if body.startswith('"') else None
                if pieces and all(k == "lit" for k, _ in pieces):
                    out.setdefault(name, "".join(v for _, v in pieces))
        return out

    def _resolve(self, pieces: list[tuple[str, str]], strmacros: dict[str, str], binding: dict[str, str],
                 where: str) -> str | None:
        out = []
        for k, v in pieces:
            if k == "lit":
                out.append(v)
            elif k == "str":
                if v not in binding:
                    return None
                out.append(re.sub(r"\s+", " ", binding[v]).strip())
            elif v in binding:
                arg = format_pieces(binding[v])
                if arg is None or any(kk != "lit" for kk, _ in arg):
                    self.unresolved.append(f"{where}: {v}={binding[v]!r}")
                    return None
                out.append("".join(vv for _, vv in arg))
            elif v in _PRI:
                out.append(_PRI[v])
            elif v in strmacros:
                out.append(strmacros[v])
            else:
                self.unresolved.append(f"{where}: {v}")
                return None
        return "".join(out)

    def _expand(self, tag: str, srcs: list[tuple[str, str, Source]], templates: dict[str, list[Template]],
                strmacros: dict[str, str]) -> list[Hit]:
        """Hits of the macros whose WARN format uses a parameter, one per invocation (cited there)."""
        hits: list[Hit] = []
        done: set[str] = set()
        for _ in range(4):  # a macro may pass its own parameter on to another such macro
            todo = {k: v for k, v in templates.items() if k not in done}
            if not todo:
                break
            done.update(todo)
            pat = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, todo)) + r")\s*\(")
            for path, blob, src in srcs:
                for m in pat.finditer(src.code):
                    if src.in_string(m.start()):
                        continue
                    d = src.define_at(m.start())
                    if d is not None and d[2] == m.group(1):
                        continue  # the #define itself
                    parsed = call_args(src.code, m.end() - 1)
                    if parsed is None:
                        continue
                    args = parsed[0]
                    line = src.line_of(m.start())
                    for t in todo[m.group(1)]:
                        binding = {}
                        for i, p in enumerate(t.params):
                            if p == "...":
                                binding["__VA_ARGS__"] = ", ".join(args[i:])
                            elif i < len(args):
                                binding[p] = args[i]
                        used = [v for k, v in t.pieces if k in ("id", "str") and v in binding]
                        if d is not None and any(binding[u].strip() in d[3] for u in used):
                            # passed through an enclosing macro's parameter: a new template
                            new = [(k, binding[v].strip() if k in ("id", "str") and v in binding
                                    and binding[v].strip() in d[3] else v) if k != "lit" else (k, v)
                                   for k, v in t.pieces]
                            templates.setdefault(d[2], []).append(Template(d[2], d[3], new, t.kind, path, line,
                                                                           t.result))
                            continue
                        fmt = self._resolve(t.pieces, strmacros, binding, f"{tag}:{path}:{line}")
                        if fmt is None:
                            continue
                        func = d[2] if d is not None else self.func_at(blob, m.start())
                        hits.append(Hit(t.kind, fmt, tag, path, line, func, via=t.macro, result=t.result))
        return hits


_RAS_HEADER = re.compile(r"^#%d-%d \(%016lx\) [A-Z]+$")


def keep(hit: Hit) -> list[tuple[str, str]]:
    """(kind, format) entries a hit gives, or none: the NCCLCHECK chain and formats with fewer than
    12 literal characters are dropped; a WARN/INFO format keeps its first line (what one log line
    shows); RAS output is split into its lines, indentation and table layouts dropped."""
    if hit.kind in ("ras", "rasclient"):
        fmts = [f.strip() for f in hit.fmt.split("\n")]
        fmts = [f for f in fmts if f and f[0] not in '"{}[' and not f.startswith("=") and
                (_RAS_HEADER.match(f) or "  " not in f)]
    else:
        fmts = [hit.fmt.split("\n", 1)[0].rstrip()]
    out = []
    for f in fmts:
        if f.startswith("[Rank %d] "):  # 2.29+ INFO lines: hangdbg peels "[Rank N]" as a rank prefix
            f = f[len("[Rank %d] "):]
        if "-> %d" in f or literal_chars(f) < MIN_LITERAL:
            continue
        kind = hit.kind
        if kind == "info":
            if _INFO_CONTEXT.search(f):
                kind = "context"
            elif not _INFO_FAILURE.search(f) or _INFO_NOT_FAILURE.search(f):
                continue
        out.append((kind, f))
    return out


# ----------------------------------------------------------------------------------------------
# classification rules
# ----------------------------------------------------------------------------------------------

# ncclResult_t -> the ncclGetErrorString() text PyTorch quotes ("NCCL error: <text>, NCCL version ...");
# filled from src/init.cc at the newest tag by special_entries().
RESULT_TEXT: dict[str, str] = {}

# 1. Defaults by source file: (path regex, subsystem as used in meanings, blame, role, action).
_FILE_RULES: list[tuple[str, str, str, str, str]] = [
    (r"src/transport/net_ib|src/misc/ibv|src/include/ibv|src/misc/mlx5dv|src/transport/gdaki",
     "NCCL's InfiniBand/RoCE transport (this host's NIC)", "environment", "root",
     "check this host's NIC and fabric (ibv_devinfo, ibstat, dmesg for mlx5 errors) and NCCL_IB_HCA / "
     "NCCL_IB_GID_INDEX"),
    (r"src/transport/net_socket", "NCCL's TCP socket transport between nodes", "peer", "consequence",
     "check the peer named in the line and the network between the nodes (NCCL_SOCKET_IFNAME, firewall)"),
    (r"src/misc/socket\.cc|src/bootstrap\.cc", "NCCL's TCP sockets (bootstrap and out-of-band connections)",
     "peer", "consequence",
     "check that every rank is alive and reachable on the interface NCCL uses (NCCL_SOCKET_IFNAME, "
     "MASTER_ADDR, firewall), and look for a peer that died first"),
    (r"src/misc/shmutils", "NCCL's shared-memory segments under /dev/shm", "environment", "root",
     "enlarge /dev/shm (docker --shm-size=16g or --ipc=host; Kubernetes: a memory-backed emptyDir at "
     "/dev/shm) or set NCCL_SHM_DISABLE=1"),
    (r"src/misc/ipcsocket", "the Unix-domain sockets NCCL's local ranks use to pass memory handles",
     "environment", "root",
     "check that the other local rank is alive; ranks in separate containers on one host need shared "
     "IPC and network namespaces (--ipc=host --network=host)"),
    (r"src/include/alloc\.h|src/misc/utils\.cc", "memory allocation on this rank", "self", "root",
     "reduce memory use on this rank (batch size, NCCL_BUFFSIZE) and check for leaks (nvidia-smi, free -g)"),
    (r"src/include/checks\.h|src/include/cudawrap\.h|src/misc/cudawrap\.cc|src/misc/strongstream",
     "CUDA on this rank", "self", "root",
     "read the CUDA error: fix the earlier fault on this GPU (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer), "
     "free memory, or check the GPU and driver (nvidia-smi, Xid in dmesg)"),
    (r"src/misc/nvmlwrap", "NVML (the NVIDIA management library) on this host", "environment", "root",
     "check the NVIDIA driver in this host or container (nvidia-smi works, libnvidia-ml.so.1 matches the "
     "kernel driver)"),
    (r"src/misc/gdrwrap|src/include/gdrwrap", "GDRCopy on this host", "environment", "root",
     "check the gdrdrv kernel module and GDRCopy library, or set NCCL_GDRCOPY_ENABLE=0"),
    (r"src/proxy\.cc", "NCCL's proxy thread (it drives network and setup work for the local ranks)",
     "peer", "consequence",
     "look for the first error before this line (a peer that exited, a network or CUDA error): the proxy "
     "reports the consequence"),
    (r"src/graph/xml", "NCCL's topology XML (sysfs reading, NCCL_TOPO_FILE, NCCL_GRAPH_FILE)",
     "environment", "root",
     "check NCCL_TOPO_FILE / NCCL_GRAPH_FILE (unset them to let NCCL detect the topology) and that /sys "
     "is readable in the container"),
    (r"src/graph/", "NCCL's topology detection and graph search", "environment", "root",
     "check the topology NCCL sees (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH, nvidia-smi topo -m, "
     "NCCL_TOPO_FILE)"),
    (r"src/misc/argcheck|src/enqueue|src/group|src/register|src/allocator|src/dev_runtime|src/scheduler|"
     r"src/collectives|src/symmetric",
     "the program's NCCL calls on this rank", "self", "root",
     "fix the NCCL call in the program (arguments, communicator, group and stream use); with PyTorch check "
     "that every rank calls the same collectives with matching tensors"),
    (r"src/init\.cc|src/mnnvl", "NCCL communicator initialization", "launch", "root",
     "check the launch configuration (rank, world size, one GPU per rank, NCCL_* variables on every node)"),
    (r"src/transport/(p2p|shm|nvls|coll_net|net)\.cc|src/transport\.cc|src/transport/generic",
     "NCCL's transport setup between GPUs", "environment", "root",
     "check GPU peer access and the transports (nvidia-smi topo -m, ACS/IOMMU, NCCL_P2P_DISABLE, "
     "NCCL_SHM_DISABLE, NCCL_NET)"),
    (r"src/plugin/|src/net\.cc|src/misc/(tuner|profiler|net)", "NCCL's plugins (net, tuner, profiler)",
     "environment", "root",
     "check NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN / NCCL_PROFILER_PLUGIN and that the plugin libraries "
     "match this NCCL"),
    (r"src/ras/", "NCCL's RAS service (it tracks the job's processes and communicators)", "peer",
     "consequence", "use the RAS report's named processes and ranks to find the first failure"),
    (r"src/gin/", "NCCL's GPU-initiated networking (GIN)", "environment", "root",
     "check the network devices GIN uses (NCCL_GIN_* settings, IB/RoCE NIC with GPUDirect support)"),
    (r"src/misc/param", "NCCL's parameter (NCCL_* variable) parsing", "launch", "root",
     "fix or unset the NCCL_* variable named in the line"),
    (r".", "NCCL", "self", "root", "rerun with NCCL_DEBUG=INFO and read the lines before this one"),
]

_INTERNAL = dict(
    blame="self", role="root", severity="warning",
    meaning="an internal consistency check of NCCL failed in {func}(): an NCCL bug, memory corruption "
            "in the process, or ranks running different NCCL builds",
    action="report it to NCCL (github.com/NVIDIA/nccl/issues) with the NCCL_DEBUG=INFO log, and try the "
           "newest NCCL release")
_FALLBACK = dict(role="context", severity="info", action="",
                 meaning="{subsystem}: a feature could not be used and NCCL goes on without it ({func}())")
_TEARDOWN = dict(blame="none", role="consequence", severity="warning",
                 meaning="{subsystem}: cleanup failed in {func}() while a communicator was destroyed or "
                         "aborted, usually after an earlier error",
                 action="look for the first error before this line; the cleanup failure follows from it")
_MISUSE = dict(blame="self", role="root", severity="suspect",
               meaning="the program's NCCL call was invalid ({func}() rejected it)",
               action="fix the call in the program (arguments, communicator, group and stream use); with "
                      "PyTorch check that every rank calls the same collectives with matching tensors")
_ENVVAR = dict(blame="launch", role="root", severity="warning",
               meaning="an NCCL_* setting of this job has a value NCCL cannot use ({func}()); {result}",
               action="fix or unset the NCCL_* variable named in the line (check every node's environment)")

# 2. Rules by wording (regex on the format, first match wins). "info": True lets a rule apply to a
#    failure INFO line too (otherwise INFO lines stay context/info).
_KEYWORD_RULES: list[tuple[str, dict[str, object]]] = [
    (r"(?i)internal error|should not happen|has bugs|\bgarbage\b|corrupted comm|List loop|Inactive op has "
     r"next|out of bounds|nonexistent|doesn't match any expected|already completed opId|Couldn't find opId|"
     r"Could not find pool of op|unknown (command|message|notification) type|Unknown (pattern|collnet pattern|"
     r"command|device code|netDevs)|Invalid regBufType|Invalid client status|lib wrapper not initialized|"
     r"Proxy append|pass NULL socket|file descriptor is -1|unexpected socket state|wrong socket state|"
     r"is not ready|Name too large|Sendrecv plan not aligned|neither send or recv|ran out of room|"
     r"ran out of channel space|Unexpected connections|called when comm|sendReq\(%p\)|wc->opcode ==|"
     r"Listencomm in unknown state|could not find mr|already connected sendComm|Cannot store sizes|"
     r"Unsupported signalOp|Requested properties for vNic|non-exist[ae]nt virtual device|Not enough space to get|"
     r"PXN should not use host buffers|(req|resp)Size is %d|CollNet sizes|refcount is 0|test called with NULL|"
     r"Mismatched response size|dequeue null operation|Unable to post incomplete proxy op|sock fd fails|"
     r"Get listenSock fd fails|Initialize peers|Invalid number of network devices|should be a diviser|"
     r"^Group creation failed|does not exist in shadow pool|No allocation found at offset|extends beyond allocation|"
     r"Net registration invalid algorithm|XML (Import|Export) Channel|KV Convert to str|ncclNetSocketListen dev=",
     dict(_INTERNAL)),
    (r"(?i)could not find|couldn't find|can't find|not found|no path|Failed to find|does not (loop|contain)|"
     r"too many|limited to|too long|ran out|Could not find any local path",
     dict(blame="environment", role="root", severity="warning", path=r"src/graph/",
          meaning="NCCL's topology search found an inconsistency in the system topology it built ({func}()): "
                  "an unusual or partly hidden GPU/NIC/PCI layout (containers or VMs with a partial /sys, a "
                  "wrong NCCL_TOPO_FILE) or an NCCL bug",
          action="compare nvidia-smi topo -m with NCCL's view (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH, "
                 "NCCL_TOPO_DUMP_FILE=...); fix or unset NCCL_TOPO_FILE, or update NCCL")),
    (r"different link_layer|incompatible devices|device is incompatible",
     dict(blame="launch", role="root", severity="suspect",
          meaning="NCCL paired NICs with different link layers (InfiniBand and Ethernet/RoCE) on this host or "
                  "between the two hosts",
          action="restrict NCCL_IB_HCA to NICs of one link type, the same on every node")),
    (r"(?i)merg|fused|vNic|virtual (NIC|device)|different number of devices",
     dict(blame="launch", role="root", severity="warning",
          meaning="NIC fusion (several NICs used as one virtual NIC) could not be set up as configured "
                  "({func}())",
          action="check NCCL_NET_FORCE_MERGE / NCCL_NET_MERGE_LEVEL (LOC disables fusion) / NCCL_IB_MERGE_NICS "
                 "and use the same NIC setup on every node")),
    (r"Plugin: |plugin load|Failed to find nccl\w*Plugin|failed to find ncclProfiler|Failed to initialize NET plugin",
     dict(blame="environment", role="context", severity="info", action="", info=True,
          meaning="NCCL looked for an external plugin library (or one of its interface versions) and did not "
                  "find or could not start it; it tries the next version or its internal implementation")),
    (r"plugin returned invalid value",
     dict(blame="environment", role="root", severity="warning",
          meaning="the network plugin reported an invalid maximum message size",
          action="update the network plugin to a version that matches this NCCL")),
    (r"^gdr_\w+\(|^GDRCOPY failure|^dlsym failed on %s",
     dict(blame="environment", role="root", severity="warning", path=r"gdrwrap",
          meaning="a GDRCopy call failed in {func}() (GDRCopy, enabled with NCCL_GDRCOPY_ENABLE=1, maps GPU "
                  "memory for CPU access through the gdrdrv driver)",
          action="check the gdrdrv kernel module and the GDRCopy library version, or set NCCL_GDRCOPY_ENABLE=0")),
    (r"cap it to|set both to|set it to|Limiting value|limiting to|setting it to|is being ignored",
     dict(blame="launch", role="root", severity="warning",
          meaning="a communicator setting (an NCCL_* variable or a ncclConfig_t field) is out of range; NCCL "
                  "adjusts or ignores it and goes on",
          action="fix the setting named in the line")),
    (r"(?i)deregister|dealloc|destroy|munmap|unlink|commReclaim|cleanup|close failed|proxyDestroy",
     dict(_TEARDOWN)),
    (r"(?i)version mismatch|Mismatched NCCL version|has wrong version|incompatible version",
     dict(blame="launch", role="root", severity="suspect",
          meaning="two parts of the job run different NCCL versions or formats ({func}())",
          action="use the same NCCL (and PyTorch) build on every node and rank", info=True)),
    (r"(?i)timed? ?out|timeout",
     dict(blame="peer", role="consequence", severity="warning",
          meaning="{subsystem}: an operation timed out waiting for another process or host",
          action="find the peer that stopped answering (its log, its host, the network between them); "
                 "this side only waited for it", info=True)),
    (r"(?i)closed by (the )?(remote )?peer|closed the connection|connection closed",
     dict(blame="peer", role="consequence", severity="warning",
          meaning="a connection to another process was closed: that process exited, crashed or aborted first",
          action="read the log of the process at the other end for its first error (exit code, OOM killer, "
                 "CUDA error)", info=True)),
    (r"as DEAD|dead peer %d|considered dead",
     dict(blame="peer", role="root", severity="warning",
          meaning="NCCL's RAS service lost contact with a process of the job: it died, hangs hard, or its "
                  "host or network is down",
          action="check the process and host named here (its log, dmesg, OOM killer, node health)", info=True)),
    (r"(?i)Failed to (CUDA )?(malloc|calloc|host alloc)|malloc\(size=|unable to allocate|Cannot allocate|"
     r"Allocation failed",
     dict(blame="self", role="root", severity="suspect",
          meaning="a memory allocation on this rank failed in {func}()",
          action="reduce memory use on this rank (batch size, NCCL_BUFFSIZE) and check for leaks "
                 "(nvidia-smi, free -g)")),
    (r"(?i)shared memory|/dev/shm",
     dict(blame="environment", role="root",
          action="enlarge /dev/shm (docker --shm-size=16g or --ipc=host; Kubernetes: a memory-backed emptyDir "
                 "at /dev/shm) or set NCCL_SHM_DISABLE=1")),
    (r"(?i)^%s : |argument is NULL|is not a valid pointer|not initialized via|not in a group call|"
     r"Invalid config|invalid (root|type|reduction)|Invalid arguments?|Invalid handle|improper usage|"
     r"must either be|not allowed in the same group|can be CUDA graph captured|Trying to (send|recv) to self|"
     r"unknown to this communicator|operator is|operator unknown|invalid communicator passed|"
     r"already been destroyed|Data type supplied|is not power of 2|must be suitably aligned|"
     r"does not satisfy symmetric", dict(_MISUSE)),
    (r"(?=.*NCCL_[A-Z0-9_]+)(?=.*(?i:invalid|unknown|unrecogni|not found|ignor|too big|too small|greater than|"
     r"not a power|limiting|cap it|setting it|must be|parse|verify|Please specify))",
     dict(_ENVVAR, info=True)),
    (r"(?i)falling back|fall ?back|using .* instead|Continu(e|ing) without|Continuing in spite|ignoring|"
     r"Skipping|disabling|Proceeding without|not using it|Defaulting to|Trying a different method|"
     r"will be disabled|retrying", dict(_FALLBACK, info=True)),
    (r"^RAS |^Unexpected error from ncclSocketReady",
     dict(blame="none", role="context", severity="info", action="", info=True, path=r"src/ras/",
          meaning="an internal message of NCCL's RAS service ({func}()); RAS goes on")),
]

_SYSCALL_ACTIONS = [
    (r"socket|bind|listen|accept|connect|getsockname|setsockopt|getsockopt|getifaddrs|shutdown|poll|fcntl",
     "check the host's network setup and open-file limit (ulimit -n), and NCCL_SOCKET_IFNAME"),
    (r"pthread", "check the process and thread limits (ulimit -u, the cgroup's pids.max) and host memory"),
    (r"rlimit", "check the process limits (ulimit -a) of the job's containers or batch system"),
    (r"sched_getaffinity", "check the CPU affinity / cgroup cpuset given to the process"),
    (r".", "check the file or descriptor involved, its permissions and the open-file limit (ulimit -n)"),
]

_CUDA_DOC = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"


def _syscall_rule(fmt: str) -> dict[str, object] | None:
    m = re.match(r"Call to ([a-z_]\w*)(?: ([A-Z_ ]+?))? failed", fmt)
    if not m or m.group(1).startswith(("ibv_", "mlx5dv_")):
        return None
    action = next(a for r, a in _SYSCALL_ACTIONS if re.search(r, m.group(1)))
    return dict(blame="environment", role="root", severity="warning",
                meaning=f"the system call {m.group(1)}() failed in {{func}}() ({{subsystem}}); the error text "
                        f"follows", action=action)


_IBV_HW = ("ibv_open_device", "ibv_query_device", "ibv_query_port", "ibv_query_gid", "ibv_query_qp",
           "ibv_get_async_event", "ibv_poll_cq")
_IBV_TEARDOWN = ("ibv_dealloc_pd", "ibv_destroy_cq", "ibv_destroy_qp", "ibv_dereg_mr", "ibv_close_device")
_MEMREG = ("ibv_reg_mr", "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "mlx5dv_reg_dmabuf_mr")


def _ibv_rule(fmt: str) -> dict[str, object] | None:
    m = re.match(r"(?:NET/MLX5: )?Call to ((?:ibv|mlx5dv)_\w+) (?:failed|skipped|not supported)", fmt)
    if not m:
        return None
    name = m.group(1)
    if name in _MEMREG:
        return dict(blame="environment", role="root", severity="suspect",
                    meaning=f"registering memory with the NIC ({name}) failed: the locked-memory limit is too "
                            f"low or GPUDirect RDMA (nvidia-peermem / DMA-BUF) is not available",
                    action="raise the locked-memory limit (ulimit -l unlimited; docker --ulimit memlock=-1) "
                           "and check GPUDirect RDMA (lsmod | grep nvidia_peermem, or DMA-BUF support); "
                           "NCCL_NET_GDR_LEVEL=LOC disables GPUDirect to test")
    if name in ("ibv_create_qp", "ibv_create_cq", "ibv_alloc_pd"):
        return dict(blame="environment", role="root", severity="suspect",
                    meaning=f"{name} failed: the NIC or the process ran out of resources for new "
                            f"connections (locked memory, queue pairs)",
                    action="raise the locked-memory limit (ulimit -l unlimited) and check how many "
                           "processes/communicators share the NIC")
    if name == "ibv_modify_qp":
        return dict(blame="environment", role="root", severity="suspect",
                    meaning="moving an InfiniBand/RoCE queue pair to the connected state failed: the two NICs "
                            "cannot reach each other with the addressing NCCL chose",
                    action="check the IB/RoCE setup between the two hosts: link up (ibstat), "
                           "NCCL_IB_GID_INDEX and RoCE version, same subnet / PKey, NCCL_IB_HCA")
    if name in _IBV_HW:
        return dict(blame="hardware", role="root", severity="warning",
                    meaning=f"the verbs call {name} on this host's NIC failed",
                    action="check the NIC and its driver (ibv_devinfo, ibstat, dmesg for mlx5 errors)")
    if name in _IBV_TEARDOWN:
        return dict(_TEARDOWN, blame="environment")
    if name == "ibv_fork_init":
        return dict(blame="environment", role="root", severity="warning",
                    meaning="ibv_fork_init failed, so verbs cannot be made fork-safe",
                    action="check rdma-core and RDMAV_FORK_SAFE / IBV_FORK_SAFE settings")
    return dict(blame="environment", role="root", severity="warning",
                meaning=f"the verbs call {name} failed in {{func}}()",
                action="check this host's NIC and rdma-core (ibv_devinfo)")


# 3. Explicit overrides for the important messages: (regex on the format, fields).
_IB_ACTION = ("check the IB/RoCE link between this host and the peer named in the line (ibstat port "
              "state, switch and cable error counters, whether the peer host is still up)")
_SHM_ACTION = ("enlarge /dev/shm (docker run --shm-size=16g or --ipc=host; Kubernetes: mount a "
               "memory-backed emptyDir at /dev/shm) or set NCCL_SHM_DISABLE=1")
_IFNAME_ACTION = ("set NCCL_SOCKET_IFNAME to an interface that exists and is up on every node (ip addr; "
                  "e.g. NCCL_SOCKET_IFNAME=eth0 or ^lo,docker)")
_OVERRIDES: list[tuple[str, dict[str, object]]] = [
    (r"^Duplicate GPU detected", dict(
        blame="launch", role="root", severity="suspect",
        meaning="two ranks of one communicator were given the same GPU",
        action="give each rank its own GPU (torch.cuda.set_device(local_rank), CUDA_VISIBLE_DEVICES, one "
               "process per GPU)")),
    (r"^Mismatched collective detected", dict(  # v2.4-2.6 src/init.cc ncclCommGetAsyncError()
        blame="self", role="root", severity="suspect",
        meaning="NCCL detected that ranks called mismatched collectives (a different operation, order or size "
                "on some ranks: an application desync) at or near the rank it names",
        action="make every rank call the same collectives in the same order with the same sizes; "
               "NCCL_DEBUG_SUBSYS=COLL (or TORCH_DISTRIBUTED_DEBUG=DETAIL) shows each rank's calls")),
    (r"(?:^|: )Socket creation failed", dict(
        blame="environment", role="root", severity="warning",
        meaning="creating a TCP socket failed on this host: the address family (IPv4/IPv6) is not available, "
                "no usable network interface, or no file descriptors left",
        action="set NCCL_SOCKET_IFNAME to an interface that works on every node (and NCCL_SOCKET_FAMILY=AF_INET "
               "when IPv6 is off); raise the open-file limit (ulimit -n)")),
    (r"^socketProgress: Connection closed by remote peer", dict(
        blame="peer", role="consequence", severity="warning",
        meaning="the TCP connection to the named peer was closed: that process exited, crashed or aborted "
                "first",
        action="read the named peer's log for its first error (exit code, OOM killer, CUDA error)")),
    (r"^socketProgressOpt: Call to ", dict(
        blame="peer", role="consequence", severity="warning",
        meaning="send/recv on the TCP connection to the named peer failed (e.g. connection reset, broken "
                "pipe): the peer died or the network between them failed",
        action="check the named peer's log and host first, then the network between the two nodes")),
    (r"^socketProgressOpt: abort called", dict(
        blame="none", role="consequence", severity="info", action="",
        meaning="a socket operation stopped because the communicator is being aborted")),
    (r"^Error while %s shared memory segment", dict(
        blame="environment", role="root", severity="suspect",
        meaning="creating or attaching a shared-memory segment in /dev/shm failed; usually /dev/shm is too "
                "small (containers default to 64 MB) or full",
        action=_SHM_ACTION)),
    (r"^Error: failed to extend %s to %ld bytes", dict(
        blame="environment", role="root", severity="suspect",
        meaning="NCCL could not grow its shared-memory file in /dev/shm to the size it needs: /dev/shm is "
                "too small or full",
        action=_SHM_ACTION)),
    (r"^Error: failed to create shared memory file|^Error: Could not map %s size|^Could not map %s size", dict(
        blame="environment", role="root", severity="suspect",
        meaning="NCCL could not create or map its shared-memory file in /dev/shm",
        action=_SHM_ACTION + "; check that /dev/shm is mounted and writable")),
    (r"^Call to open failed: %s$", dict(
        blame="environment", role="root", severity="warning",
        meaning="open() of a shared-memory file under /dev/shm failed (creating it or attaching to the "
                "segment another local rank created)",
        action="check that /dev/shm is mounted, writable and shared by the local ranks (--ipc=host)")),
    (r"(?i)^(fallocate|mkstemp): Failed", dict(
        role="context", severity="info", action="",
        meaning="a shared-memory file operation was interrupted (EINTR) and is retried")),
    (r"^Cuda failure", dict(
        blame="self", role="root", severity="suspect",
        meaning="a CUDA call made by NCCL on this rank failed; the quoted text is the CUDA error (sticky "
                "errors such as an illegal memory access come from an earlier kernel fault on this GPU)",
        action="read the CUDA error: 'out of memory' -> free GPU memory on this rank; 'illegal memory "
               "access' / 'launch failure' -> find the faulting kernel (CUDA_LAUNCH_BLOCKING=1, "
               "compute-sanitizer); ECC/NVLink/device errors -> check the GPU (nvidia-smi, Xid in dmesg)")),
    (r"^%s:%d Cuda failure", dict(
        blame="self", role="context", severity="info", action="",
        meaning="a CUDA call NCCL treats as optional failed; NCCL clears the error and goes on")),
    (r"^(NET/IB ?: |NET/IB/GIN: )Got completion from peer", dict(
        blame="hardware", role="root", severity="warning",
        meaning="an InfiniBand/RoCE work request completed with an error; the status number names the "
                "cause (12 = retry exceeded: link or peer unreachable; 5 = flushed after an earlier error)",
        action=_IB_ACTION)),
    (r"async fatal event|Got async event|Got async error event", dict(
        blame="hardware", role="root", severity="suspect",
        meaning="the NIC reported a fatal asynchronous event (port error, catastrophic error, QP/CQ fatal "
                "error) for the device:port named in the line",
        action="check the NIC and its link (ibstat, dmesg for mlx5 errors, switch port counters); reset or "
               "replace the failing HCA, cable or switch port")),
    (r"Got non-fatal async event|unknown event type", dict(
        blame="hardware", role="root", severity="warning",
        meaning="the NIC reported an asynchronous event for the device:port named in the line",
        action="check the NIC's port state and error counters (ibstat, dmesg)")),
    (r"GID table changed", dict(
        blame="environment", role="root", severity="warning",
        meaning="the RoCE GID table of the NIC changed (an IP address of the interface was added or removed) "
                "while NCCL was using it",
        action="keep the RoCE interfaces' IP configuration stable while jobs run")),
    (r"^communicator encountered a fatal error \(detected in", dict(
        blame="hardware", role="consequence", severity="warning",
        meaning="an earlier fatal event of the InfiniBand NIC was recorded; NCCL now fails network calls "
                "on this communicator",
        action="find the 'async fatal event' or completion error logged before this line")),
    (r"^NET/IB ?: Unable to open device", dict(
        blame="environment", role="root", severity="suspect",
        meaning="NCCL could not open the InfiniBand/RoCE device",
        action="check that /dev/infiniband is available (containers: --device=/dev/infiniband "
               "--cap-add=IPC_LOCK) and the HCA's state (ibv_devinfo)")),
    (r"^NET/IB ?: Unable to query", dict(
        blame="hardware", role="root", severity="warning",
        meaning="querying the InfiniBand/RoCE device or port failed",
        action="check the HCA and its driver (ibv_devinfo, dmesg)")),
    (r"^NET/IB ?: No IP interface found", dict(
        blame="launch", role="root", severity="suspect",
        meaning="NCCL found no IP interface for its out-of-band connections while setting up InfiniBand",
        action=_IFNAME_ACTION)),
    (r"^ibv_post_(send|recv)\(\) failed", dict(
        blame="hardware", role="consequence", severity="warning",
        meaning="posting a work request to the queue pair failed: the queue pair is already in the error "
                "state (after a completion error or a peer failure) or the queue is full",
        action="find the completion error or peer failure logged before this line")),
    (r"^Call to ibv_poll_cq\(\) returned", dict(
        blame="hardware", role="root", severity="warning",
        meaning="polling the NIC's completion queue failed", action=_IB_ACTION)),
    (r"collective mismatch error|posted incorrect receive info|message truncated", dict(
        blame="self", role="root", severity="warning",
        meaning="this rank and the named peer disagree on a message's size: the ranks called different "
                "collectives or sizes, or run with different NCCL_* settings (NCCL_PROTO, NCCL_ALGO) or "
                "versions",
        action="check that every rank calls the same collectives in the same order with the same sizes, "
               "and has the same NCCL version and NCCL_* environment")),
    (r"^Message truncated : received", dict(
        blame="launch", role="root", severity="warning",
        meaning="a bootstrap message from a peer had an unexpected size: ranks run different NCCL versions, "
                "or processes of different jobs/communicators reached each other",
        action="use one NCCL version on all ranks and give every job its own MASTER_ADDR:MASTER_PORT / "
               "unique id")),
    (r"^Bootstrap : no socket interface found|^NET/Socket : No usable listening interface found|"
     r"^NET/Socket : no interface found|^no device found (matching|after excluding)", dict(
        blame="launch", role="root", severity="suspect",
        meaning="no network interface matched NCCL's interface selection (NCCL_SOCKET_IFNAME / "
                "NCCL_OOB_NET_IFNAME), or none is up",
        action=_IFNAME_ACTION)),
    (r"^Net : No interface found in the same subnet", dict(
        blame="launch", role="root", severity="suspect",
        meaning="no local interface is in the same subnet as the address of the bootstrap root "
                "(NCCL_COMM_ID / the unique id's address)",
        action=_IFNAME_ACTION)),
    (r"^Invalid NCCL_COMM_ID|^Net : No valid .*pair found|^Net : error encountered when getting address info|"
     r"^Net : string is null", dict(
        blame="launch", role="root", severity="suspect",
        meaning="the bootstrap address (NCCL_COMM_ID or the address in the unique id) cannot be parsed or "
                "resolved",
        action="check NCCL_COMM_ID / MASTER_ADDR: host:port that resolves on every node")),
    (r"^Bootstrap Root : mismatch in", dict(
        blame="launch", role="root", severity="suspect",
        meaning="ranks that joined the bootstrap root disagree on the number of ranks (or roots): processes "
                "were started with different world sizes, or two jobs share one NCCL unique id / address",
        action="start every process with the same world size and give each job its own rendezvous "
               "(MASTER_ADDR:MASTER_PORT)")),
    (r"^Bootstrap Root : rank %d of %d ranks has already checked in", dict(
        blame="launch", role="root", severity="suspect",
        meaning="two processes joined the bootstrap with the same rank (a duplicate RANK, or a restarted "
                "process joining a stale rendezvous)",
        action="give every process a unique rank and a fresh rendezvous after restarts (new MASTER_PORT / "
               "unique id)")),
    (r"^socketFinalizeAccept", dict(
        blame="launch", role="root", severity="warning",
        meaning="a connection reached NCCL's listening socket from something that is not a matching NCCL "
                "peer (another job on the same address/port, a port scanner, a different NCCL version)",
        action="give each job its own ports and the same NCCL version on every rank")),
    (r"(?i)^(%s: |socketStartConnect: |socketPollConnect(: | to ))?Connect(ing)? to %s (failed|returned)|"
     r"^socketPollConnect to %s failed|^%s: connect to %s", dict(
        blame="peer", role="root", severity="warning",
        meaning="this process could not open a TCP connection to the address named (the bootstrap root or "
                "a peer): nobody listens there (the peer died or has not started), a firewall blocks it, "
                "or the address is on the wrong interface",
        action="check that the peer is alive and reachable at that address (MASTER_ADDR, "
               "NCCL_SOCKET_IFNAME, firewall rules)")),
    (r"(?i)exceeded (retries|timeouts|error retry count)|connect returned %s, exceeded", dict(
        blame="peer", role="consequence", severity="warning",
        meaning="connecting or accepting a TCP connection kept failing until NCCL gave up",
        action="check that the peer is alive and reachable (MASTER_ADDR, NCCL_SOCKET_IFNAME, firewall); "
               "look for the errors logged just before")),
    (r"^socketTryAccept: Accept failed|^\[Service thread\] Accept failed", dict(
        blame="environment", role="root", severity="warning",
        meaning="accept() on NCCL's listening socket failed (e.g. too many open files)",
        action="raise the open-file limit (ulimit -n) and check the host's network state")),
    (r"^Mismatched NCCL version detected|^NCCL version mismatch with remote peer", dict(
        blame="launch", role="root", severity="suspect",
        meaning="ranks of the job run different NCCL versions",
        action="use the same NCCL (and PyTorch) build on every node and rank")),
    (r"^NCCL RAS protocol version mismatch", dict(
        blame="launch", role="root", severity="warning",
        meaning="the ncclras client and the job's NCCL speak different RAS protocol versions",
        action="run the ncclras client from the same NCCL release as the job")),
    (r"^Failed to determine (local|intra proc) ranks", dict(
        blame="launch", role="root", severity="warning",
        meaning="NCCL could not work out which ranks share this host/process: the ranks' host and process "
                "hashes are inconsistent (e.g. containers on one node with different host identities, or "
                "NCCL_HOSTID set differently)",
        action="check that ranks on one node agree on their host identity (hostname, NCCL_HOSTID) and that "
               "rank numbering matches the launch")),
    (r"^Invalid rank requested|^rank %d exceeds ndev|^invalid device count \(%d\) requested", dict(
        blame="launch", role="root", severity="suspect",
        meaning="the rank or world size given to NCCL is out of range (rank not in 0..nranks-1, or nranks < 1)",
        action="check RANK / WORLD_SIZE (or the values passed to init_process_group) on every process")),
    (r"^Attempt to use communicator before the previous operation returned ncclSuccess", dict(
        blame="self", role="consequence", severity="warning",
        meaning="a call used a non-blocking communicator whose previous operation (e.g. its init) had not "
                "completed successfully",
        action="look for the failed or pending NCCL operation before this line; wait for ncclSuccess before "
               "using the communicator")),
    (r"^%s: communicator was revoked", dict(
        blame="none", role="consequence", severity="warning",
        meaning="work was launched on a communicator that had been revoked (ncclCommRevoke, e.g. by a "
                "fault-tolerance layer after another failure)",
        action="look for the failure that made the program revoke the communicator")),
    (r"^Comm %p is in abort state", dict(
        blame="none", role="consequence", severity="warning",
        meaning="a proxy call stopped because the communicator is being aborted (by the program, "
                "PyTorch's watchdog, or after an earlier error)",
        action="look for the error or timeout that triggered the abort")),
    (r"^hostStreamPlanCallback\(\) failed|^ncclAsyncJobComplete: job %p failed|"
     r"^\[Proxy Service %d\] Failed to execute operation|^\[Service thread\] Error encountered progressing", dict(
        blame="none", role="consequence", severity="warning",
        meaning="an NCCL operation failed; the cause is the error logged before this line",
        action="look for the first WARN before this line")),
    (r"^\[Service thread\] Could not receive type from localRank|^Socket recv failed while polling|"
     r"^ncclProxy\w* call to (tpRank|rank|top parent)|^ncclProxyClient\w* call to|^UDS: (Receiving|Sending) data", dict(
        blame="peer", role="consequence", severity="warning",
        meaning="talking to another local rank's proxy failed: that rank exited, aborted or its proxy failed",
        action="look at the other local ranks' logs for their first error")),
    (r"^UDS: Binding to socket|^UDS: Socket creation error", dict(
        blame="environment", role="root", severity="warning",
        meaning="NCCL could not create or bind its abstract Unix-domain socket on this host (a leftover "
                "process of an earlier run, or a restricted network namespace)",
        action="check for leftover processes of an earlier run on this host; ranks of one node must share "
               "the network namespace")),
    (r"^(Failed to (create|set) CUDA context|\[Proxy (Progress|Service|Service UDS)\] Failed to set CUDA device)", dict(
        blame="self", role="root", severity="warning",
        meaning="NCCL's proxy thread could not make the rank's GPU current: the GPU is in an error state "
                "or no longer usable",
        action="check this GPU (nvidia-smi, Xid in dmesg) and the CUDA errors logged before this line")),
    (r"^Error : no algorithm/protocol available", dict(
        blame="launch", role="root", severity="suspect",
        meaning="NCCL_ALGO / NCCL_PROTO (or a tuner plugin) exclude every algorithm and protocol that can "
                "run this collective",
        action="unset or widen NCCL_ALGO / NCCL_PROTO (and check NCCL_TUNER_PLUGIN)")),
    (r"^Error: no symmetric kernel available", dict(
        blame="self", role="root", severity="warning",
        meaning="no symmetric-memory kernel exists for this collective, datatype and operation",
        action="use a supported datatype/operation or disable symmetric kernels")),
    (r"^FP8 reduction support begins with sm90", dict(
        blame="self", role="root", severity="suspect",
        meaning="the program asked for an FP8 reduction on a GPU older than Hopper (sm90)",
        action="use a wider datatype for this reduction on this GPU")),
    (r"^P2P is disabled between NVLINK connected GPUs", dict(
        blame="hardware", role="root", severity="suspect",
        meaning="GPUs connected by NVLink report peer access as disabled, which points at a hardware or "
                "driver problem with the NVLink connection",
        action="check the NVLink state (nvidia-smi nvlink -s, nvidia-smi topo -m, Xid in dmesg); "
               "NCCL_IGNORE_DISABLED_P2P=1 proceeds anyway")),
    (r"^Failed to bind NVLink SHARP \(NVLS\) Multicast memory", dict(
        blame="environment", role="root", severity="suspect",
        meaning="NVSwitch multicast (NVLS) memory could not be bound: usually a Fabric Manager or NVSwitch "
                "problem",
        action="check nvidia-fabricmanager and the NVSwitches (nvidia-smi -q, dmesg), or set "
               "NCCL_NVLS_ENABLE=0")),
    (r"^MNNVL \(cliqueSize %d\) is available but not", dict(
        blame="environment", role="root", severity="suspect",
        meaning="multi-node NVLink is present but NCCL cannot use it: the IMEX service or channels are not "
                "set up",
        action="check the IMEX daemon and /dev/nvidia-caps-imex-channels (nvidia-imex-ctl -N), or set "
               "NCCL_MNNVL_ENABLE=0")),
    (r"^MNNVL is not supported on this system", dict(
        blame="environment", role="root", severity="warning",
        meaning="multi-node NVLink was requested but this system does not support it",
        action="unset NCCL_MNNVL_ENABLE or run on MNNVL-capable systems")),
    (r"^No transport found for rank|^Rank %d has no transport for", dict(
        blame="environment", role="root", severity="suspect",
        meaning="no NCCL transport (P2P, SHM or network) can connect these two ranks",
        action="check NCCL_P2P_DISABLE / NCCL_SHM_DISABLE / NCCL_NET and that a network (IB or sockets) "
               "works between the hosts")),
    (r"^failed to peer with device", dict(
        blame="environment", role="root", severity="suspect",
        meaning="enabling CUDA peer access between two GPUs failed",
        action="check GPU peer access (nvidia-smi topo -p2p r; ACS/IOMMU settings, VM passthrough) or set "
               "NCCL_P2P_DISABLE=1")),
    (r"^cudaIpcGetMemHandle failed", dict(
        blame="environment", role="root", severity="warning",
        meaning="getting a CUDA IPC handle for a buffer failed, so local ranks cannot map each other's memory",
        action="check CUDA IPC between the local processes (containers: --ipc=host and a shared PID "
               "namespace) or set NCCL_P2P_DISABLE=1")),
    (r"^Error: network %s not found", dict(
        blame="launch", role="root", severity="suspect",
        meaning="NCCL_NET names a network transport that is not available on this host",
        action="unset NCCL_NET or set it to an available network (IB, Socket, or the plugin's name)")),
    (r"^Failed to initialize any NET plugin", dict(
        blame="environment", role="root", severity="suspect",
        meaning="no network transport could be initialized (neither a plugin, InfiniBand nor sockets)",
        action="check NCCL_NET / NCCL_NET_PLUGIN and the interfaces (NCCL_SOCKET_IFNAME, NCCL_IB_HCA)")),
    (r"^Failed to open libnvidia-ml\.so\.1|^nvmlInit%s\(\) failed", dict(
        blame="environment", role="root", severity="suspect",
        meaning="NVML could not be loaded or initialized (driver libraries missing in the container, or "
                "'Driver/library version mismatch' after a driver update)",
        action="check that nvidia-smi works in this container/host; reboot or reload the driver after an "
               "update")),
    (r"^Failed to find CUDA library|^Failed to load CUDA missing symbol|^cuDriverGetVersion failed|"
     r"^CUDA some PFN functions not found|^Retrieve %s", dict(
        blame="environment", role="root", severity="suspect",
        meaning="the CUDA driver library (libcuda) is missing or older than the CUDA version NCCL was built "
                "for",
        action="update the NVIDIA driver, or use a PyTorch/NCCL build for the installed driver's CUDA "
               "version; check that libcuda.so.1 is visible in the container")),
    (r"^NCCL cannot be captured in a graph", dict(
        blame="environment", role="root", severity="suspect",
        meaning="CUDA graph capture of NCCL needs CUDA runtime >= 11.3 and driver >= R465",
        action="update the driver/CUDA or do not capture NCCL calls in CUDA graphs")),
    (r"^Failed to open libibverbs", dict(
        blame="environment", role="context", severity="info",
        meaning="rdma-core's libibverbs is not installed or not visible, so NCCL cannot use InfiniBand/RoCE "
                "and falls back to TCP sockets",
        action="install rdma-core (libibverbs1) in the image if the job should use InfiniBand/RoCE")),
    (r"^dlvsym failed on %s - %s version %s", dict(
        blame="environment", role="root", severity="warning",
        meaning="the installed rdma-core library lacks a verbs symbol NCCL needs (too old)",
        action="update rdma-core (libibverbs / libmlx5) on this host or in the image")),
    (r"^%s:%d Unrecoverable error detected: malloc", dict(
        blame="self", role="root", severity="suspect",
        meaning="a host memory allocation failed on this rank (the host is out of memory)",
        action="reduce host memory use (dataloader workers, pinned memory) or add memory; check the OOM "
               "killer in dmesg")),
    (r"^Invalid value %s for %s, using default", dict(
        blame="launch", role="root", severity="warning", info=True,
        meaning="an NCCL_* variable has a value NCCL cannot parse; NCCL uses the default instead",
        action="fix the NCCL_* variable named in the line")),
    (r"^(XML Parse|XML Mismatch)", dict(
        blame="launch", role="root", severity="warning",
        meaning="a topology or graph XML file (NCCL_TOPO_FILE / NCCL_GRAPH_FILE) is malformed",
        action="fix or unset NCCL_TOPO_FILE / NCCL_GRAPH_FILE")),
    (r"^Could not open XML (topology|graph) file", dict(
        blame="launch", role="root", severity="warning",
        meaning="the XML file named by NCCL_TOPO_FILE / NCCL_GRAPH_FILE cannot be opened",
        action="fix the path in NCCL_TOPO_FILE / NCCL_GRAPH_FILE or unset it")),
    (r"^Error : could not find CPU close to GPU|^Set CPU affinity : unable to find GPU/CPU", dict(
        blame="environment", role="root", severity="warning",
        meaning="topology detection could not attach the GPU to a CPU (NUMA) node from sysfs",
        action="check that /sys is fully visible in the container and the GPU's numa_node; or provide "
               "NCCL_TOPO_FILE")),
    (r"^Cannot initialize CollNet|^NCCL_DEVICE_UNPACK plugin has incompatible version|"
     r"^Unable to create thread context due to old driver|^CollNet is not supported or fails|"
     r"^CC On, Multi-GPU CC Off|^Profiler init failed", dict(
        role="context", severity="info", action="",
        meaning="{subsystem}: an optional feature is not available and NCCL goes on without it")),
    (r"failed to (NET|IPC|NVLS) register|COLLNET failed to register|GIN Symmetric register failed", dict(
        blame="environment", role="context", severity="info", action="",
        meaning="registering a user buffer with a transport failed; NCCL falls back to its own buffers")),
    (r"^commDestroySync|^Legacy IPC cleanup callback failed|^ncclProxyStop: comm", dict(_TEARDOWN)),
    (r"^ncclCommSetAsyncError: error comm", dict(_INTERNAL)),
    (r"^GIN Error on gin context", dict(
        blame="hardware", role="root", severity="warning",
        meaning="GPU-initiated networking reported an error on one of its contexts",
        action="check the NIC used by GIN and the errors logged before this line")),
    (r"^Invalid device count requested|^Invalid device %d \(totalnDev|^ncclRedOpDestroy", dict(_MISUSE)),
    (r"^comm %p has already been destroyed", dict(
        blame="self", role="root", severity="warning",
        meaning="ncclCommDestroy/ncclCommAbort was called on a communicator that was already destroyed",
        action="destroy each communicator once (with PyTorch: destroy_process_group once, no use afterwards)")),
    (r"^Could not find a path for pattern %d, falling back", dict(
        blame="environment", role="context", severity="info", action="", info=True,
        meaning="the graph search found no path for one communication pattern and uses a simple order "
                "instead (performance may be lower)")),
    (r"^Rank %d requires NIC %d but that NIC is not available for rank %d", dict(
        blame="environment", role="root", severity="warning",
        meaning="the ranks see different sets of NICs, so a NIC chosen for one rank is missing for another",
        action="give every node the same NICs (NCCL_IB_HCA, NCCL_SOCKET_IFNAME) and check that all NICs are up")),
    (r"^Failed to open libmlx5", dict(
        blame="environment", role="context", severity="info", action="", info=True,
        meaning="rdma-core's mlx5 provider library is not available, so NCCL disables mlx5-specific features "
                "(mlx5 direct verbs, e.g. Data Direct)")),
    (r"^RAS idle timeout", dict(
        blame="none", role="context", severity="info", action="", info=True,
        meaning="RAS closes a socket connection that has been idle for a long time (routine housekeeping)")),
    (r"^\[Service thread\] Connection closed by localRank", dict(
        blame="none", role="context", severity="info", action="", info=True,
        meaning="a local rank closed its connection to this proxy: normal when a communicator is destroyed; "
                "after a crash it follows that rank's exit")),
    (r"^Invalid %s %d \((must be|maximum|minimum)", dict(
        blame="launch", role="root", severity="warning",
        meaning="an NCCL_*NTHREADS setting is out of range; NCCL ignores it and uses its default",
        action="fix or unset the NCCL_*NTHREADS variable named in the line")),
    (r"^(All entries except the first must have a prefix|Unrecognized (element|prefix) token)", dict(
        blame="launch", role="root", severity="suspect",
        meaning="NCCL cannot parse the algorithm/protocol list in NCCL_ALGO or NCCL_PROTO",
        action="fix the syntax of NCCL_ALGO / NCCL_PROTO (see NCCL's environment-variable documentation) or "
               "unset them")),
    (r"^Failed to open %s$", dict(
        blame="environment", role="root", severity="warning",
        meaning="NCCL_GDRCOPY_ENABLE is set but the GDRCopy library (libgdrapi.so) cannot be loaded",
        action="install GDRCopy (and its gdrdrv module) or unset NCCL_GDRCOPY_ENABLE")),
    (r"^cudaArch %d ncclMaxSharedMem", dict(
        blame="environment", role="root", severity="warning",
        meaning="NCCL's kernels ask for more shared memory than this GPU provides (a build for another GPU "
                "architecture, or a bad NCCL_* shared-memory setting)",
        action="use an NCCL/PyTorch build compiled for this GPU architecture")),
    (r"^CUMEM (Host )?(is )?not supported prior to CUDA", dict(
        blame="environment", role="root", severity="warning",
        meaning="cuMem allocations were requested but this NCCL was built with a CUDA version that lacks them",
        action="use a newer NCCL build or set NCCL_CUMEM_ENABLE=0")),
    (r"^fatal error - RAS thread terminating", dict(
        blame="none", role="consequence", severity="warning",
        meaning="NCCL's RAS thread hit a fatal error and stopped; the job goes on without RAS",
        action="look at the RAS messages before this line; RAS reports are unavailable for this process")),
    (r"^NET/Socket : socket progress error", dict(
        blame="peer", role="consequence", severity="warning",
        meaning="a socket-transport thread failed to move data on a connection: the peer closed it or the "
                "network failed",
        action="look at the peer's log and the socket errors logged before this line")),
    (r"^ncclSocketInit: Socket creation failed", dict(
        blame="environment", role="root", severity="warning",
        meaning="creating a TCP socket failed (e.g. too many open files)",
        action="raise the open-file limit (ulimit -n) and check the host's network stack")),
    (r"^Could not find real path of %s", dict(
        blame="environment", role="root", severity="warning",
        meaning="the sysfs path of a GPU or NIC could not be resolved (a partial /sys in a container or VM)",
        action="make /sys (including /sys/bus/pci and /sys/class/infiniband) visible in the container")),
    (r"^(GIN not supported|GIN is disabled|No GIN-capable devices found|GIN-capable device type mismatch|"
     r"No network devices that support GDAKI found|IB device %s not found)", dict(
        blame="environment", role="root", severity="warning",
        meaning="the program asked for GPU-initiated networking (NCCL's device API), which cannot be set up on "
                "this host ({func}())",
        action="check the NIC, driver and NCCL settings GPU-initiated networking needs, or do not use the "
               "device-side network API")),
    (r"^peer query failed between dev|^Could not enable P2P between dev", dict(
        blame="environment", role="context", severity="info", action="",
        meaning="CUDA peer access between these two GPUs is unavailable; NCCL uses another path (SHM or the "
                "network)")),
    (r"^nvmlDeviceGetCount\(\) reported more devices", dict(
        blame="environment", role="root", severity="warning",
        meaning="NVML reports more GPUs than this NCCL build supports (ncclNvmlMaxDevices)",
        action="restrict the visible GPUs (CUDA_VISIBLE_DEVICES) or use a newer NCCL")),
    (r"^Warning: remote FLID configured as zero", dict(
        blame="environment", role="context", severity="info", action="",
        meaning="InfiniBand routing: the remote FLID is zero across subnets, so NCCL uses the DLID")),
]

# RAS report lines (src/ras/client_support.cc, the ncclras client): by wording, then context.
_RAS_RULES: list[tuple[str, dict[str, object]]] = [
    (r"^NCCL RAS protocol version mismatch", dict(
        blame="launch", role="root", severity="warning",
        meaning="the ncclras client and the job's NCCL speak different RAS protocol versions",
        action="run the ncclras client from the same NCCL release as the job")),
    (r"^Rank %[sd] |^%d ranks have (status|launched)|^%d ranks reported", dict(
        blame="none", role="context", severity="info", action="",
        meaning="a detail line of a RAS report entry: a group of ranks or one rank with its GPU, process and "
                "node")),
    (r"Missing communicator data from %d job process", dict(
        blame="peer", role="root", severity="warning",
        meaning="RAS got no communicator data from some processes of the job: they hang, are stuck in "
                "CUDA, or lost their network",
        action="inspect the processes listed under this line (stacks with py-spy, their logs, their hosts)")),
    (r"Missing communicator data from %d rank", dict(
        blame="peer", role="root", severity="warning",
        meaning="RAS got no data from some ranks of this communicator",
        action="inspect the ranks listed under this line (their processes, stacks and logs)")),
    (r"considered dead", dict(
        blame="peer", role="root", severity="warning",
        meaning="RAS cannot reach some processes of the job any more: they died, or their host or network "
                "is down",
        action="check the listed processes and hosts (exit codes, OOM killer, dmesg, node health)")),
    (r"different %s operation counts|different collective operation counts", dict(
        blame="peer", role="root", severity="warning",
        meaning="the ranks of this communicator have launched different numbers of collectives: the ranks "
                "with the lower count are behind (stuck, or skipped a collective)",
        action="look at the ranks with the lowest operation count (their stacks and logs)")),
    (r"^%d ranks have not launched any operations", dict(
        blame="peer", role="root", severity="warning",
        meaning="some ranks have not launched any operation on this communicator while others have",
        action="look at these ranks' stacks and logs: they never reached the first collective")),
    (r"Communicator ranks have different status", dict(
        blame="peer", role="root", severity="warning",
        meaning="the ranks of this communicator are in different states (e.g. some aborted or still "
                "initializing)",
        action="look at the ranks whose status differs from the majority")),
    (r"(Initialization|Asynchronous) error%s on", dict(
        blame="peer", role="root", severity="warning",
        meaning="ranks of this communicator reported NCCL errors (during init or asynchronously)",
        action="read the NCCL WARN lines of the listed ranks")),
    (r"communication timeout|No connection data collected|No communicator data collected|"
     r"missing data from %d process", dict(
        blame="peer", role="consequence", severity="warning",
        meaning="the RAS query could not hear from every process in time (unresponsive processes or "
                "network)",
        action="look at the processes the report lists as missing or dead")),
    (r"\) (INCOMPLETE|ERROR|MISMATCH)$", dict(
        blame="peer", role="root", severity="warning",
        meaning="the RAS report found a problem with this communicator (INCOMPLETE: ranks did not answer; "
                "ERROR: ranks reported errors; MISMATCH: ranks disagree on status or operation counts)",
        action="read the lines under this header: they name the ranks, GPUs, processes and nodes")),
    (r"negative travel times|system clocks are \*not\* synchronized|should be considered unreliable", dict(
        blame="environment", role="context", severity="info", action="",
        meaning="the nodes' clocks are not synchronized, so RAS timings between nodes are unreliable")),
    (r"^Failed to connect to the NCCL RAS service|^Connecting to %s:%s: %s", dict(
        blame="launch", role="root", severity="warning",
        meaning="the ncclras client could not connect to the job's RAS service (RAS disabled, wrong "
                "host/port, or the job is gone)",
        action="run ncclras on a node of the running job; check NCCL_RAS_ENABLE and NCCL_RAS_ADDR")),
    (r"^NCCL unexpectedly closed the connection|^Connection timed out", dict(
        blame="peer", role="consequence", severity="warning",
        meaning="the job's RAS service stopped answering the ncclras client",
        action="check whether the job's process on this node is still alive")),
]

_LIFECYCLE = [
    (r"Init START", "a rank starts creating a communicator (ncclCommInitRank/Split...): its rank, size, GPU "
                    "and communicator id; a rank with START but no COMPLETE is stuck in init"),
    (r"Init COMPLETE", "a rank finished creating a communicator: bootstrap and connection setup succeeded"),
    (r"Destroy COMPLETE", "a communicator was destroyed normally (ncclCommDestroy)"),
    (r"- %s COMPLETE", "a communicator was destroyed (Destroy: ncclCommDestroy) or aborted (Abort: ncclCommAbort, "
                       "after an error or a timeout, or at shutdown)"),
    (r"Abort START|Abort COMPLETE", "a communicator is aborted (ncclCommAbort: after an error or a timeout, or "
                                    "at shutdown)"),
    (r"Revoke", "a communicator is revoked (ncclCommRevoke), e.g. by a fault-tolerance layer"),
    (r"cudaDriverVersion", "the CUDA driver version NCCL found (e.g. 12040 = 12.4)"),
    (r".", "an NCCL communicator lifecycle line (context, not an error)"),
]

_RAS_CONTEXT = dict(blame="none", role="context", severity="info", action="",
                    meaning="a line of NCCL's RAS status report (ncclras)")


def file_rule(path: str) -> tuple[str, str, str, str, str]:
    return next(r for r in _FILE_RULES if re.search(r[0], path))


def describe_result(result: str) -> str:
    if result == "continues":
        return "NCCL logs it and goes on"
    if result == "fails":
        return "the NCCL call fails"
    return f"the NCCL call fails with {result}"


_LENGTH = re.compile(r"%(?:hh|h|ll|l|z|j|t)([diuxX])")


def _int_conv(text: str) -> str:
    """``text`` with printf length modifiers dropped (``%ld``, ``%llu``, ``%zu`` -> ``%d``, ``%u``):
    one override reads a message whose integer type changed between versions."""
    return _LENGTH.sub(r"%\1", text)


def classify(kind: str, fmt: str, path: str, func: str, result: str, levels: set[str]) -> dict[str, str]:
    """Meaning, blame, role, severity and action of one message (see the module docstring)."""
    _, subsystem, blame, role, action = file_rule(path)
    fields: dict[str, object] = dict(blame=blame, role=role, action=action, meaning="")
    warned = "warn" in levels or kind in ("ras", "rasclient")
    chosen: dict[str, object] | None = None
    if kind in ("ras", "rasclient"):
        chosen = next((dict(f) for r, f in _RAS_RULES if re.search(r, fmt)), None) or dict(_RAS_CONTEXT)
    elif kind == "context":
        chosen = dict(blame="none", role="context", severity="info", action="",
                      meaning=next(m for r, m in _LIFECYCLE if re.search(r, fmt)))
    else:
        chosen = next((dict(f) for r, f in _OVERRIDES if re.search(_int_conv(r), _int_conv(fmt))), None)
        if chosen is None:
            chosen = _ibv_rule(fmt) or _syscall_rule(fmt)
        if chosen is None and re.match(r"nvml\w+(%s)?\(.*failed", fmt):
            chosen = dict(blame="environment", role="root", severity="warning",
                          meaning="an NVML query failed ({func}()); NCCL reads the GPU topology through NVML",
                          action=action)
        if chosen is None:
            for r, f in _KEYWORD_RULES:
                if re.search(r, fmt) and (warned or f.get("info")) and re.search(str(f.get("path", "")), path):
                    chosen = dict(f)
                    break
    if chosen:
        fields.update({k: v for k, v in chosen.items() if k not in ("info", "path")})
    if not warned and kind == "info" and not (chosen and chosen.get("info")):
        # failure INFO lines: NCCL logs many recoverable failures at INFO level and goes on
        fields["role"] = "context"
        fields["severity"] = "info"
    sev = fields.get("severity") or ("info" if fields["role"] == "context" else "warning")
    fields["severity"] = sev
    if not fields["meaning"]:
        fields["meaning"] = (f"{subsystem}: {func}() logged this; {describe_result(result)}" if func else
                             f"{subsystem} logged this; {describe_result(result)}")
    meaning = str(fields["meaning"]).format(func=func or "NCCL", subsystem=subsystem,
                                            result=describe_result(result))
    fields["meaning"] = meaning
    return {k: str(fields[k]) for k in ("meaning", "blame", "role", "severity", "action")}


# ----------------------------------------------------------------------------------------------
# special entries: result codes, version banner, IB completion statuses, common CUDA errors
# ----------------------------------------------------------------------------------------------

_RESULT_FIELDS: dict[str, dict[str, str]] = {
    "ncclUnhandledCudaError": dict(
        blame="self", role="root", severity="warning",
        meaning="ncclUnhandledCudaError: a CUDA call inside NCCL failed on this rank; the 'Cuda failure' WARN "
                "(PyTorch's 'Last error:') names the CUDA error",
        action="read this rank's 'Cuda failure ...' line (or the text after PyTorch's 'Last error:')"),
    "ncclSystemError": dict(
        blame="environment", role="root", severity="warning",
        meaning="ncclSystemError: a system call or library NCCL uses failed on this rank (sockets, /dev/shm, "
                "InfiniBand verbs, NVML...)",
        action="read this rank's NCCL WARN lines (NCCL_DEBUG=WARN, or PyTorch's 'Last error:') for the failing "
               "call"),
    "ncclInternalError": dict(
        blame="self", role="root", severity="warning",
        meaning="ncclInternalError: NCCL hit an internal error (also returned after an abort, or when a "
                "network plugin misbehaves)",
        action="read the WARN lines before it; if none explains it, report it to NCCL with the "
               "NCCL_DEBUG=INFO log"),
    "ncclInvalidArgument": dict(
        blame="self", role="root", severity="warning",
        meaning="ncclInvalidArgument: an NCCL call got an invalid argument (pointer, count, datatype, root, "
                "communicator, config)",
        action="read the WARN line naming the argument (NCCL_DEBUG=WARN) and fix the call"),
    "ncclInvalidUsage": dict(
        blame="self", role="root", severity="warning",
        meaning="ncclInvalidUsage: NCCL was used wrongly (at communicator init most often two ranks on one GPU: "
                "src/init.cc returns it after 'Duplicate GPU detected'; later, unmatched group calls or a "
                "communicator used after an error or from the wrong place)",
        action="read the WARN line (NCCL_DEBUG=WARN); at init give each rank its own GPU "
               "(torch.cuda.set_device(local_rank) before init_process_group), else fix the program's use of NCCL"),
    "ncclRemoteError": dict(
        blame="peer", role="consequence", severity="warning",
        meaning="ncclRemoteError: a remote process exited or a network connection failed",
        action="find the peer that died first (its log and exit code) or the network error in the WARN lines"),
    "ncclInProgress": dict(
        blame="none", role="context", severity="info", action="",
        meaning="ncclInProgress: a non-blocking NCCL operation has not finished yet"),
}

# ibv_wc_status value -> (libibverbs' ibv_wc_status_str text, meaning, blame, role, severity, action)
_RD_ONLY = ("a reliable-datagram status that NCCL's reliable-connection queue pairs should not produce; "
            "it points at a NIC driver or firmware problem")
_IB_STATUS: dict[int, tuple[str, str, str, str, str, str]] = {
    1: ("local length error",
        "the NIC got a message longer than the receive buffer NCCL posted (or a send exceeded the port's "
        "limits): ranks disagree on sizes, usually different NCCL versions or NCCL_* settings",
        "launch", "root", "warning",
        "use the same NCCL version and NCCL_* environment on every rank; check that all ranks call the same "
        "collectives with the same sizes"),
    2: ("local QP operation error",
        "the NIC found a work request of this queue pair inconsistent with the queue pair's limits",
        "environment", "root", "warning",
        "update the NIC driver/firmware (MLNX_OFED / rdma-core) and NCCL; report it with the vendor error"),
    3: ("local EE context operation error", _RD_ONLY, "hardware", "root", "warning",
        "check the NIC driver and firmware (ibv_devinfo, dmesg)"),
    4: ("local protection error",
        "a local buffer of the work request is not registered with the NIC for this access (memory region "
        "invalid or freed, or GPUDirect RDMA registration not working)",
        "environment", "root", "suspect",
        "check GPUDirect RDMA on this host (nvidia_peermem loaded or DMA-BUF support, IOMMU/ACS settings) and "
        "the locked-memory limit; NCCL_NET_GDR_LEVEL=LOC disables GPUDirect to test"),
    5: ("Work Request Flushed Error",
        "the work request was flushed because its queue pair had already entered the error state after an "
        "earlier error (a completion error with another status, or the peer's failure)",
        "peer", "consequence", "warning",
        "find the first completion error or the peer failure before this line; this one follows from it"),
    6: ("memory management operation error",
        "a memory-window bind failed (NCCL does not bind memory windows itself)",
        "environment", "root", "warning", "check the NIC driver and any net plugin in use"),
    7: ("bad response error",
        "the remote NIC answered with an unexpected transport-layer response",
        "hardware", "root", "suspect",
        "check the IB/RoCE link and NICs of both hosts (ibstat, port error counters, firmware)"),
    8: ("local access error",
        "a protection error on a local buffer while the NIC wrote incoming data into it: the local memory "
        "registration is invalid or lacks the access right (e.g. GPUDirect RDMA not working)",
        "environment", "root", "suspect",
        "check GPUDirect RDMA on this host (nvidia_peermem or DMA-BUF, IOMMU/ACS); NCCL_NET_GDR_LEVEL=LOC "
        "disables GPUDirect to test"),
    9: ("remote invalid request error",
        "the remote NIC rejected the request as invalid (operation not supported by its queue pair, or the "
        "message does not fit its receive buffer): often ranks run different NCCL versions or settings",
        "launch", "root", "warning",
        "use the same NCCL version and NCCL_* environment on every rank, then check the peer's NIC"),
    10: ("remote access error",
         "the remote NIC refused access to the target buffer (invalid key, memory already deregistered or "
         "freed by the peer, or GPUDirect RDMA failing on the peer)",
         "peer", "root", "warning",
         "check the peer named in the line: its log (did it abort and free its buffers?) and its GPUDirect "
         "RDMA setup (nvidia_peermem / DMA-BUF)"),
    11: ("remote operation error",
         "the remote NIC could not complete the operation (an error on the responder's side)",
         "peer", "root", "warning", "check the peer's log and NIC for the first error there"),
    12: ("transport retry counter exceeded",
         "the remote NIC did not acknowledge within NCCL_IB_TIMEOUT after NCCL_IB_RETRY_CNT retries: a link "
         "or switch between the hosts failed, the peer's host or NIC went down, or the fabric is badly "
         "congested (RoCE without working PFC/ECN)",
         "hardware", "root", "suspect",
         _IB_ACTION + "; raise NCCL_IB_TIMEOUT only for a congested but healthy fabric"),
    13: ("RNR retry counter exceeded",
         "the remote side had no receive buffer posted through all receiver-not-ready retries: the peer is "
         "stuck or gone (NCCL's own transport sets rnr_retry=7, retry forever, so this points at a net plugin "
         "or a peer whose NIC failed)",
         "peer", "root", "warning",
         "check the peer named in the line (alive? hung?) and which net plugin is in use"),
    14: ("local RDD violation error", _RD_ONLY, "hardware", "root", "warning",
         "check the NIC driver and firmware (ibv_devinfo, dmesg)"),
    15: ("remote invalid RD request", _RD_ONLY, "hardware", "root", "warning",
         "check the NIC driver and firmware (ibv_devinfo, dmesg)"),
    16: ("aborted error",
         "the responder aborted the operation",
         "peer", "consequence", "warning", "look at the peer named in the line for its first error"),
    17: ("invalid EE context number", _RD_ONLY, "hardware", "root", "warning",
         "check the NIC driver and firmware (ibv_devinfo, dmesg)"),
    18: ("invalid EE context state", _RD_ONLY, "hardware", "root", "warning",
         "check the NIC driver and firmware (ibv_devinfo, dmesg)"),
    19: ("fatal error",
         "the NIC hit a fatal error",
         "hardware", "root", "suspect",
         "check the NIC (dmesg for mlx5 errors, firmware, ibv_devinfo); reset or replace it"),
    20: ("response timeout error",
         "the remote NIC did not respond in time",
         "hardware", "root", "suspect", _IB_ACTION),
    21: ("general error",
         "the NIC reported an error that fits no other status (the vendor error in the line has details)",
         "hardware", "root", "warning",
         "look up the vendor error with the NIC vendor; check the NIC and its link (ibstat, dmesg)"),
}

# The IB completion WARN in the wordings of 2.18 .. 2.28, each with the arguments for an example line
# (n = the status value, NAME = its enum name).
_IB_VARIANTS = [
    ("NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d (%s)%s%s%s%s",
     ("10.0.0.12<48362>", "n", 0, 0, 129, "Recv", "", "", "", "")),
    ("NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d (%s)%s%s%s%s",
     ("10.0.0.12<48362>", "n", 0, 0, 129, "Send", " localGid ", "::ffff:10.0.0.11", " remoteGids",
      "::ffff:10.0.0.12")),
    ("NET/IB: Got completion from peer %s with status=%d opcode=%d len=%u vendor err %u (%s)%s%s%s%s hca %s",
     ("10.0.0.12<48362>", "n", 0, 0, 129, "Recv", "", "", "", "", "mlx5_0")),
    ("NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d) reqSize=%d vendor_err=%u "
     "req_type=%s%s%s%s%s hca %s",
     ("10.0.0.12<48362>", "NAME", "n", "IBV_WC_SEND", 0, 1048576, 129, "Send", "", "", "", "", "mlx5_0")),
]

# Common CUDA error texts behind NCCL's "Cuda failure '%s'" (cudaGetErrorString / cuGetErrorString).
_CUDA_ERRORS: list[tuple[str, str, str, str, str, str]] = [
    ("out-of-memory", "out of memory", "self", "suspect",
     "a CUDA allocation inside NCCL failed: the GPU of this rank is out of memory",
     "free GPU memory on this rank (smaller batch, fewer cached blocks, NCCL_BUFFSIZE) and check for other "
     "processes on the GPU (nvidia-smi)"),
    ("illegal-memory-access", "an illegal memory access was encountered", "self", "suspect",
     "a kernel on this GPU (often the program's own, not NCCL's) accessed invalid memory; the error is sticky, "
     "so every later CUDA call on this rank fails",
     "find the faulting kernel (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer) and check Xid 13/31/43 in dmesg"),
    ("unspecified-launch-failure", "unspecified launch failure", "self", "suspect",
     "a kernel on this GPU crashed; the error is sticky, so every later CUDA call on this rank fails",
     "find the faulting kernel (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer) and check Xid errors in dmesg"),
    ("invalid-device-ordinal", "invalid device ordinal", "launch", "suspect",
     "the rank asked for a GPU index that does not exist on this node (more processes per node than "
     "visible GPUs, or a wrong LOCAL_RANK / CUDA_VISIBLE_DEVICES)",
     "start at most one process per visible GPU and select it with torch.cuda.set_device(local_rank)"),
    ("uncorrectable-ecc", "uncorrectable ECC error encountered", "hardware", "suspect",
     "this GPU reported an uncorrectable ECC memory error",
     "drain the node and check the GPU (nvidia-smi -q -d ECC, Xid 48/63/64 in dmesg); reset or replace it"),
    ("uncorrectable-nvlink", "uncorrectable NVLink error detected during the execution", "hardware", "suspect",
     "an NVLink connection of this GPU reported an uncorrectable error",
     "drain the node and check NVLink (nvidia-smi nvlink -s, Xid 74 in dmesg)"),
    ("driver-insufficient", "CUDA driver version is insufficient for CUDA runtime version", "environment",
     "suspect", "the NVIDIA driver is older than the CUDA runtime this program was built with",
     "update the NVIDIA driver or use a PyTorch/NCCL build for the driver's CUDA version"),
    ("devices-unavailable", "CUDA-capable device(s) is/are busy or unavailable", "environment", "suspect",
     "the GPU is in exclusive-process mode and already used by another process, or is unavailable",
     "check nvidia-smi for other processes on the GPU and its compute mode (nvidia-smi -q -d COMPUTE)"),
    ("no-device", "no CUDA-capable device is detected", "environment", "suspect",
     "this process sees no GPU (CUDA_VISIBLE_DEVICES empty or wrong, or the container has no GPU)",
     "check CUDA_VISIBLE_DEVICES and the container's GPU access (--gpus, device plugin)"),
    ("system-not-initialized", "system not yet initialized", "environment", "suspect",
     "on NVSwitch systems the GPUs are not ready because the Fabric Manager has not initialized the fabric",
     "start or check nvidia-fabricmanager (systemctl status nvidia-fabricmanager) and its log"),
    ("peer-access-unsupported", "peer access is not supported between these two devices", "environment",
     "warning", "CUDA peer access between two GPUs of this node is not supported (topology, ACS/IOMMU, VM)",
     "check nvidia-smi topo -p2p r and ACS/IOMMU settings, or set NCCL_P2P_DISABLE=1"),
]


def c_printf(fmt: str, args: tuple[object, ...]) -> str:
    """Format ``fmt`` like C's printf for the conversions NCCL uses (for building examples)."""
    it = iter(args)

    def rep(m: re.Match[str]) -> str:
        conv = m.group(0)
        if conv == "%%":
            return "%"
        py = re.sub(r"(hh|h|ll|l|z|j|t|L|q)(?=[a-zA-Z]$)", "", conv).replace("u", "d").replace("i", "d")
        return py % next(it)
    return _CONV.sub(rep, fmt)


def _enum_values(text: str, enum: str) -> list[tuple[str, int, int]]:
    """(name, value, line) of a plain C enum in ``text``."""
    m = re.search(r"enum\s+" + enum + r"\s*\{", text)
    if not m:
        return []
    out, value = [], -1
    line = text.count("\n", 0, m.end()) + 1
    for raw in text[m.end():].split("\n"):
        if "}" in raw:
            break
        mm = re.match(r"\s*([A-Z_][A-Z0-9_]*)\s*(?:=\s*([^,]+))?,?", raw)
        if mm:
            expr = (mm.group(2) or "").strip()
            shift = re.fullmatch(r"(\d+)\s*<<\s*(\d+)", expr)
            value = (int(shift.group(1)) << int(shift.group(2)) if shift else
                     int(expr, 0) if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", expr) else value + 1)
            out.append((mm.group(1), value, line))
        line += 1
    return out


# ----------------------------------------------------------------------------------------------
# building the catalog
# ----------------------------------------------------------------------------------------------

RDMA_VERBS_URL = "https://github.com/linux-rdma/rdma-core/blob/{ref}/libibverbs/verbs.h#L{line}"
RDMA_STRS_URL = "https://github.com/linux-rdma/rdma-core/blob/{ref}/libibverbs/enum_strs.c#L{line}"
SECTION_ORDER = ["result", "lifecycle", "message", "ib-status", "cuda-error", "ras"]


@dataclass
class Entry:
    section: str
    fields: dict[str, str]
    comment: list[str] = field(default_factory=list)
    sort_key: tuple[object, ...] = ()
    slug_text: str = ""


def _span(tags: list[str], seen: list[int]) -> str:
    return f"{tags[min(seen)]}..{tags[max(seen)]}"


def _slug_words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", strip_placeholders(text).lower())


def assign_ids(entries: list[Entry]) -> None:
    """``nccl.<words of the message>``: the first six words, more while two entries collide, then -2..."""
    taken: set[str] = set()
    pending = [e for e in entries if "id" not in e.fields]
    for e in entries:
        if "id" in e.fields:
            taken.add(e.fields["id"])
    wanted: dict[int, list[str]] = {id(e): _slug_words(e.slug_text) or ["message"] for e in pending}
    n = {id(e): min(6, len(wanted[id(e)])) for e in pending}
    for _ in range(10):
        counts: dict[str, int] = {}
        for e in pending:
            s = "-".join(wanted[id(e)][:n[id(e)]])
            counts[s] = counts.get(s, 0) + 1
        grown = False
        for e in pending:
            s = "-".join(wanted[id(e)][:n[id(e)]])
            if counts[s] > 1 and n[id(e)] < len(wanted[id(e)]):
                n[id(e)] += 1
                grown = True
        if not grown:
            break
    for e in pending:
        base = "nccl." + (e.section + "-" if e.section == "ras" else "") + "-".join(wanted[id(e)][:n[id(e)]])
        ident, k = base, 2
        while ident in taken:
            ident, k = f"{base}-{k}", k + 1
        taken.add(ident)
        e.fields = {"id": ident, **e.fields}


def build(git: Git, tags: list[str], rdma_gitdir: str | None = None) -> tuple[list[Entry], list[str]]:
    """The catalog entries and the notes (doubts) found while building them."""
    notes: list[str] = []
    ex = Extractor(git)
    groups: dict[str, list[tuple[int, str, Hit]]] = {}
    quiet: dict[str, list[tuple[int, str, Hit]]] = {}  # INFO formats keep() drops (no failure word)
    for ti, tag in enumerate(tags):
        for h in ex.tag_hits(tag):
            kept = keep(h)
            for kind, f in kept:
                groups.setdefault(f, []).append((ti, kind, h))
            if not kept and h.kind == "info":
                f = h.fmt.split("\n", 1)[0].rstrip().removeprefix("[Rank %d] ")
                if literal_chars(f) >= EARLIER_INFO_MIN_LITERAL:
                    quiet.setdefault(f, []).append((ti, "info", h))
    promoted_as = earlier_info_of_warn(groups, quiet)
    promoted = {f: quiet[f] for f in promoted_as}
    groups.update(promoted)
    if ex.unresolved:
        notes.append(f"{len(ex.unresolved)} formats skipped for an unknown identifier, e.g. {ex.unresolved[:3]}")
    newest = tags[-1]
    entries: list[Entry] = []
    entries += _result_entries(git, tags, notes)
    entries += _version_entry(git, tags)
    for fmt, occ in groups.items():
        last = max(o[0] for o in occ)
        ti, kind, h = sorted((o for o in occ if o[0] == last), key=lambda o: (o[2].path, o[2].line))[0]
        levels = {o[1] for o in occ} | ({"warn"} if fmt in promoted else set())
        if "context" in levels:
            kind = "context"
        cls = classify(kind, promoted_as.get(fmt, fmt), h.path, h.func, h.result, levels)  # an earlier INFO as its WARN
        section = {"context": "lifecycle", "ras": "ras", "rasclient": "ras"}.get(kind, "message")
        fields = {"syntax": "printf" if _CONV.search(fmt) else "literal", "format": fmt,
                  "source": f"{REPO} {tags[last]} {h.path}:{h.line}", "versions": _span(tags, [o[0] for o in occ]),
                  **cls}
        comment = []
        if h.via:
            comment.append(f"# WARN of macro {h.via}, expanded at this call")
        if "warn" in levels and "info" in levels and fmt not in promoted:
            comment.append("# printed as WARN in some versions and as INFO in others")
        if fmt in promoted:
            comment.append(f"# printed as INFO here; later versions WARN it as {promoted_as[fmt]!r}")
        others = sorted({f"{o[2].path}:{o[2].line}" for o in occ if o[0] == last} - {f"{h.path}:{h.line}"})
        if others:
            comment.append(f"# also printed at {', '.join(others[:4])}{' ...' if len(others) > 4 else ''}")
        slug = _lifecycle_slug(fmt) if kind == "context" else ("client " if kind == "rasclient" else "") + fmt
        slug = next((v for r, v in _SLUGS if re.search(r, fmt)), slug)
        entries.append(Entry(section, fields, comment, (h.path, h.line, fmt), slug))
    entries += _ib_status_entries(git, tags, groups, rdma_gitdir, notes)
    entries += _cuda_error_entries(tags, groups, notes)
    entries.sort(key=lambda e: (SECTION_ORDER.index(e.section), e.sort_key))
    assign_ids(entries)
    if newest != max(tags, key=_vkey):
        notes.append("the last tag given is not the newest; 'source' cites the last tag given")
    return entries, notes


EARLIER_INFO_MIN_LITERAL = 24
"""Fewest literal characters of an INFO format taken as an earlier wording of a WARN (:func:`earlier_info_of_warn`)."""


def earlier_info_of_warn(groups: dict[str, list[tuple[int, str, Hit]]],
                         quiet: dict[str, list[tuple[int, str, Hit]]]) -> dict[str, str]:
    """{INFO format: the WARN format it became}: an INFO line without a failure word that a later release
    prints as a WARN, with words put before it (2.25 ``INFO ncclMaxSharedMem %d exceeds device/fn
    maxSharedMem %zu``, 2.26 ``WARN cudaArch %d ncclMaxSharedMem %d exceeds ...``). NCCL's own choice of
    level in the later release says the line reports a failure, so the earlier wording is classified as
    that WARN is (and cited at its own INFO line)."""
    warns = [(f, max(o[0] for o in occ)) for f, occ in groups.items() if any(o[1] == "warn" for o in occ)]
    out: dict[str, str] = {}
    for f, occ in quiet.items():
        if f in groups:
            continue
        last_info = max(o[0] for o in occ)
        w = next((w for w, last in warns if w != f and w.endswith(" " + f) and last > last_info), None)
        if w is not None:
            out[f] = w
    return out


# Short ids for a few messages other catalogs and tests refer to (regex on the format -> id words).
_SLUGS = [
    (r"^Duplicate GPU detected", "duplicate gpu"),
    (r"^socketProgress: Connection closed by remote peer", "connection closed by remote peer"),
    (r"^Error while %s shared memory segment", "shm segment error"),
    (r"^Error: failed to extend %s to %ld bytes", "shm extend failed"),
    (r"^Mismatched NCCL version detected", "mismatched nccl version"),
    (r"^Cuda failure '%s'$", "cuda failure"),
    (r"^Cuda failure %d '%s'$", "cuda failure driver"),
    (r"^%s:%d Cuda failure '%s'$", "cuda failure ignored"),
    (r"^%s:%d Cuda failure %d '%s'$", "cuda failure driver ignored"),
]


def _lifecycle_slug(fmt: str) -> str:
    """Short id words for an init/teardown line: its API name, the phase, 'split' for split lines."""
    m = re.search(r"(Init|Destroy|Abort|Revoke) (START|COMPLETE)", fmt)
    words = [m.group(1), m.group(2)] if m else ["destroy", "or", "abort", "complete"] if "%s COMPLETE" in fmt else []
    first = fmt.split()[0]
    if first != "comm" and not first.startswith("%"):
        words.insert(0, first)
    if "parent" in fmt:
        words.append("split")
    return " ".join(words) or fmt


def _result_entries(git: Git, tags: list[str], notes: list[str]) -> list[Entry]:
    seen: dict[tuple[str, str], list[int]] = {}
    where: dict[tuple[str, str], tuple[str, int]] = {}
    for ti, tag in enumerate(tags):
        text = git.show(tag, "src/init.cc")
        body = re.search(r"const char\*\s*ncclGetErrorString\(ncclResult_t \w+\)\s*\{(.*?)\n\}", text, re.S)
        if not body:
            notes.append(f"{tag}: ncclGetErrorString not found in src/init.cc")
            continue
        base = text.count("\n", 0, body.start(1)) + 1
        for m in re.finditer(r"case\s+(nccl\w+)\s*:\s*return\s+\"([^\"]*)\"", body.group(1)):
            key = (m.group(1), m.group(2))
            seen.setdefault(key, []).append(ti)
            where[key] = (tag, base + body.group(1).count("\n", 0, m.start()))
    out = []
    named: set[str] = set()
    for (code, text), tis in sorted(seen.items(), key=lambda kv: -kv[1][-1]):  # the newest wording first
        RESULT_TEXT.setdefault(code, text)
        if code not in _RESULT_FIELDS:
            continue
        tag, line = where[(code, text)]
        fields = {"syntax": "literal", "format": text, "source": f"{REPO} {tag} src/init.cc:{line}",
                  "versions": _span(tags, tis), **_RESULT_FIELDS[code]}
        rid = "nccl.result-" + re.sub(r"(?<!^)(?=[A-Z])", "-", code[4:]).lower()
        if rid in named:  # an older wording of the same code: named for the last version that had it
            rid += "-to-" + re.sub(r"^v(\d+)\.(\d+).*", r"\1-\2", tag)
        named.add(rid)
        out.append(Entry("result", {"id": rid, **fields},
                         [f"# ncclGetErrorString({code}); PyTorch quotes it in 'NCCL error ...: <text>, NCCL version "
                          f"...' (the text is not at the start of that line)"], (code,)))
    return out


def _version_entry(git: Git, tags: list[str]) -> list[Entry]:
    seen, where = [], None
    for ti, tag in enumerate(tags):
        text = git.show(tag, "src/init.cc")
        m = re.search(r'^#define VERSION_STRING "NCCL version " STR\(NCCL_MAJOR\)', text, re.M)
        if m:
            seen.append(ti)
            where = (tag, text.count("\n", 0, m.start()) + 1)
    if not where:
        return []
    return [Entry("lifecycle", {
        "id": "nccl.version-banner", "syntax": "regex",
        "format": r"NCCL version \d+\.\d+\.\d+\S*\+cuda\d+\.\d+",
        "source": f"{REPO} {where[0]} src/init.cc:{where[1]}", "versions": _span(tags, seen),
        "meaning": "NCCL's version banner (rank 0, NCCL_DEBUG=VERSION/WARN/INFO): the NCCL release and the CUDA "
                   "version it was built with",
        "blame": "none", "role": "context", "severity": "info", "action": "",
        "example": "NCCL version 2.21.5+cuda12.4"}, ["# VERSION_STRING: \"NCCL version \" MAJOR.MINOR.PATCH SUFFIX "
                                                      "\"+cuda\" CUDA_MAJOR.CUDA_MINOR"], ("",))]


def _ib_status_entries(git: Git, tags: list[str], groups: dict[str, list[tuple[int, str, Hit]]],
                       rdma_gitdir: str | None, notes: list[str]) -> list[Entry]:
    ib = {f: occ for f, occ in groups.items() if re.match(r"NET/IB(/GIN)? ?: Got completion from peer", f)}
    if not ib:
        notes.append("no 'Got completion' WARN found: IB status entries skipped")
        return []
    for fmt, _ in _IB_VARIANTS:
        if fmt not in ib:
            notes.append(f"IB completion wording not found among the tags read: {fmt!r}")
    all_ti = [o[0] for occ in ib.values() for o in occ]
    last = max(all_ti)
    src = sorted((o[2] for occ in ib.values() for o in occ if o[0] == last and o[2].path.endswith("net_ib.cc")
                  and "/GIN" not in next(f for f, oc in ib.items() if o in oc)), key=lambda h: h.line)
    src_hit = src[0] if src else next(o[2] for occ in ib.values() for o in occ if o[0] == last)
    enum = _enum_values(git.show(tags[-1], "src/include/ibvcore.h"), "ibv_wc_status")
    ref_verbs = ref_strs = None
    if rdma_gitdir:
        rg = Git(rdma_gitdir)
        ref = max((t for t in rg.tags() if re.fullmatch(r"v\d+\.\d+", t)),
                  key=lambda t: tuple(int(x) for x in t[1:].split(".")))
        verbs = _enum_values(rg.show(ref, "libibverbs/verbs.h"), "ibv_wc_status")
        if [(n, v) for n, v, _ in verbs[:len(enum)]] != [(n, v) for n, v, _ in enum]:
            notes.append("NCCL's ibvcore.h ibv_wc_status differs from rdma-core's verbs.h")
        ref_verbs = {v: RDMA_VERBS_URL.format(ref=ref, line=ln) for _, v, ln in verbs}
        strs_text = rg.show(ref, "libibverbs/enum_strs.c")
        ref_strs = {}
        for name, v, _ in verbs:
            m = re.search(r"\[" + name + r"\]\s*=\s*\"([^\"]*)\"", strs_text)
            if m:
                ref_strs[v] = (m.group(1), RDMA_STRS_URL.format(ref=ref, line=strs_text.count("\n", 0, m.start()) + 1))
    out = []
    for name, value, eline in enum:
        if value not in _IB_STATUS:
            continue
        text, meaning, blame, role, severity, action = _IB_STATUS[value]
        if ref_strs and value in ref_strs and ref_strs[value][0] != text:
            notes.append(f"ibv_wc_status_str({value}) is {ref_strs[value][0]!r} in rdma-core, {text!r} here")
        vfmt, vargs = _IB_VARIANTS[value % len(_IB_VARIANTS)]
        example = c_printf(vfmt, tuple(value if a == "n" else name if a == "NAME" else a for a in vargs))
        comment = [f"# ibv_wc_status {value} = {name} (\"{text}\"): NCCL's copy of the enum at {tags[-1]} "
                   f"src/include/ibvcore.h:{eline}"]
        if ref_verbs and value in ref_verbs:
            comment.append(f"# rdma-core: {ref_verbs[value]} ; ibv_wc_status_str: {ref_strs[value][1]}"
                           if ref_strs and value in ref_strs else f"# rdma-core: {ref_verbs[value]}")
        comment.append("# wordings: 'with error N,' (<=2.19), 'status=N ' (2.20-2.27), 'status=NAME(N) ' (2.28+)")
        out.append(Entry("ib-status", {
            "id": f"nccl.ib-wc-status-{value}-{name[7:].lower().replace('_', '-')}", "syntax": "regex",
            "format": (r"NET/IB(?:/GIN)? ?: Got completion from peer \S+ with "
                       rf"(?:error {value},|status={value} |status=\w+\({value}\) )"),
            "source": f"{REPO} {tags[last]} {src_hit.path}:{src_hit.line}", "versions": _span(tags, all_ti),
            "meaning": f"InfiniBand/RoCE work completion status {value} {name} ('{text}'): {meaning}",
            "blame": blame, "role": role, "severity": severity, "action": action, "example": example},
            comment, (value,)))
    return out


def _cuda_error_entries(tags: list[str], groups: dict[str, list[tuple[int, str, Hit]]],
                        notes: list[str]) -> list[Entry]:
    occ = groups.get("Cuda failure '%s'")
    if not occ:
        notes.append("no \"Cuda failure '%s'\" WARN found: CUDA error entries skipped")
        return []
    last = max(o[0] for o in occ)
    h = sorted((o[2] for o in occ if o[0] == last), key=lambda h: (h.path, h.line))[0]
    out = []
    for slug, text, blame, severity, meaning, action in _CUDA_ERRORS:
        out.append(Entry("cuda-error", {
            "id": f"nccl.cuda-failure-{slug}", "syntax": "regex",
            "format": r"Cuda failure (?:\d+ )?'" + re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", text) + "'",
            "source": f"{REPO} {tags[last]} {h.path}:{h.line}", "versions": _span(tags, [o[0] for o in occ]),
            "meaning": f"NCCL's CUDA check failed with '{text}': {meaning}",
            "blame": blame, "role": "root", "severity": severity, "action": action,
            "example": f"Cuda failure '{text}'"},
            [f"# NCCL's CUDACHECK/CUCHECK WARN with the CUDA error text of {_CUDA_DOC}"], (slug,)))
    return out


# ----------------------------------------------------------------------------------------------
# TOML output and validation
# ----------------------------------------------------------------------------------------------

KEY_ORDER = ["id", "syntax", "format", "source", "versions", "meaning", "blame", "role", "severity", "action",
             "example"]
REQUIRED = ["id", "syntax", "format", "source", "meaning", "blame", "role", "severity", "action"]
SYNTAXES = {"printf", "python", "literal", "regex"}
BLAMES = {"self", "peer", "launch", "environment", "hardware", "none"}
ROLES = {"root", "consequence", "context"}
SEVERITIES = {"suspect", "warning", "info"}


def toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def newest_per_minor(tags: list[str], rx: re.Pattern[str], min_major: int = 0) -> list[str]:
    """The newest tag of each (major, minor) release among ``tags`` that ``rx`` matches (its groups: major,
    minor, then further numbers, an absent one counting 0), from ``min_major`` on, oldest first: the tags the
    plugin and library miners read (mine_ofi.py, mine_mpich.py, mine_rccl.py)."""
    best: dict[tuple[int, ...], tuple[tuple[int, ...], str]] = {}
    for t in tags:
        m = rx.match(t)
        if m is None or int(m.group(1)) < min_major:
            continue
        k = tuple(int(x or 0) for x in m.groups())
        if k[:2] not in best or best[k[:2]][0] < k:
            best[k[:2]] = (k, t)
    return [best[k][1] for k in sorted(best)]


def first_rule(rules, default: tuple, text: str) -> tuple:
    """The classification of the first of ``rules`` (regex, then its fields) whose regex is found in ``text``, else
    ``default``: the RULES tables of the plugin and library miners (mine_ofi.py, mine_mpich.py, mine_rccl.py,
    mine_cann.py)."""
    for rx, *fields in rules:
        if re.search(rx, text):
            return tuple(fields)
    return default


def write_data(out: Path, lines: list[str], what: str) -> None:
    """Write a mined data file (its TOML ``lines``) and say on stderr what it holds."""
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"{out}: {what}", file=sys.stderr)


def unique_id(seen: dict[str, int], base: str) -> str:
    """``base``, or ``base-N`` for its N-th use (``seen`` counts the uses)."""
    k = seen.get(base, 0)
    seen[base] = k + 1
    return base if k == 0 else f"{base}-{k + 1}"


def entry_lines(eid: str, syntax: str, fmt: str, source: str, versions: str, meaning: str, blame: str, role: str,
                severity: str, action: str) -> list[str]:
    """The TOML lines of one ``[[entry]]`` of a mined data file, a blank line last."""
    return ["[[entry]]", f"id = {toml_str(eid)}", f"syntax = {toml_str(syntax)}", f"format = {toml_str(fmt)}",
            f"source = {toml_str(source)}", f"versions = {toml_str(versions)}", f"meaning = {toml_str(meaning)}",
            f"blame = {toml_str(blame)}", f"role = {toml_str(role)}", f"severity = {toml_str(severity)}",
            f"action = {toml_str(action)}", ""]


def render(entries: list[Entry], tags: list[str], argv: list[str]) -> str:
    lines = [
        "# NCCL messages for hangdbg's error catalog. GENERATED - do not edit by hand; rerun:",
        "#   python scripts/catalog/mine_nccl.py " + " ".join(argv),
        f"# by scripts/catalog/mine_nccl.py from https://github.com/{REPO} (read with git show / git ls-tree),",
        "# tags: " + " ".join(tags) + " (the newest patch of each minor version).",
        "# format = the WARN/INFO format string as NCCL logs it after its 'host:pid:tid [dev] file:line NCCL WARN '",
        "# prefix; the same text is what ncclGetLastError() returns (PyTorch's 'Last error:' line).",
        "# Classification rules (defaults by source file, wording rules, explicit overrides) are documented",
        "# in the script.",
        "",
        'domain = "nccl"',
    ]
    for e in entries:
        lines.append("")
        lines.extend(e.comment)
        lines.append("[[entry]]")
        for k in KEY_ORDER:
            if k in e.fields:
                lines.append(f"{k} = {toml_str(e.fields[k])}")
    return "\n".join(lines) + "\n"


def check(git: Git, path: str) -> list[str]:
    """Problems of the catalog at ``path`` (empty when it is valid): keys, ids, allowed values, printf
    formats, regex examples, versions, and every ``source``: the tag and file exist, the line exists, and
    the line prints the format (re-extracted at that tag for printf/literal entries; the regex's longest
    literal words or the literal text on the cited lines otherwise)."""
    problems: list[str] = []
    extractor = Extractor(git)
    printed: dict[str, set[tuple[str, int, str]]] = {}

    def prints(tag: str, fpath: str, line: int, fmt: str) -> bool:
        if tag not in printed:
            printed[tag] = {(h.path, h.line, f) for h in extractor.tag_hits(tag) for _, f in keep(h)}
        return (fpath, line, fmt) in printed[tag]
    data = tomllib.loads(Path(path).read_text())
    if data.get("domain") != "nccl":
        problems.append("domain is not 'nccl'")
    entries = data.get("entry", [])
    tags = set(git.tags())
    ids: set[str] = set()
    formats: set[tuple[str, str]] = set()
    for i, e in enumerate(entries):
        where = f"entry {i} ({e.get('id')})"
        for k in REQUIRED:
            if not isinstance(e.get(k), str):
                problems.append(f"{where}: missing or non-string {k}")
        extra = set(e) - set(KEY_ORDER)
        if extra:
            problems.append(f"{where}: unknown keys {sorted(extra)}")
        if any(not isinstance(e.get(k), str) for k in REQUIRED):
            continue
        if not re.fullmatch(r"[a-z0-9]+(\.[a-z0-9-]+)+", e["id"]) or not e["id"].startswith("nccl."):
            problems.append(f"{where}: bad id")
        if e["id"] in ids:
            problems.append(f"{where}: duplicate id")
        ids.add(e["id"])
        if (e["syntax"], e["format"]) in formats:
            problems.append(f"{where}: duplicate format")
        formats.add((e["syntax"], e["format"]))
        if e["syntax"] not in SYNTAXES:
            problems.append(f"{where}: bad syntax")
        if e["blame"] not in BLAMES or e["role"] not in ROLES or e["severity"] not in SEVERITIES:
            problems.append(f"{where}: blame/role/severity outside the allowed sets")
        if not e["action"] and e["severity"] != "info":
            problems.append(f"{where}: empty action on a non-info entry")
        if not e["meaning"]:
            problems.append(f"{where}: empty meaning")
        fmt = e["format"]
        if e["syntax"] == "regex":
            if not isinstance(e.get("example"), str):
                problems.append(f"{where}: regex without example")
            else:
                try:
                    if not re.match(fmt, e["example"]):
                        problems.append(f"{where}: example does not match the regex")
                except re.error as err:
                    problems.append(f"{where}: bad regex: {err}")
        else:
            if e["syntax"] == "printf" and bad_conversions(fmt):
                problems.append(f"{where}: malformed printf conversions {bad_conversions(fmt)}")
            if e["syntax"] == "literal" and _CONV.search(fmt):
                problems.append(f"{where}: literal with printf conversions")
            if literal_chars(fmt) < MIN_LITERAL:
                problems.append(f"{where}: fewer than {MIN_LITERAL} literal characters")
            if "\n" in fmt:
                problems.append(f"{where}: newline in format")
        if "versions" in e:
            m = re.fullmatch(r"(\S+)\.\.(\S+)", e["versions"])
            if not m or m.group(1) not in tags or m.group(2) not in tags or _vkey(m.group(1)) > _vkey(m.group(2)):
                problems.append(f"{where}: bad versions {e['versions']!r}")
        m = re.fullmatch(r"NVIDIA/nccl (\S+) (src/\S+):(\d+)", e["source"])
        if not m:
            if not e["source"].startswith("https://"):
                problems.append(f"{where}: source is neither 'NVIDIA/nccl TAG path:LINE' nor a URL")
            continue
        tag, fpath, line = m.group(1), m.group(2), int(m.group(3))
        if tag not in tags:
            problems.append(f"{where}: unknown tag {tag}")
            continue
        text = git.show(tag, fpath)
        flines = text.split("\n")
        if not text or line > len(flines):
            problems.append(f"{where}: {tag}:{fpath}:{line} does not exist")
            continue
        window = "\n".join(flines[line - 1:line + 6])
        if e["syntax"] == "regex":
            lead = re.split(r"[\\()\[\]?*+.|{}^$]", fmt, maxsplit=1)[0].strip()  # the regex's literal start
            if len(lead) < 4 or lead not in window:
                problems.append(f"{where}: {tag}:{fpath}:{line} does not show the regex's start {lead!r}")
        elif not (prints(tag, fpath, line, fmt) or f'"{fmt}"' in window):
            problems.append(f"{where}: {tag}:{fpath}:{line} does not print this format")
    return problems


def summary(path: str) -> str:
    entries = tomllib.loads(Path(path).read_text())["entry"]
    out = [f"{len(entries)} entries"]
    for key in ("blame", "role", "severity", "syntax"):
        counts: dict[str, int] = {}
        for e in entries:
            counts[e[key]] = counts.get(e[key], 0) + 1
        out.append(f"  {key}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gitdir", help="git directory of NVIDIA/nccl (bare is fine)")
    ap.add_argument("tags", nargs="*", help="tags to read, oldest first")
    ap.add_argument("--latest-per-minor", nargs=2, metavar=("FROM", "TO"),
                    help="read the newest patch tag of each minor version FROM..TO (e.g. 2.18 2.28)")
    ap.add_argument("-o", "--output", default=str(Path(__file__).resolve().parents[2] /
                                                   "hangdbg/catalog/data/nccl.toml"))
    ap.add_argument("--rdma-core", metavar="GITDIR", help="git directory of linux-rdma/rdma-core, to cite and "
                    "cross-check the ibv_wc_status enum and its strings")
    ap.add_argument("--check", action="store_true", help="only validate OUTPUT against GITDIR")
    ap.add_argument("--dump", metavar="JSON", help="write the raw extraction instead of the catalog")
    args = ap.parse_args(argv)
    git = Git(args.gitdir)
    if args.check:
        problems = check(git, args.output)
        for p in problems:
            print("PROBLEM:", p)
        print(summary(args.output))
        return 1 if problems else 0
    tags = list(args.tags)
    if args.latest_per_minor:
        tags += latest_per_minor(git.tags(), *args.latest_per_minor)
    tags = sorted(dict.fromkeys(tags), key=_vkey)
    if not tags:
        ap.error("give tags or --latest-per-minor")
    if args.dump:
        dump_main(git, tags, args.dump)
        return 0
    entries, notes = build(git, tags, args.rdma_core)
    shown = [a for a in (argv if argv is not None else sys.argv[1:])]
    shown = ["NCCL_GITDIR" if a == args.gitdir else "RDMA_CORE_GITDIR" if a == args.rdma_core else a for a in shown]
    text = render(entries, tags, shown)
    tomllib.loads(text)
    Path(args.output).write_text(text)
    problems = check(git, args.output)
    for n in notes:
        print("NOTE:", n)
    for p in problems:
        print("PROBLEM:", p)
    print(summary(args.output))
    return 1 if problems else 0


def dump_main(git: Git, tags: list[str], out: str) -> None:
    ex = Extractor(git)
    rows = []
    for tag in tags:
        for h in ex.tag_hits(tag):
            for kind, f in keep(h):
                rows.append({"kind": kind, "fmt": f, "tag": tag, "path": h.path, "line": h.line,
                             "func": h.func, "via": h.via, "result": h.result})
    Path(out).write_text(json.dumps({"rows": rows, "unresolved": ex.unresolved}, indent=1))
    print(len(rows), "rows;", len({r["fmt"] for r in rows}), "distinct formats;", len(ex.unresolved), "unresolved")


if __name__ == "__main__":
    sys.exit(main())
