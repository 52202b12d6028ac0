"""``hangdbg check``: a short diagnostics job on the nodes, and bisection to the bad node or GPU."""

from __future__ import annotations

import argparse
import re

from ..api._check import check
from ..check.node import BACKENDS, CheckJob
from ..check.plan import CheckPlan
from ..errors import HangdbgError, UsageError
from ..transport.slurm_actions import leave_out
from .common import Command, add_output_arguments, command_line, positive_float, positive_int
from .targets import add_target_arguments, target_spec

__all__ = ["CheckCommand", "check_plan", "parse_size"]


def parse_size(text: str) -> int:
    """argparse type: bytes, with an optional K/M/G suffix (powers of 1024): ``64M``, ``1G``, ``4096``."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)(?:i?[Bb])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 4096, 64M, 1G)")
    value = int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    if value < 4:
        raise argparse.ArgumentTypeError("must be at least 4 bytes")
    return value


def check_plan(args: argparse.Namespace) -> CheckPlan:
    """The plan of ``check``.

    Raises:
        UsageError: options that do not go together.
    """
    job = CheckJob(args.backend, args.init_timeout, args.timeout, args.size, args.iters, args.alloc_bytes, args.health)
    return CheckPlan(target_spec(args), job, args.nproc_per_node, args.slow, args.ifname, args.master_port, args.bisect,
                     args.force, args.out, bool(getattr(args, "verbose", False)), argv=tuple(command_line(args)))


class CheckCommand(Command):
    description = (
        "Run a short torch.distributed diagnostics job on the nodes a training job would use (this node "
        "with --nproc-per-node, a SLURM job's nodes with --jobid, or --hosts/--hostfile over ssh/pdsh): every "
        "rank allocates memory, joins the rendezvous, and runs barrier, all_reduce, all_gather, broadcast and "
        "send/recv with the results checked, then a bandwidth test (algbw, busbw; per node too), and each GPU's own figures "
        "(bf16 matmul TFLOP/s, memory copy and host<->GPU copy GB/s, compared across the GPUs; ECC and row remapping "
        "through NVML). Every step has a hard timeout. "
        "When the run fails it is retried on another network interface (start-up failures) and bisected over "
        "the nodes and GPUs to the ones that fail; the verdict prints the sbatch --exclude= value. Exit status: "
        "0 healthy, 3 a bad node or GPU found, 1 the check could not run or its failure named nobody (intermittent), 2 usage "
        "(also a --size no rank can allocate, a --master-port in use)."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("the diagnostics job")
        g.add_argument("--nproc-per-node", type=positive_int, metavar="N",
                       help="ranks per node (default: the GPUs visible on this node or the job's nodes; the hostfile's slots; "
                            "else 2 on this node, 1 per remote node)")
        g.add_argument("--backend", choices=BACKENDS, default="auto",
                       help="auto (default): nccl on nodes with GPUs, else gloo")
        g.add_argument("--timeout", type=positive_float, default=30.0, metavar="S", help="seconds each step may take (default 30; the bandwidth step is one step: --size x --iters must fit)")
        g.add_argument("--init-timeout", type=positive_float, default=120.0, metavar="S",
                       help="seconds for the rendezvous and for init_process_group, each (default 120)")
        g.add_argument("--size", type=parse_size, default=64 << 20, metavar="BYTES", help="bytes of the bandwidth all_reduce (default 64M)")
        g.add_argument("--iters", type=positive_int, default=5, metavar="N", help="timed iterations of the bandwidth test (default 5)")
        g.add_argument("--alloc-bytes", type=parse_size, default=64 << 20, metavar="BYTES",
                       help="bytes each rank allocates on CPU (on a GPU: 90%% of its free memory; default 64M)")
        g.add_argument("--slow", type=positive_float, default=0.5, metavar="FRACTION",
                       help="flag ranks, GPUs and nodes below this fraction of the median figure: bandwidth, matmul "
                            "TFLOP/s, memory and host copies (default 0.5)")
        g.add_argument("--no-health", dest="health", action="store_false",
                       help="leave out the steps of each GPU alone (bf16 matmul, memory copy, host<->GPU copy); the "
                            "ECC and row-remapping counters (NVML) are read anyway")
        g.add_argument("--ifname", metavar="IFACE", help="set GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME to IFACE on every node "
                                                         "from the start (default: the nodes' own setting)")
        g.add_argument("--master-port", type=positive_int, metavar="PORT",
                       help="rendezvous port of the first run (the later runs take the next ones; default: a free random port); "
                            "one in use is refused (exit 2)")
        g.add_argument("--no-bisect", dest="bisect", action="store_false", help="run once on every node; no retry, no bisection")
        g.add_argument("--force", action="store_true", help="reuse an -o DIR that holds another run's output (its hangdbg files are removed first)")
        g.add_argument("--exclude-bad", action="store_true",
                       help="with --jobid: add the bad nodes the verdict names (its --exclude= value) to that job's "
                            "ExcNodeList (scontrol update); SLURM changes it for pending jobs only, so a running job is "
                            "requeued without them (as watch --then requeue --exclude-suspects does)")
        add_target_arguments(p, dump=False)
        add_output_arguments(p, "trials/NN-PURPOSE/messages.jsonl of every run, check.json; default ./hangdbg-check-DATE")

    def run(self, args: argparse.Namespace) -> int:
        from ..report.build import check_document
        from ..report.check_view import render_check

        plan = check_plan(args)
        if getattr(args, "exclude_bad", False) and not plan.target.jobid:
            raise UsageError("--exclude-bad goes with --jobid (the job whose ExcNodeList gets the bad nodes)")
        result = check(plan, self.events(args))
        doc = check_document(result)
        self.show(doc, args, lambda: render_check(doc, evidence=not args.no_evidence), (), result.out_dir)
        if getattr(args, "exclude_bad", False):
            self._exclude_bad(str(plan.target.jobid), result.verdict.bad_nodes, args)
        return result.status

    def _exclude_bad(self, jobid: str, bad_nodes: tuple[str, ...], args: argparse.Namespace) -> None:
        """``--exclude-bad``: the verdict's bad nodes into job ``jobid``'s ``ExcNodeList``
        (:func:`hangdbg.transport.slurm_actions.exclude_nodes`); a failure is a warning (the
        verdict's exit status stands)."""
        events = self.events(args, prefix="hangdbg check")
        if not bad_nodes:
            events.note("--exclude-bad: no bad node named: nothing excluded")
            return
        try:
            done, requeued = leave_out(jobid, bad_nodes)
        except HangdbgError as exc:
            events.warn(f"--exclude-bad: {exc}")
            return
        events.note(f"--exclude-bad: {done.describe()}" + (f"; job {jobid} requeued" if requeued else ""))
