"""hangdbg.text.addresses: IP addresses as logs write them."""

from __future__ import annotations

import pytest

from hangdbg.text.addresses import ip_text


@pytest.mark.parametrize("text, ip", [("10.0.0.5", "10.0.0.5"), ("10.0.0.5<41234>", "10.0.0.5"),
                                      ("[fe80::1]", "fe80::1"), ("fe80::1%ib0", "fe80::1"), (" (10.1.2.3) ", "10.1.2.3"),
                                      ("node7", ""), ("10.0.0", ""), ("", "")])
def test_ip_text(text, ip):
    assert ip_text(text) == ip
