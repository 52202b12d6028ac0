"""The terminal report at 10,000 ranks (issue 16): classes with counts and exceptions, the suspect's
branch in bold red, rank sets in braces, and file:line wrapped, never cut, at 80 and 60 columns."""

from __future__ import annotations

import io
import re
import sys
from dataclasses import replace

from rich.console import Console

from conftest import ROOT
from hangdbg.stacks.analysis import analyze
from hangdbg.frames import Frame
from hangdbg.report.console import render_analysis

sys.path.insert(0, str(ROOT / "bench"))
from analyze_scale import ShapeBook, build_dumps  # noqa: E402  (the benchmark's synthetic job)


def _render(a, width: int) -> tuple[str, str]:
    con = Console(width=width, file=io.StringIO(), record=True, color_system="truecolor", force_terminal=True)
    con.print(render_analysis(a))
    return con.export_text(clear=False), con.export_text(styles=True)


def _job(n: int):
    return analyze(build_dumps(n, "interned", ShapeBook()))


def test_ten_thousand_ranks_read_as_classes_and_the_suspect_branch_is_red():
    a = _job(10_000)
    text, styled = _render(a, 100)
    assert re.search(r"\d{4} ranks \{0-9999\s+except", text)  # the majority class and its exceptions
    assert "ranks {" in text and not re.search(r"ranks \d+,\d", text)  # never "ranks 3,517" (a number?)
    culprit = 10_000 // 2 + 1
    assert re.search(r"\x1b\[1;31m[^\x1b]*rank \{%d\}" % culprit, styled)  # bold red: its own branch
    # no line per rank: the classes table lists the largest classes (and the suspects'), the tree
    # one node per distinct call path (this job has 259 stack shapes)
    assert len(text.splitlines()) < 2500
    assert "smaller classes" in text


def test_file_and_line_wrap_and_are_never_cut():
    a = _job(64)
    deep = "/opt/very/long/site/packages/directory/name/that/does/not/fit/" * 2 + "module_with_a_long_name.py"
    frame = Frame("some_function_with_a_long_name", deep, 123456)
    d = a.ranks[0]
    th = replace(d.threads[0], frames=(frame, *d.threads[0].frames))
    a = analyze([replace(d, threads=(th, *d.threads[1:]), samples=((th, *d.threads[1:]),)), *a.ranks[1:]])
    for width in (60, 80):
        text, _ = _render(a, width)
        flat = re.sub(r"[\s│┃|╎┆]+", "", text)
        assert re.sub(r"\s", "", f"{frame.short_file}:123456") in flat, width
        assert "…" not in text  # nothing ellipsized
