"""The HTML report at 10,000 ranks (issue 16): small, offline, classes with counts, the suspect's
branch highlighted and open, a filter box that works — checked in a real headless Chromium."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from infra.chromium import chromium, rendered_dom, screenshot
from infra.png import count_colour

from hangdbg.stacks.analysis import analyze
from hangdbg.model import RankDump, Thread, Verdict
from hangdbg.frames import Frame
from hangdbg.report.html import FILTER_SCRIPT, render_html

sys.path.insert(0, str(ROOT / "bench"))
from analyze_files import write_job  # noqa: E402  (the benchmark's synthetic 10k-rank job)

N = 10_000
CULPRIT = N // 2 + 1  # the bench job's planted rank, outside any collective (its data loader)
SUSPECT_PINK = (0xD8, 0x1B, 0x60)  # the suspect branch's border colour in the template


def _dump(rank: int, frames: list[tuple[str, str, int]]) -> RankDump:
    th = Thread(rank, "MainThread", "idle", tuple(Frame(f, p, n) for f, p, n in frames))
    return RankDump(rank=rank, pid=100 + rank, host=f"node{rank // 2}", world_size=4, threads=(th,), samples=((th,),))


def _small_verdict() -> Verdict:
    coll = [("all_reduce", "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 2806), ("step", "/w/train.py", 40), ("<module>", "/w/train.py", 9)]
    evil = [("<script>alert(1)</script>", "/w/<img src=x onerror=alert(2)>.py", 1), ("<module>", "/w/train.py", 9)]
    a = analyze([_dump(0, coll), _dump(1, coll), _dump(2, coll), _dump(3, evil)])
    return Verdict(headline=a.headline, findings=a.findings, analysis=a)


def test_small_report_is_escaped_offline_and_allows_only_its_own_script(tmp_path):
    html = render_html(_small_verdict(), tmp_path / "r.html")
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "http://" not in html and "https://" not in html  # nothing fetched
    assert not re.search(r"<[a-z]+[^<>]*\ssrc=", html)
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert scripts == [FILTER_SCRIPT]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp
    # rank 3 is the suspect: its own branch is marked, the way down to it too, the rest not
    assert re.search(r'<details id="suspect-branch" class="suspect" data-ranks="3"', html)
    assert 'class="path" data-ranks="0-3"' in html and 'class="" data-ranks="0-2"' in html
    assert "3 ranks {0-2}" in html and "(3)" in html  # a class with its count


@pytest.fixture(scope="module")
def big_report(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("html10k")
    write_job(N, d / "job")
    html = d / "report.html"
    res = subprocess.run([sys.executable, "-m", "hangdbg", "report", str(d / "job"), "--html", str(html), "-o",
                          str(d / "out")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 3, res.stderr[-3000:]
    return html


def test_the_10000_rank_report_stays_small(big_report):
    size = big_report.stat().st_size
    assert size < 3 << 20, size  # "under a few MB"
    text = big_report.read_text()
    assert text.count("<tr") < 400  # classes and grouped rows, not one row per rank or per file
    assert re.search(r"\d{4} ranks \{0-9999 except ", text)  # the majority as a class with its exceptions


@pytest.mark.skipif(chromium() is None, reason="chromium is not installed")
def test_the_10000_rank_report_in_chromium(big_report, tmp_path):
    dom = rendered_dom(big_report)
    assert re.search(r'<input type="search" id="filter"', dom)
    branch = re.search(r'<details id="suspect-branch" class="suspect" data-ranks="(\d+)" open="">(.*?)</summary>',
                       dom, re.S)
    assert branch and int(branch.group(1)) == CULPRIT
    assert "rank {%d}" % CULPRIT in branch.group(2) and "train_epoch" in branch.group(2)
    # filtered by the culprit's rank, the page shows its highlighted branch on the first screen
    # (headless Chromium screenshots the top of the page: a #fragment's scroll is not painted)
    png = tmp_path / "branch.png"
    screenshot(big_report.resolve().as_uri() + f"#filter={CULPRIT}", png, size=(1000, 1600))
    assert png.stat().st_size > 10_000 and count_colour(png, SUSPECT_PINK) > 100
    # the filter: by the culprit's rank, the tree keeps its path and hides the other branches
    dom = rendered_dom(big_report.resolve().as_uri() + f"#filter={CULPRIT}")
    nodes = re.findall(r"<details ([^>]*)>", dom)
    shown = [n for n in nodes if "hidden" not in n]
    assert shown and len(shown) < len(nodes) / 2
    assert all(re.search(r'data-ranks="[^"]*"', n) for n in shown)
    assert any(f'data-ranks="{CULPRIT}"' in n for n in shown)
    assert re.search(r'id="filter-note"[^>]*>\d+ tree node\(s\) match', dom)
    # by text: the rank waiting in a barrier from save_checkpoint
    dom = rendered_dom(big_report.resolve().as_uri() + "#filter=save_checkpoint")
    shown = [n for n in re.findall(r"<details ([^>]*)>(.*?)</summary>", dom, re.S) if "hidden" not in n[0]]
    assert any("save_checkpoint" in s for _, s in shown) and len(shown) < 40
