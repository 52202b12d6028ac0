"""The ``dump`` use case: the stacks of every rank of a hung job, analyzed once, written as they arrive.

:func:`dump` carries out a :class:`~hangdbg.collect.plan.DumpPlan` on this node (py-spy on every
rank in parallel, the adaptive steps, ``--core``) or on every node of a job (the agent through
srun, pdsh or ssh; the coordinator merges what arrives), and returns one
:class:`~hangdbg.collect.result.StacksResult`, which the console view and the JSON document are
both rendered from. :func:`analyze` is the same analysis of saved dump files. ``watch`` calls
:func:`dump` for each stall.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from ..collect.adaptive import adapt
from ..collect.fanout import FanoutResult, NodeResult, agent_argv, fan_out, node_file
from ..collect.gcore import GcoreResult, human_size, plan_cores, write_cores
from ..collect.live_sources import fill_stacks, load_fr, mark_used, pyspy_sources, start as start_live
from ..collect.local import RAW, collect
from ..collect.node_status import node_findings
from ..collect.plan import DumpPlan, SpeedscopeBy
from ..collect.ray_ranks import ray_ranks
from ..collect.procs import Denied, Ignored, RankProcess, denied_note, find_ranks
from ..collect.ras import REMOTE, query_job_ras, with_ras_headline
from ..collect.result import StacksResult
from ..errors import HangdbgError, UsageError
from ..events import Events
from ..evidence.fr_live import fr_findings
from ..headline import fanout_headline
from ..outdir import OutDir, claim, run_path
from ..parallel import gc_paused
from ..report.build import node_document, node_entry, process_list, stacks_document
from ..report.export import write_exports
from ..report.schema import to_json
from ..stacks.analysis import analyze as analyze_stacks
from ..stacks.saved import load_dumps
from ..stacks.window import DEFAULT_MIN_WINDOW, Window
from ..evidence.fr_files import fr_dumps_beside
from ..evidence.fr_join import joined_analysis
from ..tools.pyspy import OUTPUT_CAP, find_pyspy
from ..transport.ray_state import read_cluster
from ..transport.targets import Targets, ray_targets, resolve

__all__ = ["dump", "analyze", "claim_out", "save_result", "fan_out_nodes"]


def claim_out(out: Path | None, command: str, argv: Sequence[str] = (), force: bool = False,
              prefix: str = "hangdbg-dump") -> OutDir:
    """``out``, or ``./PREFIX-YYYYmmdd-HHMMSS-XXXXXX`` (:func:`hangdbg.outdir.unique_name`), claimed for this run (:func:`hangdbg.outdir.claim`).

    Raises:
        UsageError: it cannot be created or written, or holds another run's output and not ``force``.
    """
    return claim(run_path(out, prefix), command, argv, force=force)


def dump(plan: DumpPlan, events: Events | None = None, *, command: str = "dump") -> StacksResult:
    """Dump the ranks ``plan`` names, analyze them and write everything under its output directory.

    Writes, as it goes: ``processes.json``, ``raw/`` (every py-spy output as it arrives), ``ras/``
    (NCCL RAS's answers, when the job is an NCCL job with RAS on: :mod:`hangdbg.collect.ras`),
    ``nodes/HOST.json`` (each node's status as it finishes), ``ops.json``/``store.json`` (the
    adaptive steps), core files (``--core``), the exports of the plan, and last ``hangdbg.json``
    (the document of the returned result).

    Args:
        plan: what to dump and how.
        events: progress bars, warnings and ``-v`` lines (none by default).
        command: the document's command (``dump``; ``demo`` for the demo job).

    Returns:
        The result; a node that could not be read leaves it incomplete (``complete`` False).

    Raises:
        HangdbgError: no training process was found; py-spy is not installed (here, for the
            ranks of this node); the job cannot be reached (no such SLURM job).
        UsageError: the output directory cannot be used.
    """
    events = events or Events()
    if plan.target.ray:
        return _dump_ray(plan, events, command)
    if plan.target.remote:
        return _dump_nodes(plan, events)  # py-spy runs on the nodes
    denied: Denied = []
    ignored: Ignored = []
    ranks = find_ranks(list(plan.target.pids) or None, denied=denied, ignored=ignored)
    if denied:
        events.warn(denied_note(denied, len(ranks)))
    for pid, why in ignored:
        events.warn(f"--pid {pid} ignored: {why}")
    if os.geteuid() != 0:
        others = [r.pid for r in ranks if _owner(r.pid) not in (None, os.getuid())]
        if others:
            events.warn(f"{len(others)} ranks belong to another user; py-spy will need sudo")
    if find_pyspy(plan.py_spy) is None:
        raise HangdbgError("py-spy not found", help="pip install py-spy (or pass --py-spy PATH)")
    return _dump_here(plan, ranks, events, command, tuple(pid for pid, _ in ignored))


def _dump_here(plan: DumpPlan, ranks: list[RankProcess], events: Events, command: str,
               ignored: tuple[int, ...] = ()) -> StacksResult:
    """py-spy (and the live sources) on ``ranks`` of this node; ``ignored``: ``--pid`` pids that
    gave no rank, said in the headline."""
    out = claim_out(plan.out, command, plan.argv or plan.to_argv(), plan.force)
    if not plan.cmdline:  # --no-cmdline: found by their real command lines, written without them
        ranks = [replace(r, cmdline="") for r in ranks]
    out.save_text("processes.json", to_json(process_list(command, ranks)) + "\n")
    if plan.core:
        _check_core_room(plan, ranks, out, events)  # before the stacks: a refusal then loses nothing taken
    opts = plan.collect_options(out)
    live = start_live(ranks, out, plan.timeout, events.log)  # the debug server and the FR pipe, beside py-spy
    truncated: list[tuple[int, int]] = []
    with events.progress("py-spy", len(ranks) * opts.samples) as advance:
        def on_result(p, _k, res) -> None:
            if res.dropped:
                truncated.append((p.rank, res.dropped))
            advance(bool(res.error))

        dumps = collect(ranks, opts, on_result)
    for rank, dropped in truncated:
        events.warn(f"rank {rank}: py-spy printed more than {OUTPUT_CAP >> 20} MiB; {dropped} bytes dropped")
    got = live.result()
    sources = pyspy_sources(dumps)
    dumps, filled = fill_stacks(dumps, got)
    if filled:
        events.warn(f"{len(filled)} rank(s) py-spy could not read: their stacks come from the torch debug server")
    fr, unparsed = load_fr(got)
    sources = sorted([*sources, *mark_used(got.sources, filled), *unparsed], key=lambda s: (s.rank, s.source))
    if plan.adapt:
        with events.busy("adaptive collection: what the first round lacks..."):
            adapted = adapt(ranks, dumps, opts, events.log)
        analysis = adapted.analysis
    else:
        analysis = analyze_stacks(dumps, window=plan.window)
    cores = _write_cores(plan, ranks, out, events) if plan.core else ()
    if fr:  # the joint verdict: the flight recorder decides where the stacks cannot (identical stacks)
        analysis = joined_analysis(analysis, fr)
    ras, ras_found = query_job_ras([r.pid for r in ranks], out, plan.timeout, log=events.log)  # NCCL RAS, once
    findings = (*analysis.findings, *fr_findings(fr, analysis), *ras_found)
    headline = with_ras_headline(analysis.headline, ras_found, analysis.findings)
    if ignored:
        headline += f" (--pid {', '.join(map(str, ignored))} ignored: no rank there)"
    result = StacksResult(command, analysis, headline, findings, out_dir=str(out.path), cores=cores, ras=ras, sources=tuple(sources),
                          fr_dumps=tuple(fr))
    return save_result(result, out, plan)


def _dump_ray(plan: DumpPlan, events: Events, command: str) -> StacksResult:
    """``--ray``: the cluster's ranks (:mod:`hangdbg.collect.ray_ranks`); all on this node: py-spy
    here, as for ``--pid``; some elsewhere: the agent with ``--ray`` on every node that has ranks,
    over ssh by node IP (:func:`hangdbg.transport.targets.ray_targets`), this node included."""
    found = ray_ranks(read_cluster(plan.target.ray or "", plan.timeout))
    events.log(f"Ray: {found.actors} alive actors; ranks here {[r.rank for r in found.here]}, "
               f"on {len(found.elsewhere)} other node(s)")
    if found.elsewhere:
        if plan.core:
            raise UsageError("--core writes cores of this node's ranks; the Ray job has ranks on other nodes: "
                             "run `hangdbg dump --core --pid PIDS` on each node")
        return _dump_nodes(plan, events, ray_targets(plan.target, found.nodes))
    if find_pyspy(plan.py_spy) is None:
        raise HangdbgError("py-spy not found", help="pip install py-spy (or pass --py-spy PATH)")
    return _dump_here(plan, found.here, events, command)


def _dump_nodes(plan: DumpPlan, events: Events, targets: Targets | None = None) -> StacksResult:
    """Fan out, merge, analyze: the agent on every node, one analysis of the whole job. A node not
    read leaves the result incomplete: its ranks were not looked at (not "missing"), and the
    job was not seen whole, so there is no all-clear."""
    targets = targets or resolve(plan.target)
    out = claim_out(plan.out, "dump", plan.argv or plan.to_argv(), plan.force)
    # each node keeps its raw outputs under OUT/raw/<host>/ of its own disk (the very files of
    # --fetch-raw when OUT is on a shared file system) and sends its classes
    keep = None if plan.fetch_raw else out.path.resolve() / RAW
    argv = agent_argv(plan.target.remote_python, plan.agent_argv(with_host=not plan.target.jobid, keep_raw=keep))
    with gc_paused():  # the merge builds 100,000s of acyclic objects (see hangdbg.parallel)
        fan = fan_out_nodes("dump", targets, argv, out, plan.node_budget(), events)
        failed = node_findings([(n.host, n.status, n.reason) for n in fan.nodes])
        analysis = analyze_stacks(fan.dumps, whole_job=targets.whole and not failed, store_keys=fan.store_keys,
                                  ops=fan.ops,
                                  window=plan.window)
    for f in failed:
        events.warn(f.summary)
    headline = fanout_headline(analysis.headline, [(n.host, n.status) for n in fan.nodes if n.status.failed])
    result = StacksResult("dump", analysis, headline, analysis.findings + tuple(failed), out_dir=str(out.path),
                          nodes=tuple(fan.nodes), garbled_lines=fan.garbled_lines, complete=not failed, ras=REMOTE)
    return save_result(result, out, plan)


def fan_out_nodes(command: str, targets: Targets, argv: list[str], out: OutDir, timeout: float,
                  events: Events) -> FanoutResult:
    """Run the agent ``argv`` on every node of ``targets`` (:func:`hangdbg.collect.fanout.fan_out`)
    behind a progress bar, writing each node's document to ``OUT/nodes/HOST.json`` as the node
    finishes (``command``: ``dump`` or ``collect``)."""
    with events.progress("nodes", len(targets.hosts), pending=True) as advance:
        def on_node(n: NodeResult) -> None:
            advance(n.status.failed)
            path = node_file(out.path, n.host)
            if path is not None:  # the node's final status, as it arrives
                out.save_text(path, to_json(node_document(command, node_entry(n))) + "\n")

        return fan_out(targets.make_runner(targets.hosts), targets.hosts, argv, out, timeout, on_node)


def analyze(paths: Sequence[str | os.PathLike], events: Events | None = None, *, out: Path | None = None,
            speedscope: Path | None = None, speedscope_by: SpeedscopeBy = "class", folded: Path | None = None,
            min_window: float = DEFAULT_MIN_WINDOW) -> StacksResult:
    """The analysis of saved py-spy dump texts (``hangdbg analyze``): a ``dump -o`` directory,
    files named ``rank-N.txt``, or one file with several ``Process N:`` blocks.

    Args:
        paths: files or directories.
        out: write ``hangdbg.json`` (and nothing else) into this directory.
        speedscope, speedscope_by, folded: the exports to write too.
        min_window: progress before blame (seconds, :mod:`hangdbg.stacks.window`), applied when the
            files carry their sample times (the ``unix=`` of a dump's headers): the same rule as the
            dump's, so a dump that stopped "still observing" is not blamed here on the same samples;
            0, or files without times: two samples decide.

    Raises:
        UsageError: a path does not exist.
    """
    events = events or Events()
    with gc_paused():  # millions of acyclic objects at 100,000 ranks: see hangdbg.parallel
        try:
            dumps, stats = load_dumps([str(p) for p in paths])
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
        for path, reason in stats.unreadable:
            events.warn(f"{path}: {reason}" if reason.startswith("larger than") else f"skipped {path}: {reason}")
        if stats.garbled_lines:
            events.note(f"{stats.garbled_lines} unrecognised lines skipped")
        if not dumps:
            events.warn(f"no py-spy dump found in {' '.join(map(str, paths))}")
        timed = min_window > 0 and any(d.sample_times for d in dumps)
        a = analyze_stacks(dumps, window=Window(min_window) if timed else None)
        fr = fr_dumps_beside([str(p) for p in paths])  # DIR/fr/: the joint verdict with the flight recorder
        if fr:
            a = joined_analysis(a, fr)
        result = StacksResult("analyze", a, a.headline, a.findings, inputs=tuple(str(p) for p in paths),
                              garbled_lines=stats.garbled_lines)
        plan = DumpPlan(speedscope=speedscope, speedscope_by=speedscope_by, folded=folded)
        return save_result(result, OutDir(out) if out is not None else None, plan, events)


def save_result(result: StacksResult, out: OutDir | None, plan: DumpPlan, events: Events | None = None) -> StacksResult:
    """Write the plan's exports, then the result's document (``hangdbg.json`` under ``out``); the
    result noting every file of this run that could not be saved (exports outside ``out``
    included)."""
    sink = out if out is not None else OutDir(".")
    write_exports(result.analysis, sink, plan.speedscope, plan.speedscope_by, plan.folded, (events or Events()).warn)
    if out is None:
        return result.with_not_saved(sink.not_saved)
    result = result.with_not_saved(out.not_saved)
    out.save_text("hangdbg.json", to_json(stacks_document(result)) + "\n")
    return result.with_not_saved(out.not_saved)


def _check_core_room(plan: DumpPlan, ranks: list[RankProcess], out: OutDir, events: Events) -> None:
    """``--core``: warn about the cores' size and refuse when they do not fit (unless ``force``)."""
    cores = plan_cores(ranks, out.path)
    need, free = human_size(cores.needed), human_size(cores.free)
    events.warn(f"writing {len(ranks)} core files of about {need} in all (the ranks' readable memory) to {out} ({free} free)")
    if not cores.fits and not plan.force:
        raise HangdbgError(
            f"the core files would not fit: about {need} needed, {free} free in {out}",
            help="write them elsewhere with -o DIR on a larger file system, or pass --force to try anyway")


def _write_cores(plan: DumpPlan, ranks: list[RankProcess], out: OutDir, events: Events) -> tuple[GcoreResult, ...]:
    """``--core``: gcore every rank after the stacks were taken (so the pause does not disturb
    them); each may take 15 x the py-spy timeout."""
    results = write_cores(ranks, out.path, timeout=plan.timeout * 15)
    for r in results:
        if r.error:
            events.warn(f"no core of rank {r.rank}: {r.error}")
    return tuple(results)


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
