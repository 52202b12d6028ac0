"""Fault injection for issue 14: the hostile world hangdbg must survive, made real and small.

Every injector is a context manager, a path maker or an argv/env helper, used by the tests
(``test_faults.py``, ``test_outdir.py``, ``test_fault_ranks.py``):

- **disk full**: :func:`tmpfs` mounts a real tmpfs of ``size`` (``"64k"``); :func:`fill` fills it
  up to ``leave`` bytes free.
- **read-only**: :func:`read_only` bind-mounts a directory read-only.
- **another user**: :func:`as_user` is the ``runuser -u USER --`` prefix; :func:`system_python`
  a Python interpreter that user may run (the venv's may live under ``/root``).
- **lying tools**: :func:`fake_tool` writes an executable ``py-spy``/``ssh``/``pdsh``/``srun``/
  ``scontrol`` into a directory that :func:`env_with_path` puts first on ``PATH``. It behaves as a
  :class:`Behaviour` says: :func:`hang` (sleeps forever, ignoring SIGTERM), :func:`junk` (seeded
  random bytes with NUL, invalid UTF-8, terminal escapes and rich markup), :func:`lie` (plausible
  but wrong text), :func:`fail` (non-zero exit with a message), or runs the remote command on
  this machine (:func:`local`: an honest ssh). Every run appends its argv to
  ``BIN/NAME.calls`` (:func:`calls`), so a test can assert a transport was never started.
- **special files**: :func:`fifo`, :func:`symlink_loop`.
- **the run**: :func:`guarded_run` runs ``python -m hangdbg`` under ``RLIMIT_AS`` and a timeout;
  :func:`snapshot` + :func:`assert_clean` check no traceback, an exit status in {0,1,2,3}, and
  that nothing was created or changed in a watched directory outside ``-o``.

Mounts need root: the helpers call ``pytest.skip`` when a mount fails (or :data:`ROOT_ONLY`
marks the test); every mount is undone in a ``finally``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNUSER = shutil.which("runuser")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mounts)")
EXIT_STATUSES = {0, 1, 2, 3}


# --- disk full, read-only ---------------------------------------------------------------------

@contextlib.contextmanager
def mounted(argv: list[str], mnt: Path) -> Iterator[Path]:
    """Run ``argv + [mnt]`` (a ``mount`` command) and unmount ``mnt`` at the end (lazy unmount,
    in a ``finally``). Skips the test when the mount fails (not root, no tmpfs...)."""
    mnt.mkdir(parents=True, exist_ok=True)
    if subprocess.run(argv + [str(mnt)], capture_output=True).returncode != 0:
        pytest.skip(f"cannot mount here: {' '.join(argv)}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def tmpfs(mnt: Path, size: str):
    """A real tmpfs of ``size`` (mount's syntax: ``"64k"``, ``"1m"``) mounted on ``mnt``."""
    return mounted(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs"], mnt)


def fill(mnt: Path, leave: int) -> None:
    """Fill the file system of ``mnt`` (a tmpfs) up to ``leave`` bytes free (file ``mnt/filler``)."""
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    (mnt / "filler").write_bytes(b"x" * max(0, free - leave))


@contextlib.contextmanager
def read_only(src: Path, mnt: Path) -> Iterator[Path]:
    """``src`` bind-mounted read-only on ``mnt``; skips when the mount is writable anyway."""
    src.mkdir(parents=True, exist_ok=True)
    with mounted(["mount", "--bind", "-o", "ro", str(src)], mnt) as ro:
        probe = ro / ".probe"
        try:
            probe.write_bytes(b"")
        except OSError:
            yield ro
            return
        probe.unlink()
        pytest.skip("the read-only bind mount is writable here")


# --- another user -----------------------------------------------------------------------------

def as_user(user: str = "nobody") -> list[str]:
    """The argv prefix that runs a command as ``user`` (``runuser -u USER --``); skips without runuser
    or root."""
    if RUNUSER is None or os.geteuid() != 0:
        pytest.skip("needs root and runuser")
    return [RUNUSER, "-u", user, "--"]


def system_python(user: str = "nobody") -> str | None:
    """A Python interpreter ``user`` may run (this one if it can, else ``/usr/bin/python3``), or None."""
    assert RUNUSER is not None
    for exe in (sys.executable, "/usr/bin/python3"):
        real = os.path.realpath(exe)
        ok = subprocess.run([RUNUSER, "-u", user, "--", real, "-c", "pass"], capture_output=True).returncode == 0
        if ok:
            return real
    return None


# --- fake tools -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Behaviour:
    """What a fake tool does: write ``stdout``/``stderr`` (bytes; ``{pid}`` is replaced by the
    ``--pid`` argument, ``{host}`` by the ssh host), then hang (``hang``: sleep forever, SIGTERM
    ignored) or exit with ``code``."""

    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0
    hang: bool = False
    local: bool = False


def local() -> Behaviour:
    """An honest ssh to this machine: runs its last argument (the remote command) with ``sh -c``."""
    return Behaviour(local=True)


def hang(partial: bytes = b"") -> Behaviour:
    """Print ``partial`` (flushed), then sleep forever ignoring SIGTERM: only SIGKILL ends it."""
    return Behaviour(stdout=partial, hang=True)


JUNK_PIECES = (b"\x00", b"\xff\xfe", b"\xc3\x28", b"\x1b[2J", b"\x1b]0;pwned\x07", b"\x1b]52;c;cGF5bG9hZA==\x07",
               b"[/yellow]", b"[bold red]", b"[link=file:///etc/passwd]x[/link]", b"\r", b"\n", b"Thread ",
               b"Process 1: ", b"HANGDBG1 ", b"    f (/a.py:1)\n")


def junk_bytes(seed: int, n: int = 4096) -> bytes:
    """``n``-ish bytes of seeded junk: random bytes mixed with NUL, invalid UTF-8, terminal
    escape sequences (clear screen, window title, clipboard write), rich markup and fragments of
    py-spy and agent-frame syntax."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        out += rng.choice(JUNK_PIECES) if rng.random() < 0.5 else rng.randbytes(rng.randint(1, 40))
    return bytes(out)


def junk(seed: int = 14, code: int = 0, n: int = 4096) -> Behaviour:
    """Junk (:func:`junk_bytes`) on stdout and stderr, then exit ``code``."""
    return Behaviour(stdout=junk_bytes(seed, n), stderr=junk_bytes(seed + 1, 512), code=code)


def lie(stdout: str | bytes, code: int = 0, stderr: str | bytes = b"") -> Behaviour:
    """Plausible but wrong output, then exit ``code``."""
    enc = (lambda s: s.encode() if isinstance(s, str) else s)
    return Behaviour(stdout=enc(stdout), stderr=enc(stderr), code=code)


def fail(message: str | bytes, code: int = 1) -> Behaviour:
    """``message`` on stderr, exit ``code``."""
    return Behaviour(stderr=message.encode() if isinstance(message, str) else message, code=code)


_SCRIPT = r'''
import json, os, signal, sys, time
argv = sys.argv[1:]
with open(CALLS, "a") as f:
    f.write(json.dumps(argv) + "\n")
pid = argv[argv.index("--pid") + 1] if "--pid" in argv else ""
host = argv[argv.index("--") + 1] if "--" in argv and argv.index("--") + 1 < len(argv) else ""
b = BY_KEY.get(host) or BY_KEY.get(pid) or DEFAULT
if b["local"]:
    os.execvp("sh", ["sh", "-c", argv[-1]])
def sub(data):
    return data.replace(b"{pid}", pid.encode()).replace(b"{host}", host.encode())
if b["hang"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.stdout.buffer.write(sub(b["stdout"])); sys.stdout.buffer.flush()
sys.stderr.buffer.write(sub(b["stderr"])); sys.stderr.buffer.flush()
if b["hang"]:
    while True:
        time.sleep(3600)
sys.exit(b["code"])
'''


def _spec(b: Behaviour) -> dict:
    return {"stdout": b.stdout, "stderr": b.stderr, "code": b.code, "hang": b.hang, "local": b.local}


def fake_tool(bin_dir: Path, name: str, behaviour: Behaviour, by_key: dict[str, Behaviour] | None = None) -> Path:
    """Write the executable ``bin_dir/name`` behaving as ``behaviour`` (or as ``by_key[host]`` for
    the ssh host after ``--``, ``by_key[pid]`` for the ``--pid`` argument). Each run appends its
    argv (JSON) to ``bin_dir/name.calls``. Returns the executable's path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    head = (f"#!{sys.executable}\nCALLS = {str(bin_dir / (name + '.calls'))!r}\nDEFAULT = {_spec(behaviour)!r}\n"
            f"BY_KEY = {({k: _spec(v) for k, v in (by_key or {}).items()})!r}\n")
    exe.write_text(head + _SCRIPT)
    exe.chmod(0o755)
    return exe


def calls(bin_dir: Path, name: str) -> list[list[str]]:
    """The argvs the fake ``name`` was run with (empty: never run)."""
    f = bin_dir / (name + ".calls")
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def env_with_path(bin_dir: Path, **extra: str) -> dict[str, str]:
    """This environment with ``bin_dir`` first on ``PATH`` (plus ``extra``), colours off, wide."""
    env = dict(os.environ, NO_COLOR="1", COLUMNS="160", **extra)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


# --- special files ----------------------------------------------------------------------------

def fifo(path: Path) -> Path:
    """A named pipe at ``path`` nobody writes to (a reader that opens it blocks forever)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def symlink_loop(d: Path) -> tuple[Path, Path]:
    """Two symlinks in ``d`` pointing at each other (``loop-a`` -> ``loop-b`` -> ``loop-a``) and
    a directory link to ``d`` itself (``d/self``): opening either loops (ELOOP), a recursive walk
    that follows links never ends."""
    d.mkdir(parents=True, exist_ok=True)
    a, b = d / "loop-a", d / "loop-b"
    os.symlink(b.name, a)
    os.symlink(a.name, b)
    os.symlink(".", d / "self")
    return a, b


# --- the guarded run --------------------------------------------------------------------------

def guarded_run(argv: list[str], timeout: float = 60, mem_mb: int = 2048, cwd: Path | None = None,
                env: dict[str, str] | None = None, prefix: list[str] | None = None,
                python: str | None = None) -> subprocess.CompletedProcess:
    """Run ``[PREFIX] PYTHON -m hangdbg ARGV`` (``python``: this interpreter unless given; ``prefix``:
    e.g. :func:`as_user`) with ``RLIMIT_AS`` of ``mem_mb`` MiB and a ``timeout`` (s);
    stdout/stderr as bytes. ``result.seconds`` is the wall time. A timeout fails the test (the
    process group is killed)."""
    limit = mem_mb << 20

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = env if env is not None else dict(os.environ, NO_COLOR="1", COLUMNS="160")
    env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    t0 = time.monotonic()
    proc = subprocess.Popen([*(prefix or []), python or sys.executable, "-m", "hangdbg", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=cwd or ROOT,
                            preexec_fn=bounded, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        pytest.fail(f"hangdbg {' '.join(map(str, argv))} still running after {timeout} s; stderr:\n"
                    f"{err.decode(errors='replace')[-3000:]}")
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    res.seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    return res


def snapshot(watched: Path) -> dict[str, tuple]:
    """Every entry under ``watched`` (not following links): ``{relative path: (type, size, mtime_ns,
    link target)}``."""
    snap: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(watched):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            target = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
            snap[os.path.relpath(p, watched)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, target)
    return snap


def text_of(res: subprocess.CompletedProcess) -> str:
    """stdout + stderr of a :func:`guarded_run`, decoded (replacement characters)."""
    return (res.stdout + res.stderr).decode("utf-8", "replace")


def assert_clean(res: subprocess.CompletedProcess, out_dir: Path | None, watched: Path, before: dict[str, tuple]) -> None:
    """No traceback, an exit status in {0,1,2,3}, and nothing created, changed or removed under
    ``watched`` outside ``out_dir`` since ``before`` (:func:`snapshot`)."""
    text = text_of(res)
    assert "Traceback" not in text and "MarkupError" not in text, text[-3000:]
    assert res.returncode in EXIT_STATUSES, (res.returncode, text[-3000:])
    after = snapshot(watched)
    out_rel = os.path.relpath(out_dir, watched) if out_dir is not None else None

    def outside(rel: str) -> bool:
        return out_rel is None or not (rel == out_rel or rel.startswith(out_rel + os.sep))

    changed = sorted(k for k in set(before) | set(after) if outside(k) and before.get(k) != after.get(k))
    assert not changed, f"written outside -o: {changed}"


def assert_no_raw_escapes(res: subprocess.CompletedProcess) -> None:
    """No terminal escape sequence of the hostile kinds (OSC: title, clipboard; clear screen) and
    no NUL reached stdout or stderr raw."""
    for stream in (res.stdout, res.stderr):
        assert b"\x1b]" not in stream and b"\x1b[2J" not in stream and b"\x00" not in stream, stream[-2000:]


def parts(d: Path) -> list[Path]:
    """The ``.part`` files left under ``d``."""
    return [p for p in d.rglob("*") if p.name.endswith(".part")]
