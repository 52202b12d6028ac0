"""Seeded mutation fuzzer of hangdbg's readers (issue 14), used by ``tests/test_fuzz_mutations.py``.

A case is named by a seed string ``BASE:INDEX``; everything else follows from it: which seed file
(every file under ``tests/fixtures`` and of the real-artifacts corpus, when present), which 1-3
mutations (byte flips, truncation mid-line, line duplication/deletion/shuffling, splicing two
files, very long lines, NUL runs, non-UTF-8 bytes, huge numbers in number positions, deep JSON
nesting, CRLF/CR line ends, prefix injection, markup and terminal escapes) and which commands run
on the result: ``report IN -o OUT`` and the command a user runs on that kind of file (picked by the
seed file's folder), each in-process with in-memory consoles.

A case fails when a command raises, exits outside {0, 1, 2, 3}, prints a traceback or a swallowed
reader exception (``reader failed: ...``, ``sniffing as ... failed``), or writes anything outside
its ``-o`` directory (the case's root, its cwd, ``$TMPDIR`` and ``$HOME`` are listed before and after).
Time and memory are bounded by the parent (``run_batch``): the cases run in a worker subprocess
under ``RLIMIT_AS``, and a case that does not finish within its deadline is reported as a hang and
the worker restarted after it.

Replay one case: ``python tests/fuzz_mutate.py --replay BASE:INDEX [--keep DIR]``.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import resource
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
CORPUS = Path(os.environ.get("HANGDBG_REAL_ARTIFACTS") or ROOT.parent / "shared" / "real-artifacts")

# The command a user runs on each folder's kind of file (fixture dirs and corpus folders), besides
# `report`. IN is the mutated file, DIR the folder holding only it.
COMMANDS: dict[str, list[list[str]]] = {
    "pyspy": [["analyze", "IN"]], "pyspy_few": [["analyze", "IN"]], "topology": [["analyze", "DIR"]],
    "debug_server": [["analyze", "IN"]],
    "nccl": [["nccl", "summary", "IN"]], "nccl_log": [["nccl", "summary", "IN"]], "report_jobs": [["logs", "IN"]],
    "torchlog": [["logs", "IN"]], "torchlog_formats": [["logs", "IN"]], "torchrun": [["logs", "IN"]],
    "watchdog": [["logs", "IN"]],
    "fr_text": [["fr", "IN"]], "flight_recorder": [["fr", "IN"], ["logs", "IN"], ["nccl", "summary", "IN"]],
    "gpu_text": [["gpu", "IN"]], "xid": [["gpu", "IN"]],
    "gpu_h200": [["logs", "IN"], ["nccl", "summary", "IN"], ["fr", "IN"]],  # real NCCL/torchrun logs and FR dumps
    "gpu_failures_h200": [["logs", "IN"], ["nccl", "summary", "IN"]],  # real torchrun/NCCL logs of GPU failures
    "tracer": [["traces", "DIR"]],
    "stacks": [], "gdb": [], "faulthandler": [], "core_json": [],  # core_json: documents of `hangdbg core`, read by report
    "variants": [],  # tests/fixtures/variants: every kind of evidence, read by report
}

SWALLOWED = re.compile(r"Traceback \(most recent call last\)|reader failed: |sniffing as \S+ failed: ")


def seed_files() -> list[Path]:
    """Every file the fuzzer mutates: the fixtures, then the corpus's ``*/*.txt`` (when present)."""
    files = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    if CORPUS.is_dir():
        files += sorted(p for p in CORPUS.glob("*/*.txt") if p.is_file())
    return files


def kind_of(path: Path) -> str:
    """The folder naming a seed file's kind: the first folder under fixtures/ or the corpus."""
    base = FIXTURES if path.is_relative_to(FIXTURES) else CORPUS
    return path.relative_to(base).parts[0]


# ----------------------------------------------------------------------------------------- mutations

HUGE = [b"4294967296", b"18446744073709551616", b"-1", b"-9223372036854775809", b"99999999999999999999999999",
        b"1e308", b"nan", b"inf", b"0x7fffffffffffffff", b"9" * 5000, b"00000000000000000000001"]
PREFIXES = [b"[rank3]: ", b"[1,0]<stdout>:", b"node-1: ", b"2024-05-01T12:00:00.123456Z ", b"<6>[ 12.345678] ",
            b"[/bold]", b"\x1b[31m", b"-oProxyCommand=x ", b"0: ", b"+ ", b"\x00", b"\xef\xbb\xbf"]
HOSTILE = [b"[/yellow]", b"[bold]x[/]", b"/tmp/[/x]", b"\x1b[2J\x1b[H", b"\x1b]0;pwned\x07", b"\x1b]52;c;aGk=\x07",
           b"\x1b[6n", b"\r", b"\x08\x08", b"\xe2\x80\xae", b"{{", b"%s%n", b"../../../etc/passwd"]
DIRNAMES = ["in[/x]", "in[bold]", "in\x1b]0;t\x07", "in\udcff", "in \u202e"]
BAD_UTF8 = [b"\xff\xfe", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe9t\xe9", b"\xc0\xaf"]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def m_flip(d: bytes, r: random.Random, other: bytes) -> bytes:
    b = bytearray(d)
    for _ in range(r.randint(1, 16) if b else 0):
        b[r.randrange(len(b))] = r.randrange(256)
    return bytes(b)


def m_truncate(d: bytes, r: random.Random, other: bytes) -> bytes:
    return d[:r.randint(0, len(d))]


def m_dup_lines(d: bytes, r: random.Random, other: bytes) -> bytes:
    ls = _lines(d)
    i = r.randrange(len(ls))
    j = min(len(ls), i + r.randint(1, 50))
    return b"\n".join(ls[:j] + ls[i:j] * r.randint(1, 20) + ls[j:])


def m_delete_lines(d: bytes, r: random.Random, other: bytes) -> bytes:
    ls = _lines(d)
    return b"\n".join(x for x in ls if r.random() > 0.2)


def m_shuffle_lines(d: bytes, r: random.Random, other: bytes) -> bytes:
    ls = _lines(d)
    i = r.randrange(len(ls))
    win = ls[i:i + r.randint(2, 200)]
    r.shuffle(win)
    return b"\n".join(ls[:i] + win + ls[i + len(win):])


def m_splice(d: bytes, r: random.Random, other: bytes) -> bytes:
    if r.random() < 0.5:
        return d[:r.randint(0, len(d))] + other[r.randint(0, len(other)):]
    a, b = _lines(d), _lines(other)  # interleave line by line (two ranks writing one file)
    out: list[bytes] = []
    while a or b:
        src = a if (a and (not b or r.random() < 0.5)) else b
        out.append(src.pop(0))
    return b"\n".join(out)


def m_long_line(d: bytes, r: random.Random, other: bytes) -> bytes:
    ls = _lines(d)
    i = r.randrange(len(ls))
    n = r.choice([70_000, 200_000, 1_000_000])
    unit = r.choice([b"a", b" ", b"0", b"x:", b"NCCL INFO ", ls[i] or b"y", b"[", b"\t"])
    long = (unit * (n // len(unit) + 1))[:n]
    ls[i] = ls[i] + long if r.random() < 0.5 else long
    return b"\n".join(ls)


def m_nul_run(d: bytes, r: random.Random, other: bytes) -> bytes:
    n = r.choice([1, 4096, 65536, 300_000])
    i = len(d) if r.random() < 0.5 else r.randint(0, len(d))  # a crashed node's file ends in NULs
    return d[:i] + b"\x00" * n + d[i:]


def m_bad_utf8(d: bytes, r: random.Random, other: bytes) -> bytes:
    for _ in range(r.randint(1, 8)):
        i = r.randint(0, len(d))
        d = d[:i] + r.choice(BAD_UTF8) + d[i:]
    return d


def m_huge_numbers(d: bytes, r: random.Random, other: bytes) -> bytes:
    spans = [m.span() for m in re.finditer(rb"\d+", d)]
    if not spans:
        return d + b" " + r.choice(HUGE)
    for s, e in sorted(r.sample(spans, min(len(spans), r.randint(1, 12))), reverse=True):
        d = d[:s] + r.choice(HUGE) + d[e:]
    return d


def m_deep_nesting(d: bytes, r: random.Random, other: bytes) -> bytes:
    n = r.choice([200, 5000, 100_000])
    o, c = r.choice([(b"[", b"]"), (b'{"a":', b"}"), (b"(", b")")])
    deep = o * n + b"1" + c * n * r.randint(0, 1)
    starts = [m.start() for m in re.finditer(rb"[\[{]", d)] or [0]
    i = r.choice(starts) if r.random() < 0.7 else 0
    return d[:i] + deep + d[i:]


def m_line_ends(d: bytes, r: random.Random, other: bytes) -> bytes:
    return d.replace(b"\n", r.choice([b"\r\n", b"\r", b"\n\n", b"\x0b", b"\x85"]))


def m_prefix(d: bytes, r: random.Random, other: bytes) -> bytes:
    p, share = r.choice(PREFIXES), r.random()
    return b"\n".join((p + x if r.random() < share else x) for x in _lines(d))


def m_hostile(d: bytes, r: random.Random, other: bytes) -> bytes:
    for _ in range(r.randint(1, 10)):
        i = r.randint(0, len(d))
        d = d[:i] + r.choice(HOSTILE) + d[i:]
    return d


MUTATIONS = {f.__name__[2:]: f for f in (m_flip, m_truncate, m_dup_lines, m_delete_lines, m_shuffle_lines, m_splice,
                                         m_long_line, m_nul_run, m_bad_utf8, m_huge_numbers, m_deep_nesting,
                                         m_line_ends, m_prefix, m_hostile)}


@dataclass
class Case:
    """One fuzz case: its seed, the seed file, the mutations applied, the commands to run."""

    seed: str
    path: Path
    ops: list[str]
    data: bytes
    commands: list[list[str]] = field(default_factory=list)
    dirname: str = "in"  # the folder holding the mutated file: sometimes markup or an escape sequence

    def describe(self) -> str:
        return (f"seed {self.seed}: {self.path.relative_to(ROOT.parent)} + {'+'.join(self.ops)} ({len(self.data)} bytes)"
                + (f" in a folder named {self.dirname!r}" if self.dirname != "in" else ""))


def make_case(seed: str, files: list[Path] | None = None) -> Case:
    """The case of ``seed`` (deterministic: the same seed gives the same bytes and commands)."""
    files = files or seed_files()
    r = random.Random(seed)
    path = r.choice(files)
    data = path.read_bytes()
    ops = [r.choice(list(MUTATIONS)) for _ in range(r.randint(1, 3))]
    for op in ops:
        other = r.choice(files).read_bytes()
        data = MUTATIONS[op](data, r, other)
    cmds = [] if path.suffix in (".py", ".md") else list(COMMANDS.get(kind_of(path), []))
    dirname = random.Random(seed + "/dir").choice(["in"] * 8 + DIRNAMES)  # own stream: the draws above stay
    return Case(seed, path, ops, data, cmds + [["report", "DIR"]], dirname)


# ------------------------------------------------------------------------------------- one case, in-process

def _listing(top: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple[int, int]]:
    seen: dict[str, tuple[int, int]] = {}
    for dirpath, dirs, names in os.walk(top):
        rel = Path(dirpath).relative_to(top)
        dirs[:] = [x for x in dirs if not (rel == Path(".") and x.startswith(skip))]
        for n in names + dirs:
            p = Path(dirpath) / n
            st = p.lstat()
            seen[str(rel / n)] = (st.st_size, st.st_mtime_ns)
    return seen


def run_case(case: Case, work: Path) -> list[str]:
    """Run every command of ``case`` in ``work`` (an empty directory); the problems found."""
    from rich.console import Console

    from hangdbg.cli.main import main

    problems: list[str] = []
    indir, cwd, tmp, home = work / case.dirname, work / "cwd", work / "tmp", work / "home"
    for d in (indir, cwd, tmp, home):
        d.mkdir(parents=True)  # "in[/x]" is "in[" holding "x]"
    name = case.path.name if kind_of(case.path) != "tracer" else "trace-node1-3-4242.txt"
    (indir / name).write_bytes(case.data)
    before = _listing(work, skip=("out-",))
    parent_before = sorted(os.listdir(work.parent))
    old_cwd, old_tmp, old_home, old_tmpdir = os.getcwd(), tempfile.tempdir, os.environ.get("HOME"), os.environ.get("TMPDIR")
    os.chdir(cwd)
    tempfile.tempdir, os.environ["HOME"], os.environ["TMPDIR"] = str(tmp), str(home), str(tmp)
    try:
        for k, cmd in enumerate(case.commands):
            out_dir = work / f"out-{k}-{cmd[0]}"
            argv = [str(indir / name) if a == "IN" else str(indir) if a == "DIR" else a for a in cmd] + ["-o", str(out_dir)]
            out, err = io.StringIO(), io.StringIO()
            try:
                code = main(argv, out=Console(file=out, width=160), err=Console(file=err, width=160))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                problems.append(f"{' '.join(cmd)}: raised {exc!r}\n{traceback.format_exc(limit=-8)}")
                continue
            if code not in (0, 1, 2, 3):
                problems.append(f"{' '.join(cmd)}: exit status {code!r}")
            texts = [out.getvalue(), err.getvalue()]
            if out_dir.is_dir():
                texts += [p.read_text(errors="replace") for p in out_dir.rglob("*.json") if p.is_file()]
            for t in texts:
                m = SWALLOWED.search(t)
                if m and m.group(0).encode() not in case.data:  # not the input's own text shown as evidence
                    problems.append(f"{' '.join(cmd)}: {t[max(0, m.start() - 200):m.end() + 300]!r}")
                    break
    finally:
        os.chdir(old_cwd)
        tempfile.tempdir = old_tmp
        for var, value in (("HOME", old_home), ("TMPDIR", old_tmpdir)):  # never leak into later tests
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
    after = _listing(work, skip=("out-",))
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if changed:
        problems.append(f"written outside -o: {changed[:10]}")
    if sorted(os.listdir(work.parent)) != parent_before:
        problems.append(f"written next to the case dir: {sorted(set(os.listdir(work.parent)) ^ set(parent_before))}")
    return problems


def worker() -> None:
    """Read seeds (one a line) from stdin; for each print ``START seed`` then ``DONE seed JSON``."""
    limit = int(os.environ.get("HANGDBG_FUZZ_MEM_MB", "3072")) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    files = seed_files()
    base = Path(tempfile.mkdtemp(prefix="hangdbg-fuzz-"))
    for i, line in enumerate(sys.stdin):
        seed = line.strip()
        print(f"START {seed}", flush=True)
        t0 = time.monotonic()
        selftest = os.environ.get("HANGDBG_FUZZ_SELFTEST", "")  # test_fuzz_mutations checks the guards
        if selftest == f"hang:{seed}":
            time.sleep(3600)
        try:
            if selftest == f"memory:{seed}":
                bytearray(limit)
            case = make_case(seed, files)
            slot = base / f"s{i}"
            slot.mkdir()
            work = slot / "case"
            work.mkdir()
            problems = run_case(case, work)
            what = case.describe()
            if not problems:
                subprocess.run(["rm", "-rf", str(slot)], check=False)
        except MemoryError:
            what, problems = f"seed {seed}", ["MemoryError building or running the case"]
        print(f"DONE {seed} " + json.dumps({"case": what, "problems": problems, "s": round(time.monotonic() - t0, 2)}),
              flush=True)
    subprocess.run(["rm", "-rf", str(base)], check=False)


# ------------------------------------------------------------------------------------- the parent side

def run_batch(seeds: list[str], case_timeout: float = 60.0, mem_mb: int = 3072,
              seconds: dict[str, float] | None = None) -> list[str]:
    """Run ``seeds`` in worker subprocesses; one failure message per failed case (seed first).

    A case that does not finish within ``case_timeout`` seconds is a hang: its worker is killed
    and a new one goes on with the next seed. The worker runs under ``RLIMIT_AS`` = ``mem_mb`` MiB.
    ``seconds``, when given, receives each finished case's duration.
    """
    failures: list[str] = []
    todo = list(seeds)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS}", HANGDBG_FUZZ_MEM_MB=str(mem_mb), NO_COLOR="1")
    while todo:
        proc = subprocess.Popen([sys.executable, str(Path(__file__)), "--worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
        assert proc.stdin and proc.stdout
        proc.stdin.write("".join(s + "\n" for s in todo).encode())
        proc.stdin.close()
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        current, buf = None, b""
        deadline = time.monotonic() + case_timeout
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                proc.kill()
                proc.wait()
                failures.append(f"seed {current or todo[0]}: no answer within {case_timeout:.0f} s (hang)")
                todo = todo[todo.index(current) + 1:] if current in todo else todo[1:]
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:  # the worker ended (all done, or died: killed by the memory limit...)
                proc.wait()
                err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
                if current is not None:
                    failures.append(f"seed {current}: the worker died (status {proc.returncode}): {err}")
                    todo = todo[todo.index(current) + 1:]
                elif todo:
                    failures.append(f"worker failed to start (status {proc.returncode}): {err}")
                    todo = []
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace")
                if line.startswith("START "):
                    current = line[6:]
                    deadline = time.monotonic() + case_timeout
                elif line.startswith("DONE "):
                    seed, _, doc = line[5:].partition(" ")
                    res = json.loads(doc)
                    if seconds is not None:
                        seconds[seed] = res["s"]
                    if res["problems"]:
                        failures.append(res["case"] + "\n  " + "\n  ".join(res["problems"]))
                    todo = todo[todo.index(seed) + 1:]
                    current = None
        if proc.stderr:
            proc.stderr.close()
        proc.stdout.close()
    return failures


def _replay(seed: str, keep: str | None) -> int:
    case = make_case(seed)
    print(case.describe())
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="hangdbg-replay-")) / "case"
    work.mkdir(parents=True)
    problems = run_case(case, work)
    print("\n".join(problems) or "no problem", f"\n(case files in {work})")
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker()
    elif sys.argv[1:2] == ["--replay"]:
        sys.exit(_replay(sys.argv[2], sys.argv[4] if sys.argv[3:4] == ["--keep"] else None))
    else:
        print(__doc__)
