"""What a command works on and how to reach it: :class:`TargetSpec`, and :func:`resolve` into nodes
and a transport.

``dump``, ``watch`` and ``check`` take the same targets: ranks of this node (``--pid``, or every
training process found), every node of a running SLURM job (``--jobid``, ``-w``: one srun), or
hosts over ssh/pdsh (``--hosts 'node[1-8]'`` in python-hostlist syntax, ``--hostfile`` with
deepspeed/pdsh ``host slots=N`` lines). The command line builds one :class:`TargetSpec`;
everything below it reads the spec, never the options.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, NamedTuple

from ..errors import UsageError
from ..tools.subproc import run as run_tool
from .hosts import expand_hosts, read_hostfile_slots
from .runners import LocalRunner, PdshRunner, Runner, SrunRunner, SshRunner
from .slurm import show_job

__all__ = ["TargetSpec", "Targets", "resolve", "ray_targets", "LAUNCHERS", "REMOTE_ONLY", "misplaced_option",
           "ssh_address", "job_gpus"]

LAUNCHERS = ("auto", "ssh", "pdsh")
"""How ``--hosts``/``--hostfile`` are reached: pdsh when installed (``auto``), or an ssh pool."""


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """The processes or nodes of one command, and how to reach the nodes.

    Exactly one of ``pids`` (this node), ``jobid``, ``hosts``, ``hostfile`` names the target; none
    of them: every training process of this node.

    Attributes:
        pids: ranks, or launchers whose descendant ranks are meant (this node).
        jobid: a running SLURM job: every node of it (one ``srun --overlap``).
        nodes: with ``jobid``: only these of its nodes (python-hostlist expression, ``-w/--nodelist`` as
            srun names it).
        hosts: hosts to reach over ssh/pdsh (python-hostlist expression).
        hostfile: a deepspeed/pdsh hostfile (``host slots=N`` lines).
        srun_args: extra srun arguments, each a shell-quoted string (``--srun-arg``).
        launcher: ``auto`` (pdsh when installed), ``ssh`` or ``pdsh``, for ``hosts``/``hostfile``.
        ssh_config: an ssh client configuration file (``ssh -F``).
        ssh_options: extra ``ssh -o`` options (``Port=2222``); host key checking stays on.
        connect_timeout: ssh ``ConnectTimeout``, in seconds.
        remote_python: the Python with hangdbg on the nodes.
        remote_setup: shell text run before hangdbg over ssh/pdsh (``source ~/venv/bin/activate``).
        match_env: ``KEY=VALUE`` pairs a rank's environment must hold (``{host}``: the node's name).
        ray: a Ray cluster's address (GCS ``HOST:PORT`` or dashboard ``http://HOST:PORT``): its
            actors that are ranks (:mod:`hangdbg.collect.ray_ranks`), on this node or, over ssh by
            node IP, on the others.
    """

    pids: tuple[int, ...] = ()
    jobid: str | None = None
    nodes: str | None = None
    hosts: str | None = None
    hostfile: str | None = None
    srun_args: tuple[str, ...] = ()
    launcher: str = "auto"
    ssh_config: str | None = None
    ssh_options: tuple[str, ...] = ()
    connect_timeout: int = 10
    remote_python: str = sys.executable
    remote_setup: str | None = None
    match_env: tuple[str, ...] = ()
    ray: str | None = None

    def __post_init__(self) -> None:
        named = [n for n, v in (("--pid", self.pids), ("--jobid", self.jobid), ("--hosts", self.hosts),
                                ("--hostfile", self.hostfile), ("--ray", self.ray)) if v]
        if len(named) > 1:
            raise UsageError(f"give one target, not {' and '.join(named)}: --pid is for this node, "
                             "--jobid/--hosts/--hostfile for a job's nodes")
        if any(p <= 0 for p in self.pids):
            raise UsageError("--pid takes positive process ids")
        wrong = misplaced_option(self)
        if wrong is not None:
            raise UsageError(wrong)
        if self.launcher not in LAUNCHERS:
            raise UsageError(f"--launcher is one of {', '.join(LAUNCHERS)}, not {self.launcher!r}")

    @property
    def remote(self) -> bool:
        """Other nodes (``--jobid``, ``--hosts``, ``--hostfile``), not this one."""
        return bool(self.jobid or self.hosts or self.hostfile)

    def describe(self) -> str:
        """The target as its options say it: ``--pid 12 13``, ``--jobid 42 -w node2``, ``--hosts node[1-2]``,
        ``this node``."""
        if self.pids:
            return "--pid " + " ".join(map(str, self.pids))
        if self.jobid:
            return f"--jobid {self.jobid}" + (f" -w {self.nodes}" if self.nodes else "")
        if self.hosts:
            return f"--hosts {self.hosts}"
        if self.hostfile:
            return f"--hostfile {self.hostfile}"
        if self.ray:
            return f"--ray {self.ray}"
        return "this node"

    def ssh_argv_options(self) -> list[str]:
        """The ssh options of ``ssh_config`` and ``ssh_options`` (``-F FILE -o OPT ...``)."""
        return (["-F", self.ssh_config] if self.ssh_config else []) + [x for o in self.ssh_options for x in ("-o", o)]

    def to_argv(self, agent: bool = False) -> list[str]:
        """The command-line options that give this spec (the inverse of the CLI's parsing;
        defaults left out). ``agent=True``: only what the node agent takes (``--pid``,
        ``--jobid``, ``--match-env``), not how to reach the nodes."""
        argv: list[str] = []
        if self.pids:
            argv += ["--pid", *map(str, self.pids)]
        if self.jobid:
            argv += ["--jobid", self.jobid]
        if self.ray:
            argv += ["--ray", self.ray]
        if not agent:
            argv += ["--nodelist", self.nodes] if self.nodes else []
            argv += ["--hosts", self.hosts] if self.hosts else []
            argv += ["--hostfile", self.hostfile] if self.hostfile else []
            argv += [f"--srun-arg={a}" for a in self.srun_args]
            argv += ["--launcher", self.launcher] if self.launcher != "auto" else []
            argv += ["--ssh-config", self.ssh_config] if self.ssh_config else []
            argv += [f"--ssh-option={o}" for o in self.ssh_options]
            argv += ["--connect-timeout", str(self.connect_timeout)] if self.connect_timeout != 10 else []
            argv += ["--remote-python", self.remote_python] if self.remote_python != sys.executable else []
            argv += ["--remote-setup", self.remote_setup] if self.remote_setup is not None else []
        argv += [f"--match-env={pair}" for pair in self.match_env]
        return argv


class RemoteOnly(NamedTuple):
    """An option that says how to reach other nodes, and the targets it applies to."""

    field: str
    """The :class:`TargetSpec` attribute."""
    flag: str
    """The option's name on the command line."""
    targets: tuple[str, ...]
    """The :class:`TargetSpec` attributes of the targets it goes with (one of them must be set)."""
    default: object
    """The attribute's default: any other value means the option was given."""


_SSH = ("hosts", "hostfile", "ray")  # ssh/pdsh reach these: --ray's other nodes over ssh (ray_targets)
REMOTE_ONLY: tuple[RemoteOnly, ...] = (
    RemoteOnly("nodes", "-w/--nodelist", ("jobid",), None),  # srun -w: a subset of the job's nodes
    RemoteOnly("srun_args", "--srun-arg", ("jobid",), ()),
    RemoteOnly("launcher", "--launcher", ("hosts", "hostfile"), "auto"),  # ray_targets always uses ssh
    RemoteOnly("ssh_config", "--ssh-config", _SSH, None),
    RemoteOnly("ssh_options", "--ssh-option", _SSH, ()),
    RemoteOnly("connect_timeout", "--connect-timeout", _SSH, 10),
    RemoteOnly("remote_setup", "--remote-setup", _SSH, None),  # srun runs the agent without a shell text
    RemoteOnly("remote_python", "--remote-python", ("jobid", *_SSH), sys.executable),  # the agent's Python
)
"""The options that only mean something for other nodes: given with a target they do not go with
(this node's ranks, or another transport), they would be ignored in silence, so they are a usage
error (:func:`misplaced_option`)."""

_TARGET_FLAGS = {"jobid": "--jobid", "hosts": "--hosts", "hostfile": "--hostfile", "ray": "--ray"}


def misplaced_option(spec: TargetSpec) -> str | None:
    """The usage error of the first :data:`REMOTE_ONLY` option ``spec`` holds (a value other than
    its default) without a target it goes with, e.g. ``-w/--nodelist needs --jobid ...``; None when
    every option fits the target."""
    for opt in REMOTE_ONLY:
        if getattr(spec, opt.field) != opt.default and not any(getattr(spec, t) for t in opt.targets):
            needs = " or ".join(_TARGET_FLAGS[t] for t in opt.targets)
            return (f"{opt.flag} needs {needs}: it says how to reach other nodes, and this command works on "
                    f"{spec.describe()}")
    return None


class Targets(NamedTuple):
    """The nodes of a :class:`TargetSpec` and how to reach them.

    ``make_runner``: a transport for any subset of ``hosts``; ``whole``: ``hosts`` are every node
    of the job; ``slots``: a hostfile's ``slots=N`` per host (empty for ``--jobid``/``--hosts``).
    """

    make_runner: Callable[[list[str]], Runner]
    hosts: list[str]
    whole: bool
    slots: dict[str, int]


def resolve(spec: TargetSpec, what: str = "dump") -> Targets:
    """The nodes a remote ``spec`` names and a transport factory for them (srun into the job;
    pdsh when installed or asked for, else an ssh pool); for a local spec, this node through a
    :class:`~hangdbg.transport.runners.LocalRunner`.

    Raises:
        UsageError: no such running job, ``-w`` nodes not in it, no hosts.
        HangdbgError: scontrol failed.
    """
    if not spec.remote:
        import socket

        host = socket.gethostname().split(".")[0] or "localhost"
        return Targets(lambda _hosts: LocalRunner(host), [host], True, {})
    if spec.jobid:
        jobid = spec.jobid
        job = show_job(jobid)
        hosts = list(job.nodes)
        whole = True
        if spec.nodes:
            want = expand_hosts(spec.nodes)
            unknown = [h for h in want if h not in job.nodes]
            if unknown:
                raise UsageError(f"nodes {','.join(unknown)} are not in job {jobid} ({','.join(job.nodes)})")
            hosts, whole = want, len(want) == len(job.nodes)
        srun_args = [a for arg in spec.srun_args for a in shlex.split(arg)]
        return Targets(lambda hs: SrunRunner(jobid, hs, srun_args), hosts, whole, {})
    slots = read_hostfile_slots(spec.hostfile) if spec.hostfile else {}
    hosts = expand_hosts(spec.hosts) if spec.hosts else list(slots)
    if not hosts:
        raise UsageError(f"no hosts to {what}")
    options = spec.ssh_argv_options()
    use_pdsh = spec.launcher == "pdsh" or (spec.launcher == "auto" and shutil.which("pdsh") is not None)

    def make(hs: list[str]) -> Runner:
        if use_pdsh:
            return PdshRunner(hs, options, spec.remote_setup, spec.connect_timeout)
        return SshRunner(hs, options, spec.remote_setup, spec.connect_timeout)

    return Targets(make, hosts, True, slots)


def ray_targets(spec: TargetSpec, hosts: list[str]) -> Targets:
    """The nodes of a Ray job with ranks on several nodes, each by its Ray ``node_ip``, reached
    over ssh (the options of ``spec``); the agent runs there with ``--ray`` and finds its node's
    ranks itself. ``whole``: ``hosts`` are every node with a rank."""
    options = spec.ssh_argv_options()
    return Targets(lambda hs: SshRunner(hs, options, spec.remote_setup, spec.connect_timeout), list(hosts), True, {})


def job_gpus(jobid: str) -> int:
    """GPUs per node of a SLURM job (``TresPerNode=gres:gpu:N`` / ``gres/gpu=N`` of ``scontrol show
    job``), 0 when none or when scontrol fails."""
    try:
        res = run_tool(["scontrol", "show", "job", jobid], timeout=30, text=True)
    except (OSError, subprocess.SubprocessError):
        return 0
    m = re.search(r"TresPerNode=\S*?gpu(?::[\w-]+)?:(\d+)", res.stdout or "")
    return int(m.group(1)) if m else 0


def ssh_address(host: str, options: list[str]) -> str:
    """The address ssh connects to for ``host`` (``ssh -G``: the user's configuration applied);
    ``host`` itself when ssh cannot tell."""
    try:
        res = run_tool(["ssh", "-G", *options, "--", host], timeout=10, text=True)
    except (OSError, subprocess.SubprocessError):
        return host
    m = re.search(r"^hostname (\S+)$", res.stdout or "", re.M)
    return m.group(1) if m and res.returncode == 0 else host
