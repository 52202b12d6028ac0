"""Long lines never make a reader quadratic: one 200 KB line shaped to make an unbounded regex
backtrack (a NCCL record prefix followed by a run without a colon, an interface list of one
endless word, an ``nvidia-smi -q`` line padded with blanks) is read in about the time of reading
it. The guard is a generous subprocess timeout (a quadratic scan of these inputs takes minutes),
not a speed measurement (those are in ``bench/``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real  # the command line as a child process under a timeout: a hang guard, seconds each
RUN = 200_000
CASES = {
    "nccl-record-prefix": (["nccl", "summary"], "node1:1:1 [0] NCCL INFO Init\n" + "a" * RUN + "\n"),
    "nccl-interface-word": (["nccl", "summary"],
                            "node1:100:100 [0] NCCL INFO NET/Socket : Using " + "a" * RUN + "\n"),
    "nccl-plugin-blanks": (["nccl", "summary"],
                           "node1:100:100 [0] NCCL INFO NET/Plugin" + " " * RUN + "x\n"),
    "smi-padded": (["gpu"], "==============NVSMI LOG==============\n\nGPU 00000000:09:00.0\n"
                   "    Product Name : X\n    Fan : 1" + " " * RUN + "\n"),
    "watchdog-prefix": (["logs"], "[rank0]:" * (RUN // 8) + "\n"),
    # fuzzer seeds 14:1199, 14:1796, 14:1871: a 5,000-digit device number in a NCCL record header
    "nccl-huge-device": (["nccl", "summary"], "node1:1:1 [" + "9" * 5000 + "] NCCL INFO Init\n"),
    "nccl-huge-chain-code": (["nccl", "summary"], "node1:1:1 [0] NCCL INFO init.cc:100 -> " + "9" * 5000 + "\n"),
    # fuzzer seed 14:226: an Xid line whose message runs on (lazy name/message groups before \s*$)
    "xid-long-message": (["gpu"], "[Mon Jan  5 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 31, pid=7, name=python, "
                         + "MMU Fault" + " " * RUN + "tail\n"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_long_line_is_read_in_linear_time(name: str, tmp_path: Path) -> None:
    argv, text = CASES[name]
    log = tmp_path / f"{name}.log"
    log.write_text(text)
    p = subprocess.run([sys.executable, "-m", "hangdbg", *argv, str(log), "--json"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode in (0, 1, 3), p.stderr[-2000:]
    assert "Traceback" not in p.stderr
