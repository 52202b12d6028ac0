"""``hangdbg dump``: the options of a :class:`~hangdbg.collect.plan.DumpPlan`, carried out by
:func:`hangdbg.api.dump` and shown from its one result."""

from __future__ import annotations

import argparse

from ..api._dump import dump
from ..collect.plan import DumpPlan
from ..stacks.window import DEFAULT_MIN_WINDOW
from .common import (Command, add_export_arguments, add_privacy_arguments, add_output_arguments, command_line, non_negative_float, positive_float, positive_int,
                     show_stacks)
from .targets import add_target_arguments, target_spec

__all__ = ["DumpCommand", "add_collect_arguments", "dump_plan"]


def add_collect_arguments(p: argparse.ArgumentParser) -> None:
    """The py-spy options of ``dump`` (also ``demo``'s and the agent's)."""
    g = p.add_argument_group("py-spy")
    g.add_argument("-n", "--native", action="store_true", help="include C/C++ frames (py-spy --native)")
    g.add_argument("-l", "--locals", action="store_true", help="include local variables (py-spy --locals); enables the loop-iteration check")
    g.add_argument("--nonblocking", action="store_true", help="do not pause the ranks while dumping (py-spy --nonblocking)")
    g.add_argument("--timeout", type=positive_float, default=20.0, metavar="S",
                   help="seconds before a py-spy run is abandoned, and the most the adaptive collection watches a rank "
                        "on CPU (with --min-window: max of the two) (default 20)")
    g.add_argument("--samples", type=positive_int, default=1, metavar="N", help="dumps per rank (default 1); ranks whose stacks change are progressing")
    g.add_argument("--interval", type=positive_float, default=1.0, metavar="S", help="seconds between samples (default 1)")
    g.add_argument("--jobs", type=positive_int, default=None, metavar="N", help="py-spy runs at once (default 8; with --native, the number of CPUs)")
    g.add_argument("--py-spy", dest="py_spy", metavar="PATH", help="the py-spy program to run")
    g.add_argument("--no-adapt", dest="adapt", action="store_false",
                   help="take only the first round: no retry, no --native/--locals pass for the ranks that need one, "
                        "no extra samples, no store lookup (the window still applies to the first round's samples)")
    g.add_argument("--min-window", type=non_negative_float, default=DEFAULT_MIN_WINDOW, metavar="S",
                   help="progress before blame: a rank on CPU outside any collective is named only after it was seen "
                        "in the same place this long (longer when the job's step time, estimated from its age and "
                        "step counter, is); until then the verdict is 'undecided: still observing' and the dump "
                        "keeps sampling, up to max(--timeout, S), stopping early when a rank moves. "
                        f"--samples/--interval set the first round only. 0: no window (default {DEFAULT_MIN_WINDOW:g})")
    g.add_argument("--observed", type=non_negative_float, default=0.0, help=argparse.SUPPRESS)  # watch's stall, to agents
    add_privacy_arguments(g)


def dump_plan(args: argparse.Namespace) -> DumpPlan:
    """The plan of ``dump`` (also of ``demo`` and the agent: the options they share).

    Raises:
        UsageError: options that do not go together.
    """
    return DumpPlan(
        target=target_spec(args),
        native=args.native, locals=args.locals, nonblocking=args.nonblocking, timeout=args.timeout,
        samples=args.samples, interval=args.interval, jobs=args.jobs, py_spy=args.py_spy, adapt=args.adapt,
        core=bool(getattr(args, "core", False)), force=bool(getattr(args, "force", False)), out=args.out,
        node_timeout=getattr(args, "node_timeout", None), speedscope=getattr(args, "speedscope", None),
        speedscope_by=getattr(args, "speedscope_by", "class"), folded=getattr(args, "folded", None),
        verbose=bool(getattr(args, "verbose", False)), min_window=args.min_window, observed=args.observed,
        fetch_raw=bool(getattr(args, "fetch_raw", False)), redact=getattr(args, "redact", True),
        cmdline=getattr(args, "cmdline", True), argv=tuple(command_line(args)))


class DumpCommand(Command):
    description = (
        "Find the training processes of this node (or under --pid; or of every node with "
        "--jobid/--hosts/--hostfile), take py-spy stacks of all ranks in parallel, merge them "
        "and name the ranks the others wait for. Raw outputs, processes.json and hangdbg.json are "
        "kept under --out (default ./hangdbg-dump-TIMESTAMP). Exit status: 0 nothing stands "
        "out, 3 suspects found, 1 nothing could be read or tool error (a node not read included), 2 usage."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("-p", "--pid", type=int, nargs="+", action="extend", metavar="PID", help="ranks, or launchers (torchrun, deepspeed, accelerate, mp.spawn parent) whose descendant ranks to dump")
        add_collect_arguments(p)
        g = p.add_argument_group("core files")
        g.add_argument("--core", action="store_true", help="also write a core file of every rank with gcore (OUT/core.rankR.PID) after the stacks; the ranks keep running (each gcore may take 15x --timeout)")
        g.add_argument("--force", action="store_true", help="with --core: write the cores even when they look too big for the free space; "
                            "reuse an -o DIR that holds another run's output (its hangdbg files are removed first)")
        add_target_arguments(p)
        p.add_argument("--fetch-raw", action="store_true",
                       help="with --jobid/--hosts: bring every node's raw py-spy outputs to OUT/raw/<host>/ (by default "
                            "each node keeps them under the same path on its own disk and sends only its distinct stacks)")
        add_output_arguments(p, "raw/, processes.json, hangdbg.json, core files; default ./hangdbg-dump-DATE", tree=True)
        add_export_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        result = dump(dump_plan(args), self.events(args))
        return show_stacks(self, result, args)
