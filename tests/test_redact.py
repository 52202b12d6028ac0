"""Unit tests of hangdbg.redact: which names are secrets, py-spy --locals text, command lines."""

from __future__ import annotations

import pytest

from hangdbg.redact import MASK, mask_argv, redact_pyspy_text, scrub_pyspy_output, secret_name

DUMP = '''Process 77: python train.py --hf-token hf_FAKE1 --lr 0.1
Python v3.11.7 (/usr/bin/python3.11)

Thread 77 (idle): "MainThread"
    f (sec.py:8)
        Arguments:
            api_token: "sk-FAKE-arg"
            n: 3
        Locals:
            password: "hunter2-FAKE"
            keys: ["a", "b"]
            url: "https://bob:pw-FAKE@host/x"
            cfg: {"token": "sk-FAKE-dict", "lr": 0.1}
            tokenizer: "gpt2"
    <module> (sec.py:9)
'''


@pytest.mark.parametrize("name", ["api_token", "HF_TOKEN", "password", "db_passwd", "aws_secret_access_key",
                                  "access_key", "auth_header", "Authorization", "session_cookie", "csrf",
                                  "credentials", "credential", "private_key", "bearer", "--api-key",
                                  "--notify-webhook", "slack_webhook_url"])
def test_secret_names(name):
    assert secret_name(name)


@pytest.mark.parametrize("name", ["key", "keys", "monkey", "tokenizer", "tokens", "num_tokens", "author",
                                  "authors", "lr", "step", "rank"])
def test_names_that_are_no_secret(name):
    assert not secret_name(name)


def test_pyspy_locals_masked_names_kept():
    out = redact_pyspy_text(DUMP)
    assert "FAKE" not in out.split("Python v")[1]
    assert f'api_token: "{MASK}"' in out and f'password: "{MASK}"' in out
    assert 'keys: ["a", "b"]' in out and 'tokenizer: "gpt2"' in out and "n: 3" in out
    assert f"https://bob:{MASK}@host/x" in out
    assert f'{{"token": "{MASK}", "lr": 0.1}}' in out
    assert out.count("\n") == DUMP.count("\n")  # line for line: nothing added or lost


def test_text_without_locals_unchanged():
    plain = 'Process 1: python x.py\nPython v3.11\n\nThread 1 (idle): "MainThread"\n    f (x.py:1)\n'
    assert redact_pyspy_text(plain) == plain


def test_header_command_line_masked_or_dropped():
    assert "hf_FAKE1" not in scrub_pyspy_output(DUMP)
    assert "--lr 0.1" in scrub_pyspy_output(DUMP)
    dropped = scrub_pyspy_output(DUMP, cmdline=False)
    assert dropped.startswith("Process 77: \nPython v3.11.7") and "train.py" not in dropped
    kept = scrub_pyspy_output(DUMP, redact=False)
    assert kept == DUMP


def test_mask_argv():
    argv = ["python", "train.py", "--hf-token", "hf_X", "--api_key=ABC", "password=x", "--lr", "0.1",
            "--tokenizer", "gpt2", "--db", "postgres://u:pw@h/db", "/data/token=ok"]
    assert mask_argv(argv) == ["python", "train.py", "--hf-token", MASK, f"--api_key={MASK}", f"password={MASK}",
                               "--lr", "0.1", "--tokenizer", "gpt2", "--db", f"postgres://u:{MASK}@h/db",
                               "/data/token=ok"]


def test_a_webhook_url_on_the_command_line_is_masked():
    """``watch --notify-webhook URL``: the URL's path is the hook's secret; the run marker's argv
    (``outdir.claim`` masks it with :func:`mask_argv`) must not keep it."""
    url = "https://hooks.example.org/services/T0/B0/SECRETXYZ"
    assert mask_argv(["watch", "--notify-webhook", url, "-o", "d"]) == ["watch", "--notify-webhook", MASK, "-o", "d"]
    assert mask_argv([f"--notify-webhook={url}"]) == [f"--notify-webhook={MASK}"]
