"""``hangdbg watch``: a companion process that watches a running job, dumps it when it stalls
(before a watchdog kills it) and tells someone.

Signals (:mod:`hangdbg.watch.stall`): ``--log`` files that stop growing (``--log-pattern``:
only matching lines count), ``--heartbeat DIR`` files that stop changing, or, without either (or
with ``--stacks``), the ranks' stacks sampled with non-blocking py-spy that stop changing while
ranks wait in torch.distributed. On a stall: the same collection and analysis as ``hangdbg dump``
into ``OUT/stall-YYYYmmdd-HHMMSS/``, then ``--on-hang CMD`` and ``--then kill|scancel|requeue``.
``OUT/watch.json`` (the ``watch`` document) is rewritten after every stall and at the end.

Exit status: 0 the job ended without a stall; 3 a stall was declared (``--once``: right after
the first); 1 tool error; 2 usage.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from ..watch.stall import Observation, Stall, StallDetector, stacks_signature, waiting_or_idle
from ..collect.fanout import agent_argv, fan_out
from ..collect.local import CollectOptions, collect
from ..collect.procs import find_ranks
from ..transport.slurm import WAITING_STATES, job_state, show_job
from ..watch.probes import HeartbeatProbe, LogProbe, kill_process_trees, pids_alive, watch_loop
from ..errors import HangdbgError, UsageError
from ..model import RankDump
from ..report.build import watch_document
from ..report.document import StallEntry
from ..report.safetext import visible
from ..tools.pyspy import PySpyOptions, find_pyspy
from ..tools.subproc import Popen, communicate_or_kill, run
from .common import EXIT_FOUND, EXIT_OK, Command, add_output_arguments, out_dir, positive_float, write_json
from .remote import add_remote_arguments, agent_args, remote_runner, wants_remote

__all__ = ["WatchCommand"]

ON_HANG_TIMEOUT = 600.0
"""Seconds ``--on-hang`` may run before it is killed (the watch goes on)."""

_REMOTE_FLAGS = (("nodes", "-w"), ("launcher", "--launcher"), ("ssh_config", "--ssh-config"),
                 ("connect_timeout", "--connect-timeout"), ("remote_python", "--remote-python"),
                 ("remote_setup", "--remote-setup"), ("node_timeout", "--node-timeout"))


class WatchCommand(Command):
    description = (
        "Watch a running job (--pid on this node, --jobid, --hosts/--hostfile) and, when it stalls (--log not growing "
        "for --stall seconds, --heartbeat files not changing, or the ranks' stacks not changing while they wait in "
        "torch.distributed), dump it as `hangdbg dump` would into OUT/stall-DATE/, run --on-hang and --then. "
        "Exit status: 0 the job ended without a stall, 3 a stall was declared, 1 tool error, 2 usage."
    )

    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        p.add_argument("--pid", type=int, nargs="+", metavar="PID", help="a launcher (torchrun...) or the ranks, on this node")
        g = p.add_argument_group("stall signals")
        g.add_argument("--log", nargs="+", metavar="FILE", default=[], help="training logs (globs allowed): a stall when they stop growing")
        g.add_argument("--log-pattern", metavar="REGEX", help="with --log: count only lines matching REGEX (e.g. 'iteration|step')")
        g.add_argument("--heartbeat", metavar="DIR", help="the directory of hangdbg.hooks.heartbeat() files: a stall when none changes")
        g.add_argument("--stacks", action="store_true", help="also sample the stacks (the default without --log/--heartbeat)")
        g.add_argument("--stall", type=positive_float, default=300.0, metavar="S", help="seconds without progress that make a stall (default 300)")
        g.add_argument("--interval", type=positive_float, default=10.0, metavar="S", help="seconds between observations (default 10)")
        g.add_argument("--grace", type=float, default=0.0, metavar="S", help="seconds after the start with no stall declared (start-up, compilation)")
        g.add_argument("--once", action="store_true", help="stop after the first stall (exit 3)")
        g = p.add_argument_group("on a stall")
        g.add_argument("--on-hang", metavar="CMD", help="shell command run after the dump, with HANGDBG_DUMP_DIR, HANGDBG_JSON, "
                                                        "HANGDBG_HEADLINE, HANGDBG_SUSPECTS (comma list of ranks) in its environment")
        g.add_argument("--then", choices=("kill", "scancel", "requeue"), help="after the dump: kill the job (--pid: its processes; "
                                                                              "--jobid: scancel), scancel or requeue it (--jobid)")
        g.add_argument("--native", action="store_true", help="the stall dump takes native frames too (py-spy --native)")
        g.add_argument("--locals", action="store_true", help="the stall dump takes local variables too (py-spy --locals)")
        g.add_argument("--timeout", type=positive_float, default=20.0, metavar="S", help="seconds before a py-spy run is abandoned (default 20)")
        g.add_argument("--py-spy", dest="py_spy", metavar="PATH", help="the py-spy program to run")
        g.add_argument("--force", action="store_true", help="reuse an -o DIR that holds another run's output")
        add_remote_arguments(p)
        add_output_arguments(p, "watch.json, stall-DATE/ per stall; default ./hangdbg-watch-DATE", evidence=False)

    # -- setup ------------------------------------------------------------------------------------
    def run(self, args: argparse.Namespace) -> int:
        remote = wants_remote(args)
        if not args.pid and not remote:
            raise UsageError("watch what? give --pid PID (this node), --jobid ID, --hosts EXPR or --hostfile FILE")
        if args.pid and remote:
            raise UsageError("--pid is for this node, --jobid/--hosts/--hostfile for a job's nodes: give one target")
        if args.then in ("scancel", "requeue") and not args.jobid:
            raise UsageError(f"--then {args.then} needs --jobid")
        if args.then == "kill" and not (args.pid or args.jobid):
            raise UsageError("--then kill needs --pid or --jobid (over ssh, stop the job with --on-hang)")
        if args.log_pattern and not args.log:
            raise UsageError("--log-pattern goes with --log")
        try:
            pattern = re.compile(args.log_pattern) if args.log_pattern else None
        except re.error as exc:
            raise UsageError(f"--log-pattern is not a regular expression: {exc}") from None
        if find_pyspy(args.py_spy) is None:
            raise HangdbgError("py-spy not found", help="pip install py-spy (or pass --py-spy PATH)")
        self.args = args
        self.out_dir = out_dir(args, prefix="hangdbg-watch")
        self.log_probe = LogProbe(list(args.log), pattern) if args.log else None
        self.beat_probe = HeartbeatProbe(args.heartbeat) if args.heartbeat else None
        self.sample_stacks = args.stacks or not (args.log or args.heartbeat)
        self.signals = [s for s, on in (("log", args.log), ("heartbeat", args.heartbeat), ("stacks", self.sample_stacks)) if on]
        self.targets = self._targets()
        self.stalls: list[StallEntry] = []
        self.observations = 0
        self.no_ranks = 0
        self.seen_ranks = False
        self.remote: tuple[Any, list[str]] | None = None
        if args.jobid:
            self._wait_for_start(args.jobid, args.interval)
        if remote:
            runner, hosts, _whole = remote_runner(args)
            self.remote = (runner, hosts)
        self.note(f"watching {self.targets}: {', '.join(self.signals)}; stall after {args.stall:g} s, "
                  f"every {args.interval:g} s; dumps under {self.out_dir}")
        detector = StallDetector(args.stall, args.grace, time.monotonic())
        self._write("running")
        ended = "interrupted"
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            end = watch_loop(detector, self.observe, self.alive, self.on_stall, args.interval, args.once, self.log)
            ended, self.observations = end.reason, end.observations
        except KeyboardInterrupt:
            self.note("interrupted")
        finally:
            signal.signal(signal.SIGTERM, previous)
            doc = self._write(ended)
        if args.json:
            self.print_json(doc)
        else:
            self.out.print(visible(doc.headline), markup=False, highlight=False)
        return EXIT_FOUND if self.stalls else EXIT_OK

    def _targets(self) -> str:
        a = self.args
        if a.pid:
            return "--pid " + " ".join(map(str, a.pid))
        if a.jobid:
            return f"--jobid {a.jobid}"
        return f"--hosts {a.hosts}" if a.hosts else f"--hostfile {a.hostfile}"

    def note(self, text: str) -> None:
        """A status line on stderr (plain text)."""
        if not self.args.json:
            self.err.print(f"hangdbg watch: {visible(text)}", style="dim", markup=False, highlight=False)

    def log(self, text: str) -> None:
        """A decision line, with ``-v`` only."""
        if self.args.verbose:
            self.err.print(f"hangdbg watch: {visible(text)}", style="dim", markup=False, highlight=False)

    # -- observing --------------------------------------------------------------------------------
    def observe(self, now: float) -> Observation:
        obs = Observation(now, log=self.log_probe.progress() if self.log_probe else None,
                          heartbeat=self.beat_probe.picture() if self.beat_probe else None)
        self.observations += 1
        if self.sample_stacks:
            dumps = self._sample()
            if dumps:
                obs = replace(obs, stacks=stacks_signature(dumps), waiting=waiting_or_idle(dumps))
        return obs

    def _sample(self) -> list[RankDump]:
        """One non-blocking py-spy sample of every rank (no locals, no retry); [] when no rank was found."""
        a = self.args
        if self.remote is None:
            try:
                ranks = find_ranks(a.pid)
            except HangdbgError as exc:
                self.log(f"no ranks to sample: {exc}")
                self.no_ranks += 1
                return []
            opts = CollectOptions(PySpyOptions(nonblocking=True, timeout=a.timeout, executable=a.py_spy), jobs=8)
            dumps = collect(ranks, opts)
        else:
            runner, hosts = self.remote
            # one cheap sample per node: non-blocking py-spy, no locals, no adaptive steps
            sample = argparse.Namespace(**{**vars(a), "native": False, "locals": False, "nonblocking": True,
                                           "adapt": False, "samples": 1, "interval": 1.0, "jobs": None})
            agent = agent_args(sample, with_host=not a.jobid)
            with tempfile.TemporaryDirectory(prefix="hangdbg-watch-sample-") as tmp:
                result = fan_out(runner, hosts, agent_argv(a.remote_python, agent), Path(tmp), 2 * a.timeout + 30)
            for n in result.nodes:
                if n.status not in ("ok", "no-ranks"):
                    self.log(f"node {n.host}: {n.status} {n.reason or ''}")  # a node that stops answering: go on
            dumps = result.dumps
        self.no_ranks = 0 if dumps else self.no_ranks + 1
        self.seen_ranks = self.seen_ranks or bool(dumps)
        return dumps

    def alive(self) -> bool:
        a = self.args
        if a.pid:
            return pids_alive(a.pid)
        if a.jobid:
            try:
                show_job(a.jobid)
                # RUNNING is alive even with no rank anywhere: the batch script is still setting up
                # (its first srun has not started), or it is between two steps
                return True
            except UsageError as exc:  # not RUNNING, or gone from the controller
                self.log(str(exc))
                return False
            except HangdbgError as exc:  # scontrol failed: say so, judge by the ranks meanwhile
                self.log(f"cannot ask SLURM: {exc}")
        # over ssh (or scontrol failing): no rank on any node twice in a row
        # (only once ranks were seen: a watcher may start before the job's ranks do)
        return not (self.sample_stacks and self.seen_ranks and self.no_ranks >= 2)

    def _wait_for_start(self, jobid: str, interval: float) -> None:
        """Wait while SLURM job ``jobid`` is pending (``sbatch ...; hangdbg watch --jobid ID``)."""
        said = ""
        while True:
            state = job_state(jobid).state
            if state not in WAITING_STATES:
                return
            if state != said:
                self.note(f"SLURM job {jobid} is {state}; waiting for it to run")
                said = state
            time.sleep(min(interval, 10.0))

    # -- on a stall -------------------------------------------------------------------------------
    def on_stall(self, stall: Stall) -> None:
        a = self.args
        t0 = time.monotonic()
        detected = datetime.now(timezone.utc).isoformat(timespec="seconds")
        stall_dir = _fresh(self.out_dir / f"stall-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
        self.note(f"STALL: {stall.reason}; dumping into {stall_dir}")
        code, headline, suspects = self._dump(stall_dir)
        dump_seconds = time.monotonic() - t0
        self.note(f"dump done in {dump_seconds:.1f} s: {headline or 'no answer'}")
        hook = self._on_hang(stall_dir, headline, suspects, stall) if a.on_hang else None
        then = self._then() if a.then else None
        sig = stall.signal if stall.signal in ("log", "heartbeat", "stacks") else "stacks"
        self.stalls.append(StallEntry(detected, sig, round(stall.seconds, 1), stall.reason, str(stall_dir), code,  # type: ignore[arg-type]
                                      headline, tuple(suspects), round(dump_seconds, 2), hook, then))
        self._write("running")

    def dump_argv(self, out: Path) -> list[str]:
        """The ``hangdbg dump`` command line a stall runs (its adaptive steps included)."""
        a = self.args
        argv = ["dump", "-o", str(out), "--timeout", f"{a.timeout:g}"]
        if a.verbose:
            argv.append("-v")
        argv += [f"--{f}" for f in ("native", "locals") if getattr(a, f)]
        if a.py_spy:
            argv += ["--py-spy", a.py_spy]
        if a.pid:
            return argv + ["--pid", *map(str, a.pid)]
        argv += ["--jobid", a.jobid] if a.jobid else ["--hosts", a.hosts] if a.hosts else ["--hostfile", a.hostfile]
        for attr, flag in _REMOTE_FLAGS:
            value = getattr(a, attr)
            if value is not None and (attr != "launcher" or value != "auto"):
                argv += [flag, str(value)]
        for attr, flag in (("srun_arg", "--srun-arg"), ("ssh_option", "--ssh-option"), ("match_env", "--match-env")):
            for value in getattr(a, attr):
                argv.append(f"{flag}={value}")
        return argv

    def _dump(self, stall_dir: Path) -> tuple[int | None, str | None, list[int]]:
        """Run the stall's ``hangdbg dump``; its exit status, headline and blamed ranks (from the
        document it built, whether or not the disk kept its ``hangdbg.json``)."""
        from .dump_cmd import DumpCommand
        from .main import build_parser

        argv = self.dump_argv(stall_dir)
        self.log("running: hangdbg " + shlex.join(argv))
        dump = DumpCommand(Console(file=io.StringIO()) if self.args.json else self.out, self.err)
        try:
            code = dump.run(build_parser(argv).parse_args(argv))
        except HangdbgError as exc:
            self.err.print(f"hangdbg watch: the stall dump failed: {visible(str(exc))}", markup=False, highlight=False)
            code = 2 if isinstance(exc, UsageError) else 1
        doc = dump.document
        if doc is None:
            return code, None, []
        return code, doc.headline, sorted({r for f in doc.findings if f.is_suspect for r in f.ranks})

    def _on_hang(self, stall_dir: Path, headline: str | None, suspects: list[int], stall: Stall) -> int | None:
        """Run ``--on-hang`` through ``sh -c`` (the user's own command line, as they wrote it; our values
        only in its environment); its output goes to stderr (stdout may carry ``--json``)."""
        env = dict(os.environ, HANGDBG_DUMP_DIR=str(stall_dir), HANGDBG_JSON=str(stall_dir / "hangdbg.json"),
                   HANGDBG_HEADLINE=headline or "", HANGDBG_SUSPECTS=",".join(map(str, suspects)),
                   HANGDBG_STALL_REASON=stall.reason)
        try:
            proc = Popen(["/bin/sh", "-c", self.args.on_hang], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            self.note(f"--on-hang could not run: {exc}")
            return None
        got = communicate_or_kill(proc, ON_HANG_TIMEOUT)
        if got is None:
            self.note(f"--on-hang ran longer than {ON_HANG_TIMEOUT:g} s and was stopped")
            return None
        said = got[0].decode("utf-8", "replace").rstrip()
        if said:
            self.err.print(visible(said), markup=False, highlight=False)
        if proc.returncode != 0:
            self.note(f"--on-hang exited with status {proc.returncode}")
        return proc.returncode

    def _then(self) -> str:
        a = self.args
        if a.then == "kill" and a.pid:
            return kill_process_trees(a.pid)
        argv = ["scancel", a.jobid] if a.then in ("kill", "scancel") else ["scontrol", "requeue", a.jobid]
        try:
            res = run(argv, timeout=60, text=True, errors="replace")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{a.then}: {shlex.join(argv)} failed: {exc}"
        said = (res.stderr or res.stdout).strip()[:200]
        return f"{a.then}: {shlex.join(argv)} exited {res.returncode}" + (f": {said}" if said else "")

    def _write(self, ended: str) -> Any:
        a = self.args
        doc = watch_document(self.targets, str(self.out_dir), self.signals, a.stall, a.interval, self.observations,
                             ended, self.stalls)
        write_json(self.out_dir / "watch.json", doc)
        return doc


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _fresh(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``... when it exists (two stalls in one second)."""
    n, candidate = 1, path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate
