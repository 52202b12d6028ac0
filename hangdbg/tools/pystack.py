"""The Python frames of every thread of a core file, from pystack (bloomberg/pystack >= 1.3), read
in a child process.

pystack's core mode (``pystack core CORE EXE``; Python API
``pystack.engine.get_process_threads_for_core``) finds the interpreter state in the core's memory
and walks each thread's frame chain; it is a C++ extension, so it runs in a child process with a
timeout (a damaged core must not take hangdbg down with it). The child prints one JSON document:
``{"python": [3, 11], "threads": [{"tid", "gil", "frames": [{"file", "function", "line",
"entry"}]}], "error": null}`` with frames outermost first as pystack gives them; ``entry`` marks a
frame that began a new C-level call of the interpreter loop (``PyFrame.is_entry``). pystack's
errors (``pystack.errors``: ``NotEnoughInformation``, ``CoreExecutableNotFound``,
``InvalidExecutable``, ``MissingExecutableMaps``, ``EngineError``) become ``error`` with the first
paragraph of their help text. When pystack is missing, ``py-spy dump --core`` is the fallback.

``run_pystack_remote`` does the same for a live process (``pystack remote PID``; Python API
``pystack.engine.get_process_threads``): the fallback of ``hangdbg dump`` when py-spy cannot read
a rank.

Run as ``python -m hangdbg.tools.pystack CORE EXE`` or ``python -m hangdbg.tools.pystack --pid PID``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from .subproc import Popen, communicate_or_kill

__all__ = ["PystackResult", "run_pystack_core", "run_pystack_remote", "main"]


@dataclass(frozen=True, slots=True)
class PystackResult:
    """pystack's view of a core: ``threads`` as in the module docstring, ``python`` the
    interpreter version (``"3.11"``), ``error`` why there are no Python frames (None on success),
    ``missing`` True when pystack is not installed."""

    threads: tuple[dict, ...] = ()
    python: str | None = None
    error: str | None = None
    missing: bool = False


def run_pystack_core(core: str, exe: str, timeout: float = 60.0) -> PystackResult:
    """Run the pystack child on ``core`` with ``exe``; never raises (``error`` says why)."""
    return _run_child([os.path.abspath(core), os.path.abspath(exe)], timeout, "this core")


def run_pystack_remote(pid: int, timeout: float = 20.0) -> PystackResult:
    """Run the pystack child on the live process ``pid`` (it is paused while read, as py-spy
    pauses it); never raises (``error`` says why)."""
    return _run_child(["--pid", str(int(pid))], timeout, f"pid {pid}")


def _run_child(args: list[str], timeout: float, what: str) -> PystackResult:
    argv = [sys.executable, "-m", "hangdbg.tools.pystack", *args]
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    got = communicate_or_kill(proc, timeout)
    if got is None:
        return PystackResult(error=f"pystack took longer than {timeout:g} s and was stopped; retry with a larger --timeout")
    out, err = got
    try:
        doc = json.loads(out.decode("utf-8", "replace"))
    except ValueError:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        how = f"killed by signal {-proc.returncode}" if proc.returncode and proc.returncode < 0 else last[0]
        return PystackResult(error=f"pystack failed on {what} ({how})")
    python = doc.get("python")
    return PystackResult(tuple(doc.get("threads") or ()), ".".join(map(str, python)) if python else None,
                         doc.get("error"), bool(doc.get("missing")))


def _first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _inspect(core: str, exe: str | None) -> dict:
    """Read a core (``exe`` given) or the live process whose pid is ``core`` (``exe`` None)."""
    try:
        from pystack import errors
        from pystack.engine import (
            NativeReportingMode,
            StackMethod,
            get_process_threads,
            get_process_threads_for_core,
        )
    except ImportError:
        return {"missing": True, "error": "pystack is not installed (pip install pystack)"}
    try:
        if exe is None:
            threads = get_process_threads(int(core), True, NativeReportingMode.OFF, False, StackMethod.AUTO)
        else:
            threads = get_process_threads_for_core(core, exe, None, NativeReportingMode.OFF, False, StackMethod.AUTO)
    except errors.PystackError as exc:
        help_text = getattr(exc, "HELP_TEXT", "")
        why = f"pystack: {type(exc).__name__}: {exc}"
        return {"error": why + (f" ({_first_paragraph(help_text)})" if help_text else "")}
    except (RuntimeError, OSError, ValueError) as exc:
        return {"error": f"pystack: {exc}"}
    out, version = [], None
    for t in threads:
        version = version or t.python_version
        frames = [{"file": f.code.filename, "function": f.code.scope, "line": f.code.location.lineno, "entry": bool(f.is_entry)}
                  for f in t.frames]
        out.append({"tid": t.tid, "gil": bool(t.holds_the_gil), "frames": frames})
    return {"threads": out, "python": list(version) if version else None, "error": None}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(json.dumps({"error": "usage: python -m hangdbg.tools.pystack CORE EXE | --pid PID"}))
        return 2
    print(json.dumps(_inspect(args[1], None) if args[0] == "--pid" else _inspect(args[0], args[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
