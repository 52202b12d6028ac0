"""``hangdbg demo [SCENARIO]``: start a real 4-rank gloo job that hangs, dump it, tear it down."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ..api._dump import dump
from ..demo.launch import SCENARIOS, DemoJob, default_nproc
from ..transport.targets import TargetSpec
from .common import Command, add_output_arguments, show_stacks
from .dump_cmd import add_collect_arguments, dump_plan


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
        nproc = args.nproc or default_nproc(args.scenario)
        plan = dump_plan(args)
        if args.scenario == "behind":
            plan = replace(plan, locals=True)
        if args.scenario in ("busy", "healthy", "straggler") and plan.samples == 1:
            plan = replace(plan, samples=3, locals=True)
        with DemoJob(args.scenario, nproc) as job:
            with self.err.status(f"starting a {nproc}-rank gloo job ({args.scenario}) under torchrun..."):
                job.wait_ready()
            self.err.print(f"demo job {args.scenario!r} is hung (torchrun pid {job.pid}); dumping it", style="dim",
                           markup=False, highlight=False)
            result = dump(replace(plan, target=TargetSpec(pids=(job.pid,))), self.events(args), command="demo")
            return show_stacks(self, result, args)
