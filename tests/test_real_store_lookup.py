"""``lookup_keys`` against a real c10d TCPStore (hosted here) whose keys a job set through torch's
prefixed stores: the answer is read where the keys are held, and the prefix is reported."""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys

import pytest

from hangdbg.tools.store import lookup_keys

dist = pytest.importorskip("torch.distributed")

KEYS = [f"step2/done/{r}" for r in range(4)]


@pytest.fixture(scope="module")
def tcp_store():
    """A TCPStore server here, and a rank-0 process whose environment points at it (the lookup reads
    MASTER_ADDR/MASTER_PORT/RANK there, and runs its interpreter)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=30))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    try:
        yield master, proc.pid
    finally:
        proc.kill()
        proc.wait()


def _default_store(master, group: str = "0"):
    """What ``_get_default_store()`` is in torch 2.x: the group's prefix over ``default_pg``."""
    return dist.PrefixStore(f"{group}/", dist.PrefixStore("default_pg", master))


def test_keys_of_the_default_store_are_found_under_its_prefix(tcp_store):
    master, pid = tcp_store
    for r in (0, 1, 2):
        _default_store(master).set(KEYS[r], "1")
    got = lookup_keys(pid, KEYS, timeout=60)
    assert got.error is None and got.prefix == "default_pg/0//", got
    assert dict(got.keys) == {k: r != 3 for r, k in enumerate(KEYS)}


def test_a_users_prefix_is_found_by_listing_the_store(tcp_store):
    master, pid = tcp_store
    if not hasattr(master, "list_keys"):
        pytest.skip("this torch's stores cannot list their keys")
    keys = [f"epoch1/ready/{r}" for r in range(4)]
    for r in (0, 2, 3):
        dist.PrefixStore("mine", _default_store(master)).set(keys[r], "1")
    got = lookup_keys(pid, keys, timeout=60)
    assert got.prefix == "default_pg/0//mine/", got
    assert dict(got.keys) == {k: r != 1 for r, k in enumerate(keys)}


def test_keys_at_the_root_and_keys_nowhere(tcp_store):
    master, pid = tcp_store
    keys = [f"root/done/{r}" for r in range(3)]
    master.set(keys[0], "1")
    got = lookup_keys(pid, keys, timeout=60)
    assert got.prefix == "" and dict(got.keys) == {keys[0]: True, keys[1]: False, keys[2]: False}
    nowhere = [f"never/{r}" for r in range(3)]  # the waiter's own key held nowhere: the keys as given
    got = lookup_keys(pid, nowhere, timeout=60)
    assert got.prefix == "" and not any(dict(got.keys).values())
