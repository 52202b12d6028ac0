"""The C scan of standard NCCL collective lines (``hangdbg/evidence/nccl/_cscan.c``) against the pure-Python
scan it replaces (``_scan_chunk_py``: the ``_FAST`` / ``_FAST_OP`` regexes): same chunk results
(counts, last opCounts, kept other lines, key order) and same :class:`NcclLog` on every fixture,
with small chunks and worker processes, and on random and mutated lines (hypothesis).

Skipped when the extension is not built (``python3 setup.py build_ext --inplace`` or
``pip install -e .`` with a C compiler).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdbg.evidence.nccl import scan as nccl
from hangdbg.evidence.nccl.grammar import NcclLog
from hangdbg.evidence.nccl.reader import NcclReader

try:
    from hangdbg.evidence.nccl import _cscan as _ncclscan
except ImportError:  # pragma: no cover - depends on the build
    _ncclscan = None

pytestmark = pytest.mark.skipif(_ncclscan is None, reason="hangdbg.evidence.nccl._cscan is not built (no C compiler at install)")

FIX = Path(__file__).parent / "fixtures" / "nccl"


def read(paths, **kw):
    return NcclReader().read_split(paths, **kw)

LOGS = sorted(str(p) for p in FIX.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ""))


@pytest.fixture
def pure(monkeypatch):
    """Run a block on the pure-Python path (worker processes are forked and inherit it)."""

    class Switch:
        def __enter__(self):
            monkeypatch.setattr(nccl, "_cscan", None)

        def __exit__(self, *exc):
            monkeypatch.setattr(nccl, "_cscan", _ncclscan)

    monkeypatch.setattr(nccl, "_cscan", _ncclscan)
    return Switch()


def everything(log: NcclLog):
    """All the state of a scan, in order (process and communicator order included)."""
    procs = [(k, dataclasses.asdict(p)) for k, p in log.procs.items()]
    return (procs, log.files, log.lines_read, log.lines_skipped, log.records, log.errors, log.ip_hosts,
            log.unattributed_versions, log.version_by_launcher_rank, log.nslices, log._chunks)


def chunks_both(path: str, chunk: int):
    size = os.path.getsize(path)
    for s, e in nccl._ranges(size, path, chunk):
        c = nccl._scan_chunk(path, s, e)
        p = nccl._scan_chunk_py(path, s, e)
        yield (s, e), c, p


def assert_same_chunks(path: str, chunk: int) -> int:
    ncoll = 0
    for where, c, p in chunks_both(path, chunk):
        assert c == p, (path, chunk, where)
        assert list(c["coll"]) == list(p["coll"]), (path, chunk, where)  # first-occurrence order
        ncoll += sum(c["coll"].values())
    return ncoll


# --- the extension is the path taken --------------------------------------------------------
def test_c_path_is_used_when_built(monkeypatch, tmp_path):
    if os.environ.get("HANGDBG_PURE", "") not in ("", "0"):
        pytest.skip("HANGDBG_PURE is set in this environment")
    assert nccl._load_cscan() is _ncclscan
    assert nccl.scan_path() == "c"
    calls = []
    real = _ncclscan.scan

    class Spy:
        @staticmethod
        def scan(*a):
            calls.append(a[1:])
            return real(*a)

    monkeypatch.setattr(nccl, "_cscan", Spy)
    log = nccl.scan([str(FIX / "lagging.log")], workers=1)
    assert calls and calls[0][0] == 0
    assert log.records > 0
    monkeypatch.setenv("HANGDBG_PURE", "1")
    assert nccl._load_cscan() is None


def test_scan_takes_any_buffer_and_checks_the_range():
    line = (b"h1:10:11 [0] NCCL INFO AllReduce: opCount 1f sendbuff 0x7f00 recvbuff 0x7f00 count 8 "
            b"datatype 7 op 0 root 0 comm 0xabc [nranks=2] stream 0x5\n")
    data = b"x NCCL WARN\ncontinued\n" + line * 3 + b"tail"
    for buf in (data, bytearray(data), memoryview(data)):
        n, coll, lasts, other = _ncclscan.scan(buf, 0, len(buf))
        assert n == 6
        assert coll == {(b"h1:10:11 [0] NCCL INFO AllReduce", b"0xabc [nranks=2]"): 3}
        assert lasts == {(b"h1:10:11 [0]", b"0xabc [nranks=2]"): (4, b"1f", b"AllReduce")}
        assert other == [(0, b"x NCCL WARN"), (1, b"continued")]  # a line right after a kept one is kept
    with pytest.raises(ValueError):
        _ncclscan.scan(data, 5, len(data) + 1)
    with pytest.raises(ValueError):
        _ncclscan.scan(data, 6, 5)
    with pytest.raises(TypeError):
        _ncclscan.scan("text", 0, 1)
    assert _ncclscan.scan(b"", 0, 0) == (1, {}, {}, [(0, b"")])


# --- fixtures ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", LOGS, ids=lambda p: Path(p).name)
def test_fixture_chunks_equal(path):
    for chunk in (64, 4096, 1 << 20):
        assert_same_chunks(path, chunk)


def test_fixtures_have_collective_lines():
    """The equality above is not between two empty results."""
    assert sum(assert_same_chunks(p, 1 << 20) for p in LOGS) > 1000


@pytest.mark.parametrize("path", LOGS, ids=lambda p: Path(p).name)
def test_fixture_logs_equal(path, pure):
    c = [everything(nccl.scan([path], workers=1, chunk=ch)) for ch in (4096, None)]
    c_rep = read([path], workers=1)
    with pure:
        p = [everything(nccl.scan([path], workers=1, chunk=ch)) for ch in (4096, None)]
        p_rep = read([path], workers=1)
    assert c == p
    assert dataclasses.asdict(c_rep) == dataclasses.asdict(p_rep)


def test_worker_processes_equal(pure):
    paths = [str(FIX / n) for n in ("lagging.log", "messy.log", "few_ahead.log", "subcomm.log")]
    c = everything(nccl.scan(paths, workers=2, chunk=8192))
    with pure:
        p = everything(nccl.scan(paths, workers=2, chunk=8192))
    assert c == p
    assert c[4] > 0


# --- random and mutated lines -----------------------------------------------------------------
_LINE = re.compile(nccl._COLL_HEAD + rb"[0-9a-fA-F]+" + nccl._COLL_BODY.replace(rb"\r?(?=\n|\Z)", rb""))
assert rb"\Z" not in _LINE.pattern  # the line end is added by the test
_GOOD = (b"node-01:4242:4300 [3] NCCL INFO AllReduce: opCount 1a2b sendbuff 0x7f5e2c000000 recvbuff "
         b"0x7f5e2c000000 count 1048576 datatype 7 op 0 root 0 comm 0x55d4e8a0b2c0 [nranks=512] stream 0x55d4e8a0c000")
_TRICKY = b" \t\r\x0b\x0c\x1c:[]()<>-x0aGZz\x00\x85\xff"


@st.composite
def mutated(draw, base=st.one_of(st.just(_GOOD), st.from_regex(_LINE, fullmatch=True))):
    line = bytearray(draw(base))
    for _ in range(draw(st.integers(0, 3))):
        if not line:
            break
        i = draw(st.integers(0, len(line) - 1))
        op = draw(st.sampled_from(["del", "ins", "sub", "dup", "cut"]))
        ch = draw(st.sampled_from(list(_TRICKY)))
        if op == "del":
            del line[i]
        elif op == "ins":
            line.insert(draw(st.integers(0, len(line))), ch)
        elif op == "sub":
            line[i] = ch
        elif op == "dup":
            j = draw(st.integers(i, len(line)))
            line[i:i] = line[i:j]
        else:
            line = line[:i]
    return bytes(line).replace(b"\n", b" ")


_DIG = [b"0", b"7", b"1048576"]
_HEXV = [b"1f", b"0", b"aBc9"]
_PTR = [b"0x7f5e2c000000", b"0x1"]
# (literal before the field, valid values, near misses); fields in the order of _FAST.
_GRAMMAR = [
    (b"", [b"node-01", b"10.0.0.5", b"a.b_c", b"h\x00"],
     [b"", b"n<1", b"a b", b"h(", b"h)", b"x]", b"[h", b"a\tb", b"h\x1c", b"h\x1f", b"\x85h\xff", b"\xc2\xa0h", b"\x7fh"]),
    (b":", _DIG, [b"", b"1a", b"-3", b" 1"]),
    (b":", _DIG, [b"", b"1a", b"-3", b"1 "]),
    (b" [", [b"0", b"3", b"12"], [b"-1", b"", b"0x1", b" 3", b"3 "]),
    (b"] NCCL INFO ", [b"AllReduce", b"Broadcast", b"Ab", b"ZZ"], [b"A", b"allReduce", b"All_Reduce", b"AllReduce2", b"", b"\xc3\x89a", b"A\xc3\x89", b"Ab1"]),
    (b": opCount ", _HEXV, [b"", b"g", b"0x1f", b"-1", b"1f "]),
    (b" sendbuff ", _PTR + [b"(nil)", b"\x85\x00"], [b"", b"a\tb", b"\x0b", b"\x0c", b"\x1c", b"a\rb"]),
    (b" recvbuff ", _PTR, [b"", b"a b", b"\x0b"]),
    (b" count ", _DIG, [b"", b"-1", b"1.5", b"1e"]),
    (b" datatype ", _DIG, [b"", b"-1", b"x"]),
    (b" op ", _DIG, [b"", b"-1", b"sum"]),
    (b" root ", [b"0", b"-1", b"-12"], [b"--1", b"+1", b"", b"-", b"1-"]),
    (b" comm ", [b"0xab", b"0x55d4E8"], [b"0x", b"0xG", b"(nil)", b"0XAB", b"ab", b"0xab "]),
    (b" [nranks=", [b"8", b"512"], [b"", b"-8", b"8 ", b"x"]),
    (b"] stream ", [b"0x5", b"(nil)", b"0xAbC", b"0x5\r"],
     [b"0x", b"(nil", b"nil", b"0x5 ", b"0x5\r\r", b"0x5\x0b", b"(nil)x", b"0x5\r ", b"\r"]),
]


@st.composite
def grammar(draw):
    """A collective line built field by field, with at most two fields (or keywords) a near miss."""
    broken = draw(st.lists(st.integers(0, 2 * len(_GRAMMAR) - 1), max_size=2))
    out = []
    for i, (lit, valid, near) in enumerate(_GRAMMAR):
        if 2 * i + 1 in broken:
            lit = draw(st.sampled_from([b"", lit.upper(), lit.replace(b" ", b"  "), lit.replace(b" ", b"\t"), lit[:-1]]))
        out.append(lit + draw(st.sampled_from(near if 2 * i in broken else valid)))
    return b"".join(out)


lines_st = st.lists(
    st.one_of(grammar(), grammar(), mutated(), st.just(_GOOD), st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
              st.sampled_from([b"", b"\r", b"x NCCL WARN y", b"host:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2"])),
    min_size=1, max_size=30)


def _write(lines, ends, final_nl) -> str:
    fd, name = tempfile.mkstemp(suffix=".log")
    with os.fdopen(fd, "wb") as f:
        f.write(b"".join(ln + e for ln, e in zip(lines, ends))[: None if final_nl else -1] or b"x")
    return name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_st, st.data())
def test_random_lines_same_chunks(lines, data):
    ends = data.draw(st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=len(lines), max_size=len(lines)))
    path = _write(lines, ends, data.draw(st.booleans()))
    try:
        for chunk in (1, 97, 1 << 20):
            assert_same_chunks(path, chunk)
    finally:
        os.unlink(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_st)
def test_random_lines_same_log(lines):
    path = _write(lines, [b"\n"] * len(lines), True)
    try:
        c = everything(nccl.scan([path], workers=1, chunk=128))
        saved, nccl._cscan = nccl._cscan, None
        try:
            p = everything(nccl.scan([path], workers=1, chunk=128))
        finally:
            nccl._cscan = saved
        assert c == p
    finally:
        os.unlink(path)


def _one_field_off():
    """Every line with exactly one field (or the keyword before it) a near miss, the rest valid."""
    base = [(lit, valid[0]) for lit, valid, _ in _GRAMMAR]
    for i, (lit, valid, near) in enumerate(_GRAMMAR):
        for v in valid + near:
            yield b"".join(lt + (v if j == i else fv) for j, (lt, fv) in enumerate(base))
        for bad in {b"", lit.upper(), lit.replace(b" ", b"  "), lit.replace(b" ", b"\t"), lit[:-1], lit[1:]}:
            yield b"".join((bad if j == i else lt) + fv for j, (lt, fv) in enumerate(base))


def test_each_near_miss_alone():
    """The C scan takes a line exactly when the first alternative of ``_FAST`` matches it."""
    taken = 0
    for line in _one_field_off():
        for end in (b"", b"\n", b"\r\n", b"\r", b" "):
            buf = line + end
            want = nccl._FAST.match(b"\n" + buf, 0, len(buf) + 1 - (end == b"\n")).group(1)
            _, coll, _, _ = _ncclscan.scan(buf, 0, len(buf))
            assert bool(coll) == bool(want), buf
            taken += bool(want)
    assert taken > 50


def test_line_cache_takes_exactly_what_the_regex_takes():
    """The C scan's line cache (a line the same as an earlier one but in its variable fields is
    counted without the full match): every byte of a standard line replaced, after the same line,
    gives what ``_FAST`` gives - a field byte of the field's class is the same key, anything else
    goes through the full match (another key, or another line)."""
    second = _GOOD.replace(b"node-01:4242:4300", b"node-02:4243:4301")  # another key of the same shape
    for i in range(len(_GOOD)):
        for ch in set(_TRICKY + b"0179afAF-xZ:") - {_GOOD[i]}:
            line = _GOOD[:i] + bytes([ch]) + _GOOD[i + 1:]
            buf = b"\n".join([_GOOD, second, _GOOD, line, second, line]) + b"\n"
            c = _ncclscan.scan(buf, 0, len(buf))
            with tempfile.NamedTemporaryFile(suffix=".log") as f:
                f.write(buf)
                f.flush()
                p = nccl._scan_chunk_py(f.name, 0, len(buf))
            assert (c[0], c[1], c[2], c[3]) == (p["nlines"], p["coll"], p["lasts"], p["other"]), (i, ch, line)


@pytest.mark.parametrize("chunk", [1, 50, 500, 1 << 20])
def test_fetch_reads_any_line_from_the_marks(tmp_path, chunk):
    """``NcclLog.fetch`` (evidence of lines the fast scan only counted) finds every line from the
    chunk marks, forward or back from the next mark (the file's end included), with or without a
    last newline, CR line ends and lines longer than its blocks."""
    import random

    from hangdbg.model import MAX_EVIDENCE_TEXT

    rng = random.Random(chunk)
    for trial in range(40):
        lines = [rng.choice([b"", b"x", b"\r", b"ab\r\r", b"n" * rng.randint(0, 50), b"y" * rng.randint(0, 3000),
                             _GOOD, _GOOD + b"\r"]) for _ in range(rng.randint(1, 60))]
        path = tmp_path / f"{trial}.log"
        path.write_bytes(b"\n".join(lines) + rng.choice([b"", b"\n"]))
        with open(path, "rb") as f:
            want = [raw.decode("utf-8", "replace").rstrip("\r\n")[:MAX_EVIDENCE_TEXT] for raw in f]
        log = nccl.scan([str(path)], workers=1, chunk=chunk)
        assert [log.fetch(0, i) for i in range(1, len(want) + 3)] == [*want, "", ""], trial
