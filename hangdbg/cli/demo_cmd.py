"""``hangdbg demo [SCENARIO]``: start a real 4-rank gloo job that hangs, dump it, tear it down."""

from __future__ import annotations

import argparse

from ..collect.procs import find_ranks
from ..demo.launch import SCENARIOS, DemoJob, default_nproc
from .common import Command, add_output_arguments
from .dump_cmd import add_collect_arguments, dump_ranks


class DemoCommand(Command):
    description = (
        "Launch a CPU torch.distributed job (gloo backend, torchrun) that hangs as SCENARIO says, "
        "wait until it stalls, run `hangdbg dump` on it, print the report and kill the job. "
        "Needs torch (pip install 'hangdbg[torch]')."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", nargs="?", default="mismatch", choices=SCENARIOS, help="how the job hangs (default: mismatch, rank 3 calls broadcast while the others call all_reduce)")
        p.add_argument("--nproc", type=int, default=None, help="ranks to start (default 4; tp-dp: 8)")
        add_collect_arguments(p)
        add_output_arguments(p, "raw/, processes.json, hangdbg.json; default ./hangdbg-dump-DATE", tree=True)

    def run(self, args: argparse.Namespace) -> int:
        args.nproc = args.nproc or default_nproc(args.scenario)
        if args.scenario == "behind":
            args.locals = True
        if args.scenario in ("busy", "healthy") and args.samples == 1:
            args.samples, args.locals = 3, True
        with DemoJob(args.scenario, args.nproc) as job:
            with self.err.status(f"starting a {args.nproc}-rank gloo job ({args.scenario}) under torchrun..."):
                job.wait_ready()
            self.err.print(f"demo job {args.scenario!r} is hung (torchrun pid {job.pid}); dumping it", style="dim",
                           markup=False, highlight=False)
            return dump_ranks(self, args, find_ranks([job.pid]), command="demo")
