"""hangdbg.text.addresses: IP addresses as logs write them."""

from __future__ import annotations

import pytest

from hangdbg.text.addresses import ip_text


@pytest.mark.parametrize("text, ip", [("10.0.0.5", "10.0.0.5"), ("10.0.0.5<41234>", "10.0.0.5"),
                                      ("[fe80::1]", "fe80::1"), ("fe80::1%ib0", "fe80::1"), (" (10.1.2.3) ", "10.1.2.3"),
                                      ("node7", ""), ("10.0.0", ""), ("", "")])
def test_ip_text(text, ip):
    assert ip_text(text) == ip


def test_a_loopback_peer_is_found_in_an_endpoint():
    from hangdbg.text.addresses import loopback_in
    assert loopback_in("pair.cc:724] connect [127.0.1.1]:3210: Connection refused") == "127.0.1.1"
    assert loopback_in("socketStartConnect: Connect to 127.0.0.1<47321> failed") == "127.0.0.1"
    assert loopback_in("Connection refused 10.0.0.5<1234>") == ""
    assert loopback_in("at 12:30:45 std::terminate") == ""
