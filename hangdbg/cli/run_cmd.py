"""``hangdbg run [watch options] -- COMMAND...``: start a job with the debug environment set, watch
it as ``watch --pid`` would, and write the post-mortem report of its output directory when it ends
(:func:`hangdbg.api._run.run_and_watch`).

Exit status (:func:`run_exit_status`): 3 when a stall was declared or the final report named a
suspect; otherwise the command's own status (0 when it succeeded; 128+N when signal N killed it,
as shells report it). 2 usage (no command after ``--``), 1 a tool error before the job ran (py-spy
missing, the command cannot be started). A command that itself exits 1, 2 or 3 is told apart by
the ``exited with status N`` line on stderr.
"""

from __future__ import annotations

import argparse

from ..api._run import run_and_watch
from ..errors import UsageError
from ..report.safetext import visible
from ..report.verdict_console import render_verdict
from ..watch.run_env import NCCL_DEBUG_LEVELS
from ..watch.auto_stall import BEFORE, FACTOR, FLOOR
from .common import EXIT_FOUND, Command
from .watch_cmd import WatchCommand, _WatchEvents, watch_plan

__all__ = ["RunCommand", "run_exit_status"]

_PLACEHOLDER = 1
"""The pid the watch plan is validated with before the job exists (replaced by the job's pid)."""


def run_exit_status(found: bool, returncode: int) -> int:
    """``run``'s exit status: 3 when ``found`` (a stall, or a suspect in the report); else the
    command's ``returncode`` (subprocess's ``-N`` for signal N becomes 128+N, the shells' way)."""
    if found:
        return EXIT_FOUND
    return 128 - returncode if returncode < 0 else returncode


class RunCommand(Command):
    description = (
        "Start COMMAND (torchrun, srun, python -m torch.distributed.run, or any other) with the debug environment "
        "set where the environment has none of it (flight-recorder buffer, dump on timeout and its files under OUT/fr, "
        "the FR dump pipe, NCCL_DEBUG_FILE=OUT/nccl/%h.%p.log, NCCL RAS, HANGDBG_HEARTBEAT_DIR=OUT/heartbeat, "
        "torchrun's per-rank logs under OUT/logs), watch it as `watch --pid` would (heartbeats and stacks), dump it into "
        "OUT/stall-DATE/ when it stalls (then --on-hang, --then), and when it ends write the post-mortem report of OUT "
        "(report.json). Without --then a stalled job is left running: Ctrl-C stops it (forwarded to its process group). "
        f"--stall defaults to auto: {BEFORE:g} s until the heartbeats show a step time, then max({FLOOR:g} s, "
        f"{FACTOR:g} x the longest step interval seen). Exit status: 3 a stall was declared or the report named a suspect; "
        "else the command's own (0 success, 128+N killed by signal N); 2 usage; 1 tool error."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        WatchCommand.add_arguments(p, target=False, output="stall-DATE/ per stall, fr/, nccl/, logs/, heartbeat/, "
                                                           "watch.json, report.json; default ./hangdbg-run-DATE")
        for action in p._actions:  # the one option whose default differs from watch's
            if action.dest == "stall":
                action.help = ("seconds without progress that make a stall (default: auto, from the heartbeats' "
                               "step time; see above)")
        p.set_defaults(stall=None, node_timeout=None)
        g = p.add_argument_group("the job")
        g.add_argument("--nccl-debug", choices=NCCL_DEBUG_LEVELS, metavar="LEVEL",
                       help=f"set NCCL_DEBUG=LEVEL ({', '.join(NCCL_DEBUG_LEVELS)}) for the job when its environment "
                            "has none (default: not set; NCCL_DEBUG_FILE is set either way)")
        g.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                       help="the command to run, after --")

    def run(self, args: argparse.Namespace) -> int:
        argv = list(args.argv)
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            raise UsageError("run what? give the command after --, e.g. hangdbg run -- torchrun --nproc-per-node 4 train.py")
        auto = args.stall is None
        args.pid, args.stall = [_PLACEHOLDER], BEFORE if auto else args.stall
        plan = watch_plan(args)  # validated now: a bad option is a usage error before the job starts
        events = _WatchEvents(self, args)
        events.prefix = "hangdbg run"
        result = run_and_watch(argv, plan, events, auto_stall=auto, nccl_debug=args.nccl_debug,
                               stdout=2 if args.json else None)  # --json: stdout carries the document only
        found = result.watch.found or bool(result.document.found)
        self.show(result.document, args, lambda: render_verdict(result.verdict, tree=True, evidence=True),
                  result.not_saved, str(result.out))
        code = result.returncode
        said = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        stalls = len(result.watch.stalls)
        self.err.print(visible(f"hangdbg run: {result.argv[0]} {said}; {stalls} stall(s) declared; "
                               f"report: {result.out / 'report.json'}"), style="dim", markup=False, highlight=False)
        return run_exit_status(found, code)
