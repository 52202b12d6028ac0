"""``hangdbg collect --jobid ID | --hosts EXPR ... -o DIR``: post-mortem evidence from every node.

Runs the agent on every node through the same fan-out as ``dump`` (one srun, pdsh, or an ssh
pool); each node reads its local disks (NCCL logs split per rank, core files turned into
backtraces, the kernel log, tracer files, other logs) and sends back the small results, written
to ``DIR/<host>/`` as they arrive. ``--report`` then prints ``hangdbg report DIR``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ..collect.fanout import NodeResult, agent_argv
from ..errors import HangdbgError, UsageError
from ..report.jsonout import document_header
from .agent_cmd import add_gather_arguments, gather_options
from .common import EXIT_FOUND, EXIT_OK, Command, out_dir, print_json, write_json
from .remote import FAILED_STATUSES, add_remote_arguments, fan_out_with_progress, remote_runner, wants_remote
from .report_cmd import ReportCommand



def _agent_args(args: argparse.Namespace, with_host: bool) -> list[str]:
    out: list[str] = []
    for flag, values in (("--nccl-logs", args.nccl_logs), ("--cores", args.cores), ("--traces", args.traces), ("--logs", args.logs)):
        for v in values:
            out += [flag, v]
    if args.dmesg:
        out.append("--dmesg")
    if args.exe:
        out += ["--exe", args.exe]
    out += ["--max-bytes", str(args.max_bytes)]
    if with_host:
        out += ["--node-name", "{host}"]
    return out


class CollectCommand(Command):
    description = (
        "Run the agent on every node of a SLURM job (--jobid) or a host list (--hosts/--hostfile): "
        "NCCL logs are split per rank on the node, core files are turned into backtraces where they "
        "lie (only the backtraces cross the network), kernel logs and tracer files are sent as they "
        "are; results land in DIR/<host>/. Then run `hangdbg report DIR` (or pass --report). "
        "Exit status 3 when a node could not be read."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        add_remote_arguments(p)
        add_gather_arguments(p)
        p.add_argument("-o", "--out", metavar="DIR", type=Path, help="where the evidence goes (default ./hangdbg-collect-DATE)")
        p.add_argument("--report", action="store_true", help="print the report of DIR once collected")
        p.add_argument("--html", metavar="FILE", type=Path, help="with --report: also write the HTML report")
        p.add_argument("--json", action="store_true", help="print one JSON document instead of the table")

    def run(self, args: argparse.Namespace) -> int:
        if not wants_remote(args):
            raise UsageError("collect needs --jobid, --hosts or --hostfile (on this node alone, point `hangdbg report` at the files)")
        if gather_options(args) is None:
            raise UsageError("nothing to collect: give --nccl-logs, --cores, --traces, --logs and/or --dmesg")
        if args.match_env:
            raise UsageError("--match-env is for dump (it selects ranks); collect reads files")
        runner, hosts, _whole = remote_runner(args)
        out = out_dir(args, "hangdbg-collect")
        argv = agent_argv(args.remote_python, _agent_args(args, with_host=not args.jobid))
        timeout = args.node_timeout or 600.0
        result = fan_out_with_progress(self, runner, hosts, argv, out, timeout, "collect")
        nodes = [{"host": n.host, "status": n.status, "reason": n.reason, "files": list(n.files), "seconds": n.seconds}
                 for n in result.nodes]
        doc = {**document_header("collect"), "out_dir": str(out), "nodes": nodes, "garbled_lines": result.garbled_lines}
        write_json(out / "collect.json", doc)
        bad = [n for n in result.nodes if n.status in FAILED_STATUSES]
        if args.report:
            return ReportCommand(self.out, self.err).run(argparse.Namespace(
                paths=[out], html=args.html, json=args.json, out=None, no_tree=False))
        if args.json:
            print_json(self, doc)
        else:
            self.out.print(_table(result.nodes))
            self.out.print(f"evidence in {escape(str(out))}: run [bold]hangdbg report {escape(str(out))}[/bold]", highlight=False)
        if bad and not any(n.files for n in result.nodes):
            raise HangdbgError("no node could be read", help="see the node statuses above")
        return EXIT_FOUND if bad else EXIT_OK


def _table(nodes: list[NodeResult]) -> Table:
    t = Table(title="Evidence per node", title_justify="left", expand=True)
    t.add_column("node", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("files", justify="right")
    t.add_column("notes", ratio=1)
    for n in nodes:
        style = "red" if n.status in FAILED_STATUSES else ""
        t.add_row(escape(n.host), n.status, str(len(n.files)), escape(n.reason or ""), style=style)
    return t
