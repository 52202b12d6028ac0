"""``hangdbg check``'s coordinator: run trials of the diagnostics job, then bisect a failure.

A trial runs ``hangdbg check-node`` on each of its nodes through a :class:`~.runners.Runner`
(srun for a SLURM job, ssh or pdsh for hosts, a local process for this node), decodes the
nodes' frames into a :class:`~hangdbg.check.blame.Trial` and writes every message to
``OUT/trials/NN-PURPOSE/messages.jsonl`` the moment it arrives. :func:`run_check` runs the whole
set; when it fails: one retry on the interface that routes to the rendezvous (bootstrap
failures only), then :func:`~hangdbg.check.bisection.isolate` over the nodes and over the GPUs
(slots) of a node that fails by itself. Subsets of one round run at once.
"""

from __future__ import annotations

import itertools
import json
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from .bisection import Isolation, Outcome, isolate
from .blame import SetupError, Trial, blame, check_node, rank_result, rank_setup, slots_text
from ..enums import NodeStatus
from ..outdir import OutDir
from ..tools.subproc import LOG
from .mismatch import mismatch
from .mistakes import oversized, port_in_use
from .node import CheckJob, parse_layout
from ..transport.wire import FrameDecoder
from ..transport.runners import HOST, Runner

__all__ = ["CheckSetup", "CheckRun", "Checker", "SetupFailure", "TrialMessages", "read_trial", "run_check", "node_budget",
           "setup_error", "ranks_setup_error"]

Layout = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class CheckSetup:
    """How to run the check.

    Attributes:
        layout: every node and its slots (GPU indexes), in rank order.
        addresses: the address each node's ranks reach it by (its rendezvous address when it
            is a trial's first node).
        make_runner: a transport for a list of nodes.
        python: the interpreter with hangdbg on the nodes.
        node_name_arg: pass ``--node-name {host}`` (ssh/pdsh/local); srun nodes know their name.
        job: the diagnostics job's parameters (:class:`~hangdbg.check.node.CheckJob`).
        ifname: the interface to use from the start (None: the nodes' own setting).
        master_port: first rendezvous port (None: a random free one per trial).
        bisect: bisect a failure (``--no-bisect``: only the first trial).
        out: the output directory (``trials/NN-PURPOSE/messages.jsonl`` of every trial).
        verbose: ask the nodes for their commands (``-v``).
    """

    layout: Layout
    addresses: dict[str, str]
    make_runner: Callable[[list[str]], Runner]
    python: str
    node_name_arg: bool
    job: CheckJob = field(default_factory=CheckJob)
    ifname: str | None = None
    master_port: int | None = None
    bisect: bool = True
    out: OutDir = field(default_factory=lambda: OutDir("."))
    verbose: bool = False


@dataclass
class CheckRun:
    """Every trial of a check, and what the bisection found.

    ``first``: the trial of every node; ``retry``: the same on another interface (None when not
    run); ``nodes``: the bisection over nodes; ``gpus``: over the slots of each node that fails
    by itself.
    """

    first: Trial
    trials: list[Trial]
    retry: Trial | None = None
    nodes: Isolation[str] | None = None
    gpus: dict[str, Isolation[int]] = field(default_factory=dict)


def node_budget(plan: CheckSetup) -> float:
    """Seconds a node may take for a trial: start (imports) + rendezvous + init, the eleven steps
    after them, and slack for the transport."""
    return 3 * plan.job.init_timeout + 12 * plan.job.timeout + 60


def _free_port() -> int:
    for _ in range(50):
        port = random.randrange(29500, 30500)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


class Checker:
    """Runs trials of one plan (thread-safe: subsets of a bisection round run at once)."""

    def __init__(self, plan: CheckSetup, on_trial: Callable[[Trial], None] | None = None) -> None:
        self.plan = plan
        self.on_trial = on_trial
        self.trials: list[Trial] = []
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._runners: set[Runner] = set()

    def stop(self) -> None:
        """Kill the transports of every run in progress (Ctrl-C); each node's launcher then kills its ranks."""
        with self._lock:
            runners = list(self._runners)
        for r in runners:
            r.stop()

    def argv(self, layout: Layout, port: int, ifname: str | None) -> list[str]:
        p = self.plan
        argv = [p.python, "-m", "hangdbg", "check-node", "--master-addr", p.addresses.get(layout[0][0], layout[0][0]),
                "--master-port", str(port), *p.job.argv()]
        for host, slots in layout:
            argv += ["--layout", f"{host}={slots_text(slots)}"]
        if p.node_name_arg:
            argv += ["--node-name", HOST]
        if ifname:
            argv += ["--ifname", ifname]
        if p.verbose:
            argv.append("-v")
        return argv

    def _number(self) -> int:
        with self._lock:
            return next(self._numbers)

    def run(self, layout: Layout, purpose: str, ifname: str | None = None, number: int | None = None) -> Trial:
        """One trial of ``layout``; when rank 0 could not listen on its port (``EADDRINUSE`` at the
        rendezvous or init: :func:`~.mistakes.port_in_use`), retried once on a free random port,
        except the first trial on the user's ``--master-port``: that is the user's set-up error,
        told as such (:func:`hangdbg.api.check`). ``number``: the trial's number (default: the next one)."""
        ifname = ifname or self.plan.ifname
        number = number or self._number()
        for attempt in range(2):
            port = self.plan.master_port + number - 1 if self.plan.master_port and not attempt else _free_port()
            trial = self._run_once(number, layout, purpose, ifname, port, attempt)
            if port_in_use(trial) is None or (number == 1 and self.plan.master_port):
                break
        with self._lock:
            self.trials.append(trial)
        if self.on_trial is not None:
            self.on_trial(trial)
        return trial

    def run_many(self, layouts: list[Layout], purpose: str) -> list[Trial]:
        """Trials of ``layouts`` at once, numbered in the order given."""
        numbers = [self._number() for _ in layouts]
        if len(layouts) == 1:
            return [self.run(layouts[0], purpose, number=numbers[0])]
        with ThreadPoolExecutor(max_workers=len(layouts)) as pool:
            return list(pool.map(lambda job: self.run(job[0], purpose, number=job[1]), zip(layouts, numbers)))

    def _run_once(self, number: int, layout: Layout, purpose: str, ifname: str | None, port: int, attempt: int) -> Trial:
        hosts = [h for h, _ in layout]
        out = self.plan.out
        log_path = Path("trials") / f"{number:02d}-{purpose.replace(' ', '-')}{'-again' if attempt else ''}" / "messages.jsonl"
        decoder = FrameDecoder(hosts=frozenset(hosts))
        messages = TrialMessages()
        lock = threading.Lock()
        argv = self.argv(layout, port, ifname)
        out.append_text(log_path, json.dumps({"type": "trial", "number": number, "purpose": purpose, "argv": argv}) + "\n", True)

        def on_line(stream: str | None, line: str) -> None:
            with lock:
                for host, msg in decoder.feed(line, stream):
                    out.append_text(log_path, json.dumps({"from": host, **msg}, default=str) + "\n", False)
                    messages.add(host, msg)
                    if msg.get("type") == "log" and isinstance(msg.get("text"), str):
                        LOG.info("[%s] %s", host, msg["text"])
        runner = self.plan.make_runner(hosts)
        with self._lock:
            self._runners.add(runner)
        start = time.monotonic()
        try:
            failures = runner.run(argv, on_line, node_budget(self.plan))
        except BaseException:
            runner.stop()
            raise
        finally:
            with self._lock:
                self._runners.discard(runner)
        addr = self.plan.addresses.get(layout[0][0], layout[0][0])
        return messages.trial(number, purpose, layout, ifname, f"{addr}:{port}", time.monotonic() - start, failures,
                              self.plan.job.backend)


class TrialMessages:
    """The messages of one trial's nodes (``node``, ``step``, ``rank-end``, ``done``:
    :mod:`hangdbg.check.node`), gathered as they arrive, then read as a :class:`Trial`; also
    what reads a trial back from its ``messages.jsonl`` (:func:`read_trial`)."""

    def __init__(self) -> None:
        self.facts: dict[str, dict] = {}
        self.steps: dict[int, list[dict]] = {}
        self.ends: dict[int, dict] = {}
        self.done: dict[str, dict] = {}

    def add(self, host: str, msg: dict) -> None:
        """One message of ``host`` (messages of other types, or of the wrong shape, are ignored)."""
        kind = msg.get("type")
        if kind == "node" and isinstance(msg.get("facts"), dict):
            self.facts[host] = msg["facts"]
        elif kind == "step" and isinstance(msg.get("rank"), int):
            self.steps.setdefault(msg["rank"], []).append(msg)
        elif kind == "rank-end" and isinstance(msg.get("rank"), int):
            self.ends[msg["rank"]] = msg
        elif kind == "done":
            self.done[host] = msg

    def trial(self, number: int, purpose: str, layout: Layout, ifname: str | None, master: str, seconds: float,
              failures: Mapping[str, tuple[NodeStatus | str, str]], backend: str) -> Trial:
        """The trial these messages make; ``failures``: what the transport said of nodes that sent
        no ``done`` (host -> (status, reason))."""
        ranks = []
        nodes = []
        base = 0
        for host, slots in layout:
            for local, slot in enumerate(slots):
                rank = base + local
                ranks.append(rank_result(rank, host, slot, local, self.steps.get(rank, []), self.ends.get(rank)))
            base += len(slots)
            d = self.done.get(host)
            said = NodeStatus.read(d.get("status"), NodeStatus.ERROR) if d is not None else None
            status: NodeStatus
            if said in (NodeStatus.OK, NodeStatus.RANK_FAILED):
                status, reason = said, None
            elif said is NodeStatus.SETUP:
                status, reason = said, str((self.facts.get(host) or {}).get("setup_error") or said.doc)
            elif d is not None:
                status, reason = NodeStatus.ERROR, str(d.get("error") or "the node's launcher failed")
            else:
                failed, reason = failures.get(host, (NodeStatus.NO_ANSWER, "the node sent no result"))
                status = NodeStatus.read(failed, NodeStatus.ERROR)  # what the transport said (a fake runner's text too)
                if status is NodeStatus.NO_ANSWER and host in self.facts:
                    status, reason = NodeStatus.ERROR, "the node's launcher stopped before it finished"
            nodes.append(check_node(host, slots, self.facts.get(host), status, reason, backend))
        setup = {r: s for r, msgs in self.steps.items() if (s := rank_setup(msgs)) is not None}
        return Trial(number, purpose, layout, ifname, master, tuple(nodes), tuple(ranks), seconds, setup)


def read_trial(lines: Iterable[str], backend: str = "auto") -> Trial:
    """A trial read back from its ``OUT/trials/NN-PURPOSE/messages.jsonl`` (the ``trial`` line
    first, then one ``{"from": HOST, ...message}`` per line, as :class:`Checker` writes them).

    Raises:
        ValueError: no ``trial`` line, or it has no ``--layout``. Lines that are not JSON
            objects are skipped.
    """
    head: dict | None = None
    messages = TrialMessages()
    for line in lines:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        if msg.get("type") == "trial" and head is None:
            head = msg
        elif isinstance(msg.get("from"), str):
            messages.add(msg["from"], msg)
    if head is None or not isinstance(head.get("argv"), list):
        raise ValueError("not a trial's messages.jsonl: no trial line")
    argv = [str(a) for a in head["argv"]]
    layout = parse_layout([argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--layout"])
    if not layout:
        raise ValueError("the trial line names no --layout")
    opt = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
    master = f"{opt.get('--master-addr', '?')}:{opt.get('--master-port', '?')}"
    number = head["number"] if isinstance(head.get("number"), int) else 1
    return messages.trial(number, str(head.get("purpose") or "all"), layout, opt.get("--ifname"), master, 0.0, {},
                          opt.get("--backend", backend))


def run_check(plan: CheckSetup, on_trial: Callable[[Trial], None] | None = None) -> CheckRun:
    """Run the check on every node; on a failure, retry on another interface (bootstrap
    failures) and bisect to the nodes and GPUs that fail (see the module docstring)."""
    checker = Checker(plan, on_trial)
    try:
        return _run_check(plan, checker)
    except BaseException:  # Ctrl-C: no run is left behind
        checker.stop()
        raise


@dataclass(frozen=True, slots=True)
class SetupFailure:
    """Why the check could not run at all: ``error`` what, ``reason`` the nodes' own words."""

    error: SetupError
    reason: str


def setup_error(trial: Trial) -> SetupFailure | None:
    """Why the check could not run at all on the nodes, or None: no node could start its launcher,
    for the same reason: hangdbg missing (``no-hangdbg``), the transport failing everywhere
    (``transport``)."""
    if any(r.steps for r in trial.ranks) or not trial.nodes:
        return None
    statuses = {n.status for n in trial.nodes}
    if statuses <= {NodeStatus.NO_HANGDBG, NodeStatus.ERROR} and len({n.reason for n in trial.nodes}) <= 1 \
            or statuses == {NodeStatus.NO_HANGDBG}:
        error = SetupError.NO_HANGDBG if NodeStatus.NO_HANGDBG in statuses else SetupError.TRANSPORT
        return SetupFailure(error, trial.nodes[0].reason or trial.nodes[0].status.value)
    return None


def ranks_setup_error(trial: Trial) -> SetupError | None:
    """The set-up error every rank of the trial reported at its ``facts`` step (``no-torch``,
    ``cpu-only``: :attr:`Trial.setup`), or None when a rank reported none or another."""
    found = {trial.setup.get(r.rank) for r in trial.ranks}
    return found.pop() if len(found) == 1 else None


def _run_check(plan: CheckSetup, checker: Checker) -> CheckRun:
    first = checker.run(plan.layout, "all")
    run = CheckRun(first, checker.trials)
    if first.passed or not plan.bisect or setup_error(first) is not None or mismatch(first) is not None \
            or oversized(first, plan.job) is not None or (plan.master_port and port_in_use(first)):
        return run  # a set-up that does not fit is told apart by its facts: no retry, no bisection
    b = blame(first)
    if b.bootstrap and plan.ifname is None:
        run.retry = checker.run(plan.layout, "interface", "auto")
    slots_of = dict(plan.layout)
    alone_trials: dict[str, Trial] = {}

    def node_outcomes(subsets: list[tuple[str, ...]]) -> list[Outcome[str]]:
        trials = checker.run_many([tuple((h, slots_of[h]) for h in s) for s in subsets], "bisect nodes")
        for s, t in zip(subsets, trials):
            if len(s) == 1:
                alone_trials[s[0]] = t
        return [Outcome(t.passed, blame(t).hosts) for t in trials]

    hosts = [h for h, _ in plan.layout]
    if len(hosts) > 1:
        run.nodes = isolate(hosts, node_outcomes, b.hosts)
        failing_alone = run.nodes.alone
    else:
        alone_trials[hosts[0]] = first
        failing_alone = hosts
    for host in failing_alone:
        slots = slots_of[host]
        trial = alone_trials.get(host)
        named = blame(trial) if trial is not None else None
        named_slots = tuple(s for h, s in named.slots if h == host) if named else ()
        if len(slots) < 2 or (named is not None and set(named_slots) == set(slots)):
            continue  # one GPU, or every GPU of the node fails the same way: the node is bad

        def slot_outcomes(subsets: list[tuple[int, ...]], host: str = host) -> list[Outcome[int]]:
            trials = checker.run_many([((host, s),) for s in subsets], f"bisect {host}")
            return [Outcome(t.passed, tuple(s for h, s in blame(t).slots if h == host)) for t in trials]

        run.gpus[host] = isolate(slots, slot_outcomes, named_slots)
    run.trials = sorted(checker.trials, key=lambda t: t.number)
    return run
