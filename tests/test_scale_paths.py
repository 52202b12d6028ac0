"""The paths taken only at scale (issue 16) give what the plain paths give: files read on every
core, and a large document encoded on every core."""

from __future__ import annotations

import json
from pathlib import Path

from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.saved import load_dumps
from hangdbg.stacks import saved
from hangdbg.report import schema
from hangdbg.report.build import analysis_document

FIXTURES = Path(__file__).parent / "fixtures"


def _job(tmp_path: Path) -> Path:
    """A saved job mixing every kind of rank file: the fixtures' py-spy dumps under new names,
    hangdbg headers, a file with two processes, an unreadable one and an empty one."""
    d = tmp_path / "job"
    d.mkdir()
    sources = sorted(p for p in (FIXTURES / "pyspy").rglob("*") if p.is_file())
    for i, p in enumerate(sources * 3):
        (d / f"rank-{i:04d}.txt").write_bytes(p.read_bytes())
    (d / "zz-two.txt").write_text("Process 1: python a.py\nThread 1 (idle)\n    f (a.py:1)\n\n"
                                  "Process 2: python a.py\nThread 2 (idle)\n    f (a.py:1)\n")
    (d / "zz-empty.txt").write_text("")
    (d / "zz-binary.txt").write_bytes(b"\x00\x01")
    return d


def test_files_read_on_every_core_load_as_read_here(tmp_path, monkeypatch):
    job = _job(tmp_path)
    serial = load_dumps([job])
    monkeypatch.setattr(saved, "PARALLEL_FILES", 2)
    monkeypatch.setattr(saved, "cores", lambda: 3)
    parallel = load_dumps([job])
    assert parallel == serial
    assert len(serial[0]) > 10 and serial[1].unreadable


def test_a_large_document_encoded_on_every_core_is_the_same_text(tmp_path, monkeypatch):
    dumps, _ = load_dumps([_job(tmp_path)])
    doc = analysis_document(analyze(dumps), "analyze")
    serial = schema.to_json(doc, pretty=False)
    monkeypatch.setattr(schema, "PARALLEL_RANKS", 2)
    monkeypatch.setattr(schema, "cores", lambda: 3)
    parallel = schema.to_json(doc)
    assert parallel == serial and json.loads(parallel)["stacks"]["ranks"]
    parts = schema.json_parts(doc)
    assert len(parts) > 3 and "".join(parts) == serial


def test_the_native_stack_sniffer_prefilter_drops_no_stack():
    """The fixed texts checked before the line-by-line sniff are in every file the sniff takes."""
    from hangdbg.stacks import native_text as native_stacks

    taken = 0
    roots = [FIXTURES, FIXTURES.parent.parent.parent / "shared" / "real-artifacts"]
    for f in (p for r in roots if r.is_dir() for p in r.rglob("*") if p.is_file()):
        head = f.read_bytes()[:65536]
        if b"\0" not in head[:4096] and native_stacks._sniff_lines(head):
            taken += 1
            assert native_stacks.sniff(head), f
    assert taken >= 20
