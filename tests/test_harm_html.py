"""Issue 31: the report's views under hostile text: a 10 MB function name, bidi and control
characters in a frame, a malformed ``#filter=`` in the page's address. Real ``hangdbg report`` runs
(and a real headless Chromium for the page's script)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT
from infra.chromium import chromium

pytestmark = pytest.mark.real  # the command line as a child process; Chromium


def _dumps(folder: Path, function: str) -> Path:
    """Two ranks' saved py-spy dumps whose top frame is ``function``."""
    folder.mkdir()
    for rank in (0, 1):
        pid = 101 + rank
        (folder / f"rank-{rank}.txt").write_text(
            f"# hangdbg rank={rank} pid={pid} host=vm\nProcess {pid}: python train.py\n"
            f"Python v3.11.7 (/usr/bin/python3.11)\n\nThread {pid} (idle): \"MainThread\"\n"
            f"    {function} (train.py:3)\n    <module> (train.py:7)\n")
    return folder


def _report(src: Path, out: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hangdbg", "report", str(src), "-o", str(out)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1"))


def test_a_10_mb_function_name_is_shown_cut_and_costs_seconds(tmp_path, leftovers):
    """Before: more than 300 s and 917 MB (rich wrapped the whole name in the console view); now the
    views show its first characters and how many more there are."""
    res = _report(_dumps(tmp_path / "in", "f" * 10_000_000), tmp_path / "out", timeout=120)
    assert res.returncode in (0, 3), res.stderr[-2000:]
    assert "characters)" in res.stdout and len(res.stdout) < 200_000, len(res.stdout)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "f" * 10_000 not in html and "characters)" in html


def test_bidi_and_control_characters_are_written_out_in_the_html(tmp_path, leftovers):
    """A frame named with a right-to-left override (U+202E) and an escape (ESC) cannot reorder or
    colour the page: the HTML holds ``\\u202e`` and ``\\x1b`` as text, never the characters."""
    res = _report(_dumps(tmp_path / "in", "save\u202etxt.exe\x1b[31m"), tmp_path / "out")
    assert res.returncode in (0, 3), res.stderr[-2000:]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "\u202e" not in html and "\x1b" not in html
    assert "save\\u202etxt.exe" in html


@pytest.mark.skipif(chromium() is None, reason="chromium is not installed")
def test_a_malformed_filter_in_the_address_is_ignored_by_the_page(tmp_path, leftovers):
    """``#filter=%E0%A4%A`` (not UTF-8 once decoded): the page's script must not throw (Chromium's
    console would say ``Uncaught URIError``); the page shows everything."""
    res = _report(_dumps(tmp_path / "in", "step"), tmp_path / "out")
    assert res.returncode in (0, 3), res.stderr[-2000:]
    url = (tmp_path / "out" / "report.html").resolve().as_uri() + "#filter=%E0%A4%A"
    with tempfile.TemporaryDirectory(prefix="hangdbg-chromium-", dir=tmp_path) as profile:
        run = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                              "--enable-logging=stderr", "--v=0", "--user-data-dir=" + profile, "--dump-dom", url],
                             capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-2000:]
    assert 'id="filter"' in run.stdout
    assert "URIError" not in run.stderr, [line for line in run.stderr.splitlines() if "URIError" in line]
