"""``hangdbg dump``: find this node's ranks, py-spy them in parallel, name the suspects."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..stacks.analysis import analyze
from ..collect.adaptive import adapt
from ..collect.gcore import human_size, plan_cores, write_cores
from ..collect.local import CollectOptions, collect
from ..collect.procs import Denied, RankProcess, denied_note, find_ranks
from ..errors import HangdbgError, UsageError
from ..report.build import process_list
from ..report.document import CoreWritten
from ..report.safetext import visible
from ..tools.pyspy import OUTPUT_CAP, PySpyOptions, find_pyspy
from .common import (Command, add_export_arguments, add_output_arguments, emit_stacks, out_dir, positive_float,
    positive_int, progress_bar, write_json)
from .remote import add_remote_arguments, dump_remote, wants_remote



def add_collect_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("py-spy")
    g.add_argument("--native", action="store_true", help="include C/C++ frames (py-spy --native)")
    g.add_argument("--locals", action="store_true", help="include local variables (py-spy --locals); enables the loop-iteration check")
    g.add_argument("--nonblocking", action="store_true", help="do not pause the ranks while dumping (py-spy --nonblocking)")
    g.add_argument("--timeout", type=positive_float, default=20.0, metavar="S", help="seconds before a py-spy run is abandoned (default 20)")
    g.add_argument("--samples", type=positive_int, default=1, metavar="N", help="dumps per rank (default 1); ranks whose stacks change are progressing")
    g.add_argument("--interval", type=positive_float, default=1.0, metavar="S", help="seconds between samples (default 1)")
    g.add_argument("--jobs", type=positive_int, default=None, metavar="N", help="py-spy runs at once (default 8; with --native, the number of CPUs)")
    g.add_argument("--py-spy", dest="py_spy", metavar="PATH", help="the py-spy program to run")
    g.add_argument("--no-adapt", dest="adapt", action="store_false",
                   help="take only the first round: no retry, no --native/--locals pass for the ranks that need one, "
                        "no extra samples, no store lookup")


def collect_options(args: argparse.Namespace, out: Path | None) -> CollectOptions:
    return CollectOptions(
        pyspy=PySpyOptions(
            native=args.native, locals=args.locals, nonblocking=args.nonblocking,
            timeout=args.timeout, executable=args.py_spy,
        ),
        samples=args.samples,
        interval=args.interval,
        jobs=args.jobs or (max(2, os.cpu_count() or 2) if args.native else 8),
        out=out,
    )


def dump_ranks(cmd: Command, args: argparse.Namespace, ranks: list[RankProcess], command: str = "dump") -> int:
    """Collect, analyze and report on ``ranks`` (shared by ``dump`` and ``demo``)."""
    if find_pyspy(args.py_spy) is None:
        raise HangdbgError("py-spy not found", help="pip install py-spy (or pass --py-spy PATH)")
    out = out_dir(args)
    write_json(out / "processes.json", process_list(command, ranks))
    if getattr(args, "core", False):
        check_core_room(cmd, args, ranks, out)  # before the stacks: a refusal then loses nothing taken
    opts = collect_options(args, out)
    total = len(ranks) * opts.samples
    with progress_bar(cmd.err, "py-spy", total) as progress:
        task = progress.add_task("dump", total=total, failed=0)
        failed = 0
        truncated: list[tuple[int, int]] = []

        def on_result(p, k, res):
            nonlocal failed
            failed += bool(res.error)
            if res.dropped:
                truncated.append((p.rank, res.dropped))
            progress.update(task, advance=1, failed=failed)

        dumps = collect(ranks, opts, on_result)
    for rank, dropped in truncated:
        cmd.warn(f"rank {rank}: py-spy printed more than {OUTPUT_CAP >> 20} MiB; {dropped} bytes dropped")
    if getattr(args, "adapt", True):
        log = (lambda m: cmd.err.print(f"hangdbg: {visible(m)}", style="dim", markup=False, highlight=False)) if args.verbose else (lambda _m: None)
        with cmd.err.status("adaptive collection: what the first round lacks..."):
            result = adapt(ranks, dumps, opts, log)
        analysis = analyze(result.dumps, store_keys=result.store_keys, ops=result.ops)
    else:
        analysis = analyze(dumps)
    cores = write_rank_cores(cmd, args, ranks, out) if getattr(args, "core", False) else []
    return emit_stacks(cmd, analysis, args, command, out_dir=str(out), cores=cores)


def check_core_room(cmd: Command, args: argparse.Namespace, ranks: list[RankProcess], out: Path) -> None:
    """``--core``: warn about the cores' size and refuse when they do not fit (unless ``--force``)."""
    plan = plan_cores(ranks, out)
    need, free = human_size(plan.needed), human_size(plan.free)
    cmd.warn(f"writing {len(ranks)} core files of about {need} in all (the ranks' readable memory) to {out} ({free} free)")
    if not plan.fits and not args.force:
        raise HangdbgError(
            f"the core files would not fit: about {need} needed, {free} free in {out}",
            help="write them elsewhere with -o DIR on a larger file system, or pass --force to try anyway")


def write_rank_cores(cmd: Command, args: argparse.Namespace, ranks: list[RankProcess], out: Path) -> list[CoreWritten]:
    """``--core``: gcore every rank (after the stacks were taken, so the pause does not disturb them;
    :func:`check_core_room` ran before the stacks)."""
    results = write_cores(ranks, out, timeout=args.timeout * 15)
    for r in results:
        if r.error:
            cmd.warn(f"no core of rank {r.rank}: {r.error}")
    return [CoreWritten(r.rank, r.pid, r.path, r.size, r.seconds, r.error) for r in results]


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
        p.add_argument("--pid", type=int, nargs="+", metavar="PID", help="ranks, or launchers (torchrun, deepspeed, accelerate, mp.spawn parent) whose descendant ranks to dump")
        add_collect_arguments(p)
        g = p.add_argument_group("core files")
        g.add_argument("--core", action="store_true", help="also write a core file of every rank with gcore (OUT/core.rankR.PID) after the stacks; the ranks keep running (each gcore may take 15x --timeout)")
        g.add_argument("--force", action="store_true", help="with --core: write the cores even when they look too big for the free space; "
                            "reuse an -o DIR that holds another run's output (its hangdbg files are removed first)")
        add_remote_arguments(p)
        add_output_arguments(p, "raw/, processes.json, hangdbg.json, core files; default ./hangdbg-dump-DATE", tree=True)
        add_export_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        if wants_remote(args):
            if args.pid:
                raise UsageError("--pid is for this node; with --jobid/--hosts the agent finds the ranks")
            if args.core:
                raise UsageError("--core writes cores of this node's ranks; run `hangdbg dump --core` on the node")
            return dump_remote(self, args)
        if args.pid and any(p <= 0 for p in args.pid):
            raise UsageError("--pid takes positive process ids")
        denied: Denied = []
        ranks = find_ranks(args.pid, denied=denied)
        if denied:
            self.warn(denied_note(denied, len(ranks)))
        if os.geteuid() != 0:
            mine = os.getuid()
            others = [r.pid for r in ranks if _owner(r.pid) not in (None, mine)]
            if others:
                self.warn(f"{len(others)} ranks belong to another user; py-spy will need sudo")
        return dump_ranks(self, args, ranks)


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
