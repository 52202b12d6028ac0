"""The ``check`` use case: a short diagnostics job on the nodes a training job would use, and
bisection to the bad node or GPU (:func:`check`)."""

from __future__ import annotations

import os
import resource

from ..check.blame import SetupError, Trial
from ..check.gpus import NodeGpus, node_gpus, visible_gpus
from ..check.node import gpu_list
from ..check.mistakes import BUFFERS_PER_RANK, memory_needed, oversized, port_holder, port_in_use
from ..check.plan import CheckPlan, CheckResult
from ..check.run import CheckSetup, ranks_setup_error, run_check, setup_error
from ..check.verdict import check_verdict
from ..collect.gcore import human_size
from ..enums import NodeStatus
from ..errors import HangdbgError, UsageError
from ..events import Events
from ..report.build import check_document
from ..report.schema import to_json
from ..transport.slurm import node_addresses
from ..transport.targets import job_gpus, resolve, ssh_address
from ._dump import claim_out

__all__ = ["check", "setup"]


MAX_SLOTS = 1024
"""Ranks per node above which ``check`` refuses (exit 2): more than any node's GPUs (8-72) or a
sensible CPU oversubscription; a hostfile's ``slots=99999999999`` would otherwise be a list of that
many slots (issue 31)."""

RANKS_PER_CPU = 4
"""On this node, ``--nproc-per-node`` above this many ranks per CPU (and above its GPU count) is
refused: each gloo rank is a whole Python process with torch (about 300 MB), and a thousand of them
starve the node the check is meant to judge."""


def refuse_too_many_ranks(n: int, gpus: int) -> None:
    """Refuse ``n`` ranks on this node when they exceed ``max(gpus, RANKS_PER_CPU x CPUs)`` or the
    processes the user may still start (``RLIMIT_NPROC``, getrlimit(2)).

    Raises:
        UsageError: with the numbers.
    """
    cpus = os.cpu_count() or 1
    if n > max(gpus, RANKS_PER_CPU * cpus):
        raise UsageError(f"--nproc-per-node {n}: this node has {cpus} CPU(s) and {gpus} GPU(s); more than "
                         f"{max(gpus, RANKS_PER_CPU * cpus)} ranks would starve it",
                         help="give the node's GPU count, or a few ranks per CPU for a gloo check")
    soft, _hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and n >= soft:
        raise UsageError(f"--nproc-per-node {n}: the process limit (ulimit -u) is {soft}",
                         help="raise `ulimit -u` or start fewer ranks")


def refuse_mistakes(plan: CheckPlan, ranks: int, on_cpu: bool) -> None:
    """The user's set-up errors this node can see before the run (:mod:`hangdbg.check.mistakes`):
    ``--master-port`` in use here (it hosts the rendezvous), and ``ranks`` CPU ranks whose
    buffers (:func:`~hangdbg.check.mistakes.memory_needed`) exceed this node's memory and swap
    (psutil) when ``on_cpu``.

    Raises:
        UsageError: with the port's holder or the numbers, and the remedy.
    """
    import psutil

    if plan.master_port:
        held = port_holder(plan.master_port)
        if held is not None:
            raise UsageError(f"--master-port {plan.master_port}: {held}; rank 0 could not host the rendezvous there",
                             help="give a free port, or leave --master-port out (check then picks a free one)")
    if on_cpu:
        need = memory_needed(plan.job, ranks)
        have = psutil.virtual_memory().total + psutil.swap_memory().total
        if need > have:
            raise UsageError(f"--size {human_size(plan.job.size)} / --alloc-bytes {human_size(plan.job.alloc_bytes)}: "
                             f"{ranks} rank(s) would hold about {human_size(need)} ({BUFFERS_PER_RANK} x --size or "
                             f"--alloc-bytes each), and this node has {human_size(have)} of memory and swap",
                             help="give a smaller --size (the default 64M measures bandwidth well) or --alloc-bytes")


def _refuse_mistakes_seen(first: Trial, plan: CheckPlan) -> None:
    """The user's set-up errors the first run showed (:mod:`hangdbg.check.mistakes`): every rank
    failing to allocate the size an option asks for, or rank 0 unable to listen on the given
    ``--master-port``: exit 2 with the remedy, never a bad node.

    Raises:
        UsageError: either of them.
    """
    big = oversized(first, plan.job)
    if big is not None:
        raise UsageError(f"{big.option} {human_size(big.nbytes)}: no rank could allocate it (every rank failed "
                         f"{big.step}: {big.error[:300]})", help=f"give a smaller {big.option}; no node is at fault")
    busy = port_in_use(first) if plan.master_port else None
    if busy is not None:
        raise UsageError(f"--master-port {plan.master_port} is in use on {first.hosts[0]}: rank 0 could not host the "
                         f"rendezvous there ({busy[:300]})",
                         help="give a free port, or leave --master-port out (check then picks a free one); "
                              "no node is at fault")


def setup(plan: CheckPlan) -> tuple[CheckSetup, str]:
    """The nodes, slots, rendezvous addresses and transport of ``plan``, and a description of the
    targets (``--nproc-per-node 2``, ``--jobid 42 -w node2``, ``--hosts node[1-2]``).

    Raises:
        UsageError: bad targets (no such job, no hosts), the output directory cannot be used.
    """
    t = plan.target
    targets = resolve(t, "check")  # this node: a LocalRunner
    targets.make_runner(targets.hosts)  # checks the hosts and the remote setup before anything runs
    if not t.remote:
        listed = gpu_list()
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        in_job = "SLURM_JOB_ID" in os.environ
        n = plan.nproc_per_node or len(visible_gpus(listed, cvd, in_job)) or 2
        refuse_too_many_ranks(n, len(listed))
        mine = node_gpus(plan.job.backend, range(n), listed, cvd, in_job)
        _refuse_unfit(targets.hosts[0], plan.job.backend, listed, cvd, mine)
        refuse_mistakes(plan, n, on_cpu=mine.backend == "gloo")
        slots = {h: n for h in targets.hosts}
        addresses = {h: "127.0.0.1" for h in targets.hosts}
        what = f"--nproc-per-node {n}"
    elif t.jobid:
        n = plan.nproc_per_node or job_gpus(t.jobid) or 1
        slots = {h: n for h in targets.hosts}
        addresses = node_addresses(targets.hosts)
        what = t.describe()
    else:
        slots = {h: plan.nproc_per_node or targets.slots.get(h, 1) for h in targets.hosts}
        addresses = {h: ssh_address(h, t.ssh_argv_options()) for h in targets.hosts}
        what = t.describe()
    for h, n_slots in slots.items():
        if n_slots > MAX_SLOTS:
            raise UsageError(f"{n_slots} ranks on {h}: more than {MAX_SLOTS} ranks per node is no node's layout",
                             help="give the node's GPU count (hostfile `slots=N`, --nproc-per-node N)")
    out = claim_out(plan.out, "check", plan.argv or plan.to_argv(), plan.force, prefix="hangdbg-check")
    layout = tuple((h, tuple(range(slots[h]))) for h in targets.hosts)
    return CheckSetup(layout, addresses, targets.make_runner, t.remote_python, not t.jobid, plan.job, plan.ifname,
                      plan.master_port, plan.bisect, out, plan.verbose), what


def check(plan: CheckPlan, events: Events | None = None) -> CheckResult:
    """Run the diagnostics job of ``plan`` on its nodes; on a failure, retry it on another network
    interface (start-up failures) and bisect it over the nodes and their GPUs; write every
    message to ``OUT/trials/`` as it arrives and the document to ``OUT/check.json``.

    Raises:
        HangdbgError: the check could not run at all (hangdbg or torch missing where the ranks
            run, nccl on a CPU-only torch): a setup error, never a bad node.
        UsageError: bad targets or output directory; the user's set-up errors
            (:mod:`hangdbg.check.mistakes`: a ``--size`` no rank can allocate, a busy
            ``--master-port``), before the run on this node or after the first run.
    """
    events = events or Events()
    run_setup, targets = setup(plan)

    def on_trial(t: Trial) -> None:
        what = "passed" if t.passed else f"failed at {t.failed_step or 'start'}"
        events.note(f"run {t.number} ({t.purpose}) on {t.label}: {what} in {t.seconds:.1f} s")

    ranks = sum(len(s) for _, s in run_setup.layout)
    with events.busy(f"check: {len(run_setup.layout)} node(s), {ranks} ranks..."):
        run = run_check(run_setup, on_trial)
    _refuse_setup_errors(run.first)
    _refuse_mistakes_seen(run.first, plan)
    verdict = check_verdict(run.trials, run.retry, run.nodes, run.gpus, plan.job.backend, plan.slow)
    result = CheckResult(targets, plan.job.backend, str(run_setup.out.path), tuple(run.trials), verdict)
    run_setup.out.save_text("check.json", to_json(check_document(result)) + "\n")
    return result


def _refuse_unfit(host: str, backend: str, listed: list[str], cvd: str | None, mine: NodeGpus) -> None:
    """This node's ranks must fit the GPUs CUDA shows them (:func:`~hangdbg.check.gpus.gpu_fit`),
    checked before anything runs.

    Raises:
        HangdbgError: more ranks than visible GPUs with nccl (``auto`` is nccl where a GPU is
            visible), with the numbers and the remedy; a set-up error, never a bad node.
    """
    if listed and not mine.visible and backend == "auto":
        raise HangdbgError(f"CUDA_VISIBLE_DEVICES={cvd!r} hides all {len(listed)} GPUs of this node: the check would "
                           "run without them", help="unset CUDA_VISIBLE_DEVICES (or list the GPUs to check in it), or "
                                                    "--backend gloo to check the network without GPUs")
    if mine.fit is not None:
        raise HangdbgError(f"the check cannot run here as asked: {mine.fit.message(host)}", help=mine.fit.remedy())


def _refuse_setup_errors(first: Trial) -> None:
    """A check that could not start anywhere, for a reason of the setup (:class:`SetupError`,
    carried as a value from where it happened, or every node's ranks not fitting its GPUs), is
    exit 1 with the remedy, never a bad node."""
    unfit = [n for n in first.nodes if n.status is NodeStatus.SETUP]
    if unfit and len(unfit) == len(first.nodes):
        raise HangdbgError(f"the check cannot run on the nodes as asked: {unfit[0].setup_error or unfit[0].reason}",
                           help=unfit[0].setup_remedy or "run one rank per visible GPU, or --backend gloo")
    broken = setup_error(first)
    if broken is not None and len(first.nodes) > 1:
        raise HangdbgError(f"the check could not start on any node: {broken.reason}",
                           help="hangdbg (and torch) must be importable by --remote-python on the nodes; "
                                "--remote-setup can activate a venv or load modules first")
    ranks_broken = ranks_setup_error(first)
    if ranks_broken is SetupError.NO_TORCH:
        raise HangdbgError("torch is not installed where the ranks run: the diagnostics job needs it",
                           help="pip install torch on the nodes, or pass --remote-python (a Python with torch and hangdbg)")
    if ranks_broken is SetupError.CPU_ONLY:
        raise HangdbgError("--backend nccl needs CUDA, and the torch where the ranks run is a CPU-only build",
                           help="use --backend gloo (or auto), or a Python with a CUDA build of torch (--remote-python)")
