"""Minimal reproducers of what the mutation fuzzer (``tests/test_fuzz_mutations.py``) found, each
named by the seed that found it (``python tests/fuzz_mutate.py --replay SEED`` replays it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from hangdbg.stacks.pyspy_text import parse_pyspy_dump
from hangdbg.stacks.saved import load_dumps

HUGE = "9" * 5000  # beyond Python's 4300-digit int() limit: int() raises ValueError


def test_pyspy_numbers_beyond_the_int_digit_limit_are_garbled_not_a_traceback() -> None:
    # seeds 14:328, 14:1413 (int(line) of a frame, int(pid) of a Process line raised ValueError)
    text = (f"Process {HUGE}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            f'Thread 11 (idle): "MainThread"\n    wait (train.py:{HUGE})\n    <module> (train.py:7)\n'
            f'Thread {HUGE} (idle): "Garbled"\n    run (w.py:3)\n')
    procs, _garbled = parse_pyspy_dump(text)
    frames = [(f.function, f.line) for p in procs for t in p.threads for f in t.frames]
    assert ("<module>", 7) in frames and ("wait", None) in frames  # the frame kept, not its garbled line
    assert all(t.thread_id < 1 << 64 for p in procs for t in p.threads)
    assert all(p.pid is None for p in procs)


def test_a_huge_world_size_in_a_dump_header_is_not_believed(tmp_path: Path) -> None:
    # seed 14:1188: world_size=4294967296 in a '# hangdbg' header made analyze build a set of 4e9 ranks
    dump = tmp_path / "rank-3.txt"
    dump.write_text(f"# hangdbg rank=3 pid=17531 host=vm local_rank=3 world_size=4294967296 local_world_size={HUGE}\n"
                    'Process 17531: python train.py\nPython v3.11.7\n\nThread 17531 (idle): "MainThread"\n'
                    "    poll (train.py:235)\n")
    dumps, _stats = load_dumps([tmp_path])
    assert [d.rank for d in dumps] == [3]
    assert dumps[0].world_size is None and dumps[0].local_world_size is None


def test_is_launcher_of_a_megabyte_command_line_is_bounded() -> None:
    # seed 14:1057: a 1 MB `Process N: cmdline` line ran shlex.split for minutes (quadratic)
    code = "from hangdbg.launchers import is_launcher; print(is_launcher('torchrun x.py ' + '[' * 4_000_000))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert out.stdout.strip() == "True", out.stderr


def test_nccl_record_numbers_beyond_the_int_digit_limit_are_skipped_lines(tmp_path: Path) -> None:
    # seed 14:1403: int() of a 5000-digit pid or device in a record header raised ValueError
    import io

    from rich.console import Console

    from hangdbg.cli.main import main

    coll = "NCCL INFO AllReduce: opCount {op} sendbuff 0x7f recvbuff 0x7f count {count} datatype 7 op 0 root 0 comm 0x55 " \
           "[nranks=4] stream 0x56"
    log = tmp_path / "nccl.log"
    log.write_text("\n".join([
        f"node-00:{HUGE}:41163 [3] NCCL INFO cudaDriverVersion 12020",
        "node-00:41051:41163 [3] NCCL INFO cudaDriverVersion 12020",
        "node-00:41051:41163 [3] " + coll.format(op=1, count=HUGE),
        f"node-00:41051:{HUGE} [{HUGE}] " + coll.format(op=2, count=4),
        "node-00:41051:41163 [3] " + coll.format(op=3, count=4),
    ]) + "\n")
    out = io.StringIO()
    code = main(["nccl", "summary", str(log), "--json"], out=Console(file=out, width=200), err=Console(file=out, width=200))
    assert code in (0, 3), out.getvalue()[-2000:]
    assert "41051" in out.getvalue()


def test_report_of_a_folder_with_a_non_utf8_name_writes_its_html(tmp_path: Path) -> None:
    # seed 14:7 and others: a folder named b"in\xff" (os.fsdecode: "in\udcff") made report -o OUT raise
    # UnicodeEncodeError writing report.html: the path is shown in the report
    import io
    import shutil

    from rich.console import Console

    from hangdbg.cli.main import main

    src = Path(os.fsdecode(bytes(tmp_path) + b"/in\xff"))
    src.mkdir()
    shutil.copy(FIXTURES / "pyspy" / "torch_rank0.txt", src / "rank-0.txt")
    out = io.StringIO()
    code = main(["report", str(src), "-o", str(tmp_path / "out")], out=Console(file=out), err=Console(file=out))
    assert code in (0, 3) and (tmp_path / "out" / "report.html").is_file()


def test_launcher_prefix_ranks_beyond_the_int_digit_limit_are_no_rank() -> None:
    # seed 14:112 (once tests/fixtures/core_json shifted the seed files): an mpirun --tag-output prefix
    # [1,999...]<stdout>: in an NCCL log made strip_prefix's int() raise ValueError
    from hangdbg.text.lines import strip_prefix

    for line in (f"[1,{HUGE}]<stdout>: node1:1:1 [0] NCCL INFO x", f"[rank{HUGE}]: x", f"[default{HUGE}]: x"):
        p = strip_prefix(line)
        assert (p.rank, p.local_rank) == (None, None) and not p.text.startswith("[")
    assert strip_prefix("[1,3]<stdout>: x").rank == 3 and strip_prefix("[default2]: x").local_rank == 2


def test_a_rank_waited_for_but_not_dumped_with_no_world_size_is_named_not_a_traceback(tmp_path: Path) -> None:
    # seed 14:245: the header's world_size garbled, rank 3 waits in recv from rank 2, whose stack is not given:
    # the wait-for graph's root 2 had no wait state and suspects.py raised KeyError
    from hangdbg.evidence.read import read_evidence
    src = (FIXTURES / "topology" / "pipeline" / "locals" / "rank-0003.txt").read_text()
    (tmp_path / "rank-0003.txt").write_text(src.replace("world_size=4 local_world_size=4", "local_world_size=4", 1))
    verdict = read_evidence([str(tmp_path)])
    found = [f for f in verdict.findings if f.kind.value == "missing"]
    assert found and found[0].ranks == (2,) and found[0].severity.value == "warning"


def test_a_rank_prefix_of_thousands_of_digits_in_a_torch_log_is_skipped(tmp_path: Path) -> None:
    # seed 14:147: [rank<5000 digits>]: in a torchrun log: int() of it raised ValueError in the torch-log reader
    from hangdbg.evidence.torch_log.reader import READER
    p = tmp_path / "stderr.log"
    p.write_text(f"[rank{HUGE}]: Traceback (most recent call last):\n[rank1]: RuntimeError: CUDA error: out of memory\n")
    rep = READER.read([str(p)])
    assert rep is not None


def test_a_torch_log_rank_tag_beyond_the_int_digit_limit_is_no_rank(tmp_path: Path) -> None:
    # seed 14:112 (on a clean checkout): a '[Rank <5000 digits>]' tag made the torch-log reader's int() raise
    from hangdbg.evidence.torch_log.reader import READER as TORCH_LOG

    log = tmp_path / "train.log"
    log.write_text(f"[Rank {HUGE}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
                   "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600006 milliseconds before timing out.\n")
    rep = TORCH_LOG.read([str(log)])
    assert not rep.errors and all(r < 1 << 31 for f in rep.findings for r in f.ranks)


def test_a_long_blank_run_inside_a_line_is_read_in_linear_time(tmp_path: Path) -> None:
    # seed 14:488: 200,000 tabs after "Using network IB" took `nccl summary` 31 s (`.+?\s*$` retries
    # the blank run from each of its characters); 400,000 would take 8 minutes, linear reads it at once
    path = tmp_path / "rank0.log"
    path.write_text("node-01:41102:41214 [2] NCCL INFO Using network IB" + "\t" * 400_000 + "x\n")
    for argv in (["nccl", "summary", str(path)], ["report", str(path)]):
        res = subprocess.run([sys.executable, "-m", "hangdbg", *argv, "--json"], capture_output=True, timeout=120,
                             cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert res.returncode in (0, 1, 3) and b"Traceback" not in res.stderr, res.stderr[-2000:]


@pytest.mark.parametrize("module,name,head", [
    ("hangdbg.stacks.native_text", "_FH_FATAL", "Fatal Python error: Segmentation fault"),
    ("hangdbg.stacks.native_text", "_PY_FILE", 'File "train.py", line 7, in step'),
    ("hangdbg.evidence.gpu.grammar", "_KV", "    Product Name : H100"),
])
def test_the_other_blank_run_patterns_are_linear_too(module: str, name: str, head: str) -> None:
    # the same `(.*?)\s*$` shape, found by reading the grammars after seed 14:488; a child process
    # with a deadline, since the quadratic form would take minutes
    code = (f"import {module} as m; line = {head!r} + '\\t' * 400_000 + 'x'; "
            f"print(m.{name}.match(line).groups()[-1][:40])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr[-2000:]  # matched (a None match would raise), within the deadline
