"""Issue 14, item 1: ``collect`` (and a remote ``dump``) write only under ``-o``: a line on a
node's output shaped as a hangdbg frame is taken only for the hosts of this run (and, when the
transport says whose stream it is, only for that host), and every path resolves under ``-o``."""

from __future__ import annotations

import base64
import os
import stat

from hangdbg.collect.fanout import FileSink, fan_out
from hangdbg.outdir import OutDir
from hangdbg.transport.wire import FrameDecoder, encode_message
from hangdbg.transport.runners import FakeRunner, SshRunner


def _file(host: str, name: str, data: bytes = b"pwned\n") -> dict:
    return {"type": "file", "host": host, "name": name, "offset": 0, "data": base64.b64encode(data).decode(),
            "last": True, "source": "x", "size": len(data), "skipped_bytes": 0}


def _hostile(tmp_path) -> list[str]:
    """What a login banner or a user program could print: frames for hosts not asked for."""
    msgs = [
        ("..", _file("..", "victim.txt")),
        ("..", {"type": "rank", "host": "..", "name": "victim.txt", "text": "pwned"}),
        ("../x", _file("../x", "victim.txt")),
        (str(tmp_path / "abs"), _file(str(tmp_path / "abs"), "victim.txt")),
        ("node2", _file("node2", "planted.txt")),
        ("node2", {"type": "done", "host": "node2", "status": "ok", "processes": []}),
        # the asked host, with names that try to leave its directory
        ("node1", _file("node1", "../../victim.txt")),
        ("node1", _file("node1", "/../../victim.txt")),
        ("node1", {"type": "rank", "host": "node1", "name": "..", "text": "pwned"}),
        ("node1", {"type": "rank", "host": "node1", "name": "../../victim.txt", "text": "pwned"}),
        ("node1", _file("node1", "logs/ok.log", b"fine\n")),
        ("node1", {"type": "done", "host": "node1", "status": "ok", "processes": [], "files": ["logs/ok.log"]}),
    ]
    return [line for i, (h, m) in enumerate(msgs) for line in encode_message(h, i + 1, m)]


def _listing(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files}


def _check_confined(tmp_path, out, before: set[str]) -> None:
    after = _listing(tmp_path)
    outside = {p for p in after - before if not (p == "out" or p.startswith("out" + os.sep))}
    assert outside == set(), outside
    inside = _listing(out)
    assert not any("victim" in p and not p.startswith("node1") and not p.startswith("raw") for p in inside), inside
    assert not (out / "node2").exists() and not (out / "nodes" / "node2.json").exists()
    assert (out / "node1" / "logs" / "ok.log").read_text() == "fine\n"


def test_decoder_takes_only_the_hosts_of_the_run():
    dec = FrameDecoder(hosts=frozenset({"node1", "user@node3"}))
    assert dec.feed(next(encode_message("..", 1, {"type": "hello"}))) == [] and dec.foreign == 1
    assert dec.feed(next(encode_message("node2", 1, {"type": "hello"}))) == [] and dec.foreign == 2
    assert dec.feed(next(encode_message("node1", 1, {"type": "hello"})), "node2") == [] and dec.foreign == 3
    assert dec.feed(next(encode_message("node1", 2, {"type": "hello"})), "node1") == [("node1", {"type": "hello"})]
    assert dec.feed(next(encode_message("user@node3", 2, {"type": "hello"})), "node3")[0][0] == "user@node3"
    assert FrameDecoder().feed(next(encode_message("any", 1, {"type": "hello"}))) != []  # no host list: as before


def test_fan_out_writes_nothing_outside_out(tmp_path):
    (tmp_path / "victim.txt").write_text("precious\n")
    out = tmp_path / "out"
    before = _listing(tmp_path)
    result = fan_out(FakeRunner({"all": _hostile(tmp_path)}), ["node1"], ["agent"], OutDir(out), timeout=10)
    _check_confined(tmp_path, out, before)
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
    assert [n.host for n in result.nodes] == ["node1"] and result.garbled_lines >= 6


def test_file_sink_refuses_a_symlink_out_of_the_dir(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "node1").symlink_to(elsewhere)
    (out / "node2").mkdir()
    (out / "node2" / "f.txt").symlink_to(tmp_path / "victim.txt")
    sink = FileSink(OutDir(out))
    sink.write("node1", _file("node1", "x.txt"))
    sink.write("node2", _file("node2", "f.txt"))
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "victim.txt").exists()
    assert sink.bad == 2


def test_through_a_real_transport_process(tmp_path, monkeypatch):
    """A fake ``ssh`` whose node1 prints hostile frames: the real SshRunner reads its stream."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    lines = tmp_path / "lines.txt"
    lines.write_text("\n".join(["Welcome to node1", *_hostile(tmp_path),
                                *encode_message("node2", 99, _file("node2", "from-node1-stream.txt"))]) + "\n")
    ssh = bindir / "ssh"
    ssh.write_text(f"#!/bin/sh\ncat {lines}\n")
    ssh.chmod(ssh.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    (tmp_path / "victim.txt").write_text("precious\n")
    out = tmp_path / "out"
    before = _listing(tmp_path)
    result = fan_out(SshRunner(["node1"]), ["node1"], ["agent"], OutDir(out), timeout=30)
    _check_confined(tmp_path, out, before)
    assert not list(out.rglob("from-node1-stream.txt"))
    assert [(n.host, n.status) for n in result.nodes] == [("node1", "ok")]
