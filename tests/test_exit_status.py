"""hangdbg.exit_status: what an exit status says (Python's -N, the shell's 128+N)."""

from __future__ import annotations

import pytest

from hangdbg.catalog.message import looks_like_error
from hangdbg.exit_status import describe, exit_code_in, signal_of


@pytest.mark.parametrize("code, name", [(-9, "SIGKILL"), (137, "SIGKILL"), (-11, "SIGSEGV"), (139, "SIGSEGV"),
                                        (-7, "SIGBUS"), (135, "SIGBUS"), (-6, "SIGABRT"), (143, "SIGTERM"),
                                        (1, ""), (0, ""), (128, ""), (255, ""), (2, "")])
def test_signal_of_reads_both_conventions(code, name):
    assert signal_of(code) == name


def test_describe_says_who_sends_the_signal():
    assert "OOM killer" in describe(-9) and "/dev/shm" in describe(-7)
    assert describe(1) == ""


@pytest.mark.parametrize("text, code", [
    ("['python', 'train.py'] exits with return code = -9", -9),
    ("error_file: <N/A> exitcode: -6", -6),
    ("srun: error: node3: task 5: Exited with exit code 137", 137),
    ("Process 12 exited with code 1", 1),
    ("mpirun noticed that process rank 0 with PID 42 on node n1 exited on signal 4 (Illegal instruction).", -4),
    ("the loss went down", None),
])
def test_exit_code_in(text, code):
    assert exit_code_in(text) == code


def test_a_zero_exit_status_is_not_an_error_line_and_a_signal_is():
    assert not looks_like_error("[ERROR] ['python', 'train.py'] exits with return code = 0")
    assert looks_like_error("['python', 'train.py'] exits with return code = -9")


def test_torchelastics_signal_message_reads_as_minus_the_signal():
    assert exit_code_in("Signal 7 (SIGBUS) received by PID 1234") == -7
