"""Who said they were which rank: lines where a launcher or framework announces a process's rank,
and lines only rank 0 prints. Two processes that both claim one rank (each node numbering its ranks
from 0, or an MPI that starts every process as its own job) are a launch mistake; fewer ranks than
the world size, with nothing else wrong, are ranks that never started or whose output is elsewhere.

Announcements (rank, world size), from the upstream format strings:

* Lightning ``initializing ddp: GLOBAL_RANK: {}, MEMBER: {}/{}`` (pytorch-lightning 1.4.0
  pytorch_lightning/plugins/training_type/ddp.py:321) and ``Initializing distributed: GLOBAL_RANK: {},
  MEMBER: {}/{}`` (2.6.0 src/lightning/fabric/utilities/distributed.py:282);
* PyTorch ``Rank {}: Completed store-based barrier for key:{} with {} nodes.`` (torch/distributed/
  distributed_c10d.py ``_store_based_barrier``, v1.9-v2.x);
* nccl-tests ``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s`` (NVIDIA/nccl-tests
  src/common.cu: one line per GPU of the job, printed by the main process).

Lines printed by rank 0 only (``rank_zero_info`` / ``if (is_main_proc) PRINT``): Lightning
``GPU available: {}, used: {}`` (1.4.0 pytorch_lightning/trainer/trainer.py:1283, 2.6.0
src/lightning/pytorch/trainer/setup.py:164); nccl-tests ``# nThread %d nGpus %d minBytes ...``
(src/common.cu). Seen twice in one output, two processes believed they were rank 0.

Ranks named as missing: Horovod's stall inspector prints ``Missing ranks:`` and then one line per rank
that has not submitted a tensor the others wait for, ``RANK[!]: [tensor, ...]`` (``!``: stalled past
the shutdown time; horovod v0.28.1 horovod/common/stall_inspector.cc:78). Those ranks are elsewhere:
the cause, whose stacks tell why.

A log whose every line is doubled (a logger with two handlers) proves nothing: such files are left out.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

from ...model import Evidence, Finding, Kind, Severity
from ...rankset import ranks_text

__all__ = ["Announcement", "MissingRank", "Roster", "roster_findings", "NEEDLES", "SOURCE_ID"]

SOURCE_ID = "roster"
"""The id the roster's findings cite as their last evidence (as a catalog entry id would be)."""

_ANNOUNCE = (
    (re.compile(r"(?:initializing ddp|Initializing distributed): GLOBAL_RANK: (?P<rank>\d+), MEMBER: \d+/(?P<world>\d+)"),
     "Lightning-AI/pytorch-lightning 2.6.0 src/lightning/fabric/utilities/distributed.py:282"),
    (re.compile(r"Rank (?P<rank>\d+): Completed store-based barrier for key:\S* with (?P<world>\d+) nodes"),
     "pytorch/pytorch torch/distributed/distributed_c10d.py _store_based_barrier"),
    (re.compile(r"(?:^|(?<=\s))(?:#\s+)?Rank\s+(?P<rank>\d+)\s+Group\s+\d+\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+device\s+\d+"),
     "NVIDIA/nccl-tests src/common.cu"),
)
_RANK_ZERO = (
    (re.compile(r"(?:^|(?<=\s))GPU available: \S+?(?: \([^)]*\))?, used: "),
     "Lightning-AI/pytorch-lightning 2.6.0 src/lightning/pytorch/trainer/setup.py:164 (rank_zero_info)"),
    (re.compile(r"(?:^|(?<=\s))(?:# ?)?nThread \d+ nGpus \d+ minBytes "), "NVIDIA/nccl-tests src/common.cu (PRINT: main process only)"),
)
_LOCAL = re.compile(r"LOCAL_RANK: (?P<local>\d{1,5}) ?- ?CUDA_VISIBLE_DEVICES: \[(?P<devices>[^\]]{0,400})\]")
_LOCAL_SOURCE = "Lightning-AI/pytorch-lightning 2.6.0 src/lightning/pytorch/accelerators/cuda.py:61"
NEEDLES = ("GLOBAL_RANK", "store-based barrier", "Rank", "GPU available", "nThread", "Missing ranks:", "[ready ranks:",
           "LOCAL_RANK")
"""Substrings one of which every announcement holds (a cheap test before the regexes)."""


@dataclass(frozen=True, slots=True)
class Announcement:
    """A process's claim: ``rank`` of ``world`` (None when the line does not say), or, for a line
    only rank 0 prints, ``rank`` 0 with ``zero_only`` set."""

    rank: int
    world: int | None
    who: str  # "pid 798 on hw14" where the line says, else ""
    zero_only: bool
    source: str
    evidence: Evidence
    at: int = 0  # where in its line: records a paste ran together are claims of several processes


_MISSING_HEAD = re.compile(r"(?:^|\s)Missing ranks:\s*$")
_MISSING_ROW = re.compile(r"^(?P<rank>\d{1,7})(?P<stalled>!?): \[(?P<tensors>.{0,300})")
_MISSING_SOURCE = ("horovod/horovod v0.28.1 horovod/common/stall_inspector.cc:78 (Missing ranks:); v0.12.1 "
                   "horovod/common/operations.cc:1095 (Stalled ops: TENSOR [ready ranks: ...])")
# horovod <= 0.12: "Stalled ops: NAME [ready ranks: 4, 6, 7, 1], NAME2 [ready ranks: ...]": the ranks that did submit
_READY = re.compile(r"(?P<tensor>[^\s,\[\]]{1,300}) \[ready ranks:(?P<ranks>[\d, ]{0,4000})\]")
_MAX_RANK = 65536


@dataclass(frozen=True, slots=True)
class MissingRank:
    """A rank a stall report names as not having submitted what the others wait for."""

    rank: int
    tensors: str
    stalled: bool
    evidence: Evidence
    block: int  # which ``Missing ranks:`` report of the files read (0, 1, ...)


@dataclass
class Roster:
    """The announcements of the files read, the ranks named missing, and the files whose every
    line is doubled. ``expecting`` is set while the rows of a ``Missing ranks:`` block may follow."""

    said: list[Announcement] = field(default_factory=list)
    missing: list[MissingRank] = field(default_factory=list)
    doubled_files: set[str] = field(default_factory=set)
    expecting: bool = False
    heads: list[Evidence] = field(default_factory=list)
    local: list[tuple[int, int, Evidence]] = field(default_factory=list)  # (local rank, visible GPUs, line)

    def read(self, text: str, evidence: Evidence) -> None:
        """Note ``text`` (a message with its prefixes peeled) when it announces a rank or names one
        missing (the caller offers every line while :attr:`expecting`)."""
        if self.expecting:
            if not text.strip():
                return  # a blank line a paste put between the rows
            m = _MISSING_ROW.match(text)
            if m is not None and len(self.missing) < 4096:
                self.missing.append(MissingRank(int(m.group("rank")), m.group("tensors").rstrip("]"),
                                                bool(m.group("stalled")), evidence, len(self.heads) - 1))
                return
            self.expecting = False
        if _MISSING_HEAD.search(text):
            self.expecting = True
            self.heads.append(evidence)
            return
        if "[ready ranks:" in text:
            self._ready(text, evidence)
            return
        if not any(n in text for n in NEEDLES) or len(self.said) >= 4096:
            return
        if "LOCAL_RANK" in text and (m := _LOCAL.search(text)) is not None and len(self.local) < 4096:
            n = len([d for d in m.group("devices").split(",") if d.strip()])
            self.local.append((int(m.group("local")), n, evidence))
            return
        for rx, source in _ANNOUNCE:  # every one of a line: a paste that lost its newlines runs them together
            found = list(rx.finditer(text))[:64]
            for m in found:
                d = m.groupdict()
                world = int(d["world"]) if d.get("world") else None
                who = f"pid {d['pid']} on {d['host']}" if d.get("pid") else ""
                self.said.append(Announcement(int(d["rank"]), world, who, False, source, replace(
                    evidence, text=evidence.text if len(found) == 1 else m.group(0)), m.start()))
            if found:
                return
        for rx, source in _RANK_ZERO:
            found = list(rx.finditer(text))[:64]
            for m in found:
                self.said.append(Announcement(0, None, "", True, source, evidence if len(found) == 1 else replace(
                    evidence, text=m.group(0)), m.start()))
            if found:
                return

    def _ready(self, text: str, evidence: Evidence) -> None:
        """An old stall report (horovod <= 0.12) lists the ranks that did submit each stalled tensor: every
        rank below the highest of them that is not listed has not (ranks above it are not known)."""
        lacking: dict[int, list[str]] = {}  # rank -> the tensors it has not submitted, as a new report's row lists them
        for m in _READY.finditer(text):
            ready = {int(x) for x in re.findall(r"\d{1,7}", m.group("ranks"))}
            if ready and max(ready) <= _MAX_RANK:
                for r in sorted(set(range(max(ready) + 1)) - ready):
                    lacking.setdefault(r, []).append(m.group("tensor"))
        if lacking:
            self.heads.append(evidence)
        for r, tensors in sorted(lacking.items())[: max(0, 4096 - len(self.missing))]:
            self.missing.append(MissingRank(r, ", ".join(tensors), False, evidence, len(self.heads) - 1))

    def note_file(self, path: str, lines: Counter[str], repeats: int) -> None:
        """Mark ``path`` doubled when nearly every distinct line of it occurs an even number of times and
        the copies follow each other (``repeats``: lines equal to the line with text before them), as a
        logger with two handlers writes them; two processes printing the same lines interleave them."""
        distinct = [n for line, n in lines.items() if line.strip()]
        if (len(distinct) >= 4 and sum(n % 2 == 0 for n in distinct) >= 0.9 * len(distinct)
                and repeats >= 0.9 * sum(distinct) / 2):
            self.doubled_files.add(path)


def _claims(said: list[Announcement]) -> dict[int, list[Announcement]]:
    """Each rank's distinct claims: the same process announcing itself twice counts once."""
    out: dict[int, dict[tuple, Announcement]] = {}
    for a in said:
        key = (a.who, a.source) if a.who else (a.evidence.source, a.evidence.line, a.at)
        out.setdefault(a.rank, {}).setdefault(key, a)
    return {r: list(v.values()) for r, v in out.items()}


def _missing_findings(roster: Roster) -> list[Finding]:
    """The last stall report of each file decides: one set of tensors missing on some ranks names
    those ranks; ranks missing *different* tensors ran different collectives (they diverged)."""
    if not roster.missing:
        return []
    last: dict[str, int] = {}
    for m in roster.missing:
        last[m.evidence.source] = m.block
    rows = [m for m in roster.missing if last[m.evidence.source] == m.block]
    by_rank: dict[int, MissingRank] = {}
    for m in rows:
        by_rank.setdefault(m.rank, m)
    ranks = sorted(by_rank)
    what = "; ".join(f"{r}{'!' if by_rank[r].stalled else ''}: {by_rank[r].tensors[:80]}" for r in ranks[:6])
    heads = tuple(dict.fromkeys(roster.heads[m.block] for m in rows))
    ev = heads[:2] + tuple(m.evidence for m in rows[:4]) + (Evidence(SOURCE_ID, None, f"{SOURCE_ID}: {_MISSING_SOURCE}"),)
    if len({by_rank[r].tensors for r in ranks}) > 1:  # each waits for what another never submits
        return [Finding(
            Kind.COLLECTIVE_MISMATCH,
            f"the ranks diverged: each submitted tensors the others did not ({what}): they run different "
            f"collectives (a branch that differs by rank: a rank-dependent condition, a file check, uneven data)",
            severity=Severity.SUSPECT, evidence=ev,
            action="find the condition that sends ranks down different paths before these collectives (a check "
                   "done on one rank only, a filesystem race, a different number of batches) and make it agree "
                   "on every rank (broadcast the decision)")]
    return [Finding(
        Kind.OUTSIDE_COLLECTIVE,
        f"{ranks_text(ranks)} did not submit the tensors the other ranks wait for (a stall report: {what}): "
        f"{'they are' if len(ranks) > 1 else 'it is'} elsewhere - a different code path, more data than the others, "
        f"or stuck before the collective",
        ranks=tuple(ranks), severity=Severity.SUSPECT, evidence=ev,
        action="dump the stacks of these ranks (py-spy dump / hangdbg dump) to see where they are; check that every "
               "rank gets the same number of batches and submits the same tensors in the same order")]


def roster_findings(roster: Roster) -> list[Finding]:
    """A launch-error suspect when a rank is claimed by two processes; the ranks a stall report
    names missing as suspects; a warning naming the ranks never announced when fewer than the world
    size announced themselves (the caller promotes it when nothing else names a cause)."""
    out = _missing_findings(roster)
    said = [a for a in roster.said if a.evidence.source not in roster.doubled_files]
    if not said:
        return out
    # duplicates count within one file (one output stream): two files may be two runs of the job
    twice: dict[int, list[Announcement]] = {}
    for path in dict.fromkeys(a.evidence.source for a in said):
        for r, v in _claims([a for a in said if not a.zero_only and a.evidence.source == path]).items():
            if len(v) > 1 and len(v) > len(twice.get(r, ())):
                twice[r] = v
    zero = [a for a in said if a.zero_only]
    by_source = Counter((a.evidence.source, a.source) for a in zero)
    zeros = [s for s, n in by_source.items() if n > 1]
    if twice or zeros:
        ev = [a.evidence for v in twice.values() for a in v][:4] + [a.evidence for a in zero if (a.evidence.source, a.source) in zeros][:2]
        what = []
        if twice:
            n = max(len(v) for v in twice.values())
            what.append(f"{ranks_text(sorted(twice))} announced by {n} processes each")
        if zeros:
            what.append(f"a line only rank 0 prints appears {max(by_source[s] for s in zeros)} times")
        out.append(Finding(
            Kind.LAUNCH_ERROR,
            f"the launch configuration: {' and '.join(what)}: several processes believe they hold the same "
            f"global rank (duplicate ranks), so they never form one job: each node numbers its ranks from 0 "
            f"(num_nodes / node_rank / --nnodes not passed, the batch script starts the program without srun), or "
            f"the MPI that launched them is not the one the program was built with",
            severity=Severity.SUSPECT, evidence=tuple(ev) + (Evidence(SOURCE_ID, None, f"{SOURCE_ID}: {said[0].source}"),),
            action="give every process a distinct global rank: check the launcher's node count and node rank against "
                   "the job (SLURM --nodes/--ntasks-per-node with srun, torchrun --nnodes/--node_rank, Lightning "
                   "Trainer(num_nodes=...)), and that mpirun matches the MPI the program was built with"))
        return out
    worlds = Counter(a.world for a in said if a.world)
    if not worlds:
        return out
    world = worlds.most_common(1)[0][0]
    if (shared := _shared_local_ranks(roster, world)) is not None:
        out.append(shared)
        return out
    seen = sorted({a.rank for a in said if not a.zero_only and a.world == world})
    missing = [r for r in range(world) if r not in seen]
    if seen and missing and world <= 1 << 16:
        first = next(a for a in said if a.world == world)
        out.append(Finding(
            Kind.MISSING,
            f"only {len(seen)} of {world} ranks announced themselves in these logs ({ranks_text(seen)}); "
            f"{ranks_text(missing)} never did: they were not started "
            f"(the launcher: a batch script without srun, a node that did not start), or their output is elsewhere",
            severity=Severity.WARNING,
            evidence=tuple(a.evidence for a in said if a.world == world)[:4] + (
                Evidence(SOURCE_ID, None, f"{SOURCE_ID}: {first.source}"),),
            action="collect the output of the missing ranks' nodes; if they have none, check that the launcher "
                   "started every process (srun in the batch script, --nnodes, the hostfile)"))
    return out


def _shared_local_ranks(roster: Roster, world: int) -> Finding | None:
    """A launch error when, in one file, more processes announce one local rank than the job has nodes: a world
    of ``world`` ranks on nodes of N visible GPUs has ``world / N`` nodes, so each local rank is announced at
    most that often (Lightning ``LOCAL_RANK: {} - CUDA_VISIBLE_DEVICES: [{}]``, pytorch-lightning 2.6.0
    src/lightning/pytorch/accelerators/cuda.py:61, 1.4.0 pytorch_lightning/accelerators/gpu.py:54). More
    mean that processes on one node computed the same local rank and share its GPU."""
    for path in dict.fromkeys(ev.source for _, _, ev in roster.local):
        if path in roster.doubled_files:
            continue
        rows = [(r, n, ev) for r, n, ev in roster.local if ev.source == path]
        gpus = Counter(n for _, n, _ in rows).most_common(1)[0][0]
        if gpus < 1 or world % gpus or world // gpus < 1:
            continue
        nodes = world // gpus
        counts = Counter(r for r, _, _ in rows)
        local, n = counts.most_common(1)[0]
        if n > nodes:
            ev = tuple(e for r, _, e in rows if r == local)[:4]
            return Finding(
                Kind.LAUNCH_ERROR,
                f"the launch configuration: {n} processes announced LOCAL_RANK {local} in a job of {world} ranks on "
                f"nodes of {gpus} visible GPUs ({nodes} node{'s' if nodes > 1 else ''}, so at most {nodes}): processes "
                f"on one node computed the same local rank and share one GPU (the launcher's tasks per node, the "
                f"SLURM/torchrun environment the framework reads, or the framework's version)",
                severity=Severity.SUSPECT, evidence=ev + (Evidence(SOURCE_ID, None, f"{SOURCE_ID}: {_LOCAL_SOURCE}"),),
                action="make the launcher start one process per GPU with distinct local ranks (srun --ntasks-per-node "
                       "= GPUs per node with the framework's SLURM support, torchrun --nproc-per-node), and check the "
                       "framework's num_nodes/devices against the job")
    return None
