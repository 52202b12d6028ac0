"""`hangdbg report DIR`: one verdict from a directory of evidence; the HTML renders in Chromium."""

from __future__ import annotations

import html as htmlmod
import shutil

import pytest

from conftest import FIXTURES, main_json, run_cli, run_main, suspects, validate
from infra.chromium import chromium, rendered_dom, screenshot

SCENARIO = "mismatch"

XSS = "<img src=x onerror=\"document.title='PWNED'\"><script>document.title='PWNED'</script>"

needs_chromium = pytest.mark.skipif(chromium() is None, reason="chromium is not installed (apt-get install chromium)")


def _evil_dump(path, pid=4242):
    """A py-spy dump whose function and thread names carry HTML/JS."""
    path.write_text(
        f"Process {pid}: python evil.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        f"Thread {pid} (idle): \"MainThread\"\n    {XSS} (evil.py:3)\n    <module> (evil.py:9)\n"
    )


@pytest.fixture(scope="module")
def evidence_dir(hung_job, tmp_path_factory):
    """A real `hangdbg dump -o` of the hung job, plus an unreadable and an unknown file."""
    d = tmp_path_factory.mktemp("evidence")
    res = run_cli("dump", "--pid", hung_job.pid, "-o", d / "dump")
    assert res.returncode == 3, res.stderr
    (d / "notes.txt").write_text("the job hung at 3 a.m.; nothing here is a log\n")
    (d / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    return d


def test_report_names_the_rank_from_a_dump_directory(evidence_dir, tmp_path):
    rc, doc = main_json("report", evidence_dir, "-o", tmp_path / "out")
    assert rc == 3
    assert doc["schema_version"] == 4 and doc["command"] == "report"
    assert suspects(doc)[0]["ranks"] == [3] and suspects(doc)[0]["kind"] == "different-collective"
    assert "rank 3" in doc["headline"] and "broadcast" in doc["headline"]
    assert doc["stacks"]["headline"].startswith("suspect rank 3")
    assert sorted({r["rank"] for r in doc["ranks"]}) == [0, 1, 2, 3]
    assert next(r for r in doc["ranks"] if r["rank"] == 3)["last_collective"] == "broadcast"
    waiting = [f for f in doc["findings"] if f["kind"] == "waiting"]  # the others wait for rank 3, never suspects
    assert [(f["ranks"], f["waits_for"], f["severity"], f["source"]) for f in waiting] == [([0, 1, 2], [3], "waiting", "stacks")]
    unparsed = {u["file"].rsplit("/", 1)[-1]: u["reason"] for u in doc["unparsed"]}
    assert unparsed["notes.txt"] == "no reader recognised its content"
    assert unparsed["blob.bin"] == "binary file of unknown kind"
    assert unparsed["hangdbg.json"].startswith("hangdbg's own output")
    assert (tmp_path / "out" / "report.json").exists() and (tmp_path / "out" / "report.html").exists()


def test_text_report_orders_verdict_suspects_ranks_stacks(evidence_dir):
    res = run_main("report", evidence_dir)
    assert res.returncode == 3, res.stderr
    t = res.stdout
    assert t.index("failure found") < t.index("Suspects") < t.index("Per rank") < t.index("merged call tree") < t.index("Files not used")
    assert "notes.txt" in t


@needs_chromium
def test_html_renders_in_chromium_and_escapes_everything(evidence_dir, tmp_path):
    d = tmp_path / "ev"
    shutil.copytree(evidence_dir, d)
    _evil_dump(d / "evil.txt")
    _evil_dump(d / "javascript:alert(7).txt", pid=4343)  # (a rank of its own: 7)
    (d / "dump" / "raw" / "extra").mkdir()
    html = tmp_path / "report.html"
    res = run_main("report", d, "--html", html)
    assert res.returncode == 3, res.stderr
    dom = rendered_dom(html)
    # the verdict renders on top, the suspects table and the tree are there
    assert "PWNED" not in dom.split("<body", 1)[0]  # no script ran: the title is untouched
    assert "<title>hangdbg report:" in dom
    verdict = dom.split('id="verdict"', 1)[1].split("</div>", 1)[0]
    assert "in no collective" in verdict  # the evil processes (ranks 4 and 5)
    suspects = dom.split('id="suspects"', 1)[1].split("</table>", 1)[0]
    assert "in no collective" in suspects and "broadcast" in dom  # rank 3 waits in broadcast: the evil ranks are the roots
    assert dom.count("<details") >= 3 and 'id="suspects"' in dom and 'id="ranks"' in dom
    # the log's HTML shows up as text, never as elements
    assert "<img" not in dom and "<script>document" not in dom
    assert htmlmod.escape("<img src=x onerror=", quote=False) in dom
    # raw evidence is linked relative to the report
    assert 'href="./ev/dump/raw/rank-0003.txt"' in dom
    assert 'href="./ev/javascript%3Aalert%287%29.txt"' in dom  # a file name is never a URL scheme
    screenshot(html, tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_report_of_fixture_files_without_a_job():
    rc, doc = main_json("report", FIXTURES / "pyspy" / "torch_rank0.txt", FIXTURES / "pyspy" / "torch_rank1.txt")
    assert rc in (0, 3)
    assert doc["files"] and all(f["kinds"] == ["stacks"] for f in doc["files"])
    assert doc["stacks"] is not None


def test_report_usage_errors(tmp_path):
    res = run_main("report", tmp_path / "nope")
    assert res.returncode == 2 and "no such file or directory" in res.stderr
    res = run_main("report", tmp_path)  # nothing to read is no all-clear
    assert res.returncode == 1 and "nothing could be read" in res.stdout
    (tmp_path / "notes.txt").write_text("lunch at noon\n")
    rc, doc = main_json("report", tmp_path)  # the wrong directory handed to a CI gate: exit 1, not 0
    assert rc == 1 and not doc["found"] and doc["headline"].startswith("nothing could be read")
    assert [u["reason"] for u in doc["unparsed"]] == ["no reader recognised its content"]


def test_json_is_indented_when_small_and_compact_when_large(monkeypatch):
    import json

    from hangdbg.stacks.analysis import analyze
    from hangdbg.stacks.saved import load_dumps
    from hangdbg.report import schema
    from hangdbg.report.build import analysis_document

    dumps, _ = load_dumps([str(FIXTURES / "pyspy" / "torch_xargs.txt")])
    doc = analysis_document(analyze(dumps), "analyze")
    small = schema.to_json(doc)
    assert small.startswith('{\n  "schema_version": 4,') and validate(json.loads(small))
    monkeypatch.setattr(schema, "PRETTY_LIMIT", 100)
    big = schema.to_json(doc)
    assert "\n" not in big and json.loads(big) == json.loads(small)


def test_own_outputs_are_not_read_again(tmp_path):
    """A directory that holds an earlier run's -o output: report.json, report.html and the per-kind
    documents quote the evidence they rest on, and must not be read as that evidence again."""
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(FIXTURES / "nccl" / "refused.log", d / "slurm-1.out")
    shutil.copy(FIXTURES / "xid" / "syslog", d / "syslog")
    rc, first = main_json("report", d, "-o", d)
    assert rc == 3 and (d / "report.json").exists() and (d / "report.html").exists()
    code, doc = main_json("nccl", "summary", d, "-o", d)
    assert code == 3 and doc["source"]["files"] == [str(d / "slurm-1.out"), str(d / "syslog")]
    rc, again = main_json("report", d)
    assert again["findings"] == first["findings"]
    own = {u["file"].rsplit("/", 1)[-1]: u["reason"] for u in again["unparsed"]}
    assert set(own) == {"report.json", "report.html", "nccl.json"} and all("own output" in r for r in own.values())
