#!/usr/bin/env python3
"""How much of the development score survives the ways a paste deforms a log (a robustness score).

Every development case that check_corpus.py grades RIGHT is run again with its files deformed the way
web pages, mail and terminals deform pasted logs, and graded the same way:

  crlf           Windows line endings
  quote          a Markdown / e-mail quote ("> ") on every line
  indent4        every line indented by four blanks (a code block)
  ansi           terminal colours around every line (ESC[31m ... ESC[0m)
  tabs           runs of four blanks turned into tabs
  blank_between  a blank line after every line (a web page's copy)
  wrap80         every line wrapped at 80 columns at word boundaries (textwrap)
  cut100         every line cut every 100 columns, inside words too (a terminal's hard wrap)
  glued          every newline turned into a blank (a paste that lost them)

The deformations are generic, not taken from any case; the held-out part is not used. Usage:
check_corpus.py's directory on sys.path, then ``perturb.py [NAME ...] [--json FILE]``; prints, per
deformation, how many RIGHT cases stay RIGHT and how many turn WRONG or ERROR (never acceptable).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_corpus as cc  # noqa: E402


def _wrap80(text: str) -> str:
    out: list[str] = []
    for line in text.split("\n"):
        out += textwrap.wrap(line, 80, break_long_words=True, break_on_hyphens=False, drop_whitespace=False) or [""]
    return "\n".join(out)


DEFORM: dict[str, Callable[[str], str]] = {
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "quote": lambda t: "\n".join("> " + ln for ln in t.split("\n")),
    "indent4": lambda t: "\n".join("    " + ln for ln in t.split("\n")),
    "ansi": lambda t: "\n".join(f"\x1b[31m{ln}\x1b[0m" if ln else ln for ln in t.split("\n")),
    "tabs": lambda t: t.replace("    ", "\t"),
    "blank_between": lambda t: "\n\n".join(t.split("\n")),
    "wrap80": _wrap80,
    "cut100": lambda t: "\n".join(ln[i:i + 100] for ln in t.split("\n") for i in range(0, max(len(ln), 1), 100)),
    "glued": lambda t: " ".join(t.split("\n")),
}
MILD = ("crlf", "quote", "indent4", "ansi", "tabs", "blank_between")
"""The deformations a reader should take in its stride (the suite holds their floor)."""


def run_deformed(case: dict, deform: Callable[[str], str]) -> dict:
    """check_corpus.run_case on a copy of the case's files deformed by ``deform`` (in-process)."""
    with tempfile.TemporaryDirectory(prefix="perturb-") as tmp:
        for rel in case["files"]:
            src = cc.HERE / case["split"] / rel
            dst = Path(tmp) / case["split"] / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(deform(src.read_text(encoding="utf-8", errors="replace")), encoding="utf-8")
        here, cc.HERE = cc.HERE, Path(tmp)
        try:
            return cc.run_case(case, in_process=True)
        finally:
            cc.HERE = here


def score(names: list[str], right: list[dict] | None = None) -> dict:
    """{name: {"right": n, "kept": k, "wrong": [...], "lost": [[id, verdict], ...]}} over the development
    cases graded RIGHT (``right``: those cases, when the caller has graded them already)."""
    if right is None:
        right = [c for c in cc.load_cases("dev") if cc.run_case(c, in_process=True)["verdict"] == "RIGHT"]
    out = {}
    for name in names:
        lost, wrong = [], []
        for c in right:
            v = run_deformed(c, DEFORM[name])["verdict"]
            if v != "RIGHT":
                lost.append([c["id"], v])
            if v in ("WRONG", "ERROR"):
                wrong.append(c["id"])
        out[name] = dict(right=len(right), kept=len(right) - len(lost), wrong=wrong, lost=lost)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"deformations: {', '.join(DEFORM)} (default: all)")
    ap.add_argument("--json", metavar="FILE", help="write the result, with the cases lost, to FILE")
    args = ap.parse_args(argv)
    if unknown := [n for n in args.names if n not in DEFORM]:
        ap.error(f"unknown deformation {', '.join(unknown)}: choose from {', '.join(DEFORM)}")
    res = score(args.names or list(DEFORM))
    for name, r in res.items():
        print(f"{name:14} kept {r['kept']}/{r['right']}  wrong/error {len(r['wrong'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 1 if any(r["wrong"] for r in res.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
