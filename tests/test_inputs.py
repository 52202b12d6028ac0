"""Issue 14, hostile inputs: every reader opens regular files only (a FIFO, ``/dev/zero``), reads
lines of bounded length, validates the numbers it reads, survives deeply nested JSON, binary
hostfiles, non-UTF-8 ``scontrol`` output and compressed bombs. The CLI runs in a subprocess
under a 2 GB address-space limit and a generous timeout: both are hang and memory guards, not
speed measurements. Those tests are ``real`` (a child process each, seconds with its start-up);
the readers' own checks run in the fast lane."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from hangdbg.text import lines as textlines

ROOT = Path(__file__).resolve().parent.parent
LIMIT_AS = 2 << 30


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def run(*argv: str, timeout: float = 60, cwd: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``python -m hangdbg ARGV`` under the memory limit; a hang fails the test (TimeoutExpired)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "hangdbg", *argv], capture_output=True, timeout=timeout,
                          preexec_fn=_limit, env=env, cwd=cwd, input=stdin if stdin is not None else b"")


def no_traceback(p: subprocess.CompletedProcess) -> None:
    assert b"Traceback" not in p.stderr, p.stderr.decode(errors="replace")[-3000:]
    assert b"MemoryError" not in p.stderr
    assert p.returncode in (0, 1, 2, 3), (p.returncode, p.stderr[-2000:])


NCCL = ("node1:100:100 [0] NCCL INFO NCCL version 2.18.3+cuda12.1\n"
        "node1:100:100 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START\n"
        "node1:100:100 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n")

COMMANDS = [["logs"], ["nccl", "summary"], ["gpu"], ["report"], ["core"], ["traces"], ["fr"]]


# --- only regular files ----------------------------------------------------------------------
@pytest.mark.real
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: "-".join(a))
def test_a_fifo_on_the_command_line_is_listed_not_read(argv: list[str], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    p = run(*argv, str(fifo), timeout=60)  # today: blocks forever in open()
    no_traceback(p)
    assert p.returncode == 1
    assert b"not a regular file" in p.stdout + p.stderr


@pytest.mark.real
@pytest.mark.parametrize("argv", [["logs"], ["nccl", "summary"], ["gpu"], ["report"], ["traces"]], ids=lambda a: "-".join(a))
def test_a_fifo_next_to_a_log_does_not_stop_the_log(argv: list[str], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    log = tmp_path / "nccl.log"
    log.write_text(NCCL)
    p = run(*argv, str(fifo), str(log), "--json")
    no_traceback(p)
    assert b"not a regular file" in p.stdout + p.stderr


@pytest.mark.real
@pytest.mark.parametrize("argv", [["logs"], ["nccl", "summary"], ["gpu"], ["report"]], ids=lambda a: "-".join(a))
def test_dev_zero_as_a_log_ends_in_bounded_memory(argv: list[str]) -> None:
    p = run(*argv, "/dev/zero", timeout=60)  # today: one endless line read into memory
    no_traceback(p)
    assert p.returncode == 1
    assert b"not a regular file" in p.stdout + p.stderr


@pytest.mark.real
def test_a_directory_walk_skips_fifos_and_survives_a_symlink_loop(tmp_path: Path) -> None:
    d = tmp_path / "job"
    (d / "sub").mkdir(parents=True)
    os.mkfifo(d / "sub" / "pipe.log")
    (d / "sub" / "loop").symlink_to(d, target_is_directory=True)
    (d / "nccl.log").write_text(NCCL)
    for argv in (["report"], ["nccl", "summary"], ["logs"], ["gpu"]):
        p = run(*argv, str(d), "--json")
        no_traceback(p)
    assert list(textlines.iter_files(str(d))) == [str(d / "nccl.log")]


def test_open_input_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    for path in (str(tmp_path / "p"), "/dev/zero", str(tmp_path)):
        with pytest.raises(OSError, match="not a regular file"):
            textlines.open_input(path)
        with pytest.raises(OSError, match="not a regular file"):
            textlines.read_head(path)


# --- bounded lines ---------------------------------------------------------------------------
def test_an_endless_line_is_cut_at_the_cap_and_the_next_lines_are_read() -> None:
    data = b"x" * (5 * textlines.MAX_LINE + 17) + b"\nnext line\n" + b"\0" * (3 * textlines.MAX_LINE)
    lines = list(textlines.iter_lines_from(io.BytesIO(data)))
    assert [n for n, _ in lines] == [1, 2, 3]
    assert len(lines[0][1]) == textlines.MAX_LINE and lines[1][1] == "next line"
    assert len(lines[2][1]) == textlines.MAX_LINE


@pytest.mark.real
@pytest.mark.parametrize("argv", [["nccl", "summary"], ["report"], ["logs"], ["gpu"], ["traces"]], ids=lambda a: "-".join(a))
def test_a_200_mb_one_line_file_finishes(argv: list[str], tmp_path: Path) -> None:
    """Today ``nccl summary`` never finishes: the record regex tries 128 host characters at every byte."""
    big = tmp_path / "one.log"
    with open(big, "wb") as f:
        f.write(b"node1:1:1 [0] NCCL INFO Init ")
        block = b"a" * (1 << 20)
        for _ in range(200):
            f.write(block)
    p = run(*argv, str(big), "--json", timeout=90)
    no_traceback(p)


@pytest.mark.real
def test_nul_padding_after_a_real_nccl_log_keeps_its_records(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_bytes(NCCL.encode() + b"\0" * (64 << 10))
    for argv in (["nccl", "summary"], ["report"]):
        p = run(*argv, str(log), "--json", timeout=60)
        no_traceback(p)
        assert b"2.18.3" in p.stdout


@pytest.mark.fuzz
def test_record_starts_is_the_record_regex() -> None:
    """The candidate scan of :func:`record_starts` finds exactly what ``RECORD.finditer`` finds."""
    import random

    from hangdbg.evidence.nccl.grammar import RECORD, record_starts

    rnd = random.Random(14)
    alphabet = ["a", ":", "1", " ", "[0]", " NCCL INFO ", " INFO ", "\0", "node1:12:13 [0] NCCL INFO x", "(", ":1:2 ",
                "h" * 130, "n:1:2 [3] 1.5 init.cc:12 NCCL WARN "]
    for _ in range(20000):
        t = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 25)))
        want = [(m.start(), m.end(), m.groups()) for m in RECORD.finditer(t)]
        assert [(m.start(), m.end(), m.groups()) for m in record_starts(t)] == want, t


# --- item 3: validated numbers -----------------------------------------------------------------
GARBLED = ("node1:100:100 [0] NCCL INFO NCCL version 2.18.3+cuda12.1\n"
           "node1:100:100 [0] NCCL INFO comm 0x55d0 rank 0 nranks 4294967296 cudaDev 0 busId 1000 - Init START\n"
           "node1:100:100 [0] NCCL INFO comm 0x55d0 rank 0 nranks 4294967296 cudaDev 0 busId 1000 - Init COMPLETE\n"
           "node1:100:100 [0] NCCL INFO AllReduce: opCount 5 sendbuff 0x1 recvbuff 0x2 count 10 datatype 7 op 0 "
           "root 0 comm 0x55d0 [nranks=4294967296] stream 0x3\n")


@pytest.mark.real
@pytest.mark.parametrize("argv", [["nccl", "summary"], ["report"]], ids=lambda a: "-".join(a))
def test_a_garbled_nranks_builds_no_set_of_4_billion_ranks(argv: list[str], tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(GARBLED)
    p = run(*argv, str(log), "--json")  # today: MemoryError under 2 GB (16 GB in a minute without a limit)
    no_traceback(p)
    assert b"4294967296" not in p.stdout.split(b'"evidence"')[0]


@pytest.mark.real
def test_a_garbled_flight_recorder_group_builds_no_huge_world(tmp_path: Path) -> None:
    dump = tmp_path / "nccl_trace_rank_0.json"
    dump.write_text(json.dumps({"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                                     "ranks": "[0, 4294967296]"}},
                                "entries": []}))
    p = run("fr", str(dump), "--json")
    no_traceback(p)
    p = run("report", str(tmp_path), "--json")
    no_traceback(p)


def test_rank_number_is_the_one_validation() -> None:
    from hangdbg.launch_env import env_int
    from hangdbg.rankset import MAX_RANKS, rank_number

    assert rank_number("3") == 3 and rank_number(b" 7 ") == 7 and rank_number(0) == 0
    assert rank_number(0, 1) is None and rank_number("4294967296") is None and rank_number(MAX_RANKS) is None
    assert rank_number("-1") is None and rank_number(True) is None and rank_number("1e9") is None
    assert rank_number("9" * 5000) is None  # no int() of a 5000-digit string
    assert env_int("8(x2)") == 8 and env_int("4294967296") is None


# --- nested JSON ------------------------------------------------------------------------------
def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


@pytest.mark.real
@pytest.mark.parametrize("name,text", [
    ("nccl_trace_rank_0.json", '{"version": "2.4", "entries": ' + _deep() + "}"),
    ("error.json", '{"message": {"message": "x", "extraInfo": ' + _deep() + '}}'),
    ("core-rank0.json", '{"tool": "hangdbg", "command": "core", "ranks": ' + _deep() + "}"),
], ids=lambda v: v if v.endswith(".json") else "deep")  # (the 200 KB text as an id: PYTEST_CURRENT_TEST too long to exec)
def test_deeply_nested_json_is_reported_too_deeply_nested(name: str, text: str, tmp_path: Path) -> None:
    (tmp_path / name).write_text(text)
    for argv in (["report", str(tmp_path)], ["fr", str(tmp_path / name)], ["logs", str(tmp_path / name)]):
        p = run(*argv)
        no_traceback(p)
    p = run("fr", str(tmp_path / name)) if name.startswith("nccl") else run("report", str(tmp_path))
    assert b"too deeply nested" in p.stdout + p.stderr


def test_load_json_turns_recursion_into_a_value_error() -> None:
    from hangdbg.text.jsondoc import load_json

    assert load_json(b'{"a": [1, "\\u00e9"]}') == {"a": [1, "é"]}
    with pytest.raises(ValueError, match="too deeply nested"):
        load_json(_deep())
    with pytest.raises(ValueError):
        load_json(b"{\xff")


# --- encodings at the boundary ----------------------------------------------------------------
@pytest.mark.real
def test_a_binary_hostfile_is_a_usage_error_naming_the_line(tmp_path: Path) -> None:
    hf = tmp_path / "hostfile"
    hf.write_bytes(b"node1 slots=8\nnode2 slots=8\n\xff\xfe\x00\x01junk\n")
    p = run("dump", "--hostfile", str(hf), "-o", str(tmp_path / "out"))  # today: UnicodeDecodeError
    no_traceback(p)
    assert p.returncode == 2
    assert f"{hf}:3".encode() in p.stderr and b"not text" in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.real
def test_a_fifo_as_hostfile_is_a_usage_error(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "hostfile")
    p = run("dump", "--hostfile", str(tmp_path / "hostfile"), "-o", str(tmp_path / "out"))
    no_traceback(p)
    assert p.returncode == 2 and b"not a regular file" in p.stderr


@pytest.mark.real
def test_non_utf8_scontrol_output_is_decoded_not_a_traceback(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "scontrol"
    fake.write_text("#!/bin/sh\nprintf 'slurm_load_jobs error: \\377\\376 Invalid job id \\351\\n' >&2\nexit 1\n")
    fake.chmod(0o755)
    env_path = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=env_path, NO_COLOR="1")
    p = subprocess.run([sys.executable, "-m", "hangdbg", "dump", "--jobid", "123", "-o", str(tmp_path / "out")],
                       capture_output=True, timeout=60, env=env, preexec_fn=_limit)
    no_traceback(p)  # today: UnicodeDecodeError
    assert p.returncode in (1, 2) and b"123" in p.stderr


# --- decompression cap ------------------------------------------------------------------------
def test_a_compressed_bomb_from_a_node_is_refused_after_the_cap() -> None:
    import base64
    import zlib

    from hangdbg.transport.wire import MARKER, MAX_MESSAGE, FrameDecoder, encode_message

    bomb = zlib.compressobj(9)
    body = bomb.compress(b'{"type": "rank", "name": "rank-0000", "text": "')
    body += b"".join(bomb.compress(b"a" * (1 << 20)) for _ in range(256))
    body += bomb.compress(b'"}') + bomb.flush()  # 256 MiB of JSON inflated from ~250 KB (a node sent 2 GB)
    assert len(body) < 4 << 20
    payload = base64.b64encode(body).decode("ascii")
    step = 4000
    parts = -(-len(payload) // step)
    dec = FrameDecoder()
    got = []
    for i in range(parts):
        got += dec.feed(f"{MARKER} node1 7 {i + 1}/{parts} {payload[i * step:(i + 1) * step]}")
    assert got == [("node1", {"type": "problem", "what": "message 7",
                              "reason": f"too large after decompression (more than {MAX_MESSAGE >> 20} MiB)"})]
    # an ordinary message still decodes
    lines = list(encode_message("node1", 8, {"type": "done", "status": "ok"}))
    assert [m for line in lines for m in dec.feed(line)] == [("node1", {"type": "done", "status": "ok"})]


def test_a_nested_message_from_a_node_is_garbled_not_a_traceback() -> None:
    import base64
    import zlib

    from hangdbg.transport.wire import MARKER, FrameDecoder

    payload = base64.b64encode(zlib.compress(_deep().encode())).decode("ascii")
    dec = FrameDecoder()
    assert dec.feed(f"{MARKER} node1 1 1/1 {payload}") == [] and dec.garbled == 1


def test_a_trace_file_line_past_the_cap_is_skipped_and_counted(tmp_path: Path) -> None:
    from hangdbg.evidence.traces.grammar import read_trace

    t = tmp_path / "trace-node1-0-100.txt"
    t.write_bytes(b"# tracer v1 host=node1 rank=0 pid=100 start=2024-01-01T00:00:00 argv=train.py\n"
                  + b"x" * (3 * textlines.MAX_LINE) + b"\n"
                  + b"MainThread train.py:7 | x = 1\n")
    tr = read_trace(str(t))
    assert tr.garbled >= 1


@pytest.mark.real
def test_a_saved_dump_file_past_the_cap_is_read_up_to_it_and_said(tmp_path: Path) -> None:
    """A saved py-spy file larger than 64 MiB (a runaway log saved as rank-0.txt) is read up to the
    cap, in bounded memory, and the command says it was cut instead of reading it whole."""
    from hangdbg.stacks.saved import MAX_DUMP_FILE

    good = (ROOT / "tests" / "fixtures" / "pyspy_few").glob("*.txt")
    first = next(iter(sorted(good)))
    f = tmp_path / "rank-0.txt"
    with f.open("wb") as fh:
        fh.write(first.read_bytes())
        line = b"x" * 1023 + b"\n"
        for _ in range(MAX_DUMP_FILE // len(line) + 64):
            fh.write(line)
    p = run("analyze", str(f), timeout=240)
    no_traceback(p)
    assert b"only the first 64 MiB were read" in p.stderr, p.stderr[-2000:]


def test_the_kernel_log_fallback_sends_the_tail_of_a_huge_file(tmp_path: Path) -> None:
    from hangdbg.collect.gather import _tail

    f = tmp_path / "kern.log"
    f.write_bytes(b"old line\n" * 1000 + b"NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\n")
    xid = "NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus."
    text = _tail(str(f), 100)
    assert text.endswith(xid + "\n") and len(text) <= 100
    assert set(text.splitlines()) == {"old line", xid}  # whole lines only
    assert _tail(str(f), 1 << 20).startswith("old line\n")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        _tail(str(tmp_path / "fifo"), 100)


XID = b"Nov 23 03:00:01 node7 kernel: NVRM: Xid (PCI:0000:07:00): 79, pid=123, GPU has fallen off the bus.\n"


@pytest.mark.real
@pytest.mark.parametrize("argv,data,expect", [
    (["gpu", "-"], XID, b"node7"),
    (["report", "-"], XID, b"fallen off the bus"),
    (["nccl", "summary", "-"], NCCL.encode(), b"node1"),
    (["analyze", "-"], (ROOT / "tests/fixtures/pyspy_few/model_forward.txt").read_bytes(), b"modeling_llama.py"),
], ids=lambda v: "-".join(v) if isinstance(v, list) else None)
def test_dash_reads_standard_input_and_leaves_no_temporary_file(argv: list[str], data: bytes, expect: bytes,
                                                                tmp_path: Path) -> None:
    """``-`` is the one way to read a pipe (readers open regular files only): standard input is
    kept in a private temporary file, read like any file, and removed at the end."""
    env_tmp = tmp_path / "tmp"
    env_tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", NO_COLOR="1", TMPDIR=str(env_tmp))
    p = subprocess.run([sys.executable, "-m", "hangdbg", *argv, "--json"], input=data, capture_output=True,
                       timeout=120, env=env, preexec_fn=_limit)
    no_traceback(p)
    assert p.returncode in (0, 3), p.stderr[-2000:]
    assert expect in p.stdout, p.stdout[-2000:]
    assert list(env_tmp.iterdir()) == []


@pytest.mark.real
def test_dash_twice_or_from_a_terminal_is_a_usage_error() -> None:
    p = run("logs", "-", "-")
    assert p.returncode == 2 and b"more than once" in p.stderr
    import pty

    leader, follower = pty.openpty()
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
        q = subprocess.run([sys.executable, "-m", "hangdbg", "gpu", "-"], stdin=follower, capture_output=True,
                           timeout=60, env=env)
    finally:
        os.close(leader)
        os.close(follower)
    assert q.returncode == 2 and b"terminal" in q.stderr, q.stderr


def test_read_capped_reads_small_large_and_growing_files(tmp_path):
    from hangdbg.text.lines import open_input, read_capped

    small = tmp_path / "small"
    small.write_bytes(b"x" * 100)
    with open_input(small) as f:
        assert read_capped(f, 1000) == b"x" * 100
    big = tmp_path / "big"
    big.write_bytes(b"y" * 5000)
    with open_input(big) as f:
        assert read_capped(f, 1000) == b"y" * 1001  # one more than the cap: "larger"
    with open_input(big) as f:
        big.write_bytes(b"z" * 3000)  # rewritten (shorter) after the open: read what is there
        assert read_capped(f, 10_000) == b"z" * 3000
    with open("/proc/self/status", "rb") as f:  # st_size 0: read on until the end
        assert b"Pid:" in read_capped(f, 1 << 20)


def test_a_quoted_paste_is_read_without_its_quotes_by_every_line_reader():
    import io

    from hangdbg.text.lines import iter_lines_from
    body = b"> [rank1]: RuntimeError: boom\n>\n> exitcode  : -7 (pid: 12)\n"
    assert [t for _, t in iter_lines_from(io.BytesIO(body))] == ["[rank1]: RuntimeError: boom", "",
                                                                 "exitcode  : -7 (pid: 12)"]
    # one quoted line among others is text, not a quote to peel; Python's prompt is no quote
    body = b"> one\nplain two\nplain three\n>>> import torch\n"
    assert [t for _, t in iter_lines_from(io.BytesIO(body))][:4] == ["> one", "plain two", "plain three", ">>> import torch"]


def test_a_paste_that_lost_its_newlines_is_read_as_records_again():
    import io

    from hangdbg.text.lines import iter_lines_from
    block = ("Root Cause (first observed failure): [0]:   time      : 2024-01-16_18:04:01   host      : n1   rank      : "
             "0 (local_rank: 0)   exitcode  : -7 (pid: 16609)   error_file: <N/A>   traceback : Signal 7 (SIGBUS) received "
             "by PID 16609 " + "=" * 60 + " srun: error: n1: task 0: Exited with exit code 1 " + "x" * 100)
    lines = [t for _, t in iter_lines_from(io.BytesIO(block.encode()))]
    assert "exitcode  : -7 (pid: 16609)" in lines and any(t.startswith("srun: error:") for t in lines)
    # a long line with fewer than three record starts is a line
    one = "RuntimeError: " + "y" * 500 + " time : 3"
    assert [t for _, t in iter_lines_from(io.BytesIO(one.encode()))] == [one]
