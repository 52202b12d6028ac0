"""The contract every command keeps: the JSON Schema that `hangdbg schema` prints, one meaning per
exit status (a file no reader recognises is 1, a missing path is 2, for every reader command),
`-v` logging each external command, the hidden agent, and the packaging promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, ROOT, main_json, read_json, run_main, schema_validator

# every command that reads files, with the arguments that precede the paths
READERS = {
    "report": ["report"], "analyze": ["analyze"], "logs": ["logs"], "gpu": ["gpu"], "fr": ["fr"],
    "nccl summary": ["nccl", "summary"], "traces": ["traces"], "core": ["core"],
}


def test_schema_is_draft_2020_12_and_describes_every_command():
    res = run_main("schema")
    assert res.returncode == 0, res.stderr
    schema = json.loads(res.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema)
    commands = set()
    for ref in schema["anyOf"]:
        props = schema["$defs"][ref["$ref"].rsplit("/", 1)[1]]["properties"]
        c = props["command"]
        commands |= set(c.get("enum") or [c.get("const")])
        if ref["$ref"].endswith(("/ProcessList", "/ErrorDocument")):  # not a command's document
            continue
        # the common header of every command's document, every field required
        header = ["schema_version", "tool", "version", "created", "command", "found", "headline", "findings"]
        assert list(props)[:8] == header
    assert commands >= {"dump", "analyze", "demo", "report", "nccl summary", "nccl split", "logs", "fr", "gpu", "core",
                        "traces", "collect", "watch", "check"}
    finding = schema["$defs"]["Finding"]
    assert finding["additionalProperties"] is False
    assert set(finding["required"]) >= {"kind", "severity", "ranks", "hosts", "gpus", "summary", "evidence", "action"}
    assert finding["properties"]["ranks"]["items"] == {"type": "integer"}
    kinds = {k["const"]: k["description"] for k in schema["$defs"]["Kind"]["oneOf"]}
    assert "different-collective" in kinds and all(kinds.values())
    assert [s["const"] for s in schema["$defs"]["Severity"]["oneOf"]] == ["suspect", "warning", "waiting", "info"]
    assert "suspects" not in json.dumps(schema["$defs"]["StacksDocument"]["properties"])


def test_schema_kinds_table_and_out_dir(tmp_path):
    res = run_main("schema", "--kinds")
    assert res.returncode == 0 and "different-collective" in res.stdout and "waits_for" in res.stdout
    res = run_main("schema", "-o", tmp_path)
    assert res.returncode == 0 and json.loads((tmp_path / "hangdbg-schema-v4.json").read_text())["$id"]


def test_a_document_that_breaks_the_contract_is_caught():
    """The validator is no rubber stamp: a v1-style document, or a rank given as text, fails."""
    code, doc = main_json("analyze", FIXTURES / "pyspy" / "torch_xargs.txt")
    v = schema_validator()
    assert v.is_valid(doc)
    assert not v.is_valid({**doc, "suspects": []})  # unknown key
    bad = json.loads(json.dumps(doc))
    bad["findings"][0]["ranks"] = ["0-3"]
    assert not v.is_valid(bad)
    bad = json.loads(json.dumps(doc))
    del bad["headline"]
    assert not v.is_valid(bad)


@pytest.mark.parametrize("command", list(READERS))
def test_unrecognised_file_is_exit_1_and_missing_path_is_exit_2(command, tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("lunch at noon, then the all-hands\n")
    res = run_main(*READERS[command], other)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    res = run_main(*READERS[command], tmp_path / "nope")
    assert res.returncode == 2 and "Traceback" not in res.stderr and "no such" in res.stderr.lower()


@pytest.mark.parametrize("command", [c for c in READERS if c != "core"])
def test_unrecognised_file_json_is_a_document_with_nothing_read(command, tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("lunch at noon\n")
    code, doc = main_json(*READERS[command], other)
    assert code == 1 and not doc["found"] and doc["command"] == command


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time; print('ready', flush=True); time.sleep(600)"],
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ, RANK="0", WORLD_SIZE="1"))
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def test_verbose_logs_each_external_command(sleeper, tmp_path):
    t0 = time.monotonic()
    res = run_main("-v", "dump", "--pid", sleeper.pid, "-o", tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("hangdbg: ")]
    started = [ln for ln in lines if "py-spy dump --pid" in ln and ln.startswith("hangdbg: $ ")]
    ended = [ln for ln in lines if ln.startswith("hangdbg: exit 0 after ") and "py-spy dump --pid" in ln]
    assert started and ended, res.stderr
    seconds = float(ended[0].split("after ", 1)[1].split(" s:", 1)[0])
    assert 0 <= seconds <= time.monotonic() - t0
    assert f"--pid {sleeper.pid}" in started[0]
    quiet = run_main("dump", "--pid", sleeper.pid, "-o", tmp_path / "q")
    assert "py-spy dump --pid" not in quiet.stderr  # without -v: nothing
    after = run_main("dump", "-v", "--pid", sleeper.pid, "-o", tmp_path / "a")  # after the subcommand too
    assert "hangdbg: $ " in after.stderr


def test_agent_is_hidden_from_help_but_runs():
    res = run_main("--help")
    assert res.returncode == 0 and "schema" in res.stdout and "agent" not in res.stdout
    assert "check-node" not in res.stdout and "check" in res.stdout  # check-node is check's own, run on each node
    res = run_main("agent", "--help")
    assert res.returncode == 0 and "HANGDBG1" in " ".join(res.stdout.split())


def test_packaging_promises():
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    torch = [d for d in extras["torch"] if d.startswith("torch")]
    assert torch and all("==" not in d and ">=" in d for d in torch)  # a range: never replaces the user's torch
    assert not any(d.startswith("pexpect") for d in meta["dependencies"])  # only the tests drive terminals
    assert any(d.startswith("pexpect") for d in extras["test"])
    assert not any("==" in d for d in extras["test"])
    assert meta["license"] == "Apache-2.0" and meta["urls"] and meta["classifiers"]
    assert (ROOT / "hangdbg" / "py.typed").exists()


@pytest.mark.parametrize("command,inputs,name", [
    (["analyze"], [FIXTURES / "pyspy" / "torch_xargs.txt"], "hangdbg.json"),
    (["report"], [FIXTURES / "nccl" / "refused.log", FIXTURES / "xid" / "syslog"], "report.json"),
    (["nccl", "summary"], [FIXTURES / "nccl" / "lagging.log"], "nccl.json"),
    (["logs"], [FIXTURES / "torchlog" / "watchdog_pg_v24.log"], "logs.json"),
    (["gpu"], [FIXTURES / "xid" / "syslog"], "gpu.json"),
])
def test_out_dir_holds_what_the_command_produces(tmp_path, command, inputs, name):
    """-o DIR means one thing everywhere: the command's document (and its other products) in DIR,
    the same document --json prints; DIR is created."""
    out = tmp_path / "new" / "dir"
    code, printed = main_json(*command, *inputs, "-o", out)
    written = read_json(out / name)
    assert code == 3 and written["command"] == printed["command"] and written["findings"] == printed["findings"]
    if command == ["report"]:
        assert (out / "report.html").stat().st_size > 1000


def test_json_nested_deeper_than_json_can_read_is_a_file_error(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000
    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / "nccl_trace_rank_0.json").write_text('{"entries": ' + deep + "}")
    res = run_main("fr", tmp_path / "fr")
    assert res.returncode == 1 and "Traceback" not in res.stderr and "not valid JSON" in res.stderr
    (tmp_path / "el").mkdir()
    (tmp_path / "el" / "error.json").write_text('{"message": ' + deep + "}")
    res = run_main("logs", tmp_path / "el" / "error.json")
    assert res.returncode == 1 and "Traceback" not in res.stderr and "invalid error file" in res.stderr


def test_brackets_in_paths_and_patterns_are_text_not_markup(tmp_path):
    d = tmp_path / "m[/x]"  # a directory "m[" with "x]" in it: "[/x]" closes a rich markup tag
    d.mkdir(parents=True)
    res = run_main("core", d / "nope")
    assert res.returncode == 2 and "Traceback" not in res.stderr and "m[/x]/nope" in res.stderr
    res = run_main("report", FIXTURES / "xid" / "syslog", "--html", d / "r.html")
    assert res.returncode == 3 and "Traceback" not in res.stderr and "m[/x]/r.html" in res.stderr
    res = run_main("nccl", "summary", FIXTURES / "nccl" / "iterations.log", "--split-on", "[/a-z]+ iteration")
    assert res.returncode in (0, 3) and "Traceback" not in res.stderr and "[/a-z]+ iteration" in res.stdout


def test_core_and_nccl_split_print_a_document_when_nothing_could_be_read(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("no core, no NCCL\n")
    code, doc = main_json("core", other)
    assert code == 1 and doc["headline"].startswith("nothing could be read") and doc["cores"][0]["diagnoses"]
    code, doc = main_json("nccl", "split", other, "-o", tmp_path / "split")
    assert code == 1 and doc["files"] == [] and read_json(tmp_path / "split" / "split.json")["headline"] == doc["headline"]
