"""IP addresses as logs write them (no I/O)."""

from __future__ import annotations

import ipaddress

__all__ = ["ip_text"]


def ip_text(text: str) -> str:
    """``text`` as an IP address in Python's spelling (``10.0.0.5``, ``10.0.0.5<41234>`` as NCCL writes a
    peer, ``[fe80::1]``, ``fe80::1%ib0``), else "" (a host name, garbage)."""
    t = text.strip().strip("[]()").split("<", 1)[0].split("%", 1)[0].strip("[]")
    try:
        return str(ipaddress.ip_address(t))
    except ValueError:
        return ""
