"""Every post-mortem reader survives random and mutated input (hypothesis).

Lines are drawn from the real fixtures of every kind (py-spy dumps, NCCL logs, torch logs, Xid
syslogs...), then cut, spliced, byte-flipped, mixed with random text and random bytes. Each
reader is given every such file, whatever its sniff says: no exception may escape, the result is
a SourceReport, and garbled lines are counted rather than raised.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from hangdbg.model import Severity, SourceReport
from hangdbg.evidence.registry import READERS
from hangdbg.evidence.walk import walk


def _corpus() -> list[bytes]:
    lines: list[bytes] = []
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file() and p.stat().st_size < 2_000_000:
            lines.extend(p.read_bytes().splitlines()[:400])
    return lines or [b"x"]


CORPUS = _corpus()


@st.composite
def mutated_line(draw) -> bytes:
    line = draw(st.sampled_from(CORPUS))
    op = draw(st.sampled_from(["keep", "cut", "splice", "flip", "random", "bytes", "dup"]))
    if op == "cut" and line:
        i = draw(st.integers(0, len(line)))
        line = line[:i]
    elif op == "splice":
        other = draw(st.sampled_from(CORPUS))
        i = draw(st.integers(0, len(line)))
        line = line[:i] + other
    elif op == "flip" and line:
        i = draw(st.integers(0, len(line) - 1))
        line = line[:i] + bytes([draw(st.integers(0, 255))]) + line[i + 1:]
    elif op == "random":
        line = draw(st.text(max_size=120)).encode("utf-8", "surrogatepass")
    elif op == "bytes":
        line = draw(st.binary(max_size=120))
    elif op == "dup":
        line = line + b" " + line
    return line


documents = st.lists(mutated_line(), min_size=0, max_size=60).map(lambda ls: b"\n".join(ls))
endings = st.sampled_from([b"", b"\n", b"\r\n"])


@pytest.mark.parametrize("reader", READERS, ids=lambda r: str(r.kind))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=documents, end=endings)
def test_reader_never_raises(reader, doc, end):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "evidence.log"
        path.write_bytes(doc.replace(b"\n", end or b"\n") + end)
        reader.sniff(doc[:65536])
        rep = reader.read([str(path)])
        assert isinstance(rep, SourceReport) and rep.kind is reader.kind
        assert rep.lines_skipped >= 0 and rep.records >= 0
        for f in rep.findings:
            assert isinstance(f.severity, Severity) and f.source is not None


@settings(max_examples=25, deadline=None)
@given(docs=st.lists(documents, min_size=1, max_size=4))
def test_report_of_random_directory_never_raises(docs):
    from hangdbg.evidence.verdict import build_verdict
    from hangdbg.evidence.read import read_sources

    with tempfile.TemporaryDirectory() as d:
        for i, doc in enumerate(docs):
            (Path(d) / f"f{i}.log").write_bytes(doc)
        assert len(walk([d])) == len(docs)
        sources, analysis, unparsed, files = read_sources([d])
        v = build_verdict(sources, analysis, unparsed, files)
        assert len(v.files) == len(docs)
        for s in sources:
            assert not [e for e in s.errors if "reader failed" in e.reason], s.errors
