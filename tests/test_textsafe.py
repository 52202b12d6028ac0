"""Issue 14, item 6: text from users, logs and nodes is never read as rich markup and never
reaches the terminal with its control characters (clear screen, window title, OSC 52 clipboard
write); the JSON keeps it raw."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from conftest import FIXTURES, run_main
from hangdbg.stacks.analysis import analyze
from hangdbg.cli.common import Command, print_error
from hangdbg.frames import Frame
from hangdbg.model import (Evidence, FileError, Finding, Kind, RankDump, RankState, Severity, SourceKind, SourceReport,
    Thread, Verdict)
from hangdbg.report.console import render_analysis
from hangdbg.report.source_view import findings_table, render_source_report
from hangdbg.report.safetext import escape, safe_text, visible
from hangdbg.report.verdict_console import render_verdict

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"
CLIP = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
HOSTILE = f"/tmp/[/x] x[/bold] [/yellow] [bold]b[/] \\ {CLEAR}{TITLE}{CLIP}\x9b2J\u202e end"


def _render(renderable) -> str:
    buf = io.StringIO()
    Console(file=buf, width=100).print(renderable)
    return buf.getvalue()


def _clean(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out
    assert "\\x1b" in out or "^[" in out  # still readable


def test_visible_and_escape():
    assert visible("plain [b] text\n\tok") == "plain [b] text\n\tok"
    assert visible(CLEAR) == "\\x1b[2J" and visible("\x07\x00\x7f\x9b") == "\\x07\\x00\\x7f\\x9b"
    assert visible("\u202e") == "\\u202e"
    for s in (HOSTILE, "ends with \\", "[/x]", "[bold]"):
        text = safe_text(s).plain
        assert text == visible(s)
        out = _render(f"[red]{escape(s)}[/red] tail")
        assert "tail" in out


def _finding(sev: Severity = Severity.SUSPECT) -> Finding:
    return Finding(next(iter(Kind)), f"summary {HOSTILE}", ranks=(0,),
                   hosts=(f"x[/bold]{CLEAR}",), gpus=(f"g[/x]{TITLE}",), severity=sev,
                   evidence=(Evidence(f"/tmp/[/x]/log{CLEAR}.txt", 3, f"line {HOSTILE}"),), action=f"do [/x] {CLIP}",
                   source=SourceKind.TORCH_LOG)


def _dumps() -> list[RankDump]:
    frames = (Frame(f"wait[/x]{CLEAR}", f"/tmp/[/x]/{TITLE}.py", 3), Frame("main", "train.py", 9))
    other = (Frame(f"step[/bold]{CLIP}", "/tmp/[/x]/m.py", 4), Frame("main", "train.py", 9))
    out = []
    for r in range(4):
        th = Thread(1, f"Main[/x]{CLEAR}", "idle", frames if r else other)
        out.append(RankDump(r, 100 + r, f"x[/bold]{CLEAR}", threads=(th,), samples=((th,),)))
    out.append(RankDump(4, 104, f"n[/yellow]{TITLE}", error=f"ssh: [/yellow] {HOSTILE}"))
    return out


@pytest.mark.parametrize("view", ["analysis", "verdict", "findings", "source"])
def test_views_render_hostile_text(view):
    a = analyze(_dumps())
    f = _finding()
    if view == "analysis":
        r = render_analysis(a)
    elif view == "verdict":
        r = render_verdict(Verdict(headline=f"head {HOSTILE}", findings=(f, _finding(Severity.WARNING)), analysis=a,
                                   rank_states=(RankState(0, f"x[/bold]{CLEAR}", 1, f"AR[/x]{TITLE}", 3, "g[/x]", f"st {CLIP}"),),
                                   unparsed=(FileError(f"/tmp/[/x]/{CLEAR}f", f"why [/x] {TITLE}"),)))
    elif view == "findings":
        r = findings_table([f])
    else:
        r = render_source_report(SourceReport(SourceKind.TORCH_LOG, files=(f"/tmp/[/x]{CLEAR}",), findings=(f,),
                                              ranks=(RankState(0, f"x[/bold]{CLEAR}", state=f"s{CLIP}"),),
                                              errors=(FileError(f"/tmp/[/x]{TITLE}", f"bad [/x]{CLEAR}"),)),
                                 f"head {HOSTILE}", f"title [/x]{CLEAR}")
    out = _render(r)
    _clean(out)
    assert "[/x]" in out or "[/bold]" in out


def test_cli_messages_render_hostile_text():
    buf = io.StringIO()
    err = Console(file=buf, width=100)
    print_error(err, f"bad {HOSTILE}", help=f"fix [/x] {CLIP}")
    Command(err, err).warn(f"node x[/bold]: ssh: [/yellow] {HOSTILE}")
    out = buf.getvalue()
    _clean(out)
    assert "[/yellow]" in out and "x[/bold]" in out


def test_logs_command_escapes_terminal_sequences(tmp_path):
    src = (FIXTURES / "torchlog" / "desync_lagging.log").read_text().splitlines()
    src[0] = src[0].replace("Watchdog caught", f"Watchdog{CLEAR}{TITLE}{CLIP} [/x] caught")
    log = tmp_path / "[/x]" / "rank0.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(src) + "\n")
    res = run_main("logs", log)
    assert res.returncode in (0, 3), res.stderr
    assert "Traceback" not in res.stderr
    _clean(res.stdout)
    js = run_main("logs", log, "--json")
    assert CLEAR in json.loads(js.stdout).__repr__() or "\\u001b" in js.stdout  # JSON keeps the raw text


def test_report_on_a_dir_named_like_markup(tmp_path):
    d = tmp_path / f"[/x]{CLEAR}"
    d.mkdir(parents=True)
    src = (FIXTURES / "torchlog" / "desync_lagging.log").read_text()
    (d / f"rank0-b]{TITLE}.log").write_text(src.replace("Watchdog caught", f"Watchdog {CLEAR} caught", 1))
    res = run_main("report", d)
    assert res.returncode in (0, 1, 3), res.stderr
    assert "Traceback" not in res.stderr and "MarkupError" not in res.stderr
    for stream in (res.stdout, res.stderr):
        assert "\x1b" not in stream and "\x07" not in stream
    res = run_main("report", tmp_path / "[/x]nothing here")
    assert "Traceback" not in res.stderr and "\x1b" not in res.stderr


def test_usage_error_shows_escapes_of_argv():
    res = run_main("logs", "x.log", f"--bogus={TITLE}{CLEAR}")
    assert res.returncode == 2 and "--bogus" in res.stderr
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr and "\\x1b" in res.stderr
