"""The documented enums of the ground floor (issue 25, item 4): each member has its one-line
description, serialises to the string it replaced (the JSON does not change), and a value written
elsewhere that this hangdbg does not know is read, never raised."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from hangdbg.enums import DocumentedEnum, Level
from hangdbg.model import KIND_LEVELS, Kind
from hangdbg.report.schema import to_json

ENUMS = [Level]


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_every_member_has_a_description_and_is_its_string(enum):
    for m in enum:
        assert isinstance(m, str) and m == m.value and str(m) == m.value and f"{m}" == m.value
        assert m.doc and "\n" not in m.doc
        assert json.loads(to_json({"v": m})) == {"v": m.value}
        assert enum(m.value) is m


def test_read_never_raises_and_falls_back():
    assert Level.read("gpu", Level.RANK) is Level.GPU
    for garbled in ("GPU", "", None, 3, ["gpu"], {"a": 1}, "gpu\x00"):
        assert Level.read(garbled, Level.RANK) is Level.RANK
    assert issubclass(Level, DocumentedEnum)


def test_every_kind_has_exactly_one_level():
    listed = [v for values in KIND_LEVELS.values() for v in values.split()]
    assert sorted(listed) == sorted(k.value for k in Kind), "each kind in exactly one level"
    assert all(isinstance(k.level, Level) for k in Kind)
    assert set(KIND_LEVELS) == set(Level)
    # the examples of the issue
    assert Kind.NODE_FAILED.level is Level.NODE and Kind.CHECK_FAILED.level is Level.NODE
    assert {Kind.XID.level, Kind.ECC.level, Kind.GPU_LOST.level, Kind.CUDA_STUCK.level} == {Level.GPU}
    assert {Kind.MIXED_JOBS.level, Kind.OP_MISMATCH.level, Kind.NCCL_OP_MISMATCH.level, Kind.FR_MISMATCH.level,
            Kind.COLLECTIVE_DATA.level} == {Level.JOB}
    assert Kind.NOT_SAVED.level is Level.TOOL
    assert Kind.MISSING.level is Level.RANK and Kind.WAITING.level is Level.RANK


def test_schema_kinds_shows_each_kinds_level():
    res = run_cli("schema", "--kinds")
    assert res.returncode == 0, res.stderr
    rows = {}
    for line in res.stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 3 and cells[0] in {k.value for k in Kind}:
            rows[cells[0]] = cells[1]
    assert "level" in res.stdout
    assert rows == {k.value: k.level.value for k in Kind}
