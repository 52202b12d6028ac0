"""IP addresses as logs write them (no I/O)."""

from __future__ import annotations

import ipaddress
import re
from typing import Callable

__all__ = ["ip_text", "loopback_in", "no_host_in"]


def ip_text(text: str) -> str:
    """``text`` as an IP address in Python's spelling (``10.0.0.5``, ``10.0.0.5<41234>`` as NCCL writes a
    peer, ``[fe80::1]``, ``fe80::1%ib0``), else "" (a host name, garbage)."""
    t = text.strip().strip("[]()").split("<", 1)[0].split("%", 1)[0].strip("[]")
    try:
        return str(ipaddress.ip_address(t))
    except ValueError:
        return ""


_ENDPOINT = re.compile(r"\[?((?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f:]{2,39})\]?(?::\d{1,5}|<\d{1,5}>)?")


def loopback_in(text: str) -> str:
    """The first loopback address (127.0.0.0/8, ::1) written in ``text`` as an address or an endpoint
    (``[127.0.1.1]:3210``, ``127.0.0.1<41234>``), else ""."""
    return _first(_ENDPOINT, text, lambda ip: ip.is_loopback)


def _first(rx: re.Pattern[str], text: str,
           wanted: Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address], bool]) -> str:
    """The first address ``rx`` (group 1) finds in ``text`` that is an IP address for which ``wanted(ip)`` holds, in
    Python's spelling, else ""."""
    for m in rx.finditer(text):
        try:
            ip = ipaddress.ip_address(m.group(1))
        except ValueError:
            continue
        if wanted(ip):
            return str(ip)
    return ""


_DOTTED = re.compile(r"(?<![\d.])((?:\d{1,3}\.){3}\d{1,3})(?![\d.])")


def no_host_in(text: str) -> str:
    """The first IPv4 address written in ``text`` (also inside ``::ffff:A.B.C.D``) that no host can have: multicast
    (224.0.0.0/4) or reserved (240.0.0.0/4, which holds netmasks such as 255.255.0.0 and the broadcast address
    255.255.255.255; RFC 1112, RFC 5735 via Python's ipaddress), else "". 0.0.0.0 is not one: it is a listening
    socket's "any"."""
    return _first(_DOTTED, text, lambda ip: ip.is_multicast or ip.is_reserved)  # 240.0.0.0/4 holds 255.255.255.255
