"""``hangdbg collect --jobid ID | --hosts EXPR ... -o DIR``: post-mortem evidence from every node.

Runs the agent on every node through the same fan-out as ``dump`` (one srun, pdsh, or an ssh
pool); each node reads its local disks (NCCL logs split per rank, core files turned into
backtraces, the kernel log, tracer files, other logs) and sends back the small results, written
to ``DIR/<host>/`` as they arrive. ``--report`` then prints ``hangdbg report DIR``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..api._collect import collect
from ..api._report import report
from .agent_cmd import add_gather_arguments, gather_options
from .common import EXIT_ERROR, EXIT_OK, Command, add_output_arguments, command_line
from .report_cmd import ReportCommand
from .targets import add_target_arguments, target_spec


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
        add_target_arguments(p)
        add_gather_arguments(p)
        p.add_argument("--report", action="store_true",
                       help="then read DIR as `hangdbg report DIR -o DIR` does (report.json, report.html) and print it")
        p.add_argument("--html", metavar="FILE", type=Path, help="with --report: also write the HTML report to FILE")
        p.add_argument("--force", action="store_true",
                       help="reuse an output directory that holds another run's output: its hangdbg files are removed first")
        add_output_arguments(p, "DIR/<host>/..., collect.json, with --report report.json and report.html; "
                                "default ./hangdbg-collect-DATE", tree=True)

    def run(self, args: argparse.Namespace) -> int:
        from ..report.build import collect_document
        from ..report.collect_view import render_collect

        gather = gather_options(args)
        result = collect(target_spec(args), gather, self.events(args), out=args.out, force=args.force,
                         node_timeout=args.node_timeout or 600.0, verbose=bool(getattr(args, "verbose", False)),
                         argv=command_line(args))
        if args.report:
            code = ReportCommand(self.out, self.err).show_verdict(report([result.out_dir]), args, [result.out_dir],
                                                                  Path(result.out_dir))
        else:
            self.show(collect_document(result), args, lambda: render_collect(result), result.not_saved)
            code = EXIT_OK if result.files else EXIT_ERROR
        return EXIT_ERROR if not result.complete and code == EXIT_OK else code
