"""Host lists: ``node[1-4,7]`` expressions (python-hostlist) and deepspeed/pdsh hostfiles.

Every host name that reaches a transport (``--hosts``, ``--hostfile``, ``-w``, a SLURM node list,
``collect``) is checked by :func:`check_host` first: a name starting with ``-`` would reach ssh or
pdsh as an option (``-oProxyCommand=...``).
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import hostlist

from ..errors import UsageError
from ..text.lines import open_input

MAX_HOSTFILE = 16 << 20
"""Bytes a hostfile may have (a million hosts fit)."""

__all__ = ["expand_hosts", "read_hostfile", "read_hostfile_slots", "check_host", "check_hosts"]

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
HOST_HELP = ("a host is a DNS name (letters, digits, '-', '_', dot-separated labels that neither start nor end "
             "with '-'), an IPv4 address, an IPv6 address (plain or in brackets), optionally as user@host")


def check_host(host: str) -> str:
    """``host`` when it is a host name ssh, pdsh and srun can only read as one, else an error.

    Accepted: RFC 1123 names (``_`` tolerated, a trailing dot too), IPv4 and IPv6 addresses
    (``::1`` or ``[::1]``), each optionally as ``user@host``.

    Raises:
        UsageError: naming the host: it starts with ``-`` (it would be read as an option), is
            empty or longer than 253 characters, or holds a character no host name has.
    """
    user, at, name = host.rpartition("@")
    ok = bool(name) and (not at or _USER.fullmatch(user) is not None)
    if ok:
        addr = name[1:-1] if name.startswith("[") and name.endswith("]") else name
        if ":" in addr or addr is not name:
            try:
                ipaddress.IPv6Address(addr)
            except ValueError:
                ok = False
        else:
            ok = len(name) <= 253 and _NAME.fullmatch(name) is not None
    if not ok:
        why = "it starts with '-' and would be read as an option" if host.startswith("-") else "not a host name or address"
        shown = host if len(host) <= 80 else host[:80] + "..."
        raise UsageError(f"bad host {shown!r}: {why}", help=HOST_HELP)
    return host


def check_hosts(hosts: list[str] | tuple[str, ...]) -> list[str]:
    """``hosts`` as a list, each checked with :func:`check_host` (the first bad one raises UsageError)."""
    return [check_host(h) for h in hosts]


def expand_hosts(expr: str) -> list[str]:
    """``node[1-4,7]`` -> ``['node1', 'node2', 'node3', 'node4', 'node7']`` (python-hostlist).

    Raises:
        UsageError: the expression is malformed, or a host in it is not a host name
            (:func:`check_host`: ``-oProxyCommand=...``, spaces, shell characters).
    """
    try:
        return check_hosts(hostlist.expand_hostlist(expr))
    except hostlist.BadHostlist as exc:
        raise UsageError(f"bad host list {expr!r}: {exc}", help=HOST_HELP) from None


def read_hostfile(path: str | Path) -> list[str]:
    """Hosts of a hostfile in the deepspeed/pdsh format: one ``host slots=N`` per line
    (:func:`read_hostfile_slots`, its slots left out).

    Raises:
        UsageError: see :func:`read_hostfile_slots`.
    """
    return list(read_hostfile_slots(path))


def read_hostfile_slots(path: str | Path) -> dict[str, int]:
    """Hosts of a hostfile in the deepspeed/pdsh format, one ``host slots=N`` per line, with
    their slots (1 when the line gives none), in file order; a host listed twice keeps its
    first line.

    Blank lines and ``#`` comments are skipped; a host may itself be a ``node[1-4]`` expression
    (each of its hosts gets the line's slots).

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
    hosts: dict[str, int] = {}
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
        slots = int(rest[-1][6:]) if rest else 1
        for h in expand_hosts(host):
            hosts.setdefault(h, slots)
    return hosts
