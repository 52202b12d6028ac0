"""The target options of ``dump``, ``watch`` and ``check`` (``--pid``, ``--jobid``, ``--hosts``,
``--hostfile`` and how to reach the nodes), parsed into one
:class:`~hangdbg.transport.targets.TargetSpec`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..transport.targets import LAUNCHERS, REMOTE_ONLY, TargetSpec

__all__ = ["add_target_arguments", "target_spec"]


class _DeprecatedNodes(argparse.Action):
    """``--nodes EXPR``: the old name of ``-w/--nodelist``; still works, with a one-line warning
    (SLURM's ``--nodes`` is a node count, srun's ``-w/--nodelist`` the host list meant here)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print("hangdbg: warning: --nodes is deprecated, use -w/--nodelist (as srun names it)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_target_arguments(p: argparse.ArgumentParser, dump: bool = True) -> None:
    """The target options; ``dump=False`` (``check``) leaves out the options about finding and
    dumping ranks (``--node-timeout``, ``--match-env``)."""
    g = p.add_argument_group("other nodes (SLURM, ssh, pdsh)")
    target = g.add_mutually_exclusive_group()
    target.add_argument("--jobid", help="every node of this running SLURM job (one srun runs the agent on all of them)")
    target.add_argument("--hosts", metavar="EXPR", help="hosts to reach over ssh/pdsh, e.g. 'node[1-8]' (python-hostlist syntax)")
    target.add_argument("--hostfile", metavar="FILE", help="deepspeed/pdsh hostfile: `host slots=N` lines")
    target.add_argument("--ray", metavar="ADDRESS", help="the ranks of a Ray job: the actors of the Ray cluster at ADDRESS "
                        "(GCS HOST:PORT or dashboard http://HOST:8265) that have a rank (Ray Train, runtime_env or start "
                        "environment); other nodes over ssh by node IP (needs ray: pip install 'hangdbg[ray]')")
    g.add_argument("-w", "--nodelist", dest="nodes", metavar="EXPR",
                   help="with --jobid: only these nodes of the job, e.g. 'node[2-3]' (srun -w/--nodelist)")
    g.add_argument("--nodes", dest="nodes", metavar="EXPR", action=_DeprecatedNodes, help=argparse.SUPPRESS)  # old name
    g.add_argument("--srun-arg", action="append", default=[], metavar="ARG", help="extra srun argument, e.g. --srun-arg=--gres=gpu:0 --srun-arg=--mem=0 (repeatable)")
    g.add_argument("--launcher", choices=LAUNCHERS, default="auto", help="for --hosts/--hostfile: pdsh when installed (auto), or an ssh pool")
    g.add_argument("--ssh-config", metavar="FILE", help="ssh client configuration (ssh -F FILE)")
    g.add_argument("--ssh-option", action="append", default=[], metavar="OPT", help="extra ssh -o option, e.g. --ssh-option Port=2222 (repeatable; host key checking is never turned off by hangdbg)")
    g.add_argument("--connect-timeout", type=int, default=10, metavar="S", help="ssh ConnectTimeout in seconds (default 10)")
    g.add_argument("--remote-python", metavar="PATH", default=sys.executable, help=f"Python with hangdbg on the nodes (default: this one, {sys.executable})")
    g.add_argument("--remote-setup", metavar="SHELL", help="shell text run before the agent over ssh/pdsh, e.g. 'source ~/.pdshrc' (non-interactive shells skip ~/.bashrc)")
    if not dump:
        return
    g.add_argument("--node-timeout", type=float, metavar="S", help="seconds a node may take (default: 6 x --timeout + samples x interval + 30, or 2 x --timeout with --no-adapt)")
    g.add_argument("--match-env", action="append", default=[], metavar="KEY=VALUE", help="ranks must have KEY=VALUE in their environment; {host} is replaced by the node's name (repeatable)")


def target_spec(args: argparse.Namespace) -> TargetSpec:
    """The :class:`TargetSpec` of the parsed options (``--pid`` where the command has it).

    A :data:`~hangdbg.transport.targets.REMOTE_ONLY` option that a config file set
    (``args._config_set``, :mod:`hangdbg.cli.config`) and that does not go with the chosen target
    is left out (a site's ``remote-setup`` must not make every local dump a usage error); given on
    the command line, it is a usage error.

    Raises:
        UsageError: two targets, a remote-only option (``-w/--nodelist``, ``--srun-arg``,
            ``--ssh-option``...) without a target it goes with, a pid <= 0.
    """
    from_config: dict[str, tuple[str, Any]] = getattr(args, "_config_set", None) or {}

    def configured(dest: str) -> bool:  # the file's value, not one the command line gave
        return dest in from_config and getattr(args, dest, None) == from_config[dest][1]

    def opt(name: str, default: Any = None) -> Any:
        value = getattr(args, name, None)  # commands offer some of the target options only (the agent)
        return default if value is None else value

    targets = {t: opt(t) for t in ("jobid", "hosts", "hostfile", "ray")}
    dropped = {o.field: o.default for o in REMOTE_ONLY
               if configured(_dest(o.field)) and not any(targets[t] for t in o.targets)}

    def remote(name: str, field: str, default: Any = None) -> Any:
        return dropped[field] if field in dropped else opt(name, default)

    return TargetSpec(
        pids=tuple(opt("pid", ())), jobid=opt("jobid"), nodes=remote("nodes", "nodes"), hosts=opt("hosts"),
        hostfile=opt("hostfile"), srun_args=tuple(remote("srun_arg", "srun_args", ())),
        launcher=remote("launcher", "launcher", "auto"), ssh_config=remote("ssh_config", "ssh_config"),
        ssh_options=tuple(remote("ssh_option", "ssh_options", ())),
        connect_timeout=remote("connect_timeout", "connect_timeout", 10),
        remote_python=remote("remote_python", "remote_python", sys.executable),
        remote_setup=remote("remote_setup", "remote_setup"), match_env=tuple(opt("match_env", ())), ray=opt("ray"))


def _dest(field: str) -> str:
    """The argparse dest of a :class:`TargetSpec` field (``srun_args`` is ``--srun-arg``'s)."""
    return {"srun_args": "srun_arg", "ssh_options": "ssh_option"}.get(field, field)
