"""``hangdbg dump --jobid / --hosts / --hostfile``: the agent on every node, one merged report."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from typing import Callable, NamedTuple

from ..stacks.analysis import analyze
from ..collect.node_status import node_findings as failed_node_findings
from ..headline import fanout_headline
from ..collect.fanout import FanoutResult, NodeResult, agent_argv, fan_out, node_file
from ..transport.hosts import expand_hosts, read_hostfile_slots
from ..transport.runners import HOST, PdshRunner, Runner, SrunRunner, SshRunner
from ..transport.slurm import show_job
from ..errors import UsageError
from ..model import Finding
from ..report.build import node_document, node_entry
from ..report.document import NodeEntry
from .common import EXIT_ERROR, EXIT_FOUND, Command, emit_stacks, out_dir, progress_bar, write_json

__all__ = [
    "add_remote_arguments",
    "agent_args",
    "dump_remote",
    "fan_out_with_progress",
    "node_entries",
    "node_findings",
    "remote_runner",
    "remote_targets",
    "ssh_options",
    "Targets",
    "wants_remote",
]



def add_remote_arguments(p: argparse.ArgumentParser, dump: bool = True) -> None:
    """The target options (``--jobid``, ``--hosts``, ``--hostfile`` and their transports);
    ``dump=False`` (``check``) leaves out the options about finding and dumping ranks."""
    g = p.add_argument_group("other nodes (SLURM, ssh, pdsh)")
    target = g.add_mutually_exclusive_group()
    target.add_argument("--jobid", help="every node of this running SLURM job (one srun runs the agent on all of them)")
    target.add_argument("--hosts", metavar="EXPR", help="hosts to reach over ssh/pdsh, e.g. 'node[1-8]' (python-hostlist syntax)")
    target.add_argument("--hostfile", metavar="FILE", help="deepspeed/pdsh hostfile: `host slots=N` lines")
    g.add_argument("-w", "--nodes", metavar="EXPR", help="with --jobid: only these nodes of the job")
    g.add_argument("--srun-arg", action="append", default=[], metavar="ARG", help="extra srun argument, e.g. --srun-arg=--gres=gpu:0 --srun-arg=--mem=0 (repeatable)")
    g.add_argument("--launcher", choices=("auto", "ssh", "pdsh"), default="auto", help="for --hosts/--hostfile: pdsh when installed (auto), or an ssh pool")
    g.add_argument("--ssh-config", metavar="FILE", help="ssh client configuration (ssh -F FILE)")
    g.add_argument("--ssh-option", action="append", default=[], metavar="OPT", help="extra ssh -o option, e.g. --ssh-option Port=2222 (repeatable; host key checking is never turned off by hangdbg)")
    g.add_argument("--connect-timeout", type=int, default=10, metavar="S", help="ssh ConnectTimeout in seconds (default 10)")
    g.add_argument("--remote-python", metavar="PATH", default=sys.executable, help=f"Python with hangdbg on the nodes (default: this one, {sys.executable})")
    g.add_argument("--remote-setup", metavar="SHELL", help="shell text run before the agent over ssh/pdsh, e.g. 'source ~/.pdshrc' (non-interactive shells skip ~/.bashrc)")
    if not dump:
        return
    g.add_argument("--node-timeout", type=float, metavar="S", help="seconds a node may take (default: 6 x --timeout + samples x interval + 30, or 2 x --timeout with --no-adapt)")
    g.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE", help="ranks must have KEY=VALUE in their environment; {host} is replaced by the node's name (repeatable)")


def wants_remote(args: argparse.Namespace) -> bool:
    return bool(args.jobid or args.hosts or args.hostfile)


def agent_args(args: argparse.Namespace, with_host: bool) -> list[str]:
    """The agent's options for ``args`` of ``dump`` (py-spy flags, timeouts, samples, target, ``--match-env``)."""
    out: list[str] = []
    for flag in ("native", "locals", "nonblocking"):
        if getattr(args, flag):
            out.append(f"--{flag}")
    if not getattr(args, "adapt", True):
        out.append("--no-adapt")
    out += ["--timeout", f"{args.timeout:g}", "--samples", str(args.samples), "--interval", f"{args.interval:g}"]
    if args.jobs:
        out += ["--jobs", str(args.jobs)]
    if args.py_spy:
        out += ["--py-spy", args.py_spy]
    if getattr(args, "verbose", False):
        out.append("-v")  # the agents send their external commands back as log frames
    if args.jobid:
        out += ["--jobid", args.jobid]
    if with_host:
        out += ["--node-name", HOST]
    for pair in args.match_env:
        out += ["--match-env", pair]
    return out


class Targets(NamedTuple):
    """The nodes of ``--jobid``/``--hosts``/``--hostfile`` and how to reach them.

    ``make_runner``: a transport for any subset of ``hosts``; ``whole``: ``hosts`` are every node
    of the job; ``slots``: a hostfile's ``slots=N`` per host (empty for ``--jobid``/``--hosts``).
    """

    make_runner: Callable[[list[str]], Runner]
    hosts: list[str]
    whole: bool
    slots: dict[str, int]


def ssh_options(args: argparse.Namespace) -> list[str]:
    """The ssh options of ``--ssh-config`` and ``--ssh-option``."""
    return (["-F", args.ssh_config] if args.ssh_config else []) + [x for o in args.ssh_option for x in ("-o", o)]


def remote_targets(args: argparse.Namespace, what: str = "dump") -> Targets:
    """The nodes named by the options and a transport factory for them (srun into the job;
    pdsh when installed or asked for, else an ssh pool).

    Raises:
        UsageError: no such running job, ``-w`` nodes not in it, ``-w`` without ``--jobid``, no hosts.
    """
    if args.jobid:
        job = show_job(args.jobid)
        hosts = list(job.nodes)
        whole = True
        if args.nodes:
            want = expand_hosts(args.nodes)
            unknown = [h for h in want if h not in job.nodes]
            if unknown:
                raise UsageError(f"nodes {','.join(unknown)} are not in job {args.jobid} ({','.join(job.nodes)})")
            hosts, whole = want, len(want) == len(job.nodes)
        srun_args = [a for arg in args.srun_arg for a in shlex.split(arg)]
        return Targets(lambda hs: SrunRunner(args.jobid, hs, srun_args), hosts, whole, {})
    if args.nodes:
        raise UsageError("-w/--nodes goes with --jobid; use --hosts to choose hosts")
    slots = read_hostfile_slots(args.hostfile) if not args.hosts else {}
    hosts = expand_hosts(args.hosts) if args.hosts else list(slots)
    if not hosts:
        raise UsageError(f"no hosts to {what}")
    options = ssh_options(args)
    use_pdsh = args.launcher == "pdsh" or (args.launcher == "auto" and shutil.which("pdsh") is not None)

    def make(hs: list[str]) -> Runner:
        if use_pdsh:
            return PdshRunner(hs, options, args.remote_setup, args.connect_timeout)
        return SshRunner(hs, options, args.remote_setup, args.connect_timeout)

    return Targets(make, hosts, True, slots)


def remote_runner(args: argparse.Namespace) -> tuple[Runner, list[str], bool]:
    """The transport, the node names, and whether they are the whole job (:func:`remote_targets`)."""
    targets = remote_targets(args)
    return targets.make_runner(targets.hosts), targets.hosts, targets.whole


def fan_out_with_progress(cmd: Command, runner: Runner, hosts: list[str], argv: list[str], out, timeout: float,
                          label: str, command: str = "dump") -> FanoutResult:
    """:func:`fan_out` behind a progress bar of nodes done / failed / pending."""
    with progress_bar(cmd.err, "nodes", len(hosts), pending=True) as progress:
        task = progress.add_task(label, total=len(hosts), failed=0)
        failed = 0

        def on_node(n: NodeResult) -> None:
            nonlocal failed
            failed += n.status.failed
            progress.update(task, advance=1, failed=failed)
            path = node_file(out, n.host)
            if path is not None:  # the node's final status, as it arrives
                write_json(path, node_document(command, node_entry(n)))

        return fan_out(runner, hosts, argv, out, timeout, on_node)


def node_entries(nodes: list[NodeResult]) -> list[NodeEntry]:
    """The nodes as document entries."""
    return [node_entry(n) for n in nodes]


def node_findings(nodes: list[NodeResult]) -> list[Finding]:
    """The ``node-failed`` warnings of the nodes that could not be read."""
    return failed_node_findings([(n.host, n.status, n.reason) for n in nodes])


def dump_remote(cmd: Command, args: argparse.Namespace) -> int:
    """Fan out, merge, analyze and report; see the module docstring.

    Exit status: 3 when a suspect is named; else 1 when a node could not be read (the rest is
    kept and reported: never an all-clear for a job not seen whole) or no stack came back; else 0.
    """
    runner, hosts, whole = remote_runner(args)
    out = out_dir(args)
    # the adaptive steps may add a retry, pystack, a native pass, two samples and a store lookup
    timeout = args.node_timeout or ((6 if args.adapt else 2) * args.timeout + args.samples * args.interval + 30)
    argv = agent_argv(args.remote_python, agent_args(args, with_host=not args.jobid))
    result = fan_out_with_progress(cmd, runner, hosts, argv, out, timeout, "fan-out")
    failed = node_findings(result.nodes)
    # the ranks of a node not read were not looked at: not "missing" (never started or exited),
    # only not seen; the node-failed warning and the exit status say so
    analysis = analyze(result.dumps, whole_job=whole and not failed, store_keys=result.store_keys, ops=result.ops)
    for f in failed:
        cmd.warn(f.summary)
    headline = fanout_headline(analysis.headline, [(n.host, n.status) for n in result.nodes if n.status.failed])
    code = emit_stacks(cmd, analysis, args, "dump", out_dir=str(out), nodes=node_entries(result.nodes),
                       garbled_lines=result.garbled_lines, findings=analysis.findings + tuple(failed), headline=headline)
    if code != EXIT_FOUND and failed:
        return EXIT_ERROR  # a node not read: the job was not seen whole, so no all-clear
    return code
