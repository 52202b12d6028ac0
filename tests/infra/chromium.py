"""Render an HTML file in a real headless Chromium (Debian package) and return the DOM it built."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def rendered_dom(html: Path, timeout: float = 60) -> str:
    """The DOM after Chromium loaded ``html`` and ran whatever it would run (``--dump-dom``)."""
    exe = chromium()
    assert exe, "chromium is not installed"
    res = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--user-data-dir=" + str(html.parent / ".chromium-profile"), "--dump-dom", html.resolve().as_uri()],
        capture_output=True, text=True, timeout=timeout,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def screenshot(html: Path, png: Path, timeout: float = 60) -> None:
    """A PNG of the rendered page (a non-empty image proves layout and paint ran)."""
    exe = chromium()
    assert exe, "chromium is not installed"
    res = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,2000",
         "--user-data-dir=" + str(html.parent / ".chromium-profile"), f"--screenshot={png}", html.resolve().as_uri()],
        capture_output=True, text=True, timeout=timeout,
    )
    assert res.returncode == 0 and png.exists(), res.stderr[-2000:]
