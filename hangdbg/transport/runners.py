"""Transports that run the node agent on many nodes: srun, pdsh, an ssh pool, and a fake.

Each runner starts the agent on its nodes and feeds every output line to ``on_line(host, line)``
as it arrives (``host`` is ``None`` when the transport does not say, e.g. one srun for all
nodes: the frames name their host). ``run`` returns what the transport knows of each node that
failed (unreachable, no hangdbg, timeout) as ``{host: (status, reason)}`` (a
:class:`~hangdbg.enums.NodeStatus` whose ``failed`` is true). Commands are argv
lists; the remote command of ssh/pdsh is joined with :func:`shlex.join` (every word quoted).
Every runner checks its hosts when it is made (:func:`hangdbg.transport.hosts.check_host`: a bad
host raises UsageError before any command is built), and ssh gets ``--`` before the host.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import IO, BinaryIO, Callable, cast

from ..enums import NodeStatus
from ..errors import UsageError
from ..text.lines import MAX_LINE, HeadTail, capped_lines
from ..tools.children import GRACE, RUN, STOP_ON_EOF
from ..tools.subproc import LOG, Popen, kill_group
from ..tools.subproc import run as run_command
from .hosts import check_host, check_hosts

__all__ = ["STDERR_HEAD", "STDERR_TAIL", "Runner", "SrunRunner", "SshRunner", "PdshRunner", "LocalRunner", "FakeRunner", "remote_command", "check_setup", "ssh_argv", "HOST"]

OnLine = Callable[[str | None, str], None]
Failures = dict[str, tuple[NodeStatus, str]]
HOST = "{host}"
"""Placeholder in the agent argv, replaced by each node's name (ssh: per host; pdsh: ``%h``)."""


STDERR_HEAD = 1 << 20
"""Bytes kept of the start of a transport's stderr (pdsh's per-host lines, ssh's errors)."""
STDERR_TAIL = 64 << 10
"""Bytes kept of the end of a transport's stderr (its last error); what lies between is dropped and
counted: a node writing gigabytes of stderr costs the coordinator ``STDERR_HEAD + STDERR_TAIL``."""


def _for_host(argv: list[str], host: str) -> list[str]:
    return [a.replace(HOST, host) for a in argv]


def check_setup(setup: str | None) -> None:
    """Refuse ``--remote-setup`` text that leaves the agent's command line incomplete: a
    trailing ``&&``, ``||``, ``|`` or backslash (it would swallow or break the agent).

    A trailing ``;``, ``&`` or ``# comment`` is fine: :func:`remote_command` puts the setup on
    lines of its own.

    Raises:
        UsageError: the setup text ends with such an operator.
    """
    if setup and setup.rstrip().endswith(("&&", "|", "\\")):
        raise UsageError(f"--remote-setup ends with an operator that waits for more: {setup!r}; "
                         "drop the trailing &&, ||, | or \\ (the agent runs after the setup)")


def remote_command(argv: list[str], setup: str | None = None, stop_on_eof: bool = False, run: str | None = None) -> str:
    """The shell command a remote login shell runs: the setup text, then argv quoted.

    ``setup`` (e.g. ``source ~/.pdshrc``) is the user's own shell text, run as given in the
    login shell (remote non-interactive shells skip ``~/.bashrc``, so a venv must be activated
    here), inside a ``{ ...; }`` group on lines of its own: a trailing ``;``, ``&`` or
    ``# comment`` can neither break nor comment out the agent, which runs when the group
    succeeds: ``{\nSETUP\n} && ARGV``.

    ``stop_on_eof``: run argv under ``env HANGDBG_STOP_ON_EOF=1`` (the agent stops when its
    standard input, the coordinator's ssh, ends: :func:`hangdbg.tools.children.stop_on_stdin_eof`);
    ``run``: the run's token, ``HANGDBG_RUN`` in the agent's environment (what
    ``hangdbg agent --stop-run TOKEN`` stops on the node).

    Raises:
        UsageError: see :func:`check_setup`.
    """
    marks = ([f"{STOP_ON_EOF}=1"] if stop_on_eof else []) + ([f"{RUN}={run}"] if run else [])
    cmd = shlex.join(["env", *marks, *argv] if marks else argv)
    if not setup or not setup.strip():
        return cmd
    check_setup(setup)
    return f"{{\n{setup.strip(chr(10))}\n}} && {cmd}"


def _classify_exit(code: int | None, stderr: str) -> tuple[NodeStatus, str] | None:
    """A transport-level failure from an exit status and stderr, or None if the agent ran."""
    tail = " ".join(stderr.strip().splitlines()[-2:])[-300:]
    if "No module named hangdbg" in stderr or code == 127 or "command not found" in stderr or "No such file" in stderr:
        return NodeStatus.NO_HANGDBG, f"hangdbg is not installed there (use --remote-python / --remote-setup): {tail}"
    if code == 255:
        return NodeStatus.UNREACHABLE, tail or "ssh failed (exit status 255)"
    return None


def _host_failure(code: int | None, stderr: str, timed_out: bool, timeout: float, what: str) -> tuple[NodeStatus, str] | None:
    """What became of one host's command (:meth:`Runner._pump`'s result), or None when it ran:
    a timeout, :func:`_classify_exit`, or an exit status other than 0 and 3 (ignored when the
    agent still sent its result)."""
    if timed_out:
        return NodeStatus.TIMEOUT, f"no answer within {timeout:g} s"
    if (bad := _classify_exit(code, stderr)) is not None:
        return bad
    if code not in (0, 3):
        tail = " ".join(stderr.strip().splitlines()[-2:])[-300:]
        return NodeStatus.ERROR, f"{what} exited with status {code}" + (f": {tail}" if tail else "")
    return None


def _binary(stream: IO) -> BinaryIO:
    """The byte stream under a text-mode pipe (read in bytes, so that a cap counts bytes)."""
    return cast(BinaryIO, getattr(stream, "buffer", stream))


class Runner:
    """Base class: ``run(agent_argv, on_line, timeout) -> failures``; ``stop()`` kills it all."""

    hosts: list[str]

    def __init__(self) -> None:
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self.dropped: dict[str | None, int] = {}
        """Bytes of output left out per host (None: a transport's shared stream), :meth:`_pump`."""

    def run(self, agent_argv: list[str], on_line: OnLine, timeout: float) -> Failures:  # pragma: no cover
        raise NotImplementedError

    die_with_parent = False
    """Start the transport with ``PR_SET_PDEATHSIG`` (:class:`LocalRunner`: a local launcher
    dies with hangdbg, even when hangdbg is SIGKILLed)."""

    stop_on_eof = False
    """Keep the transport's standard input open (a pipe never written): when hangdbg ends, the
    remote agent sees it end and stops (ssh, pdsh: ``HANGDBG_STOP_ON_EOF``)."""

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        proc = Popen(
            argv, stdin=subprocess.PIPE if self.stop_on_eof else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, errors="replace", env=env, start_new_session=True, bufsize=1,
            die_with_parent=self.die_with_parent,
        )
        with self._lock:
            self._procs.add(proc)
        return proc

    def _pump(self, proc: subprocess.Popen, host: str | None, on_line: OnLine, timeout: float) -> tuple[int | None, str, bool]:
        """Feed stdout lines until exit or ``timeout``; returns (exit code, stderr, timed out).

        Bounded whatever the node sends: a line keeps its first :data:`~hangdbg.text.lines.MAX_LINE`
        bytes (1 MiB, a ``host: `` prefix included), stderr its first :data:`STDERR_HEAD` and last
        :data:`STDERR_TAIL` bytes; the bytes left out are added to ``dropped[host]`` (``host``
        None: the transport's one stream for every node)."""
        assert proc.stdout is not None and proc.stderr is not None  # started with PIPE for both (_start)
        stdout, stderr = _binary(proc.stdout), _binary(proc.stderr)
        err = HeadTail(STDERR_HEAD, STDERR_TAIL)
        reader = threading.Thread(target=err.drain, args=(stderr,), daemon=True)
        reader.start()
        fired = threading.Event()

        def expire() -> None:
            fired.set()
            self._kill(proc)

        timer = threading.Timer(timeout, expire)
        timer.start()
        cut = 0
        try:
            for raw, lost in capped_lines(stdout, MAX_LINE):
                cut += lost
                on_line(host, raw.decode("utf-8", "replace").rstrip("\r"))
            code = proc.wait()
        except BaseException:  # Ctrl-C, SIGTERM: the transport is killed here, before it is forgotten
            self._kill(proc)
            raise
        finally:
            timer.cancel()
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            with self._lock:
                self._procs.discard(proc)
        reader.join(timeout=5)
        text = err.text()
        if cut or err.dropped:
            with self._lock:
                self.dropped[host] = self.dropped.get(host, 0) + cut + err.dropped
        return code, text, fired.is_set()

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        kill_group(proc)

    ssh_options: list[str]
    setup: str | None
    connect_timeout: int

    def _remote_stop(self, hosts: list[str], agent_argv: list[str], token: str) -> None:
        """The remote kill of a run given up on (its node timed out): ``hangdbg agent --stop-run
        TOKEN`` over ssh on each of ``hosts``, before anything new starts there (the agent also
        stops by itself when its standard input ends; this covers one that cannot see it). Only
        for an agent run as ``PYTHON -m hangdbg ...``, and without ``--remote-setup`` (the setup may
        be what hangs: the Python is run by its path); a failure is logged, never raised. Each stop is
        bounded by ``connect_timeout`` + :data:`~hangdbg.tools.children.GRACE` + 2 seconds (a transport
        that hangs delays the command's end by that much, never more)."""
        if agent_argv[1:3] != ["-m", "hangdbg"]:
            return
        stop = [*agent_argv[:3], "agent", "--stop-run", token]

        def one(host: str) -> None:
            argv = ssh_argv(check_host(host), self.ssh_options, self.connect_timeout, remote_command(stop))
            try:
                run_command(argv, timeout=self.connect_timeout + GRACE + 2)  # connect, then the agent's TERM/KILL
            except (OSError, subprocess.SubprocessError) as exc:
                LOG.info("remote stop on %s failed: %s", host, exc)

        if hosts:
            with ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
                list(pool.map(one, hosts))

    def stop(self) -> None:
        """Kill every transport process still running (Ctrl-C)."""
        with self._lock:
            for proc in list(self._procs):
                self._kill(proc)


class SrunRunner(Runner):
    """One ``srun --jobid=ID --overlap -N n --ntasks-per-node=1 -w nodes AGENT`` for all nodes,
    so that SLURM's own tree does the fan-out. The agents stop when their standard input ends
    (``HANGDBG_STOP_ON_EOF`` in the environment srun exports to them; ``--input=all``): srun passes
    on the end of its own, so a hangdbg that ends however (SIGKILL included) stops them. A SIGKILLed
    srun would not (slurmstepd keeps the tasks' standard input open): :meth:`_kill` sends SIGTERM first."""

    def __init__(self, jobid: str, hosts: list[str], srun_args: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        super().__init__()
        self.jobid, self.hosts, self.srun_args, self.env = jobid, check_hosts(hosts), srun_args or [], env

    def argv(self, agent_argv: list[str]) -> list[str]:
        return [
            "srun", f"--jobid={self.jobid}", "--overlap", "-N", str(len(self.hosts)),
            "--ntasks-per-node=1", "-w", ",".join(self.hosts), "--kill-on-bad-exit=0", "--input=all",
            *self.srun_args, *agent_argv,
        ]

    stop_on_eof = True  # srun gives its standard input to every task (--input=all, srun(1))

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        """SIGTERM srun, then SIGKILL its group after :data:`GRACE` seconds: srun forwards SIGTERM
        to the step's tasks (srun(1), "SIGNALS AND ESCAPE SEQUENCES") and the step ends with it;
        a SIGKILLed srun leaves the step and its agents running (slurmstepd keeps their standard
        input open, so they never see it end)."""
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            kill_group(proc)
            return

        def later() -> None:
            try:
                proc.wait(GRACE)
            except subprocess.TimeoutExpired:
                kill_group(proc)

        threading.Thread(target=later, daemon=True, name="srun-kill").start()

    def run(self, agent_argv: list[str], on_line: OnLine, timeout: float) -> Failures:
        env = {**(self.env if self.env is not None else os.environ), STOP_ON_EOF: "1"}  # srun exports it to the agents
        try:
            proc = self._spawn(self.argv(agent_argv), env)
        except FileNotFoundError:
            return {h: (NodeStatus.ERROR, "srun not found (is this a SLURM login node?)") for h in self.hosts}
        code, err, timed_out = self._pump(proc, None, on_line, timeout)
        failures: Failures = {}
        for m in re.finditer(r"srun: error: (\S+): tasks? [\d,\-]+: (.*)", err):
            failures[m.group(1)] = (NodeStatus.ERROR, f"agent {m.group(2).strip()}")
        if timed_out:
            return {h: failures.get(h, (NodeStatus.TIMEOUT, f"no answer within {timeout:g} s")) for h in self.hosts} | failures
        if code not in (0, 3) and not failures:
            reason = " ".join(err.strip().splitlines()[-3:])[-400:] or f"srun exited with status {code}"
            failures = {h: (NodeStatus.ERROR, reason) for h in self.hosts}
        return failures


def ssh_argv(host: str, options: list[str], connect_timeout: int, command: str) -> list[str]:
    """``ssh -o BatchMode=yes -o ConnectTimeout=T [options] -- host command``.

    After ``--`` ssh reads no more options: neither ``host`` nor the command can be taken for one.
    """
    return ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}", *options, "--", host, command]


class SshRunner(Runner):
    """The agent over ``ssh -o BatchMode=yes -o ConnectTimeout=T host -- CMD``, a bounded pool.

    Host key checking stays as the user's ssh configuration has it (never turned off here).
    """

    def __init__(self, hosts: list[str], ssh_options: list[str] | None = None, setup: str | None = None,
                 connect_timeout: int = 10, jobs: int = 32) -> None:
        super().__init__()
        check_setup(setup)  # before any transport runs
        self.hosts, self.ssh_options, self.setup = check_hosts(hosts), ssh_options or [], setup
        self.connect_timeout, self.jobs = connect_timeout, jobs

    stop_on_eof = True

    def argv(self, host: str, agent_argv: list[str], token: str | None = None) -> list[str]:
        return ssh_argv(check_host(host), self.ssh_options, self.connect_timeout,
                        remote_command(_for_host(agent_argv, host), self.setup, stop_on_eof=True, run=token))

    def run(self, agent_argv: list[str], on_line: OnLine, timeout: float) -> Failures:
        failures: Failures = {}

        def one(host: str) -> None:
            token = uuid.uuid4().hex
            try:
                proc = self._spawn(self.argv(host, agent_argv, token))
            except FileNotFoundError:
                failures[host] = (NodeStatus.ERROR, "ssh not found")
                return
            bad = _host_failure(*self._pump(proc, host, on_line, timeout), timeout, "remote command")
            if bad is not None:
                failures[host] = bad
                if bad[0] is NodeStatus.TIMEOUT:
                    self._remote_stop([host], agent_argv, token)

        pool = ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(self.hosts))))
        try:
            list(pool.map(one, self.hosts))
        except BaseException:  # Ctrl-C: kill the ssh processes instead of waiting for them
            pool.shutdown(wait=False, cancel_futures=True)
            self.stop()
            raise
        pool.shutdown()
        return failures


class PdshRunner(Runner):
    """The agent through ``pdsh -S -R exec -w hosts ssh ... %h -- CMD``.

    The exec module runs the same ssh argv as :class:`SshRunner` (BatchMode, ConnectTimeout,
    the user's ssh options; host keys checked) with ``%h`` replaced by each host, so the agent
    learns its node's name. ``-S`` makes pdsh exit with the largest remote status (it otherwise
    exits 0 when ssh fails). Output lines come as ``host: line``.
    """

    def __init__(self, hosts: list[str], ssh_options: list[str] | None = None, setup: str | None = None,
                 connect_timeout: int = 10, fanout: int = 32) -> None:
        super().__init__()
        check_setup(setup)  # before any transport runs
        self.hosts, self.ssh_options, self.setup = check_hosts(hosts), ssh_options or [], setup
        self.connect_timeout, self.fanout = connect_timeout, fanout

    stop_on_eof = True

    def argv(self, agent_argv: list[str], timeout: float, token: str | None = None) -> list[str]:
        command = remote_command(_for_host(agent_argv, "%h"), self.setup, stop_on_eof=True, run=token)
        return [
            "pdsh", "-S", "-R", "exec", "-f", str(self.fanout), "-u", str(max(1, int(timeout))),
            "-w", ",".join(self.hosts), *ssh_argv("%h", self.ssh_options, self.connect_timeout, command),
        ]

    def run(self, agent_argv: list[str], on_line: OnLine, timeout: float) -> Failures:
        token = uuid.uuid4().hex
        try:
            proc = self._spawn(self.argv(agent_argv, timeout, token))
        except FileNotFoundError:
            return {h: (NodeStatus.ERROR, "pdsh not found") for h in self.hosts}

        def split(_host: str | None, line: str) -> None:
            host, sep, rest = line.partition(": ")
            on_line(host if sep else None, rest if sep else line)

        code, err, timed_out = self._pump(proc, None, split, timeout + 10)
        failures: Failures = {}
        by_host: dict[str, list[str]] = {}
        for line in err.splitlines():
            m = re.match(r"pdsh@\S+: (\S+): (.*)", line)
            host, sep, rest = (m.group(1), ":", m.group(2)) if m else line.partition(": ")
            if sep and host in self.hosts:
                by_host.setdefault(host, []).append(rest)
        for host, lines in by_host.items():
            text = "\n".join(lines)
            code_m = re.search(r"exited with exit code (\d+)", text)
            host_code = int(code_m.group(1)) if code_m else None
            if "command timeout" in text:
                failures[host] = (NodeStatus.TIMEOUT, f"no answer within {timeout:g} s")
            elif (bad := _classify_exit(host_code, text)) is not None:
                failures[host] = bad
            elif host_code not in (None, 0, 3):
                failures[host] = (NodeStatus.ERROR, text[-300:])
        if timed_out:
            for h in self.hosts:
                failures.setdefault(h, (NodeStatus.TIMEOUT, f"no answer within {timeout:g} s"))
        self._remote_stop([h for h, (st, _) in failures.items() if st is NodeStatus.TIMEOUT], agent_argv, token)
        return failures


class LocalRunner(Runner):
    """The command as a child process on this node (``hangdbg check`` with ``--nproc-per-node``):
    the same path as the remote transports, without one. ``{host}`` becomes ``host``. The
    command dies with hangdbg (``PR_SET_PDEATHSIG``)."""

    die_with_parent = True

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host
        self.hosts = [host]

    def run(self, agent_argv: list[str], on_line: OnLine, timeout: float) -> Failures:
        try:
            proc = self._spawn(_for_host(agent_argv, self.host))
        except FileNotFoundError as exc:
            return {self.host: (NodeStatus.ERROR, f"cannot run {exc.filename}")}
        bad = _host_failure(*self._pump(proc, self.host, on_line, timeout), timeout, "the command")
        return {} if bad is None else {self.host: bad}


class FakeRunner(Runner):
    """Replays recorded agent output (``{host: [lines]}``) for unit tests of the coordinator."""

    def __init__(self, outputs: dict[str, list[str]], failures: Failures | None = None, delay: float = 0.0) -> None:
        super().__init__()
        self.outputs, self.failures, self.delay = outputs, failures or {}, delay
        self.hosts = list(outputs) + [h for h in self.failures if h not in outputs]

    def run(self, agent_argv: list[str], on_line: OnLine, timeout: float) -> Failures:
        for host, lines in self.outputs.items():
            for line in lines:
                on_line(None, line)
                if self.delay:
                    time.sleep(self.delay)
        return dict(self.failures)
