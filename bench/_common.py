"""Shared by the benchmark scripts: what was measured (commit, dirty tree)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_state() -> dict:
    """The hangdbg commit measured, and whether hangdbg/ had uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "hangdbg"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return {}
    return {"commit": head, "hangdbg_dirty": bool(dirty)}
