"""``hangdbg check``: a short diagnostics job on the nodes, and bisection to the bad node or GPU."""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys

from ..check.verdict import check_verdict
from ..check.node import CheckJob, gpu_list
from ..check.blame import SetupError
from ..check.run import CheckPlan, ranks_setup_error, run_check, setup_error
from ..transport.runners import LocalRunner
from ..transport.slurm import node_addresses
from ..errors import HangdbgError
from ..report.safetext import visible
from ..tools.subproc import run as run_tool
from .common import EXIT_ERROR, Command, add_output_arguments, exit_status, out_dir, positive_float, positive_int
from .remote import add_remote_arguments, remote_targets, ssh_options, wants_remote

__all__ = ["CheckCommand", "parse_size"]


def parse_size(text: str) -> int:
    """argparse type: bytes, with an optional K/M/G suffix (powers of 1024): ``64M``, ``1G``, ``4096``."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)(?:i?[Bb])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 4096, 64M, 1G)")
    value = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if value < 4:
        raise argparse.ArgumentTypeError("must be at least 4 bytes")
    return value


def _job_gpus(jobid: str) -> int:
    """GPUs per node of a SLURM job (``TresPerNode=gres:gpu:N`` / ``gres/gpu=N``), 0 when none."""
    try:
        res = run_tool(["scontrol", "show", "job", jobid], timeout=30, text=True)
    except (OSError, subprocess.SubprocessError):
        return 0
    m = re.search(r"TresPerNode=\S*?gpu(?::[\w-]+)?:(\d+)", res.stdout or "")
    return int(m.group(1)) if m else 0


def _ssh_address(host: str, options: list[str]) -> str:
    """The address ssh connects to for ``host`` (``ssh -G``: the user's configuration applied)."""
    try:
        res = run_tool(["ssh", "-G", *options, "--", host], timeout=10, text=True)
    except (OSError, subprocess.SubprocessError):
        return host
    m = re.search(r"^hostname (\S+)$", res.stdout or "", re.M)
    return m.group(1) if m and res.returncode == 0 else host


class CheckCommand(Command):
    description = (
        "Run a short torch.distributed diagnostics job on the nodes a training job would use (this node "
        "with --nproc-per-node, a SLURM job's nodes with --jobid, or --hosts/--hostfile over ssh/pdsh): every "
        "rank allocates memory, joins the rendezvous, and runs barrier, all_reduce, all_gather, broadcast and "
        "send/recv with the results checked, then a bandwidth test (algbw, busbw). Every step has a hard timeout. "
        "When the run fails it is retried on another network interface (start-up failures) and bisected over "
        "the nodes and GPUs to the ones that fail; the verdict prints the sbatch --exclude= value. Exit status: "
        "0 healthy, 3 a bad node or GPU found, 1 the check could not run, 2 usage."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("the diagnostics job")
        g.add_argument("--nproc-per-node", type=positive_int, metavar="N",
                       help="ranks per node (default: the GPUs of this node or of the job's nodes; the hostfile's slots; "
                            "else 2 on this node, 1 per remote node)")
        g.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                       help="auto (default): nccl on nodes with GPUs, else gloo")
        g.add_argument("--timeout", type=positive_float, default=30.0, metavar="S", help="seconds each step may take (default 30; the bandwidth step is one step: --size x --iters must fit)")
        g.add_argument("--init-timeout", type=positive_float, default=120.0, metavar="S",
                       help="seconds for the rendezvous and for init_process_group, each (default 120)")
        g.add_argument("--size", type=parse_size, default=64 << 20, metavar="BYTES", help="bytes of the bandwidth all_reduce (default 64M)")
        g.add_argument("--iters", type=positive_int, default=5, metavar="N", help="timed iterations of the bandwidth test (default 5)")
        g.add_argument("--alloc-bytes", type=parse_size, default=64 << 20, metavar="BYTES",
                       help="bytes each rank allocates on CPU (on a GPU: 90%% of its free memory; default 64M)")
        g.add_argument("--slow", type=positive_float, default=0.5, metavar="FRACTION",
                       help="flag ranks and nodes below this fraction of the median bandwidth (default 0.5)")
        g.add_argument("--ifname", metavar="IFACE", help="set GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME to IFACE on every node "
                                                         "from the start (default: the nodes' own setting)")
        g.add_argument("--master-port", type=positive_int, metavar="PORT",
                       help="rendezvous port of the first run (the later runs take the next ones; default: a free random port)")
        g.add_argument("--no-bisect", dest="bisect", action="store_false", help="run once on every node; no retry, no bisection")
        g.add_argument("--force", action="store_true", help="reuse an -o DIR that holds another run's output (its hangdbg files are removed first)")
        add_remote_arguments(p, dump=False)
        add_output_arguments(p, "trials/NN-PURPOSE/messages.jsonl of every run, check.json; default ./hangdbg-check-DATE")

    def run(self, args: argparse.Namespace) -> int:
        plan, targets = self.plan(args)
        lines: list[str] = []

        def on_trial(t) -> None:
            what = "passed" if t.passed else f"failed at {t.failed_step or 'start'}"
            line = f"run {t.number} ({t.purpose}) on {t.label}: {what} in {t.seconds:.1f} s"
            lines.append(line)
            self.err.print(f"hangdbg: {visible(line)}", style="dim", markup=False, highlight=False)

        with self.err.status(f"check: {len(plan.layout)} node(s), {sum(len(s) for _, s in plan.layout)} ranks..."):
            result = run_check(plan, on_trial)
        first = result.first
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
        verdict = check_verdict(result.trials, result.retry, result.nodes, result.gpus, args.backend, args.slow)
        from ..report.build import check_document
        from ..report.check_view import render_check

        doc = check_document(targets, args.backend, str(plan.out), result.trials, verdict)
        self.emit(doc, args, "check.json", lambda: render_check(doc, evidence=not args.no_evidence))
        code = exit_status(doc.found, True)
        if not doc.found and not first.passed:
            return EXIT_ERROR  # never an all-clear for a run that failed
        return code

    def plan(self, args: argparse.Namespace) -> tuple[CheckPlan, str]:
        """The plan and a description of the targets. Raises UsageError on bad options."""
        job = CheckJob(args.backend, args.init_timeout, args.timeout, args.size, args.iters, args.alloc_bytes)
        common = dict(job=job, ifname=args.ifname, master_port=args.master_port, bisect=args.bisect,
                      verbose=bool(getattr(args, "verbose", False)))
        if not wants_remote(args):
            n = args.nproc_per_node or len(gpu_list()) or 2
            host = socket.gethostname().split(".")[0] or "localhost"
            out = out_dir(args, "hangdbg-check")
            plan = CheckPlan(((host, tuple(range(n))),), {host: "127.0.0.1"}, lambda hosts: LocalRunner(host),
                             sys.executable, True, out=out, **common)  # type: ignore[arg-type]
            return plan, f"--nproc-per-node {n}"
        targets = remote_targets(args, "check")
        targets.make_runner(targets.hosts)  # checks the hosts and --remote-setup before anything runs
        if args.jobid:
            n = args.nproc_per_node or _job_gpus(args.jobid) or 1
            slots = {h: n for h in targets.hosts}
            addresses = node_addresses(targets.hosts)
            what = f"--jobid {args.jobid}" + (f" -w {args.nodes}" if args.nodes else "")
        else:
            slots = {h: args.nproc_per_node or targets.slots.get(h, 1) for h in targets.hosts}
            addresses = {h: _ssh_address(h, ssh_options(args)) for h in targets.hosts}
            what = f"--hosts {args.hosts}" if args.hosts else f"--hostfile {args.hostfile}"
        out = out_dir(args, "hangdbg-check")
        plan = CheckPlan(tuple((h, tuple(range(slots[h]))) for h in targets.hosts), addresses, targets.make_runner,
                         args.remote_python, not args.jobid, out=out, **common)  # type: ignore[arg-type]
        return plan, what
