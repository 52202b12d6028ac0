"""``hangdbg check-node``: a node's part of ``hangdbg check`` (internal; run by the coordinator)."""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import threading

from ..tools.children import stop_on_stdin_eof
from ..collect.agent import agent_host
from ..check.node import CheckJob, NodeCheckOptions, parse_layout, run_node
from ..transport.wire import encode_message
from ..errors import UsageError
from ..tools.subproc import LOG
from .agent_cmd import _FrameHandler
from .common import Command


class CheckNodeCommand(Command):
    description = (
        "Start this node's ranks of a `hangdbg check` trial (its entry of --layout) and write their "
        "results as HANGDBG1 frame lines on stdout. Exit status 0 when every rank passed, 3 when one failed."
    )
    verbose_to_stderr = False

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--node-name", help="this node's name in --layout (default: SLURMD_NODENAME or the host name)")
        p.add_argument("--layout", action="append", required=True, metavar="HOST=SLOTS", help="every node of the trial in rank order")
        p.add_argument("--master-addr", required=True)
        p.add_argument("--master-port", type=int, required=True)
        p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
        p.add_argument("--init-timeout", type=float, default=120.0)
        p.add_argument("--timeout", type=float, default=30.0)
        p.add_argument("--size", type=int, default=64 << 20)
        p.add_argument("--iters", type=int, default=5)
        p.add_argument("--alloc-bytes", type=int, default=64 << 20)
        p.add_argument("--no-health", dest="health", action="store_false")
        p.add_argument("--ifname", help="GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME for the ranks (auto: the route to the rendezvous)")

    def run(self, args: argparse.Namespace) -> int:
        stop_on_stdin_eof()  # over ssh/pdsh: the coordinator gone, the node stops its ranks
        try:
            layout = parse_layout(args.layout)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        host = agent_host(args.node_name)
        job = CheckJob(args.backend, args.init_timeout, args.timeout, args.size, args.iters, args.alloc_bytes, args.health)
        opts = NodeCheckOptions(host, layout, args.master_addr, args.master_port, job, args.ifname)
        ids = itertools.count(1)
        lock = threading.Lock()

        def send(message: dict) -> None:
            with lock:
                sys.stdout.write("\n".join(encode_message(host, next(ids), message)) + "\n")
                sys.stdout.flush()

        if getattr(args, "verbose", False):
            LOG.addHandler(_FrameHandler(send))
            LOG.setLevel(logging.INFO)
        try:
            status = run_node(opts, send)
        except ValueError as exc:
            send({"type": "done", "status": "error", "error": str(exc)})
            return 1
        send({"type": "done", "status": status})
        return 0 if status == "ok" else 3
