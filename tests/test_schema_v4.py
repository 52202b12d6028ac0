"""schema_version 4 (issue 25, item 4): the equivalence classes are ``stacks.classes`` (``groups``
in 2 and 3; ``groups`` now only ever means process groups), and what hangdbg reads back of its own
documents still reads the older ones. The fixture ``core.14173.v3.json`` is a real document of
``hangdbg core -o`` written by the schema_version 3 hangdbg (commit 77c134b) from a gcore of a
sleeping rank 3."""

from __future__ import annotations

import json

from conftest import FIXTURES, run_cli, run_json
from hangdbg.evidence.core.json_reader import read_documents
from hangdbg.evidence.own_output import is_own_output
from hangdbg.model import SCHEMA_VERSION
from hangdbg.enums import ThreadStatus

V3 = FIXTURES / "core_json" / "core.14173.v3.json"


def test_the_fixture_is_a_v3_document():
    doc = json.loads(V3.read_text())
    assert (doc["schema_version"], doc["command"]) == (3, "core") and "groups" in doc["stacks"]
    assert SCHEMA_VERSION == 4


def _check(report, dumps):
    assert report.records == 1 and not report.errors
    (d,) = dumps
    assert (d.rank, d.world_size, d.local_rank, d.pid) == (3, 4, 3, 14173)
    assert [f.function for f in d.threads[0].python_frames] == ["wait_for_peers", "step", "<module>"]
    assert d.threads[0].status is ThreadStatus.IDLE
    (core,) = report.facts.cores
    assert (core.rank, core.how, core.signal) == (3, "on demand", None)


def test_core_reader_reads_a_v3_document_and_its_v4_form(tmp_path):
    _check(*read_documents([str(V3)]))
    doc = json.loads(V3.read_text())
    doc["schema_version"] = 4
    doc["stacks"]["classes"] = doc["stacks"].pop("groups")
    v4 = tmp_path / "core.v4.json"
    v4.write_text(json.dumps(doc))
    _check(*read_documents([str(v4)]))
    doc["schema_version"] = 5  # a newer hangdbg's: refused, with the versions this one reads
    v5 = tmp_path / "core.v5.json"
    v5.write_text(json.dumps(doc))
    report, dumps = read_documents([str(v5)])
    assert not dumps and "schema_version 5, this hangdbg reads 2, 3, 4" in report.errors[0].reason


def test_report_of_a_v3_core_document_writes_v4(tmp_path):
    code, doc = run_json("report", V3)
    assert code == 0 and doc["schema_version"] == 4 and not doc["unparsed"]
    assert [(s["kind"], s["records"]) for s in doc["sources"]] == [("core-json", 1), ("stacks", 1)]
    assert "groups" not in doc["stacks"]
    (cls,) = doc["stacks"]["classes"]
    assert cls["ranks"] == [3] and cls["frames"][0]["function"] == "wait_for_peers"
    assert doc["sources"][1]["facts"]["class_count"] == 1


def test_schema_files_of_every_version_are_own_output(tmp_path):
    res = run_cli("schema", "-o", tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "hangdbg-schema-v4.json").read_text())["$id"].endswith("/v4.json")
    (tmp_path / "hangdbg-schema-v3.json").write_text("{}\n")  # what `schema -o` of hangdbg 3 left
    assert is_own_output(str(tmp_path / "hangdbg-schema-v3.json")) and is_own_output(str(tmp_path / "hangdbg-schema-v4.json"))
    assert not is_own_output(str(tmp_path / "hangdbg-schema-v4.json.bak"))
    (tmp_path / "core.json").write_text(V3.read_text())
    code, doc = run_json("report", tmp_path)
    assert code == 0 and [s["kind"] for s in doc["sources"]] == ["core-json", "stacks"]
    assert {u["file"].rsplit("/", 1)[-1] for u in doc["unparsed"]} == {"hangdbg-schema-v3.json", "hangdbg-schema-v4.json"}


def test_schema_names_the_classes_and_no_groups_in_the_stack_section():
    schema = json.loads(run_cli("schema").stdout)
    props = schema["$defs"]["StacksSection"]["properties"]
    assert "classes" in props and "groups" not in props
    assert props["classes"]["items"] == {"$ref": "#/$defs/ClassEntry"}
    assert schema["$defs"]["StacksFacts"]["properties"].keys() >= {"class_count"}
    assert schema["title"].startswith("hangdbg documents, schema_version 4")
