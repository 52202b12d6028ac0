"""``hangdbg agent``: the per-node collector that ``dump --jobid/--hosts`` runs on every node."""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from ..collect.agent import agent_host, run_agent
from ..collect.frames import encode_message
from .common import Command
from .dump_cmd import add_collect_arguments, collect_options


class AgentCommand(Command):
    help = "collect this node's ranks and print framed results (run by dump --jobid/--hosts)"
    description = (
        "Run the local collection on this node and write every result as HANGDBG1 frame lines "
        "on stdout (safe to interleave with other nodes' output). Exit status 0 when the "
        "node's ranks were dumped, 3 when it has none, 1 on error."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--jobid", help="keep only the ranks of this SLURM job on this node")
        p.add_argument("--pid", type=int, nargs="+", metavar="PID", help="ranks or launchers to dump")
        p.add_argument("--node-name", help="the name the coordinator knows this node by")
        p.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE", help="keep only ranks whose environment has KEY=VALUE (repeatable)")
        p.add_argument("-o", "--out", type=Path, metavar="DIR", help="also keep the raw dumps in DIR/<node>/raw (a shared directory)")
        add_collect_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        host = agent_host(args.node_name).replace(" ", "_")
        ids = itertools.count(1)

        def send(message: dict) -> None:
            lines = "\n".join(encode_message(host, next(ids), message)) + "\n"
            sys.stdout.write(lines)  # one write per message: whole lines even when interleaved
            sys.stdout.flush()

        out = args.out / host if args.out is not None else None
        status = run_agent(collect_options(args, out), send, args.jobid, args.pid, host, args.match_env)
        return {"ok": 0, "no-ranks": 3}.get(status, 1)
