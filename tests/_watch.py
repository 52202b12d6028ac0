"""Shared by the real ``hangdbg watch`` tests (``test_real_watch.py``, ``test_real_watch_slurm.py``):
a watcher process next to a job, its end, and waiting for a job's log line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import ROOT


def watcher(*args: object, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m hangdbg watch ARGS`` in the background (``env``: e.g. the test cluster's)."""
    env = dict(env or os.environ, NO_COLOR="1", COLUMNS="160", PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "hangdbg", "watch", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p: subprocess.Popen, timeout: float, what: str = "the watcher",
           job_output: bool = False) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of ``what`` (a watcher, ``run``); one still running after
    ``timeout`` seconds, or one that printed a traceback, fails the test. ``job_output``: its stderr
    carries the job's own output too (``run``), whose tracebacks (torchrun's on its SIGTERM) are the
    job's: only a traceback through hangdbg's own packages fails it then."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"{what} did not finish within {timeout:g} s:\n{err[-3000:]}")
    if job_output:
        assert not any(f"hangdbg/{d}/" in err for d in ("cli", "api", "watch", "collect")), err[-3000:]
    else:
        assert "Traceback" not in err, err[-3000:]
    return p.returncode, out, err


def wait_for_line(path: Path, text: str, timeout: float = 180.0) -> None:
    """Wait until the file ``path`` holds ``text`` (a job's log reaching a step)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    pytest.fail(f"{text!r} never appeared in {path}:\n{path.read_text(errors='replace')[-2000:] if path.exists() else ''}")


class WebhookSink:
    """A real HTTP server on 127.0.0.1 (a thread) that keeps each POST's Content-Type and body and
    answers ``status`` (200 unless changed): the receiver of ``--notify-webhook``."""

    def __init__(self) -> None:
        self.got: list[tuple[str, bytes]] = []
        self.status = 200
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.got.append((self.headers.get("Content-Type", ""), body))
                self.send_response(sink.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def webhook_sink() -> Iterator[WebhookSink]:
    """A :class:`WebhookSink`, closed on exit."""
    sink = WebhookSink()
    try:
        yield sink
    finally:
        sink.close()
