"""Host lists: ``node[1-4,7]`` expressions (python-hostlist) and deepspeed/pdsh hostfiles."""

from __future__ import annotations

from pathlib import Path

import hostlist

from ..errors import UsageError
from ..parse.textlines import open_input

MAX_HOSTFILE = 16 << 20
"""Bytes a hostfile may have (a million hosts fit)."""

__all__ = ["expand_hosts", "read_hostfile"]


def expand_hosts(expr: str) -> list[str]:
    """``node[1-4,7]`` -> ``['node1', 'node2', 'node3', 'node4', 'node7']`` (python-hostlist).

    Raises:
        UsageError: the expression is malformed.
    """
    try:
        return hostlist.expand_hostlist(expr)
    except hostlist.BadHostlist as exc:
        raise UsageError(f"bad host list {expr!r}: {exc}") from None


def read_hostfile(path: str | Path) -> list[str]:
    """Hosts of a hostfile in the deepspeed/pdsh format: one ``host slots=N`` per line.

    Blank lines and ``#`` comments are skipped; a host may itself be a ``node[1-4]`` expression.

    Raises:
        UsageError: the file cannot be read, is not a regular file, is bigger than 16 MiB, or a
            line is malformed or not text (a binary file: the first such line is named).
    """
    try:
        with open_input(str(path)) as f:
            data = f.read(MAX_HOSTFILE + 1)
    except OSError as exc:
        raise UsageError(f"cannot read hostfile {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_HOSTFILE:
        raise UsageError(f"hostfile {path} is larger than {MAX_HOSTFILE >> 20} MiB: not a hostfile")
    hosts: list[str] = []
    for n, rawb in enumerate(data.splitlines(), 1):
        try:
            raw = rawb.decode("utf-8")
        except UnicodeDecodeError:
            raw = None
        if raw is None or any(not c.isprintable() and c != "\t" for c in raw):
            raise UsageError(f"{path}:{n}: not text (a binary file?): {rawb[:40]!r}")
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        host, *rest = line.split()
        if any(not r.startswith("slots=") or not r[6:].isdigit() for r in rest):
            raise UsageError(f"{path}:{n}: expected `host slots=N`, got {raw.strip()!r}")
        hosts.extend(expand_hosts(host))
    return list(dict.fromkeys(hosts))
