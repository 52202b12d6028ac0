"""``hangdbg watch``: the options of a :class:`~hangdbg.watch.plan.WatchPlan`, carried out by
:func:`hangdbg.api.watch`.

Exit status: 0 the job ended without a stall; 3 a stall was declared (``--once``: right after
the first); 1 tool error, or the watch was interrupted (Ctrl-C, SIGTERM: never an all-clear; the
stalls so far are in ``watch.json``); 2 usage (a ``--pid`` that is no process included).
"""

from __future__ import annotations

import argparse

from ..api._watch import watch
from ..report.safetext import visible
from ..watch.plan import MAX_STALLS, STALL_GAP, THEN, WatchPlan
from .common import EXIT_ERROR, EXIT_FOUND, EXIT_OK, Command, add_output_arguments, add_privacy_arguments, command_line, positive_float
from .events import ConsoleEvents
from .targets import add_target_arguments, target_spec

__all__ = ["WatchCommand", "watch_plan"]


def watch_plan(args: argparse.Namespace) -> WatchPlan:
    """The plan of ``watch``.

    Raises:
        UsageError: no target, options that do not go together, a bad ``--log-pattern``.
    """
    return WatchPlan(
        target=target_spec(args), logs=tuple(args.log), log_pattern=args.log_pattern, heartbeat=args.heartbeat,
        stacks=args.stacks, stall=args.stall, interval=args.interval, grace=args.grace, once=args.once,
        max_stalls=args.max_stalls, stall_gap=args.stall_gap,
        on_hang=args.on_hang, then=args.then, native=args.native, locals=args.locals, timeout=args.timeout,
        py_spy=args.py_spy, node_timeout=args.node_timeout, force=args.force, out=args.out,
        verbose=bool(getattr(args, "verbose", False)), straggler_every=args.straggler_every, keep_last=args.keep_last,
        redact=getattr(args, "redact", True), cmdline=getattr(args, "cmdline", True), argv=tuple(command_line(args)),
        exclude_suspects=getattr(args, "exclude_suspects", False), notify_webhook=getattr(args, "notify_webhook", None))


class _WatchEvents(ConsoleEvents):
    """The watch's lines on stderr, and each stall's dump report on stdout (not with ``--json``)."""

    def __init__(self, cmd: Command, args: argparse.Namespace) -> None:
        super().__init__(cmd.err, verbose=bool(getattr(args, "verbose", False)), quiet=args.json, prefix="hangdbg watch")
        self.cmd = cmd
        self.args = args

    def output(self, text: str) -> None:
        self.err.print(visible(text), markup=False, highlight=False)

    def result(self, value: object) -> None:
        if not self.args.json:
            from ..report.console import render_stacks

            self.cmd.out.print(render_stacks(value, tree=True, evidence=True))  # type: ignore[arg-type]


class WatchCommand(Command):
    description = (
        "Watch a running job (--pid on this node, --jobid, --hosts/--hostfile) and, when it stalls (--log not growing "
        "for --stall seconds, --heartbeat files not changing, or the ranks' stacks not changing while they wait in "
        "torch.distributed), dump it as `hangdbg dump` would into OUT/stall-DATE/, run --on-hang and --then. "
        "Exit status: 0 the job ended without a stall, 3 a stall was declared, 1 tool error or interrupted "
        "(the stalls so far are in watch.json), 2 usage."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser, target: bool = True,
                      output: str = "watch.json, stall-DATE/ per stall; default ./hangdbg-watch-DATE") -> None:
        """The options; ``target=False`` (``hangdbg run``, which watches the job it starts) leaves out
        the target options (``--pid``, ``--jobid``, ``--hosts``...), ``output`` describes ``-o``."""
        if target:
            p.add_argument("-p", "--pid", type=int, nargs="+", action="extend", metavar="PID", help="a launcher (torchrun...) or the ranks, on this node")
        g = p.add_argument_group("stall signals")
        g.add_argument("--log", nargs="+", metavar="FILE", default=[], help="training logs (globs allowed): a stall when they stop growing")
        g.add_argument("--log-pattern", metavar="REGEX", help="with --log: count only lines matching REGEX (e.g. 'iteration|step')")
        g.add_argument("--heartbeat", metavar="DIR", help="the directory of hangdbg.hooks.heartbeat() files: a stall when none changes")
        g.add_argument("--stacks", action="store_true", help="also sample the stacks (the default without --log/--heartbeat)")
        g.add_argument("--stall", type=positive_float, default=300.0, metavar="S", help="seconds without progress that make a stall (default 300)")
        g.add_argument("--interval", type=positive_float, default=10.0, metavar="S", help="seconds between observations (default 10)")
        g.add_argument("--grace", type=float, default=0.0, metavar="S", help="seconds after the start with no stall declared (start-up, compilation)")
        g.add_argument("--once", action="store_true", help="stop after the first stall (exit 3)")
        g.add_argument("--max-stalls", type=int, default=MAX_STALLS, metavar="N",
                       help=f"end the watch after N stalls, each dumped (default {MAX_STALLS}; exit 3)")
        g.add_argument("--stall-gap", type=float, default=STALL_GAP, metavar="S",
                       help=f"seconds between two stalls at least: one due sooner waits (default {STALL_GAP:g})")
        g = p.add_argument_group("slow ranks and crashes")
        g.add_argument("--straggler-every", type=int, metavar="N",
                       help="every N steps (--heartbeat; stack samples otherwise) print a straggler report and write it "
                            "to OUT/straggler/: ranks chronically slower than the others, by how much, since when")
        g.add_argument("--keep-last", type=int, nargs="?", const=3, default=0, metavar="N",
                       help="keep each rank's latest N stack samples (default 3) in OUT/last/, so that `hangdbg report "
                            "OUT` shows where every rank was when the job died (samples every --interval)")
        g = p.add_argument_group("on a stall")
        g.add_argument("--on-hang", metavar="CMD", help="shell command run after the dump, with HANGDBG_DUMP_DIR, HANGDBG_JSON, "
                                                        "HANGDBG_HEADLINE, HANGDBG_SUSPECTS (comma list of ranks) in its environment")
        g.add_argument("--then", choices=THEN, help="after the dump: kill the job (--pid: its processes; "
                                                    "--jobid: scancel), scancel or requeue it (--jobid)")
        g.add_argument("--exclude-suspects", action="store_true",
                       help="with --then requeue --jobid: requeue the job without the suspects' nodes (added to its "
                            "ExcNodeList: scontrol requeuehold, update, release); a dump with no suspect excludes nothing")
        g.add_argument("--notify-webhook", metavar="URL",
                       help="POST the stall as JSON (headline, suspects' ranks and hosts, dump_dir, exit, kind, command, "
                            "time) to this http(s) URL (10 s timeout; a failure is a warning)")
        g.add_argument("-n", "--native", action="store_true", help="the stall dump takes native frames too (py-spy --native)")
        g.add_argument("-l", "--locals", action="store_true", help="the stall dump takes local variables too (py-spy --locals)")
        add_privacy_arguments(g)
        g.add_argument("--timeout", type=positive_float, default=20.0, metavar="S", help="seconds before a py-spy run is abandoned (default 20)")
        g.add_argument("--py-spy", dest="py_spy", metavar="PATH", help="the py-spy program to run")
        g.add_argument("--force", action="store_true", help="reuse an -o DIR that holds another run's output")
        if target:
            add_target_arguments(p)
        add_output_arguments(p, output, evidence=False)

    def run(self, args: argparse.Namespace) -> int:
        from ..report.build import watch_document

        result = watch(watch_plan(args), _WatchEvents(self, args))
        doc = watch_document(result)
        if args.json:
            self.print_json(doc)
        else:
            self.out.print(visible(doc.headline), markup=False, highlight=False)
        if result.ended == "interrupted":  # the watch did not finish: never an all-clear (a stall so far is in watch.json)
            return EXIT_ERROR
        return EXIT_FOUND if result.found else EXIT_OK
