"""Run gdb on a core file in batch mode: every thread's native backtrace, the signal, the
environment, and a diagnosis when it fails.

gdb is driven as memray's ``attach`` drives it (bloomberg/memray src/memray/commands/attach.py):
an argv list with explicit flags (``-batch -nx -nw``, no init file, nothing auto-loaded from the
core's libraries, no debuginfod downloads), marker lines echoed between the commands so the
output can be cut apart, and the failure told from gdb's own messages (gdb 8-13 texts:
``BFD: warning: ... is truncated``, ``core file may not match specified executable file``,
``not in executable format``, ``Could not load shared library symbols``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from .subproc import Popen, communicate_or_kill

__all__ = ["GdbResult", "find_gdb", "gdb_argv", "run_gdb_core", "diagnose_gdb", "ENV_MARK", "BT_MARK"]

BT_MARK = "HANGDBG-BACKTRACES"
ENV_MARK = "HANGDBG-ENV "
_ENV_SCRIPT = f"""set $i = 0
while ((char**)environ)[$i] != 0
  printf "{ENV_MARK}%s\\n", ((char**)environ)[$i]
  set $i = $i + 1
end
"""


@dataclass(frozen=True, slots=True)
class GdbResult:
    """What one gdb run on a core gave.

    Attributes:
        text: gdb's output from the backtraces on (``thread apply all bt``), ``""`` on failure.
        environ: ``environ`` as the process last had it (``KEY=VALUE`` strings gdb printed).
        error: why there is no backtrace, with the fix; None when gdb printed one.
        warnings: problems that leave the backtrace usable but doubtful, each with the fix.
    """

    text: str = ""
    environ: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    warnings: tuple[str, ...] = ()


def find_gdb(executable: str | None = None) -> str | None:
    """``executable`` if given and runnable, else ``gdb`` on PATH, else None."""
    return shutil.which(executable or "gdb")


def gdb_argv(gdb: str, core: str, exe: str | None, env_script: str | None = None) -> list[str]:
    """The gdb command line for one core (absolute paths, so no file name reads as an option)."""
    argv = [
        gdb, "-batch", "-nx", "-nw", "-q",
        "-iex", "set auto-load off",
        "-iex", "set debuginfod enabled off",
        "-ex", "set pagination off",
        "-ex", "set width 0",
        "-ex", "set height 0",
        "-ex", "set print frame-arguments none",
        "-ex", "set print entry-values no",
        "-ex", f"echo \\n{BT_MARK}\\n",
        "-ex", "thread apply all bt",
    ]
    if env_script:
        argv += ["-ex", "echo \\n", "-x", env_script]
    if exe:
        argv.append(os.path.abspath(exe))
    argv += ["--core", os.path.abspath(core)]
    return argv


def run_gdb_core(core: str, exe: str | None, timeout: float = 60.0, gdb: str | None = None) -> GdbResult:
    """Run gdb on ``core`` (with ``exe`` as the executable, None lets gdb guess) and diagnose.

    Args:
        core: the core file.
        exe: the executable that made it (the Python interpreter), or None.
        timeout: seconds before gdb is killed (with its process group).
        gdb: the gdb program (default: ``gdb`` on PATH).

    Returns:
        a :class:`GdbResult`; never raises for a failed run (``error`` says why).
    """
    prog = find_gdb(gdb)
    if prog is None:
        return GdbResult(error="gdb not found: install it (apt-get install gdb / dnf install gdb) or pass --gdb PATH; "
                               "the native frames below come from pystack")
    fd, script = tempfile.mkstemp(prefix="hangdbg-env-", suffix=".gdb")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_ENV_SCRIPT)
        argv = gdb_argv(prog, core, exe, script)
        env = dict(os.environ, LC_ALL="C", TERM="dumb")
        env.pop("DEBUGINFOD_URLS", None)
        proc = Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        got = communicate_or_kill(proc, timeout)
        if got is None:
            return GdbResult(error=f"gdb took longer than {timeout:g} s on {core} and was stopped; retry with a larger "
                                   "--timeout (a core of many GB with debug symbols takes minutes)")
    finally:
        try:
            os.unlink(script)
        except OSError:
            pass
    text = got[0].decode("utf-8", "replace")
    header, mark, rest = text.partition(BT_MARK + "\n")
    environ: dict[str, str] = {}
    body = []
    for line in (rest if mark else "").splitlines():
        if line.startswith(ENV_MARK):
            key, eq, value = line[len(ENV_MARK):].partition("=")
            if eq:
                environ.setdefault(key, value)
        else:
            body.append(line)
    error, warnings = diagnose_gdb(text if not mark else header + "\n".join(body), proc.returncode, core, exe)
    return GdbResult("\n".join(body) + "\n" if mark else "", environ, error, tuple(warnings))


_TRUNC = re.compile(r"is truncated: expected core file size >= (\d+), found: (\d+)")
_NOLIBS = re.compile(r"Could not load shared library symbols for (\d+) librar")


def diagnose_gdb(output: str, returncode: int | None, core: str, exe: str | None) -> tuple[str | None, list[str]]:
    """Read gdb's messages: ``(error, warnings)``; ``error`` is set when no backtrace came out."""
    warnings: list[str] = []
    low = output.lower()
    m = _TRUNC.search(output)
    if m:
        warnings.append(f"the core is truncated ({int(m.group(2)):,} of {int(m.group(1)):,} bytes): frames may be missing; "
                        "raise `ulimit -c` (unlimited) and check free space where cores are written")
    if "core file may not match specified executable" in low:
        warnings.append(f"the core was not made by {exe}: pass the interpreter the job ran with, --exe /path/to/python")
    m = _NOLIBS.search(output)
    if m:
        warnings.append(f"gdb could not load {m.group(1)} shared libraries named in the core: read it on the node (or "
                        "container image) it came from so the same libraries are found")
    has_frames = re.search(r"^#\d+\s", output, re.M) is not None
    if has_frames:
        return None, warnings
    if "is not a core dump" in low or ("not in executable format" in low and core in output):
        return f"gdb cannot read {core} as a core file: {_first(output, 'core')}", warnings
    if exe and "not in executable format" in low:
        return (f"{exe} is not an executable gdb can read (a script or a wrapper?): pass the Python interpreter with --exe",
                warnings)
    if "no such file or directory" in low:
        return f"gdb: {_first(output, 'No such file')}", warnings
    if "no stack" in low or "cannot access memory" in low:
        return (f"gdb found no readable stack in {core} (the stack segments are missing: a truncated core or a "
                "core filter (/proc/PID/coredump_filter) that left them out)", warnings)
    return f"gdb printed no backtrace (exit status {returncode}): {_first(output, '')}", warnings


def _first(output: str, word: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and BT_MARK not in ln]
    hit = next((ln for ln in lines if word.lower() in ln.lower()), None) if word else None
    return (hit or (lines[-1] if lines else "no output"))[:300]
