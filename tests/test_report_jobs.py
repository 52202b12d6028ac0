"""``hangdbg report`` over many files: documentation is not a log, several unrelated jobs are
named as such, and report finds what the per-kind command finds in each file (fixtures written
from the documented NCCL_DEBUG, torchrun, kernel-log formats)."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES

from hangdbg.evidence.jobs import job_groups, mixed_jobs
from hangdbg.model import ClassifiedFile, SourceKind
from hangdbg.evidence.job_signature import signature
from hangdbg.evidence.read import _second_chance, read_evidence
from hangdbg.evidence.registry import reader_for
from hangdbg.evidence.walk import NO_READER, classify

FX = FIXTURES / "report_jobs"


def _copy(tmp_path, *names, src=FX):
    for n in names:
        shutil.copy(src / n, tmp_path / n)
    return tmp_path


def test_markdown_prose_is_skipped_with_the_reason(tmp_path):
    _copy(tmp_path, "README.md")
    c = classify(str(tmp_path / "README.md"))
    assert c.kinds == () and "documentation" in c.reason
    v = read_evidence([str(tmp_path)])
    assert not v.findings and not any(s.records for s in v.sources)
    assert not any("`" in h for f in v.findings for h in f.hosts)


def test_a_raw_log_saved_as_md_is_still_read(tmp_path):
    p = tmp_path / "dmesg.md"
    p.write_text("Jan  5 10:00:00 hpc-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\n")
    assert classify(str(p)).kinds == (SourceKind.GPU, SourceKind.ERROR_LINES)
    v = read_evidence([str(tmp_path)])
    assert v.findings[0].kind == "gpu-lost" and v.findings[0].hosts == ("hpc-7",)


def test_several_jobs_are_named_one_job_is_not(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    _copy(one, "job1-node-a.log", "job1-node-b.log")
    v = read_evidence([str(one)])
    assert not [f for f in v.findings if f.kind == "mixed-jobs"]
    shutil.copy(FX / "other-job.log", one / "other-job.log")
    v = read_evidence([str(one)])
    mixed = [f for f in v.findings if f.kind == "mixed-jobs"]
    assert len(mixed) == 1 and mixed[0].severity == "warning" and "2 different jobs" in mixed[0].summary
    assert "up to 16 ranks" in mixed[0].summary and "up to 4 ranks" in mixed[0].summary and "one job" in mixed[0].action
    assert {e.source.rsplit("/", 1)[-1] for e in mixed[0].evidence} == {"job1-node-a.log", "other-job.log"}
    assert "2 different jobs" in v.headline and "one job's files" in v.headline


@pytest.mark.parametrize("a,b,same", [
    (b"2024-01-29T21:54:38 x nranks 8", b"2024-01-30T01:00:00 y nranks 8", True),
    (b"2024-01-29T21:54:38 x", b"2024-03-01T00:00:00 y", False),  # a month apart
    (b"h1:1:1 [0] NCCL INFO NCCL version 2.18.1\n", b"h2:1:1 [0] NCCL INFO NCCL version 2.7.8\n", False),
    # one job whose hosts run different NCCL builds: a set-up difference, not two jobs
    (b"h1:1:1 [0] NCCL INFO NCCL version 2.18.1\nh2:1:1 [0] NCCL INFO x\n", b"h2:1:1 [0] NCCL INFO NCCL version 2.19.3\n", True),
    (b"world_size=8", b"WORLD_SIZE=16", False),
    # a rank's log may show only its 8-rank tensor-parallel communicator: nranks is a lower bound
    (b"h1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 16 - Init COMPLETE", b"h9:1:1 [0] NCCL INFO comm 0x2 rank 3 nranks 8", True),
    (b"h1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 16", b"world_size=8", False),  # larger than a stated world
    (b"h1:1:1 [0] NCCL INFO x WORLD_SIZE=8", b"h1:2:2 [0] NCCL INFO y WORLD_SIZE=16", True),  # a shared host
    (b"nothing here", b"world_size=16", True),  # no traits: no group
])
def test_job_grouping(a, b, same):
    groups = job_groups([("a", signature(a)), ("b", signature(b))])
    assert (len(groups) <= 1) == same
    assert bool(mixed_jobs([("a", signature(a)), ("b", signature(b))])) != same


def test_signature_rejects_garbage_numbers_and_dates():
    s = signature(b"nranks 4294967296 world_size=0 2024-13-45T00:00:00")
    assert s.empty and not s.worlds and s.dates is None


def test_second_chance_adds_the_log_reader_that_finds_records(tmp_path):
    p = _copy(tmp_path, "agent-frames-first.log") / "agent-frames-first.log"
    c = _second_chance(ClassifiedFile(str(p), (SourceKind.STACK_TEXT,)))
    assert SourceKind.TORCH_LOG in c.kinds and SourceKind.STACK_TEXT in c.kinds and c.reason == ""
    assert _second_chance(ClassifiedFile(str(p), (), "documentation (Markdown/reST prose), not a log: skipped")).kinds == ()
    notes = tmp_path / "notes.txt"
    notes.write_text("lunch at noon\n")
    assert _second_chance(ClassifiedFile(str(notes), (), NO_READER)) == ClassifiedFile(str(notes), (), NO_READER)


def _suspects(findings):
    return {(str(f.kind), f.ranks, f.hosts, f.gpus) for f in findings if f.severity == "suspect"}


_PER_KIND = [(SourceKind.TORCH_LOG, FIXTURES / "torchlog", "*.log"), (SourceKind.TORCH_LOG, FX, "agent-*.log"),
             (SourceKind.NCCL, FIXTURES / "nccl", "*.log"), (SourceKind.GPU, FIXTURES / "xid", "*"),
             (SourceKind.GPU, FIXTURES / "gpu_text", "*")]


@pytest.mark.parametrize("kind,path", [(k, p) for k, d, g in _PER_KIND for p in sorted(d.glob(g)) if p.is_file()],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_report_names_the_suspects_the_per_kind_command_names(tmp_path, kind, path):
    """What `logs` / `nccl summary` / `gpu` blame in a file, `report` on a directory holding only that file blames too."""
    f = _copy(tmp_path, path.name, src=path.parent) / path.name
    alone = _suspects(reader_for(kind).read([str(f)]).findings)
    together = _suspects(read_evidence([str(tmp_path)]).findings)
    assert alone <= together, (alone - together)


def test_a_quoted_paste_of_a_stack_dump_is_classified_by_its_reader(tmp_path):
    from hangdbg.evidence.walk import classify
    from hangdbg.model import SourceKind

    dump = ("Thread 0x7f00 (active): \"MainThread\"\n    all_reduce (torch/distributed/distributed_c10d.py:2501)\n"
            "    train (train.py:42)\n    <module> (train.py:99)\n")
    plain, quoted = tmp_path / "plain.txt", tmp_path / "quoted.txt"
    plain.write_text(dump)
    quoted.write_text("".join("> " + ln + "\n" for ln in dump.splitlines()))
    kinds = classify(str(plain)).kinds
    assert kinds and classify(str(quoted)).kinds == kinds and SourceKind.ERROR_LINES not in kinds


def test_a_paste_indented_as_a_code_block_is_read_by_its_reader(tmp_path):
    from hangdbg.text.lines import dedented_paste

    assert dedented_paste(b"    a\n\n      b\n    c\n") == b"a\n\n  b\nc\n"
    assert dedented_paste(b"a\n    b\n") == b"a\n    b\n"  # a line at column 0: nothing shared
    assert dedented_paste(b"\tx\n    y\n") == b"\tx\n    y\n"  # a tab and blanks: no common indentation
