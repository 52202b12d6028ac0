"""``hangdbg collect --jobid ID | --hosts EXPR ... -o DIR``: post-mortem evidence from every node.

Runs the agent on every node through the same fan-out as ``dump`` (one srun, pdsh, or an ssh
pool); each node reads its local disks (NCCL logs split per rank, core files turned into
backtraces, the kernel log, tracer files, other logs) and sends back the small results, written
to ``DIR/<host>/`` as they arrive. ``--report`` then prints ``hangdbg report DIR``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from ..headline import collect_headline
from ..collect.fanout import NodeResult, agent_argv
from ..errors import UsageError
from ..report.build import collect_document
from ..report.safetext import escape
from ..evidence.read import read_evidence
from .agent_cmd import add_gather_arguments, gather_options
from .common import EXIT_ERROR, EXIT_OK, Command, add_output_arguments, out_dir, write_json
from .remote import (add_remote_arguments, fan_out_with_progress, node_entries, node_findings,
    remote_runner, wants_remote)
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
    if getattr(args, "verbose", False):
        out.append("-v")  # the agents send their external commands back as log frames
    if with_host:
        out += ["--node-name", "{host}"]
    return out


class CollectCommand(Command):
    description = (
        "Run the agent on every node of a SLURM job (--jobid) or a host list (--hosts/--hostfile): "
        "NCCL logs are split per rank on the node, core files are turned into backtraces where they "
        "lie (only the backtraces cross the network), kernel logs and tracer files are sent as they "
        "are; results land in DIR/<host>/. Then run `hangdbg report DIR` (or pass --report). "
        "Exit status 1 when a node could not be read (what the others sent is kept); with --report, "
        "the report's status (3 when it names a suspect)."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        add_remote_arguments(p)
        add_gather_arguments(p)
        p.add_argument("--report", action="store_true",
                       help="then read DIR as `hangdbg report DIR -o DIR` does (report.json, report.html) and print it")
        p.add_argument("--html", metavar="FILE", type=Path, help="with --report: also write the HTML report to FILE")
        p.add_argument("--force", action="store_true",
                       help="reuse an output directory that holds another run's output: its hangdbg files are removed first")
        add_output_arguments(p, "DIR/<host>/..., collect.json, with --report report.json and report.html; "
                                "default ./hangdbg-collect-DATE", tree=True)

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
        result = fan_out_with_progress(self, runner, hosts, argv, out, timeout, "collect", "collect")
        failed = node_findings(result.nodes)
        sent = sum(len(n.files) for n in result.nodes)
        text = collect_headline(failed, sent, len(result.nodes), str(out))
        doc = collect_document(str(out), node_entries(result.nodes), result.garbled_lines, failed, text)
        write_json(out / "collect.json", doc)
        for f in failed:
            self.warn(f.summary)
        if args.report:
            args.paths = [str(out)]
            code = ReportCommand(self.out, self.err).show(read_evidence(args.paths), args)
        else:
            if args.json:
                self.print_json(doc)
            else:
                self.out.print(_table(result.nodes))
                self.out.print(f"evidence in {escape(str(out))}: run [bold]hangdbg report {escape(str(out))}[/bold]",
                               highlight=False)
            code = EXIT_OK if sent else EXIT_ERROR
        return EXIT_ERROR if failed and code == EXIT_OK else code


def _table(nodes: list[NodeResult]) -> Table:
    t = Table(title="Evidence per node", title_justify="left", expand=True)
    t.add_column("node", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("files", justify="right")
    t.add_column("notes", ratio=1)
    for n in nodes:
        style = "red" if n.status.failed else ""
        t.add_row(escape(n.host), n.status, str(len(n.files)), escape(n.reason or ""), style=style)
    return t
