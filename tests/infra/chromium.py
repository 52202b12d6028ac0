"""Render an HTML file in a real headless Chromium (Debian package) and return the DOM it built."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _url(html: Path | str) -> str:
    return html if isinstance(html, str) else html.resolve().as_uri()


def rendered_dom(html: Path | str, timeout: float = 60) -> str:
    """The DOM after Chromium loaded ``html`` (a path, or a ``file:`` URL with a ``#fragment``)
    and ran whatever it would run (``--dump-dom``)."""
    exe = chromium()
    assert exe, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="hangdbg-chromium-") as profile:  # one per run: xdist workers
        res = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--user-data-dir=" + profile, "--dump-dom", _url(html)],
            capture_output=True, text=True, timeout=timeout,
        )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def screenshot(html: Path | str, png: Path, timeout: float = 60, size: tuple[int, int] = (1200, 2000)) -> None:
    """A PNG of the rendered page (a non-empty image proves layout and paint ran); ``html`` may be a
    ``file:`` URL (with a ``#fragment``: the page scrolls to that element, or its script reads it)."""
    exe = chromium()
    assert exe, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="hangdbg-chromium-") as profile:
        res = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--window-size={size[0]},{size[1]}", "--user-data-dir=" + profile, f"--screenshot={png}", _url(html)],
            capture_output=True, text=True, timeout=timeout,
        )
    assert res.returncode == 0 and png.exists(), res.stderr[-2000:]
