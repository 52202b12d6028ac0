#!/usr/bin/env python3
"""Score hangdbg on the project's corpus of real artifacts (tests/corpus/{dev,heldout}).

Each case (``cases-*.toml`` in a split's folder; format in tests/corpus/README.md) names real files
pasted in a public thread, the command a user would run on them and the thread's ground truth as a
check. The files are copied into a fresh temporary folder (``report`` reads that folder), hangdbg
runs with ``--json``, and the check grades the findings:

  RIGHT   the culprit / cause is named by a suspect and no innocent rank is blamed
  PARTIAL the culprit is among the blamed with innocents, or the cause without the rank/host/GPU,
          or only at warning severity
  WRONG   innocents blamed and the culprit not, or a claim the ground truth contradicts
  SILENT  no verdict on it
  ERROR   a traceback, an exit status outside 0-3, output that is not JSON, or a timeout

The split is by thread, fixed by a hash of the thread's address (``split_of``), decided before any
rule was written; the held-out part is scored only at the start and the end of a piece of work.

Usage: check_corpus.py [--split dev|heldout|all] [--case ID] [-v] [--json FILE]
Exit status 0 when every split run has right >= 80 % of its cases and no wrong or error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = ("dev", "heldout")
TIMEOUT_S = 120
PASS_RIGHT = 0.80
COMMANDS = {"report": ["report", "{dir}"], "logs": ["logs", "{files}"], "nccl": ["nccl", "summary", "{files}"],
            "gpu": ["gpu", "{files}"], "analyze": ["analyze", "{files}"]}
SUSPECT = {"suspect"}
TEXT_KEYS = ("summary", "action", "kind")


def split_of(thread: str) -> str:
    """The split of a thread: held out when the SHA-256 of its address is 0 modulo 3."""
    return "heldout" if int(hashlib.sha256(thread.encode()).hexdigest(), 16) % 3 == 0 else "dev"


def load_cases(split: str) -> list[dict]:
    out = []
    for f in sorted((HERE / split).glob("cases-*.toml")):
        for c in tomllib.loads(f.read_text(encoding="utf-8")).get("case", []):
            c = dict(c, split=split, table=f.name)
            out.append(c)
    return out


def _ranks(v) -> set[int]:
    if v is None:
        return set()
    if isinstance(v, int):
        return {v}
    return {int(x) for x in v if isinstance(x, int)}


def items_of(doc: dict) -> list[dict]:
    """The findings of a hangdbg document (every ``findings`` list in it), normalised."""
    out: list[dict] = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "findings" and isinstance(v, list):
                    out.extend(i for i in v if isinstance(i, dict) and "severity" in i)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    seen, uniq = set(), []
    for i in out:
        key = (i.get("kind"), i.get("summary"), i.get("severity"))
        if key not in seen:
            seen.add(key)
            uniq.append(dict(ranks=_ranks(i.get("ranks")), hosts=set(i.get("hosts") or ()), gpus=set(i.get("gpus") or ()),
                             text=" ".join(str(i.get(k) or "") for k in TEXT_KEYS), severity=str(i.get("severity"))))
    return uniq


def _m(rx, text) -> bool:
    return bool(rx) and re.search(rx, text, re.I) is not None


def grade(case: dict, items: list[dict], text: str) -> tuple[str, str]:
    check = case.get("check", "cause")
    sus = [i for i in items if i["severity"] in SUSPECT]
    if case.get("wrong_text") and re.search(case["wrong_text"], text, re.I):
        return "WRONG", f"output says /{case['wrong_text']}/"
    if check == "culprit":
        culprit = set(case["ranks"])
        innocent = set(case["innocent"]) if "innocent" in case else None
        bad = sorted({r for i in sus for r in i["ranks"] if (r in innocent if innocent is not None else r not in culprit)})
        hits = [i for i in sus if i["ranks"] & culprit]
        good = [i for i in hits if not case.get("cause") or _m(case["cause"], i["text"])]
        if good and not bad:
            return "RIGHT", "suspect names the culprit"
        if hits:
            return "PARTIAL", "culprit blamed" + (f" with innocents {bad}" if bad else " without the cause")
        if bad:
            return "WRONG", f"blames {bad}, not {sorted(culprit)}"
        if case.get("cause") and any(_m(case["cause"], i["text"]) for i in items):
            return "PARTIAL", "right cause, culprit not named as a suspect"
        if any(i["ranks"] & culprit for i in items):
            return "PARTIAL", "culprit named below suspect severity"
        return "SILENT", ""
    if check == "waiters":
        innocent = set(case.get("innocent", ()))
        bad = sorted({r for i in sus for r in i["ranks"] if not innocent or r in innocent})
        if bad:
            return "WRONG", f"blames waiting ranks {bad}"
        return ("RIGHT", "reports the wait") if any(_m(case.get("where", "wait"), i["text"]) for i in items) else ("SILENT", "")
    # cause
    innocent = set(case.get("innocent", ()))
    bad = sorted({r for i in sus for r in i["ranks"] if r in innocent})

    def where_ok(i):
        return ((not case.get("gpu") or _m(case["gpu"], " ".join(i["gpus"]) + " " + i["text"])) and
                (not case.get("host") or _m(case["host"], " ".join(i["hosts"]) + " " + i["text"])))
    hit = [i for i in items if _m(case["cause"], i["text"])]
    if any(i["severity"] in SUSPECT and where_ok(i) for i in hit):
        return ("PARTIAL", f"right cause, but blames {bad}") if bad else ("RIGHT", "cause named")
    if hit:
        return "PARTIAL", "right cause " + ("without the GPU/host" if not any(where_ok(i) for i in hit) else
                                           f"only at {hit[0]['severity']} severity")
    if bad:
        return "WRONG", f"blames {bad} (no rank is at fault)"
    return "SILENT", ""


def hangdbg_cmd() -> list[str]:
    """``$CORPUS_HANGDBG`` (split on blanks: another checkout's ``python -m hangdbg``), else the
    ``hangdbg`` beside this Python, else ``python -m hangdbg``."""
    if os.environ.get("CORPUS_HANGDBG"):
        return os.environ["CORPUS_HANGDBG"].split()
    exe = shutil.which("hangdbg", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return [exe] if exe else [sys.executable, "-m", "hangdbg"]


def _in_process(argv: list[str], cwd: str) -> subprocess.CompletedProcess:
    """``hangdbg ARGV`` run by this interpreter (``hangdbg.cli.main.main`` with captured consoles and
    absolute paths): the same command without a new Python and its imports per case."""
    import io

    from rich.console import Console

    from hangdbg.cli.main import main as hangdbg_main

    argv = [str(Path(cwd) / a) if (Path(cwd) / a).exists() and a not in COMMAND_WORDS else a for a in argv]
    out, err = io.StringIO(), io.StringIO()
    rc = hangdbg_main(argv, out=Console(file=out, no_color=True, width=200, soft_wrap=True),
                      err=Console(file=err, no_color=True, width=200))
    return subprocess.CompletedProcess(argv, rc, out.getvalue(), err.getvalue())


COMMAND_WORDS = {w for cmd in COMMANDS.values() for w in cmd if not w.startswith("{")}


def run_case(case: dict, in_process: bool = False) -> dict:
    split_dir = HERE / case["split"]
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        names = []
        for rel in case["files"]:
            src = split_dir / rel
            dst = Path(tmp) / src.name
            shutil.copy(src, dst)
            names.append(src.name)
        argv = []
        for a in COMMANDS[case.get("command", "report")]:
            argv += names if a == "{files}" else ["." if a == "{dir}" else a]
        try:
            p = _in_process(argv + ["--json"], tmp) if in_process else subprocess.run(
                hangdbg_cmd() + argv + ["--json"], cwd=tmp, capture_output=True, text=True,
                timeout=TIMEOUT_S, env=dict(os.environ, NO_COLOR="1"))
        except subprocess.TimeoutExpired:
            return dict(case=case, verdict="ERROR", note=f"timeout {TIMEOUT_S} s", items=[], rc=None)
    if "Traceback (most recent call last)" in p.stderr or p.returncode not in (0, 1, 2, 3):
        return dict(case=case, verdict="ERROR", note=f"rc {p.returncode}: {(p.stderr.strip().splitlines() or ['?'])[-1][:160]}",
                    items=[], rc=p.returncode)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else {}
    except ValueError:
        return dict(case=case, verdict="ERROR", note="output is not JSON", items=[], rc=p.returncode)
    items = items_of(doc)
    verdict, note = grade(case, items, p.stdout)
    return dict(case=case, verdict=verdict, note=note, items=items, rc=p.returncode, headline=doc.get("headline", ""))


def score(results: list[dict]) -> dict:
    n = {k: sum(r["verdict"] == k for r in results) for k in ("RIGHT", "PARTIAL", "WRONG", "SILENT", "ERROR")}
    n["cases"] = len(results)
    n["threads"] = len({r["case"]["thread"] for r in results})
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=[*SPLITS, "all"], default="dev")
    ap.add_argument("--case", help="only the case with this id")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--json", metavar="FILE", help="write every result to FILE")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--in-process", action="store_true",
                    help="run hangdbg in this interpreter, one case after another (the suite's way; no timeout)")
    args = ap.parse_args(argv)
    ok = True
    report = {}
    for split in (SPLITS if args.split == "all" else (args.split,)):
        cases = [c for c in load_cases(split) if args.case in (None, c["id"])]
        if args.in_process:
            results = [run_case(c, in_process=True) for c in cases]
        else:
            with ThreadPoolExecutor(args.jobs) as pool:
                results = list(pool.map(run_case, cases))
        for r in results:
            c = r["case"]
            if args.verbose or r["verdict"] != "RIGHT":
                print(f"{split:8} {c['id']:48} {r['verdict']:7} {r['note']}")
            if args.verbose:
                print(f"         GT: {c['gt']}\n         {r.get('headline', '')[:220]}")
        n = score(results)
        report[split] = dict(score=n, results=[dict(id=r["case"]["id"], verdict=r["verdict"], note=r["note"]) for r in results])
        print(f"{split}: right {n['RIGHT']}/{n['cases']} ({n['threads']} threads) partial {n['PARTIAL']} "
              f"wrong {n['WRONG']} silent {n['SILENT']} error {n['ERROR']}")
        ok &= n["cases"] > 0 and n["RIGHT"] >= PASS_RIGHT * n["cases"] and n["WRONG"] == 0 and n["ERROR"] == 0
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
