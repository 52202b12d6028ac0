"""``hangdbg agent``: the per-node collector that ``dump --jobid/--hosts`` runs on every node."""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import threading
from pathlib import Path

from ..collect.agent import agent_host, run_agent
from ..collect.fanout import safe_name
from ..transport.wire import encode_message
from ..api._collect import read_core
from ..collect.gather import GatherOptions, gather
from ..outdir import OutDir
from ..tools.children import stop_on_stdin_eof, stop_run
from ..tools.subproc import LOG
from .common import Command
from .dump_cmd import add_collect_arguments, dump_plan


class _FrameHandler(logging.Handler):
    """Log records (the external commands run on this node) as ``log`` frames for the coordinator."""

    def __init__(self, send) -> None:
        super().__init__(logging.INFO)
        self.send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.send({"type": "log", "text": record.getMessage()})
        except Exception:  # logging must never break the agent
            self.handleError(record)


class AgentCommand(Command):
    description = (
        "Run the local collection on this node and write every result as HANGDBG1 frame lines "
        "on stdout (safe to interleave with other nodes' output). Exit status 0 when the "
        "node's ranks were dumped, 3 when it has none, 1 on error."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--jobid", help="keep only the ranks of this SLURM job on this node")
        p.add_argument("-p", "--pid", type=int, nargs="+", action="extend", metavar="PID", help="ranks or launchers to dump")
        p.add_argument("--ray", metavar="ADDRESS", help="dump this node's ranks of the Ray cluster at ADDRESS")
        p.add_argument("--node-name", help="the name the coordinator knows this node by")
        p.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE", help="keep only ranks whose environment has KEY=VALUE (repeatable)")
        p.add_argument("-o", "--out", type=Path, metavar="DIR", help="write the raw dumps into DIR/<node>/raw as well (a shared directory)")
        p.add_argument("--keep-raw", type=Path, metavar="DIR", help="write the raw py-spy outputs into DIR/<node>/ as they arrive (what `dump` passes: OUT/raw)")
        p.add_argument("--stop-run", nargs="+", metavar="TOKEN", help="stop this user's processes of the remote runs "
                       "TOKEN (HANGDBG_RUN in their environment) and exit: the coordinator's remote kill")
        p.add_argument("--fetch-raw", dest="send_raw", action="store_true", help="also send every raw py-spy output (rank messages), not only the equivalence classes")
        add_collect_arguments(p)
        add_gather_arguments(p)

    verbose_to_stderr = False  # with -v the agent sends its log lines to the coordinator as frames

    def run(self, args: argparse.Namespace) -> int:
        if args.stop_run:
            stop_run(args.stop_run)
            return 0
        stop_on_stdin_eof()  # over ssh/pdsh: the coordinator gone, the agent stops (no new py-spy)
        host = agent_host(args.node_name).replace(" ", "_")
        ids = itertools.count(1)
        lock = threading.Lock()

        def send(message: dict) -> None:
            with lock:  # py-spy results arrive from worker threads
                lines = "\n".join(encode_message(host, next(ids), message)) + "\n"
                sys.stdout.write(lines)  # one write per message: whole lines even when interleaved
                sys.stdout.flush()

        if getattr(args, "verbose", False):
            LOG.addHandler(_FrameHandler(send))
            LOG.setLevel(logging.INFO)

        gopts = gather_options(args)
        if gopts:  # hangdbg collect: evidence from local disks instead of stacks
            send(gather(gopts, host, send, read_core))
            return 0
        plan = dump_plan(args)
        out = OutDir(args.out / host) if args.out is not None else None
        keep = OutDir(args.keep_raw / safe_name(host)) if args.keep_raw is not None else None
        status = run_agent(plan.collect_options(out), send, plan.target.jobid, list(plan.target.pids) or None, host,
                           list(plan.target.match_env), plan.adapt, keep, args.send_raw, ray=plan.target.ray)
        return {"ok": 0, "no-ranks": 3}.get(status, 1)


def add_gather_arguments(p: argparse.ArgumentParser) -> None:
    """The evidence options ``hangdbg collect`` passes on to the agent (and offers itself)."""
    g = p.add_argument_group("evidence on the nodes' local disks ({host} in a glob is the node's name)")
    g.add_argument("--nccl-logs", action="append", default=[], metavar="GLOB", help="NCCL_DEBUG_FILE logs, e.g. '/tmp/nccl.{host}.*': split per rank on the node")
    g.add_argument("--cores", action="append", default=[], metavar="GLOB", help="core files: read on the node, only backtraces are sent")
    g.add_argument("--traces", action="append", default=[], metavar="GLOB", help="tracer files (trace-HOST-RANK-PID.txt)")
    g.add_argument("--logs", action="append", default=[], metavar="GLOB", help="other files sent as they are (torchrun logs, flight-recorder dumps)")
    g.add_argument("--dmesg", action="store_true", help="the kernel log (GPU Xid errors)")
    g.add_argument("--exe", metavar="PYTHON", help="the Python executable of the core files (default: found from each core)")
    g.add_argument("--max-bytes", type=int, default=256 << 20, metavar="N", help="send at most the last N bytes of a file (default 256 MiB)")
    g.add_argument("--all-users", action="store_true",
                   help="also take files of other users (by default only your own regular files are taken; links are never followed; what is skipped is reported)")


def gather_options(args: argparse.Namespace) -> GatherOptions:
    """The evidence options (false when none was given)."""
    return GatherOptions(tuple(args.nccl_logs), tuple(args.cores), tuple(args.traces), tuple(args.logs),
                         args.dmesg, args.max_bytes, args.exe, bool(getattr(args, "all_users", False)))

