"""Events to findings: one finding per catalog entry that matched, the first failure named,
the later ones and the echoes kept as warnings, the unrecognised lines quoted.

Heuristic (ours, after the issue's "first failure, not its echoes"): a catalog entry says whose
fault a message is (:class:`~hangdbg.catalog.entry.Blame`) and whether it can be a first failure
(:class:`~hangdbg.catalog.entry.Role`). Entries of severity ``suspect`` are suspects, except that
among a rank's or host's own failures (blame ``self`` / ``environment``) only the first stays
one: first by the time its prefix gives when both have one, else by its place in the same file.
Failures in different files without times cannot be ordered and stay suspects. A launch mistake
(blame ``launch``) blames no rank and no node; a hardware fault names its host and GPU. Messages
of a peer's failure and consequences (timeouts, SIGTERM from the agent, aborts) are warnings:
the rank that printed them is a victim.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

from ...catalog.entry import Blame, CatalogEntry, Role
from ...catalog.message import Message, parse_line
from ...catalog.nccl_areas import areas_of
from ...exit_status import describe, exit_code_in
from ...model import Evidence, Finding, Kind, Severity
from ...rankset import ranks_text
from ...text.addresses import ip_text, loopback_in, no_host_in
from ...text.cuda_oom import held_elsewhere
from .facts import EntryCount, ErrorLinesFacts
from .grammar import ErrorEvent, ErrorLog
from .roster import SOURCE_ID, roster_findings

__all__ = ["findings_from", "MAX_UNRECOGNISED"]

MAX_UNRECOGNISED = 25
"""Distinct unrecognised messages quoted one per finding; the rest are quoted together in one more."""
_MAX_EV = 3
_KIND = {Blame.LAUNCH: Kind.LAUNCH_ERROR, Blame.HARDWARE: Kind.HARDWARE_ERROR, Blame.ENVIRONMENT: Kind.RESOURCE_ERROR,
         Blame.SELF: Kind.KNOWN_ERROR, Blame.PEER: Kind.PEER_ERROR, Blame.NONE: Kind.ECHO}
_SEVERITY = {"suspect": Severity.SUSPECT, "warning": Severity.WARNING, "info": Severity.INFO}
_PCI = re.compile(r"\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?\b")
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")
_GPU_WORDS = re.compile(r"\(GPU (\d{1,3});|\bon GPU (\d{1,3})\b|\bGPU (\d{1,3}) has a total capacity|\bdevice\(?type='cuda', index=(\d{1,3})"
                        r"|\bcuda:(\d{1,3})\b")
"""How PyTorch names the GPU in an error (its allocator's ``(GPU 0; 4.00 GiB total capacity ...)`` and
``GPU 0 has a total capacity of``, c10's ``cuda:3``, a ``torch.device``): the process's visible index."""


@dataclass
class _Group:
    entry: CatalogEntry
    outer: CatalogEntry
    events: list[ErrorEvent]

    @property
    def first(self) -> ErrorEvent:
        return self.events[0]


def _who(g: _Group, block_hosts: tuple[str, ...] = (),
         block_ranks: tuple[int, ...] = ()) -> tuple[tuple[int, ...], tuple[str, ...], tuple[str, ...], str]:
    """ranks, hosts, gpus and the words that name them (``block_hosts``: the node a line of the same block
    names, :func:`_block_hosts`; ``block_ranks``: the rank whose error follows a kernel's line, :func:`_kernel_ranks`)."""
    ranks = tuple(sorted({e.message.rank for e in g.events if e.message.rank is not None})) or block_ranks
    hosts = tuple(sorted({e.message.host for e in g.events if e.message.host})) or block_hosts
    gpus = tuple(sorted({f"{e.message.host}:{e.message.dev}" if e.message.host else f"cuda device {e.message.dev}"
                         for e in g.events if e.message.dev is not None and e.message.dev >= 0}))
    if g.entry.blame in (Blame.SELF, Blame.HARDWARE) and not gpus:  # the GPU the message itself names
        gpus = tuple(sorted({f"{e.message.host + ':' if e.message.host else ''}GPU {n}" for e in g.events
                             for m in _GPU_WORDS.finditer(e.message.text) for n in m.groups() if n is not None}))[:8]
    if g.entry.blame is Blame.HARDWARE:  # the PCI address the driver names (NVRM: GPU 0000:05:00.0: ...)
        gpus += tuple(sorted({f"{e.message.host + ':' if e.message.host else ''}{m.group(0)}" for e in g.events
                              for m in _PCI.finditer(e.evidence.text)}))
    if g.entry.blame is Blame.LAUNCH:
        return (), (), (), "the launch configuration"
    if not hosts and g.entry.blame in (Blame.ENVIRONMENT, Blame.HARDWARE):  # a node the message names by address
        hosts = tuple(sorted({ip for e in g.events if e.match is not None for f in _fields(e.match)
                              if (ip := ip_text(f))}))[:8]
    if g.entry.blame is not Blame.HARDWARE and g.entry.blame is not Blame.SELF:
        gpus = ()
    words = []
    if ranks:
        words.append(ranks_text(ranks))
    if g.entry.blame in (Blame.ENVIRONMENT, Blame.HARDWARE) and g.entry.id not in _OWN_DEATH:
        ranks = ()  # the host's or the GPU's fault, not the rank's
    if hosts:
        words.append("on " + ", ".join(hosts[:4]) + (f" (+{len(hosts) - 4})" if len(hosts) > 4 else ""))
    if not words:
        pids = sorted({e.message.pid for e in g.events if e.message.pid is not None})
        words.append(f"pid {', '.join(map(str, pids[:4]))}" if pids else
                     "the node's hardware" if g.entry.blame is Blame.HARDWARE else "a process of the job")
    if gpus and not any(":" in x for x in gpus) and not hosts:  # the GPU the message names, when no host says more
        words.append("on " + ", ".join(gpus[:4]))
    return ranks, hosts, gpus, " ".join(words)


_OWN_DEATH = frozenset({"system.shell.killed"})
"""Entries of the environment that report the death of the process whose line it is (the shell's "Killed" under a
rank's prefix: that rank was SIGKILLed): the cause is the host's (the OOM killer, the scheduler), but the rank is
the one that died first, so the line keeps its rank; the other ranks' lost peers are echoes of it."""


def _fields(m) -> list[str]:
    """The texts every match of the chain captured."""
    out = []
    while m is not None:
        out += list(m.fields)
        m = m.inner
    return out


def _quote(e: ErrorEvent) -> str:
    m = e.message
    t = f"{m.exception}: {m.text}" if m.exception and m.text != m.exception and e.match is None else m.text
    return t if len(t) <= 200 else t[:197] + "..."


EXCEPTION_ID = "python.exception"
"""The id the findings of uncaught exceptions no catalog entry knows cite (as a catalog entry id would be)."""
WAITED_ID = "python.exception-waited"
"""The id such a finding cites when the exception's words say the process waited for another (a timeout, a lost
peer): a warning that is shown (an exception was raised: never "nothing abnormal"), never a first failure."""
_WAITER_WORDS = re.compile(r"\b(?:time[ds]? ?out|timeout|reset by peer|connection (?:closed|reset|refused|lost)|closed by|"
                           r"broken pipe|refused|abort|watchdog|rendezvous|signal|killed|terminat|sigterm|barrier|"
                           r"peers?\b|unreachable|heartbeat)", re.IGNORECASE)  # whole words: TypeError holds "peEr"
"""Words of an exception that a rank raises because of another one (a lost peer, a timeout, an abort):
such an exception is not the rank's own first failure."""


_INSTALL_EXC = re.compile(r"(?:^|\.)(?:ImportError|ModuleNotFoundError)$")
_INSTALL_WORDS = re.compile(
    r"\bNo module named\b|\bcannot import name\b|\bmodule '[\w.]{1,120}' has no attribute\b|\bnot installed\b|"
    r"\b(?:does not|doesn't|do not|don't) support\b|\bis not supported (?:on|by|with|for)\b|"
    r"\brequires? (?:\S{1,60} )?(?:version|>=|compute capability)|\bversion\b.{0,60}\b(?:is required|mismatch|"
    r"incompatible|not supported)|\b(?:Missing|Unexpected) key\(?s?\)? in (?:checkpoint )?state_dict\b|"
    r"\bError\(s\) in loading state_dict\b|\bsize mismatch for \S{1,200}: copying a param", re.IGNORECASE)
"""An exception that reports the installation, a version or a capability of the machine (Python's ImportError /
ModuleNotFoundError, 'No module named', 'module X has no attribute', 'does not support', 'requires version'), or a
checkpoint that does not fit the model (torch/nn/modules/module.py load_state_dict's 'Missing key(s) in state_dict',
'Unexpected key(s)', 'size mismatch for'; torch/distributed/checkpoint/default_planner.py's 'Missing key in checkpoint
state_dict'): every rank that runs this code with these packages and this input raises it, so it names no rank as
the culprit."""


def _exceptions(log: ErrorLog) -> list[Finding]:
    """Uncaught Python exceptions no catalog entry knows (the last line of a traceback): one warning
    finding per exception class and message shape, earliest first; their own failure, unless their
    words say they waited for another rank (:data:`_WAITER_WORDS`)."""
    by: dict[tuple[str, str], list[ErrorEvent]] = {}
    for ev in log.events:
        if ev.match is None and ev.message.exception:
            by.setdefault((ev.message.exception, _NUMBERS.sub("#", ev.message.text)[:160]), []).append(ev)
    out = []
    seen = {e.message.rank for e in log.events if e.message.rank is not None}
    for (exc, _), evs in sorted(by.items(), key=lambda kv: kv[1][0].order)[:MAX_UNRECOGNISED]:
        ranks = tuple(sorted({e.message.rank for e in evs if e.message.rank is not None}))
        hosts = tuple(sorted({e.message.host for e in evs if e.message.host}))
        who = ranks_text(ranks) if ranks else f"a process on {', '.join(hosts[:3])}" if hosts else "a process of the job"
        if len(ranks) >= 2 and set(ranks) == seen:  # the same exception on every rank: a cause they share
            who = f"every rank in these logs ({ranks_text(ranks)}) alike"
            ranks = ()
        install = _INSTALL_EXC.search(exc) is not None or _INSTALL_WORDS.search(evs[0].message.text) is not None
        if install and ranks:
            who, ranks = f"{who} (an installation, version, capability or checkpoint problem, not that rank's own)", ()
        # an installation / capability report is the process's own failure even when it names a collective
        # ("ProcessGroupNCCL does not support barrier")
        waits = not install and (_WAITER_WORDS.search(f"{exc} {evs[0].message.text}") is not None
                                 or _waited_after(log, evs[0])) \
            or exc.endswith("ChildFailedError")  # torchelastic's report of its children's ends, read in its block
        out.append(Finding(
            Kind.RANK_ERROR, f"{who} raised \u201c{_quote(evs[0])}\u201d"
            + (f" at {evs[0].frame}" if evs[0].frame else "") + (f" ({len(evs)} lines)" if len(evs) > 1 else "")
            + (" (torchelastic's report of its children's ends: read in its failure block)" if exc.endswith(
                "ChildFailedError") else " (its words say it waited for something else: a consequence)" if waits else "")
            + ("; the same on every rank: a cause they share (the installed packages, the environment, the "
               "code or its input), not one rank" if who.startswith("every rank") else ""),
            ranks=ranks, hosts=hosts, severity=Severity.WARNING,
            evidence=tuple(e.evidence for e in evs[:_MAX_EV]) + (
                Evidence("traceback", None, f"{WAITED_ID if waits else EXCEPTION_ID}: "
                                            "https://docs.python.org/3/library/exceptions.html"),),
            action="read the traceback that ends in this line: its last frame is where the exception was raised"))
    return out


_WAIT_BLOCK = 4
"""Lines after an exception within which a line of the same file says that the process waited for another one."""


def _other_process(a: Message, b: Message) -> bool:
    """Whether two lines' messages name different processes (a rank, pid or host each names, and they differ)."""
    return any(x is not None and y is not None and x != y for x, y in ((a.rank, b.rank), (a.pid, b.pid), (a.host, b.host)))


def _waited_after(log: ErrorLog, ev: ErrorEvent) -> bool:
    """Whether a catalog line of the same process just after exception ``ev`` (within :data:`_WAIT_BLOCK` lines of
    its file; no other rank, pid or host) is a peer's consequence: the error text a framework prints under its exception (torch_npu's CANN code line
    ``EI0006: ... Remote Rank did not send the data in time``) says that this process waited for another."""
    src, line = ev.evidence.source, ev.evidence.line
    if line is None:
        return False
    at = next((i for i, e in enumerate(log.events) if e is ev), len(log.events))
    for other in log.events[at + 1:at + 1 + 2 * _WAIT_BLOCK]:
        if other.evidence.source != src or other.evidence.line is None or other.evidence.line - line > _WAIT_BLOCK:
            break
        if _other_process(ev.message, other.message):
            continue  # another process's line (the watchdog of a rank that waited for this one)
        if ev.message.rank is not None and other.message.rank is None:
            continue  # a line without the rank prefix the exception's own lines carry: the launcher's, another process's
        e = other.match.innermost if other.match is not None else None
        if e is not None and e.role is Role.CONSEQUENCE and e.blame is Blame.PEER:
            return True
    return False


def _before(a: ErrorEvent, b: ErrorEvent) -> bool | None:
    """Whether ``a`` happened before ``b``: by their times, else by their lines in one file;
    None when they cannot be ordered."""
    if a.message.time is not None and b.message.time is not None:
        return a.message.time < b.message.time or (a.message.time == b.message.time and a.order < b.order)
    if a.evidence.source == b.evidence.source:
        return a.order < b.order
    return None


_ABORTS = frozenset({"system.shell.aborted-core-dumped", "system.shell.line-aborted", "system.python.fatal-aborted",
                     "system.libstdcxx.terminate-without-exception", "system.libstdcxx.terminate-after-throwing",
                     "system.slurm.task-aborted", "system.slurm.exit-code-134"})
"""Entries that report a process's SIGABRT (a shell's, Python's faulthandler's, libstdc++'s terminate, srun's)."""
_ABORT_AFTER = 80
"""Lines before an abort within which the process's last catalog line is read as its reason (a C++ exception's
frames, ``frame #N:`` lines, stand between PyTorch's watchdog line and the shell's ``Aborted (core dumped)``)."""


def _abort_reason(log: ErrorLog, at: int) -> CatalogEntry | None:
    """The entry of the line that says why the abort ``log.events[at]`` happened: the last catalog line (not context) of
    the same file and process before it, within :data:`_ABORT_AFTER` lines. PyTorch's NCCL watchdog aborts a rank whose
    collective timed out ("To avoid data inconsistency, we are taking the entire process down", ProcessGroupNCCL.cpp),
    an uncaught error ends in std::terminate: the abort is that line's echo, no failure of its own."""
    ev = log.events[at]
    src, line = ev.evidence.source, ev.evidence.line
    if line is None:
        return None
    for other in reversed(log.events[max(0, at - 64):at]):
        if other.evidence.source != src or other.evidence.line is None or line - other.evidence.line > _ABORT_AFTER:
            return None
        if _other_process(ev.message, other.message):
            continue  # another process's line
        e = other.match.innermost if other.match is not None else None
        if e is not None and e.role is not Role.CONTEXT and e.id not in _ABORTS:
            return e
    return None


def _groups(log: ErrorLog) -> list[_Group]:
    by_id: dict[str, _Group] = {}
    for at, ev in enumerate(log.events):
        if ev.match is None:
            continue
        inner = ev.match.innermost
        if inner.id in _ABORTS and (why := _abort_reason(log, at)) is not None:
            inner = replace(inner, id=f"{inner.id}.echo", role=Role.CONSEQUENCE, blame=why.blame, severity="warning",
                            meaning=f"{inner.meaning} - the end of the error this process reported just before it "
                                    f"({why.id}): its echo, no failure of its own")
        g = by_id.get(inner.id)
        if g is None:
            by_id[inner.id] = _Group(inner, ev.match.entry, [ev])
        else:
            g.events.append(ev)
    return list(by_id.values())


def _severity(g: _Group) -> Severity:
    if g.entry.role is Role.ROOT and g.entry.blame not in (Blame.PEER, Blame.NONE) and any(e.named for e in g.events):
        return Severity.SUSPECT  # NCCL's "Last error:" account of a failure that already happened: its cause
    sev = _SEVERITY[g.entry.severity]
    if sev is Severity.SUSPECT and (g.entry.role is not Role.ROOT or g.entry.blame in (Blame.PEER, Blame.NONE)):
        return Severity.WARNING
    return sev


_WORKER_EXITS = frozenset({"pytorch.elastic-worker-failed-binary", "pytorch.elastic-worker-failed-fn"})
"""The agent's report that a worker exited non-zero (torch/distributed/elastic/multiprocessing/api.py
``failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s``): the worker's own lines say why."""


def _exit_of_a_waiter(g: _Group, waited: set[int]) -> bool:
    """Whether ``g`` is the agent's report of workers that exited with a positive code (an exception, not a signal)
    while each one's own lines (its rank prefix; torchrun's local rank is the rank on one node) say it waited for
    another process (``waited``: ranks with a peer-consequence line): the exit is the echo of that wait."""
    if g.entry.id not in _WORKER_EXITS or not waited:
        return False
    for e in g.events:
        f = _fields(e.match)
        if len(f) < 2 or not f[0].strip().isdigit() or not f[1].strip().isdigit() or int(f[1]) not in waited:
            return False
    return True


def _first_failure(groups: list[_Group], sev: dict[str, Severity]) -> tuple[_Group | None, dict[str, _Group]]:
    """The group of the first failure, and the later own failures (id -> the first failure)."""
    own = [g for g in groups if sev[g.entry.id] is Severity.SUSPECT and g.entry.blame in (Blame.SELF, Blame.ENVIRONMENT)]
    first: _Group | None = None
    for g in own:
        if first is None or _before(g.first, first.first):
            first = g
    later = {}
    for g in own:
        if g is not first and first is not None and _before(first.first, g.first):
            later[g.entry.id] = first
    if first is None:
        suspects = [g for g in groups if sev[g.entry.id] is Severity.SUSPECT]
        first = min(suspects, key=lambda g: g.first.order) if suspects else None
    if first is None:  # no suspect: the earliest root-class event, whatever its severity alone
        waited = {e.message.rank for g in groups if g.entry.role is Role.CONSEQUENCE and g.entry.blame is Blame.PEER
                  for e in g.events if e.message.rank is not None}
        roots = [g for g in groups if g.entry.role is Role.ROOT and g.entry.blame not in (Blame.PEER, Blame.NONE)
                 and not _exit_of_a_waiter(g, waited)]
        for g in roots:
            if first is None or _before(g.first, first.first) or (
                    _before(g.first, first.first) is None and g.first.order < first.first.order):
                first = g
    return first, later


_BLOCK_LINES = 3
"""Lines after a message within which another line of the same file is read as part of its block."""


def _block_hosts(groups: list[_Group], gaps: dict[str, int]) -> dict[str, tuple[str, ...]]:
    """{entry id: hosts} for an environment or hardware message that names no node when a line of its block
    (the next :data:`_BLOCK_LINES` lines of the same file) does, about the same kind of fault: Ray's "Task was
    killed due to the node running low on memory." and the "Memory on the node (IP: ...)" line under it."""
    local = (Blame.ENVIRONMENT, Blame.HARDWARE)
    at: dict[tuple[str, int], tuple[str, ...]] = {}  # (file, line) of a node-naming event -> its hosts
    for h in groups:
        if h.entry.blame in local and (hosts := _who(h)[1]):
            for e in h.events[:64]:
                if e.evidence.line is not None:
                    at.setdefault((e.evidence.source, e.evidence.line), hosts)
    out: dict[str, tuple[str, ...]] = {}
    for g in groups:
        first = g.first.evidence
        if g.entry.blame not in local or first.line is None or _who(g)[1]:
            continue
        span = _BLOCK_LINES * gaps.get(first.source, 1)  # a double-spaced paste puts a blank line after each
        near = next((at[k] for d in range(1, span + 1) if (k := (first.source, first.line + d)) in at), None)
        if near is not None:
            out[g.entry.id] = near
    return out


_KERNEL_AFTER = 24
"""Lines after a kernel's last printf line within which the CUDA error of the process that ran it is looked for (a
failed device assert prints one line per failing thread, then the host reports ``device-side assert triggered``)."""


def _kernel_ranks(groups: list[_Group], gaps: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """{entry id: (rank,)} for a CUDA line without any process prefix (a kernel's ``printf``, such as a failed
    device assert: the GPU writes it to the process's stdout, past the rank prefix the launcher or PyTorch puts on
    its own lines) when the next CUDA error of the same file, within :data:`_KERNEL_AFTER` lines, names one rank:
    the CUDA runtime reports a kernel's failure to the process that launched it (CUDA C Programming Guide,
    "Assertion": the kernel's assert stops it and the host's next call returns cudaErrorAssert)."""
    ranked = [(h.first.evidence.source, e.evidence.line, e.message.rank) for h in groups
              if h.entry.domain == "cuda" and h.entry.blame is Blame.SELF for e in h.events[:64]
              if e.evidence.line is not None and e.message.rank is not None]
    out: dict[str, tuple[int, ...]] = {}
    for g in groups:
        last = g.events[-1].evidence
        if (g.entry.domain != "cuda" or g.entry.blame is not Blame.SELF or last.line is None or any(
                e.message.rank is not None or e.message.host or e.message.pid is not None for e in g.events)):
            continue
        span = _KERNEL_AFTER * gaps.get(last.source, 1)
        after = sorted((line, rank) for src, line, rank in ranked
                       if src == last.source and 0 < line - last.line <= span)
        if after:
            out[g.entry.id] = (after[0][1],)
    return out


def _finding(g: _Group, severity: Severity, after: _Group | None, block_hosts: tuple[str, ...] = (),
             block_ranks: tuple[int, ...] = ()) -> Finding:
    ranks, hosts, gpus, who = _who(g, block_hosts, block_ranks)
    e = g.entry
    n = len(g.events)
    via = f" [{g.outer.id} -> {e.id}]" if g.outer is not e else ""
    srcs = sorted({x.message.src.rsplit(":", 1)[0] for x in g.events if x.message.src})
    areas = areas_of(srcs)
    label = "NCCL " if any("NCCL" in x.evidence.text for x in g.events) else ""  # glog's, Ray's, Open MPI's file:line too
    where = f" ({label}{', '.join(srcs[:3])}" + (f": {'; '.join(areas)}" if areas else "") + ")" if srcs else ""
    summary = f"{who}: {e.meaning}: \u201c{_quote(g.first)}\u201d{where}" + (f" ({n} lines)" if n > 1 else "")
    code = exit_code_in(g.first.message.text)
    if code is not None and describe(code):
        summary += f"; exit status {describe(code)}"
    if e.id.startswith("pytorch.cuda-oom") and (elsewhere := held_elsewhere(g.first.message.text)):
        summary += f"; {elsewhere}"
    if after is not None:
        summary += f"; after the first failure ({after.entry.id})"
    loop = loopback_in(g.first.message.text) if e.blame in (Blame.PEER, Blame.ENVIRONMENT) else ""
    if loop:
        summary += (f"; the peer address {loop} is a loopback address: in a job of several nodes the peer's host "
                    "name resolved to this host itself (/etc/hosts maps the host name to 127.0.1.1 on Debian and "
                    "Ubuntu) or the loopback interface was chosen: set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to "
                    "the nodes' network interface or make the name resolve to a routable address")
    kind = Kind.ECHO if e.role is Role.CONSEQUENCE and e.blame is not Blame.PEER else _KIND[e.blame]
    ev = tuple(x.evidence for x in g.events[:_MAX_EV]) + (Evidence("catalog", None, f"{e.id}: {e.source}{via}"),)
    bad = no_host_in(g.first.message.text) if e.blame in (Blame.PEER, Blame.ENVIRONMENT) else ""
    if bad:  # a connection to an address no host has: the address the job was given is wrong, not a peer
        return Finding(Kind.LAUNCH_ERROR, f"the launch configuration: {bad} is no host's address (a multicast, "
                       f"reserved or broadcast address, such as a netmask), yet the process connects to it: {summary}",
                       severity=Severity.SUSPECT, evidence=ev,
                       action="set MASTER_ADDR (the rendezvous endpoint, --master_addr) to the address or host name of "
                              "the node that runs rank 0; check the launch script's variables (an interface's netmask "
                              "or broadcast taken for its address)")
    return Finding(kind, summary, ranks=ranks, hosts=hosts, gpus=gpus, severity=severity, evidence=ev, action=e.action)


def _ib_missing(log: ErrorLog) -> list[Finding]:
    """A process whose environment names InfiniBand HCAs (``NCCL_IB_HCA set to ...``) while NCCL finds no IB
    device (``NET/IB : No device found.``; NCCL src/transport/net_ib/init.cc, both INFO lines): the host's RDMA
    stack is missing or hidden, and NCCL falls back to TCP sockets (much slower across nodes) or fails."""
    out = []
    for hca, none in log.ib_missing[:4]:
        msg = parse_line(hca.text)
        asked = (msg.text.split("NCCL_IB_HCA set to", 1)[-1].split() or ["?"])[0][:120]
        hosts = (msg.host,) if msg.host else ()
        out.append(Finding(
            Kind.RESOURCE_ERROR,
            f"{'on ' + msg.host if msg.host else 'a process of the job'}: the environment names InfiniBand HCAs "
            f"(NCCL_IB_HCA={asked}) but NCCL found no IB device, so it uses TCP sockets (much slower across nodes) "
            "or fails where IB is required: the host's RDMA stack is missing or not visible",
            hosts=hosts, evidence=(hca, none), severity=Severity.SUSPECT,
            action=("check the RDMA stack on that node: ibv_devinfo, the ib_uverbs/mlx5_ib modules, rdma-core's user "
                    "libraries; in a container pass /dev/infiniband and the RDMA libraries; or unset NCCL_IB_HCA")))
    return out


CUT_ID = "python.traceback-cut"
"""The id the finding of a traceback an excerpt ends inside cites when it may be the first failure."""
_WAIT_FRAME = re.compile(r"\b(?:wait|barrier|monitored_barrier|_store_based_barrier|all_reduce|all_gather\w*|"
                         r"reduce_scatter\w*|all_to_all\w*|broadcast\w*|gather\w*|scatter\w*|reduce|recv|irecv|"
                         r"send|isend|batch_isend_irecv|get|join|sleep|communicate|select|poll|acquire)\b\s*(?:\(|$)")
"""A frame or source line that waits (a collective or point-to-point op of torch/distributed/distributed_c10d.py,
a store get/wait, a join, a sleep, a select): a traceback cut there is most often a waiter's timeout, an echo."""


def _cut_may_be_first(tb) -> bool:
    """Whether a traceback cut after frame ``tb.frame`` may stand for the first failure when nothing else does:
    its last frame does not wait (:data:`_WAIT_FRAME`, on the function name and the source line), and it names
    no rank: a rank's traceback cut before its exception line cannot tell its own error from a timeout it got
    while waiting for another rank (a backward pass ends in autograd either way), so it never makes that rank a
    suspect."""
    if not tb.frame:
        return False  # only the header was pasted: nothing says where it failed, nor that it was first
    func = tb.frame.rsplit(" in ", 1)[-1].strip()
    if _WAIT_FRAME.search(func + "(") or _WAIT_FRAME.search(tb.code):
        return False
    return tb.rank is None


def _cut(log: ErrorLog) -> list[Finding]:
    """A warning per traceback an excerpt ends inside: where the process was when it failed (its last
    frame and source line), never why (the exception line was not pasted). One whose last frame does not
    wait (:func:`_cut_may_be_first`) cites :data:`CUT_ID`: with nothing else in the logs (no cause, and no line that
    says a process waited: a timeout, a lost peer) it is the first failure."""
    out = []
    for tb in log.cut_tracebacks[:MAX_UNRECOGNISED]:
        who = ranks_text((tb.rank,)) if tb.rank is not None else "a process of the job"
        code = f" (\u201c{tb.code[:200]}\u201d)" if tb.code else ""
        cite = (Evidence("traceback", None, f"{CUT_ID}: https://docs.python.org/3/library/traceback.html"),) \
            if _cut_may_be_first(tb) else ()
        where = f"its last frame is {tb.frame}{code}" if tb.frame else "the excerpt ends at its header (no frame pasted)"
        what = f"raised {tb.exc}" if tb.exc else "failed"  # IPython's title names the exception's class
        spawn = ("; it failed while a child started by multiprocessing's spawn method ran the main script again "
                 "(spawn.py _fixup_main_from_path: code outside `if __name__ == '__main__':` runs in every child)"
                 if tb.spawned_main else "")
        out.append(Finding(
            Kind.RANK_ERROR, f"{who} {what} in a traceback that the excerpt ends inside, before its exception line: "
            f"{where}{spawn}", ranks=(tb.rank,) if tb.rank is not None else (),
            severity=Severity.WARNING, evidence=(tb.evidence,) + cite,
            action=("put the script's top-level work under `if __name__ == '__main__':` (and get the exception line); "
                    if spawn else "") + "get the rest of this output: the exception line after the last frame says what failed"))
    return out


def _stalls(log: ErrorLog) -> list[Finding]:
    """A warning per quiet file (no error line) whose last line starts a step that can wait forever (its catalog
    entry's ``stall``): where the output stops, and what that step waits for if the job hung there. Only a warning:
    an excerpt may end anywhere, so its end is no proof that the step never finished."""
    out = []
    for ev, msg, e in log.stalls[:MAX_UNRECOGNISED]:
        who = ranks_text((msg.rank,)) if msg.rank is not None else (f"on {msg.host}" if msg.host else "a process of the job")
        out.append(Finding(
            Kind.STALL, f"{who}: no error line; the output stops at \u201c{msg.text[:200]}\u201d ({e.meaning}); if the job "
            f"hung, it hung in that step: {e.stall}", ranks=(msg.rank,) if msg.rank is not None else (),
            hosts=(msg.host,) if msg.host else (), severity=Severity.WARNING,
            evidence=(ev, Evidence("catalog", None, f"{e.id}: {e.source}")), action=e.action))
    return out


def _unrecognised(log: ErrorLog) -> list[Finding]:
    by_shape: dict[str, list[ErrorEvent]] = {}
    for ev in log.events:
        if ev.match is None and not ev.message.exception:
            by_shape.setdefault(_NUMBERS.sub("#", ev.message.text)[:160], []).append(ev)
    groups = list(by_shape.values())
    out = []
    for evs in groups[:MAX_UNRECOGNISED]:
        e0 = evs[0]
        ranks = tuple(sorted({e.message.rank for e in evs if e.message.rank is not None}))
        hosts = tuple(sorted({e.message.host for e in evs if e.message.host}))
        out.append(Finding(
            Kind.UNRECOGNISED_ERROR,
            f"unrecognised error line: \u201c{_quote(e0)}\u201d" + (f" ({len(evs)} lines)" if len(evs) > 1 else ""),
            ranks=ranks, hosts=hosts, severity=Severity.WARNING, evidence=tuple(e.evidence for e in evs[:_MAX_EV]),
            action="no catalog entry knows this message: read it and the lines before it"))
    rest = groups[MAX_UNRECOGNISED:]
    if rest:
        out.append(Finding(
            Kind.UNRECOGNISED_ERROR, f"{len(rest)} more distinct unrecognised error lines "
            f"({sum(len(r) for r in rest)} lines)", severity=Severity.WARNING,
            evidence=tuple(r[0].evidence for r in rest[:_MAX_EV]), action="read them in the files cited"))
    return out


_JOB_ENDS = frozenset({"system.slurm.cancelled-time-limit", "system.slurm.cancelled-preemption",
                       "system.slurm.cancelled-node-failure", "system.slurm.cancelled-requeue",
                       "system.slurm.cancelled-signal", "system.slurm.cancelled"})
"""Slurm's ends of a whole job or step (slurmstepd ``*** JOB N ON node CANCELLED AT time DUE TO ... ***``): Slurm then
sends SIGTERM and SIGKILL to every task."""
_RANK_KILLED = frozenset({"system.openmpi.proc-aborted-strsignal", "system.openmpi.proc-aborted"})
_KILL_SIGNAL = re.compile(r"exited on signal (?:9|15)\b")


def _ended_by_the_scheduler(groups: list[_Group], sev: dict[str, Severity]) -> None:
    """A rank mpirun saw killed by SIGKILL or SIGTERM is no suspect when Slurm ended the whole job (a time limit,
    a preemption, scancel): those are the signals Slurm ends every task with, and mpirun names the first end it
    noticed. Changes ``sev`` in place."""
    if not any(g.entry.id in _JOB_ENDS for g in groups):
        return
    for g in groups:
        if g.entry.id in _RANK_KILLED and sev[g.entry.id] is Severity.SUSPECT and _KILL_SIGNAL.search(g.first.message.text):
            sev[g.entry.id] = Severity.WARNING


def findings_from(log: ErrorLog) -> tuple[list[Finding], ErrorLinesFacts]:
    """The findings and facts of the error lines read.

    Returns:
        the findings (recognised, suspects first, then the unrecognised lines) and the facts.
    """
    groups = [g for g in _groups(log) if not (g.entry.role is Role.CONTEXT and g.entry.severity == "info")]
    sev = {g.entry.id: _severity(g) for g in groups}
    _ended_by_the_scheduler(groups, sev)
    first, later = _first_failure(groups, sev)
    near = _block_hosts(groups, log.gaps)
    kernel = _kernel_ranks(groups, log.gaps)
    out = []
    for g in groups:
        after = later.get(g.entry.id)
        out.append(_finding(g, Severity.WARNING if after is not None else sev[g.entry.id], after, near.get(g.entry.id, ()),
                            kernel.get(g.entry.id, ())))
    out.sort(key=lambda f: (f.severity is not Severity.SUSPECT, f.severity is not Severity.WARNING))
    if first is not None:  # the first failure leads its severity
        lead = next(i for i, f in enumerate(out) if f.evidence[-1].text.startswith(first.entry.id + ":"))
        top = next(i for i, f in enumerate(out) if f.severity is out[lead].severity)
        out.insert(top, out.pop(lead))
    roster = roster_findings(log.roster)
    out[:0] = [f for f in roster if f.severity is Severity.SUSPECT]
    raised = _exceptions(log)
    out[:0] = _ib_missing(log)
    cut = _cut(log)
    out += [f for f in roster if f.severity is not Severity.SUSPECT] + raised + _unrecognised(log) + cut + _stalls(log)
    counts = Counter(ev.match.innermost.id for ev in log.events if ev.match is not None)
    sources = {ev.match.innermost.id: ev.match.innermost.source for ev in log.events if ev.match is not None}
    recognised = sum(counts.values())
    facts = ErrorLinesFacts(error_lines=log.error_lines + log.dropped, recognised=recognised,
                            unrecognised=log.error_lines + log.dropped - recognised,
                            entries=tuple(EntryCount(i, n, sources[i]) for i, n in counts.most_common()),
                            first_failure=first.entry.id if first is not None else (
                                EXCEPTION_ID if any(f.evidence[-1].text.startswith(EXCEPTION_ID + ":") for f in raised) else
                                SOURCE_ID if roster else
                                CUT_ID if any(f.evidence[-1].text.startswith(CUT_ID + ":") for f in cut)
                                and not any(g.entry.role is Role.CONSEQUENCE for g in groups) else ""),
                            quiet_files=tuple(log.quiet_files))
    return out, facts
