"""The helper of ``tests/gpu/run`` (not a test module): three steps, each ``python3 tests/gpu/summary.py STEP OUT``.

``env OUT``
    Writes ``OUT/environment.json`` (Python, torch, CUDA, NCCL, the GPUs, hangdbg, py-spy, pystack) and exits
    0 when torch sees a CUDA GPU, 10 when it does not or torch is missing (the last line printed says why).
``reap OUT``
    Kills the process group of every command the cases recorded (``OUT/cases/*.json``) that is still alive:
    what a run cut short by its time limit left behind (each case kills its own when it ends normally).
``summary OUT [--skipped REASON] [--pytest-exit N] [--seconds S]``
    Writes ``OUT/summary.json`` and ``OUT/summary.md`` from the cases' records and pytest's junit xml
    (``OUT/junit.xml``): pass/fail per case, its seconds and figures, the environment, and whether the whole
    run passed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_GPU = 10


def _version(argv: list[str]) -> str | None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    return (res.stdout or res.stderr).strip().splitlines()[0] if (res.stdout or res.stderr).strip() else None


def environment() -> tuple[dict, str | None]:
    """The facts of this machine and why the GPU cases cannot run here (None: they can)."""
    env: dict = {"host": platform.node(), "python": sys.version.split()[0], "python_executable": sys.executable,
                 "pythonpath": os.environ.get("PYTHONPATH", ""), "checkout": str(ROOT),
                 "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        sys.path.insert(0, str(ROOT))
        from hangdbg._version import __version__
        env["hangdbg"] = __version__
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        env["hangdbg"] = f"error: {exc}"
    git = _version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    env["commit"] = git
    try:  # (where hangdbg looks: PATH, then beside this Python)
        from hangdbg.tools.pyspy import find_pyspy
        pyspy = find_pyspy()
    except Exception:  # noqa: BLE001 - hangdbg not importable: recorded above
        pyspy = shutil.which("py-spy")
    env["py_spy"] = {"path": pyspy, "version": _version([pyspy, "--version"]) if pyspy else None}
    env["pystack"] = _version([sys.executable, "-m", "pystack", "--version"])
    env["nvidia_smi_L"] = _version(["nvidia-smi", "-L"]) if shutil.which("nvidia-smi") else None
    try:
        import torch
    except ImportError as exc:
        return env, f"torch is not installed ({exc})"
    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    try:
        env["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None
    except Exception as exc:  # noqa: BLE001 - a build without NCCL
        env["nccl"] = f"error: {exc}"
    if not torch.cuda.is_available():
        return env, f"torch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)"
    env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return env, None


def cmd_env(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    env, why = environment()
    env["gpu_missing"] = why
    (out / "environment.json").write_text(json.dumps(env, indent=1) + "\n")
    print(json.dumps(env, indent=1))
    if why:
        print(why)
        return NO_GPU
    return 0


def _records(out: Path) -> list[dict]:
    """The cases' records, in the order they started."""
    recs = [json.loads(p.read_text()) for p in (out / "cases").glob("*.json")]
    return sorted(recs, key=lambda r: (r.get("started", ""), r.get("case", "")))


def cmd_reap(out: Path) -> int:
    killed = []
    for rec in _records(out) if (out / "cases").is_dir() else []:
        for c in rec.get("commands", []):
            pid = c.get("pid")
            if not pid:
                continue
            try:
                os.killpg(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    if killed:
        print(f"killed the process groups left running: {killed}")
    return 0


def _junit(out: Path) -> tuple[dict | None, dict[str, dict]]:
    """Totals of OUT/junit.xml and {test name: {outcome, seconds, message}} (None, {}: no junit file)."""
    path = out / "junit.xml"
    if not path.exists():
        return None, {}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return {"error": f"unreadable junit.xml: {exc}"}, {}
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return {"error": "no testsuite in junit.xml"}, {}
    totals = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    totals["time_s"] = float(suite.get("time", 0))
    tests = {}
    for tc in suite.iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = tc.find(tag)
            if el is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (el.get("message") or "")[:2000]
                break
        tests[tc.get("name", "")] = {"outcome": outcome, "seconds": float(tc.get("time", 0)), "message": message}
    return totals, tests


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.1f}"
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def cmd_summary(out: Path, skipped: str | None, pytest_exit: int | None, seconds: float | None) -> int:
    env = json.loads((out / "environment.json").read_text()) if (out / "environment.json").exists() else {}
    totals, tests = _junit(out)
    cases = []
    for rec in _records(out) if (out / "cases").is_dir() else []:
        j = tests.pop(rec["case"], None)
        outcome = rec["outcome"]
        if outcome == "running":  # never finished: the run's time limit (or a crash) cut it short
            outcome = "not finished"
        if j and j["outcome"] in ("failed", "error") and outcome == "passed":
            outcome = j["outcome"]  # (its teardown failed after the call passed)
        cases.append({"case": rec["case"], "test": rec["test"], "outcome": outcome, "seconds": rec["seconds"],
                      "figures": rec["figures"], "notes": rec["notes"], "message": rec["message"][-2000:],
                      "commands": [{k: c.get(k) for k in ("label", "rc", "seconds", "timed_out")} for c in rec["commands"]]})
    for name, j in tests.items():  # in the junit file but without a record: skipped or failed at set-up
        cases.append({"case": name, "test": name, "outcome": j["outcome"], "seconds": j["seconds"], "figures": {},
                      "notes": {}, "message": j["message"], "commands": []})
    passed = (skipped is None and pytest_exit == 0 and bool(cases)
              and all(c["outcome"] in ("passed", "skipped") for c in cases))
    doc = {"skipped": skipped is not None, "reason": skipped, "passed": passed, "pytest_exit": pytest_exit,
           "seconds": seconds, "out_dir": str(out), "environment": env, "junit": totals, "cases": cases}
    (out / "summary.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")

    md = [f"# hangdbg GPU run: {'skipped' if skipped else 'passed' if passed else 'FAILED'}", ""]
    if skipped:
        md += [f"no GPU: skipped ({skipped}).", ""]
    facts = [("host", env.get("host")), ("commit", env.get("commit")), ("GPUs", ", ".join(env.get("gpus") or []) or None),
             ("torch", env.get("torch")), ("CUDA", env.get("cuda")), ("NCCL", env.get("nccl")),
             ("python", env.get("python")), ("py-spy", (env.get("py_spy") or {}).get("version")),
             ("wall time", f"{seconds:.0f} s" if seconds is not None else None), ("pytest exit", pytest_exit)]
    md += ["| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in facts if v is not None], ""]
    if cases:
        md += ["| case | outcome | seconds | figures |", "|---|---|---|---|"]
        for c in cases:
            figs = "; ".join(f"{k} {_fmt(f['value'])}{(' ' + f['unit']) if f['unit'] else ''}" for k, f in c["figures"].items())
            secs = f"{c['seconds']:.1f}" if isinstance(c["seconds"], (int, float)) else "-"
            md.append(f"| {c['case']} | {c['outcome']} | {secs} | {figs} |")
        md.append("")
        for c in cases:
            if c["outcome"] not in ("passed", "skipped") and c["message"]:
                md += [f"## {c['case']}: {c['outcome']}", "", "```", c["message"][-1500:].strip(), "```", ""]
    (out / "summary.md").write_text("\n".join(md) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=["env", "reap", "summary"])
    p.add_argument("out", type=Path)
    p.add_argument("--skipped", metavar="REASON")
    p.add_argument("--pytest-exit", type=int)
    p.add_argument("--seconds", type=float)
    a = p.parse_args(argv)
    out = a.out.resolve()
    if a.step == "env":
        return cmd_env(out)
    if a.step == "reap":
        return cmd_reap(out)
    return cmd_summary(out, a.skipped, a.pytest_exit, a.seconds)


if __name__ == "__main__":
    sys.exit(main())
