"""Name the suspects of a hang from the ranks' stacks: the ranks the others wait for, each with a
one-line reason, as :class:`~hangdbg.model.Finding` objects of severity ``suspect``.

Rules, in order (a rank named by an earlier rule is not named again):

1. ``missing``: ranks of the examined nodes that have no process (never started or exited).
   Ranks waiting in init/rendezvous are then a consequence, not suspects.
2. ``deadlock``: a rank whose chosen thread and another thread both wait to acquire a mutex.
3. ``outside-collective``: ranks outside any collective while other ranks wait in one (a rank
   waiting on its GPU, :attr:`~hangdbg.waits.WaitKind.GPU`, is named with :data:`GPU_CAUSE` and
   :data:`GPU_ACTION`: the work on its GPU is the cause).
4. ``different-collective``: ranks in a collective or call site that differs from the majority
   (with no strict majority, every split is named).
3b. ``outside-collective`` with no waiting rank in the dumps and the job's size unknown (saved
   dumps of one or a few ranks): ranks
   blocked on something named that is not another rank (a data loader queue, a pipe, a socket, a
   file, a lock: :func:`hangdbg.stacks.wait_state.identified_block`) are roots of the wait-for
   graph by themselves; any rank waiting in a collective waits for them.
5. ``behind``: ranks in the same place but at a lower loop counter (``--locals``: integer locals
   named step, iteration, epoch, i, ...), the "code loops" problem that STAT attacks with
   loop-order variables. A rank that waits for a rank already named (it reaches it in the wait-for
   graph: a ring's sender held up by a receiver that took the wrong peer) is behind because it
   waits: it is not named again; ranks seen moving between samples (progressing) take no part either:
   two ranks of a healthy job sampled a moment apart across a step boundary differ by one step. When a few ranks are *ahead* of a majority that is behind, the few
   are named instead (kind ``ahead``) and the reason says which way they differ.

When every dumped rank waits for others and none of those is in the dumps (the job's size unknown),
:func:`not_dumped` says so and what to collect (an ``undecided`` warning, never a suspect).
When every rank is in the same place, or every rank is still making progress between samples,
no rank is named. The ranks that only wait (in a collective or a rendezvous) are never suspects:
:func:`hangdbg.stacks.waiting.waiting_findings` says whom they wait for.
"""

from __future__ import annotations

from dataclasses import replace

from ..model import Finding, Kind, RankDump, Severity, Thread
from ..frames import Frame
from ..enums import ObjectPhase, PlaceKind
from ..waits import RankWait, WaitKind
from .cycles import resolve_cycles
from .waitfor import WaitGraph
from .places import read_source
from .wait_state import identified_block, may_be_computing
from .store_answer import untrusted
from .blockers import action_of
from .blocker_facts import outside_the_job
from .classes import RankView
from .waiting import Groups, chain_text, select, waiting_groups
from .window import ONE_SAMPLE, Timing
from ..rankset import ranks_text

__all__ = ["find_suspects", "not_dumped", "place_buckets", "expected_ranks", "progressing_ranks", "LOOP_VARIABLES"]

LOOP_VARIABLES = (
    "epoch", "global_step", "step", "steps", "completed_steps", "iteration", "iter", "itr", "it",
    "batch_idx", "batch_num", "micro_step", "i", "j", "k", "n", "idx",
)


def _ranks_text(ranks) -> str:
    return ranks_text(ranks)


def expected_ranks(dumps: list[RankDump], whole_job: bool = False) -> tuple[set[int], int]:
    """Ranks that should have a process on the examined nodes, and how many live elsewhere.

    With ``world_size`` only (one node holds the whole job): ``range(world_size)``. When
    ``local_world_size < world_size`` (a multi-node job seen from one node): the ranks of each
    seen node, ``rank - local_rank + range(local_world_size)`` (torchrun's contiguous layout).
    With ``whole_job`` (every node was asked): ``range(world_size)``.
    """
    sizes = [d.world_size for d in dumps if d.world_size]
    if not sizes:
        return {d.rank for d in dumps}, 0
    world = max(sizes)
    if whole_job:
        return set(range(world)), 0
    # (first rank, size) of each seen node, from the dumps that know their local rank
    nodes = {(d.rank - d.local_rank, d.local_world_size) for d in dumps
             if d.local_world_size and d.local_rank is not None}
    if nodes and max(size for _, size in nodes) < world:
        exp: set[int] = set()
        for base, size in nodes:
            exp.update(range(max(0, base), min(world, base + size)))
        exp.update(d.rank for d in dumps)
        return exp, world - len(exp)
    return set(range(world)), 0


def progressing_ranks(dumps: list[RankDump], views: dict[int, RankView]) -> set[int]:
    """Ranks whose chosen thread's Python stack changed between samples, or whose loop counters
    changed between samples that both carry ``--locals`` (a sample without locals, such as the
    first round of an adaptive dump, has no counters to compare)."""
    out = set()
    for d in dumps:
        if len(d.samples) < 2 or d.rank not in views:
            continue
        name = views[d.rank].thread.name
        stacks, counters = set(), set()
        for sample in d.samples:
            t = next((t for t in sample if t.name == name), sample[0] if sample else None)
            if t is None:
                continue
            stacks.add(t.stack_key)
            if any(f.locals for f in t.frames):
                counters.add((t.stack_key, _loop_values(t)))
        if len(stacks) > 1 or len(counters) > 1:
            out.add(d.rank)
    return out


def _loop_values(thread: Thread) -> tuple:
    vals = []
    for depth, f in enumerate(reversed(thread.python_frames)):
        for name, value in f.locals:
            if name in LOOP_VARIABLES:
                try:
                    vals.append((depth, f.function, name, int(value)))
                except ValueError:
                    pass
    return tuple(vals)


def _top(view: RankView) -> str:
    site = view.place.call_site
    return f"{site}{_code(site)}" if site is not None else "an unknown frame"


def _frame_text(frame: Frame) -> str:
    return f"{frame}{_code(frame)}"


def _code(frame: Frame | None) -> str:
    """`` `source line` `` of a frame when its file is readable here, else ''."""
    text = read_source(frame) if frame is not None else ""
    return f" `{text}`" if text else ""


def place_buckets(views: list[RankView]) -> list[list[RankView]]:
    """The ranks grouped by where they are (kind, collective, call site), largest group first
    (then lowest rank): computed once per analysis, every rule reads it."""
    by_place: dict[int, list[RankView]] = {}  # places are shared by the ranks of a stack: group by identity first
    for v in views:
        by_place.setdefault(id(v.place), []).append(v)
    by: dict[tuple, list[RankView]] = {}
    for members in by_place.values():
        p = members[0].place
        by.setdefault((p.kind, p.collective, p.call_site.key if p.call_site else None), []).extend(members)
    return sorted(by.values(), key=lambda b: (-len(b), min(v.rank for v in b)))


def find_suspects(
    views: list[RankView],
    missing: list[int],
    progressing: set[int],
    buckets: list[list[RankView]],
    graph: WaitGraph,
    sampled: bool = False,
    groups: Groups | None = None,
    unranked: frozenset[int] = frozenset(),
    size_unknown: bool = False,
    exited: frozenset[int] = frozenset(),
    timing: Timing | None = None,
) -> list[Finding]:
    """Apply the rules of this module (see the module docstring): the suspects, most important
    first, without hosts or evidence (the caller adds them); or one ``undecided`` warning when the
    stacks cannot decide.

    Args:
        buckets: :func:`place_buckets` of ``views``.
        graph: the wait-for graph (:func:`hangdbg.stacks.waitfor.build_graph`).
        sampled: some rank was sampled more than once (a computing rank can be told from a slow step).
        groups: :func:`waiting_groups` of the graph (computed when not given).
        unranked: ranks whose number is only their order among the files (the text says so).
        size_unknown: no dump knows the job's size (saved dumps of one or a few ranks): rule 3b
            applies (with every rank of a known job dumped and none waiting, nobody waits for them).
        exited: the missing ranks that were seen alive and then gone (a later sample, a retry):
            they died during the dump, the job is dying rather than hung.
        timing: the samples' times and the progress-before-blame window (:mod:`hangdbg.stacks.window`):
            a root on CPU the window does not cover is held back with an ``undecided`` warning; every
            root's reason says how long it was seen there. None: no window, no times.
    """
    suspects: list[Finding] = []
    named: set[int] = set()

    def name(ranks, reason: str, kind: Kind, action: str = "") -> None:
        ranks = tuple(sorted(r for r in ranks if r not in named))
        if ranks:
            named.update(ranks)
            suspects.append(Finding(kind, reason, ranks, severity=Severity.SUSPECT, action=action))

    if missing:
        gone = set(missing)
        waiting = [kept for b in buckets if b[0].place.kind != PlaceKind.OUTSIDE and (kept := [v for v in b if v.rank not in gone])]
        where = _where(waiting) if waiting else "the others are elsewhere"
        died = sorted(gone & exited)
        if died:
            rest = f"; {where}" if waiting or len(views) > len(died) else ""
            name(died, f"{_ranks_text(died)} exited while hangdbg was dumping (seen alive, then gone): "
                       f"the job is dying, not hung{rest}", Kind.MISSING)
        name(missing, f"no process for {_ranks_text(missing)} (never started or exited); {where}", Kind.MISSING)

    for v in views:
        if v.lock_waiters:
            other = v.lock_waiters[0]
            name(
                [v.rank],
                f"thread deadlock: {v.thread.name or 'a thread'} waits for a lock in {_top(v)} while thread "
                f"{other.name or other.thread_id} waits for a lock in "
                f"{_frame_text(other.python_frames[0]) if other.python_frames else '?'}",
                Kind.DEADLOCK,
            )
    if missing:
        return suspects
    waits = graph.waits
    absent = [r for r in graph.roots if r not in named and r not in waits]
    if absent:  # the others wait for ranks whose stacks are not in these files (the world size unknown)
        return suspects + [Finding(
            Kind.MISSING, f"the dumped ranks wait for {_ranks_text(absent)}, whose stacks are not in these files: "
            "the cause is there", tuple(absent), severity=Severity.WARNING)]
    roots = [r for r in graph.roots if r not in named]
    unknown = [r for r in roots if waits[r].kind is WaitKind.UNKNOWN]
    if unknown and len(unknown) < len(roots):
        roots = [r for r in roots if r not in unknown]  # what the stacks show first; the unreadable are a warning
    elif unknown:  # only unreadable roots: a mismatch the stacks show comes first, else they are the suspects
        _resolve(graph, buckets, name)
        if suspects:
            roots = []
    if roots:
        windowed = timing is not None and timing.window is not None
        undecided = _undecided(roots, graph, sampled or windowed)
        if undecided is not None:
            return suspects + [undecided]
        held = ([r for r in roots if may_be_computing(waits[r]) and not timing.covered(r)]
                if timing is not None and windowed else [])
        _name_roots([r for r in roots if r not in held], views, progressing, graph, groups, timing, name)
        if held and timing is not None:
            suspects.append(timing.observing(held, waits, _waiters_text(graph, held)))
    elif not suspects:
        _resolve(graph, buckets, name)
        if not suspects and graph.unresolved:
            return [_unresolved(graph)]
        if not suspects and size_unknown and not any(w.waiting for w in waits.values()):
            suspects.extend(_lone_roots(views, waits, progressing, unranked))
            named.update(r for f in suspects for r in f.ranks)
    # a rank that waits for a suspect is not behind: it waits; a rank seen moving is not stuck behind
    skip = _waiting_for(graph, named) | progressing
    _behind([v for v in views if waits[v.rank].waiting and v.rank not in skip], name)
    return suspects


def _waiting_for(graph: WaitGraph, named: set[int]) -> set[int]:
    """The ranks from which a named rank is reached in the wait-for graph: they wait for it (directly or
    through others), so rule 5 (``behind``) does not read their lower loop counter as a cause."""
    out: set[int] = set()
    for r in named:
        out.update(graph.distances_to(r))
    return out


def _name_roots(roots: list[int], views: list[RankView], progressing: set[int], graph: WaitGraph,
                groups: Groups | None, timing: Timing | None, name) -> None:
    """Rule 3: name each root (a rank the others wait for, outside any collective) with the chain of
    the ranks that wait for it, nearest first."""
    waits = graph.waits
    by_view = {v.rank: v for v in views}
    base = waiting_groups(graph) if groups is None else groups
    for r in roots:
        w = waits[r]
        dist = graph.distances_to(r)
        nearest_first = sorted(select(base, {r}, dist), key=lambda g: (dist[g[0][0]], len(g[1])))
        chain = chain_text(graph, nearest_first, r)
        if w.kind is WaitKind.UNKNOWN:
            name([r], f"could not be read ({w.detail}); {chain}", Kind.UNREADABLE)
            continue
        state = " (still running: its stack changed between samples)" if r in progressing else ""
        name([r], *_outside(w, by_view.get(r), state, chain, timing.seen_text(r) if timing is not None else ""))


def _outside(w: RankWait, view: RankView | None, state: str, chain: str, seen: str = "") -> tuple[str, Kind, str]:
    """``(reason, kind, action)`` of a root rank outside any collective that others wait for (rule 3);
    ``seen``: how long it was seen there (``, seen there for 12.4 s over 6 samples``) or ''."""
    if w.kind is WaitKind.GPU:
        return (f"{w.describe()}{_code(w.site)}{state}, in no collective{seen}: {GPU_CAUSE}; {chain}",
                Kind.OUTSIDE_COLLECTIVE, GPU_ACTION)
    pickling = view is not None and view.place.phase == ObjectPhase.PICKLE  # in an object collective, before its exchange
    lead = f"still pickling its object for {view.place.collective}, " if pickling and view is not None else ""
    where = ": it never reached the collective's exchange" if pickling else f", in no collective{seen}"
    if w.blocker:  # the source line right after the site, then what it waits on
        said = f"{replace(w, waiting_on='').describe()}{_code(w.site)}{', ' + w.waiting_on if w.waiting_on else ''}"
        return f"{lead}{said}{state}{where}; {chain}", Kind.OUTSIDE_COLLECTIVE, action_of(w.blocker)
    code = _code(view.place.call_site) if view is not None else ""
    return f"{lead}{w.describe()}{code}{state}{where}; {chain}", Kind.OUTSIDE_COLLECTIVE, ""

GPU_CAUSE = "its GPU has not finished earlier work (a kernel still running, or queued behind one)"
"""Why a rank that waits on its GPU (:attr:`~hangdbg.waits.WaitKind.GPU`) does not reach the collective: a CUDA
synchronize returns when the work queued before it is done (CUDA Runtime API, ``cudaDeviceSynchronize``)."""

GPU_ACTION = ("see what its GPU runs: nvidia-smi on its node (the GPU busy, its processes; `hangdbg gpu` reads it and "
              "the kernel log for Xid errors), `py-spy dump --native --pid PID` (the CUDA call it waits in), "
              "`cuda-gdb -p PID` then `info cuda kernels` (the kernel in flight), and the flight recorder "
              "(TORCH_FR_BUFFER_SIZE with TORCH_NCCL_ENABLE_TIMING=1, `hangdbg fr`): a collective of this rank "
              "`scheduled` and never `started` is queued behind that kernel; if the kernel in flight is an NCCL collective, its GPU waits "
              "for a peer that did not join it")
"""What to collect for a rank that waits on its GPU."""

_BLOCK_ACTIONS = (
    ("data loader", "look at the data loader's workers (py-spy dump --subprocesses --pid of this rank: a dead or stuck "
                    "worker, a full /dev/shm); rerun with num_workers=0 to confirm"),
    ("queue", "dump the threads or processes that fill the queue (py-spy dump --subprocesses)"),
    ("lock", "take native frames to see the lock's owner: hangdbg dump --native"),
    ("file", "check the file system the rank reads (a hung NFS/Lustre mount, a missing file)"),
    ("socket", "check the service or peer the rank talks to (host, port, firewall)"),
)


def who_text(ranks, unknown: frozenset[int] | set[int]) -> str:
    """``rank 3``, or ``the dumped process (rank unknown, numbered 0 by file order)`` for ranks whose
    number is only their order among the files."""
    if ranks and set(ranks) <= set(unknown):
        n = len(ranks)
        return (f"the dumped process{'es' if n > 1 else ''} (rank unknown, numbered {_ranks_text(ranks).split(' ', 1)[-1]} "
                "by file order)")
    return _ranks_text(ranks)


def _lone_roots(views: list[RankView], waits, progressing: set[int], unknown: frozenset[int]) -> list[Finding]:
    """Rule 3b: no dumped rank waits for another; the ranks blocked on something named that is not
    a rank are the roots (grouped by what they wait on)."""
    by: dict[str, list[int]] = {}
    for v in views:
        w = waits[v.rank]
        if v.rank not in progressing and identified_block(w) and not _is_worker(v):
            by.setdefault(w.describe(), []).append(v.rank)
    out = []
    n = len(views)
    for what, ranks in by.items():
        w = waits[ranks[0]]
        view = next(v for v in views if v.rank == ranks[0])
        unsure = f" ({who_text(ranks, unknown)})" if set(ranks) <= unknown else ""
        others = "no other rank was dumped" if n == len(ranks) else f"none of the {n} dumped ranks waits in one"
        action = action_of(w.blocker) or next((a for key, a in _BLOCK_ACTIONS if key in w.detail), "dump what it waits for")
        if w.kind is WaitKind.LOCK or outside_the_job(w) or any(key in w.detail for key in _LONE_CAUSES):
            out.append(Finding(Kind.OUTSIDE_COLLECTIVE,
                               f"{what}{_code(view.place.call_site)}{unsure}, not in any collective: "
                               f"it waits on nothing inside the job, so every rank that waits in a collective waits "
                               f"for it ({others})", tuple(ranks), severity=Severity.SUSPECT, action=action))
        else:  # a thread, a subprocess, a future, a plain queue: maybe work of the job itself, maybe idle
            out.append(Finding(Kind.OUTSIDE_COLLECTIVE,
                               f"{what}{_code(view.place.call_site)}{unsure}, not in any collective ({others}): "
                               f"if other ranks wait in a collective, this is why", tuple(ranks),
                               severity=Severity.WARNING, action=action + "; dump every rank to see who waits"))
    return out


_LONE_CAUSES = ("data loader", "file", "socket", "lock", "sleep")
"""What a lone rank can wait on and be the suspect for (a hung job's rank that waits on these waits
on nothing of the job); other named waits (a thread, a subprocess, a future, a queue) are only a
warning: the work they wait for may be the job's own, or the process idle."""

_WORKER_LOOPS = (("torch/utils/data/_utils/worker.py", "_worker_loop"),
                 ("torch/utils/data/_utils/pin_memory.py", "_pin_memory_loop"))
"""A DataLoader worker process or pin-memory thread idles in a queue by design (torch 1.x-2.x)."""


def _is_worker(v: RankView) -> bool:
    """True when the thread that speaks for ``v`` is a DataLoader worker loop, not a rank's own code."""
    return any(f.file.replace("\\", "/").endswith(file) and f.bare == fn
               for f in v.thread.frames for file, fn in _WORKER_LOOPS)


def not_dumped(graph: WaitGraph, views: list[RankView], unknown: frozenset[int] = frozenset()) -> Finding | None:
    """An ``undecided`` warning when every dumped rank waits for other ranks (a collective, a
    rendezvous) and none of those is in the dumps: the ranks that do not arrive were not dumped.

    Args:
        graph: the wait-for graph; the rule applies only when it has no edge and nothing unresolved.
        views: the readable ranks.
        unknown: ranks numbered by file order (the text says their rank is unknown).

    Returns:
        The finding, or None when some dumped rank does not wait or some edge exists. The caller
        applies it only when the job's size is unknown (a complete job in one collective is not this).
    """
    if not views or graph.edges or graph.unresolved or not all(graph.waits[v.rank].waiting for v in views):
        return None
    ranks = tuple(sorted(v.rank for v in views))
    places = {graph.waits[r].describe() for r in ranks}
    where = next(iter(places)) if len(places) == 1 else "; ".join(sorted(places))
    one = len(ranks) == 1
    return Finding(Kind.UNDECIDED,
                   f"{who_text(ranks, unknown)} {'waits' if one else 'wait'} {where} for ranks that are not in these "
                   f"dumps: no dumped rank is elsewhere, and the job's size is unknown",
                   ranks, severity=Severity.WARNING,
                   action="dump every rank of the job while it hangs (hangdbg dump on every node, or py-spy dump --pid "
                          "for each rank): the rank outside the collective is the cause")


def only_one(graph: WaitGraph, views: list[RankView], unknown: frozenset[int] = frozenset()) -> Finding | None:
    """An ``undecided`` warning for the stacks of one rank alone (the job's size unknown), blocked (idle) and waiting
    for no other rank the stacks can see: where it is, and that one rank's stack cannot tell a hang there from a slow
    step or say what it waits for (its GPU, a thread, another rank). None for more ranks, or a rank :func:`not_dumped`
    speaks for. The rank is named, as a warning: nothing shows that it is the cause."""
    if len(views) != 1 or graph.edges or graph.unresolved or graph.waits[views[0].rank].kind is not WaitKind.BLOCKED:
        return None  # a rank on CPU alone is most likely at work: one sample says no more
    rank = views[0].rank
    return Finding(Kind.UNDECIDED, f"{who_text((rank,), unknown)} is {graph.waits[rank].describe()}, and it is the "
                   "only rank these stacks show: one rank's stack cannot tell a hang there from a slow step, nor what "
                   "it waits for", (rank,), severity=Severity.WARNING,
                   action="dump every rank of the job while it hangs, twice a few seconds apart (hangdbg dump "
                          "--samples 3 --native on every node): a rank elsewhere, or one whose stack does not change, "
                          "is the lead")


def _resolve(graph: WaitGraph, buckets: list[list[RankView]], name) -> None:
    """No root: what does not match (p2p, store keys), else a collective split from the majority."""
    hits: list[int] = []

    def counted(ranks, reason: str, kind: Kind) -> None:
        hits.append(1)
        name(ranks, reason, kind)

    resolve_cycles(graph, counted)
    if not hits:
        in_coll = [b for b in buckets if b[0].place.kind == PlaceKind.COLLECTIVE
                   and graph.waits[b[0].rank].kind is WaitKind.COLLECTIVE]
        collective_splits(in_coll, name)


def _undecided(roots: list[int], graph: WaitGraph, sampled: bool) -> Finding | None:
    """An ``undecided`` warning when the roots might not be stuck: ranks on CPU seen once (a slow
    step or a hang?), or ranks inside a C++ call whose native frames were not taken."""
    waits = graph.waits
    hidden = [r for r in roots if waits[r].kind in (WaitKind.BLOCKED, WaitKind.COMPUTE)
              and "native" not in waits[r].evidence and waits[r].detail.startswith("inside")]
    if hidden:
        w = waits[hidden[0]]
        where = f" under {w.site}" if w.site is not None else ""
        return Finding(Kind.UNDECIDED, f"{_ranks_text(hidden)} {'is' if len(hidden) == 1 else 'are'} inside a C++ call"
                       f"{where} that Python frames cannot show: it may be a wait for other ranks "
                       "(DDP's gradient all_reduce in backward(), work.wait())", tuple(hidden),
                       severity=Severity.WARNING, action="take native frames: hangdbg dump --native")
    computing = [r for r in roots if waits[r].kind is WaitKind.COMPUTE]
    if computing and len(computing) == len(roots) and not sampled:
        w = waits[computing[0]]
        return Finding(Kind.UNDECIDED, f"{_ranks_text(computing)} {'is' if len(computing) == 1 else 'are'} on CPU "
                       f"({w.describe()}), in no collective, while {_waiters_text(graph, computing)}: {ONE_SAMPLE} "
                       "a slow step from a hang",
                       tuple(computing), severity=Severity.WARNING,
                       action="sample again: hangdbg dump --samples 3 --locals")
    return None


def _waiters_text(graph: WaitGraph, ranks) -> str:
    """``ranks 0-2 wait in all_reduce at x.py:4``: the ranks that wait for ``ranks`` (the first one's place)."""
    mine = set(ranks)
    waiters = sorted({r for e in graph.edges if not mine.isdisjoint(e.targets) for r in e.waiters})
    if not waiters:
        return "the others wait"
    return f"{_ranks_text(waiters)} {'waits' if len(waiters) == 1 else 'wait'} {graph.waits[waiters[0]].describe()}"


def _unresolved(graph: WaitGraph) -> Finding:
    """Waiting ranks whose peer or keys the stacks do not show, and nobody else to blame."""
    ranks = graph.unresolved
    w = graph.waits[ranks[0]]
    verb = "waits" if len(ranks) == 1 else "wait"
    if w.kind is WaitKind.STORE and w.keys:
        if untrusted(w):
            return Finding(Kind.UNDECIDED, f"{_ranks_text(ranks)} {verb} {w.describe()}, but which of them the store "
                           f"lacks is unknown: {w.detail}", tuple(ranks), severity=Severity.WARNING, action=STORE_ACTION)
        return Finding(Kind.UNDECIDED, f"{_ranks_text(ranks)} {verb} {w.describe()}, but which of them the store lacks "
                       "is unknown", tuple(ranks), severity=Severity.WARNING,
                       action="run hangdbg dump on the node while the job hangs: it asks the job's store")
    what = "peer" if w.kind is WaitKind.P2P else "keys"
    return Finding(Kind.UNDECIDED, f"{_ranks_text(ranks)} {verb} {w.describe()} but the stacks do not show the {what}",
                   tuple(ranks), severity=Severity.WARNING, action="take locals and native frames: hangdbg dump --locals --native")


STORE_ACTION = ("read the keys where the job writes them: in the job, `store.check([key])` on the store it waits on "
                "(`torch.distributed.distributed_c10d._get_default_store()` for init_process_group's store, whose keys "
                "the TCPStore holds as `default_pg/0//KEY`), or list the TCPStore's keys: "
                "`TCPStore(MASTER_ADDR, MASTER_PORT, is_master=False).list_keys()`")
"""What to do when the store's answer contradicts the waiter's own key."""


def _where(buckets: list[list[RankView]]) -> str:
    parts = []
    for b in buckets:
        verb = "waits" if len(b) == 1 else "wait"
        parts.append(f"{_ranks_text(v.rank for v in b)} {verb} {b[0].place.describe()}")
    return "; ".join(parts)


def collective_splits(buckets: list[list[RankView]], name) -> None:
    if len(buckets) < 2:
        return
    top = buckets[0]
    if len(top) > len(buckets[1]):
        ref = top[0].place
        waits = f"{_ranks_text(v.rank for v in top)} {'waits' if len(top) == 1 else 'wait'} {ref.describe()}"
        for b in buckets[1:]:
            p = b[0].place
            what = "different collective" if p.collective != ref.collective else "same collective from a different call site"
            name([v.rank for v in b], f"{what}: {p.describe()} while {waits}", Kind.DIFFERENT_COLLECTIVE)
        return
    desc = "; ".join(f"{_ranks_text(v.rank for v in b)} {b[0].place.describe()}" for b in buckets)
    for b in buckets:
        name([v.rank for v in b], f"collective mismatch with no majority: {desc}", Kind.DIFFERENT_COLLECTIVE)


def _behind(views: list[RankView], name) -> None:
    by: dict[tuple, list[RankView]] = {}
    for v in views:
        if v.has_locals:
            by.setdefault(v.key, []).append(v)
    for members in by.values():
        if len(members) < 2:
            continue
        values = {v.rank: _loop_values(v.thread) for v in members}
        shapes = {tuple(x[:3] for x in vals) for vals in values.values()}
        if len(shapes) != 1 or not next(iter(shapes)):
            continue
        keyed = {r: tuple(x[3] for x in vals) for r, vals in values.items()}
        ahead = max(keyed.values())
        behind = [r for r, k in keyed.items() if k < ahead]
        if not behind:
            continue
        labels = [var for (_, _, var, _) in values[behind[0]]]
        front = [r for r, k in keyed.items() if k == ahead]
        where = members[0].place.describe()

        def fmt(value, labels=labels):
            return ", ".join(f"{lab}={x}" for lab, x in zip(labels, value, strict=True))

        if len(behind) > len(members) // 2 and len(front) < len(behind):
            # a few ranks ahead of the many: the few did an extra iteration (skipped or
            # repeated work); the stragglers are the many, so say which way they differ
            name(front, f"ahead of the others in the same place ({where}): {fmt(ahead)} while "
                 f"{_ranks_text(behind)} {'is' if len(behind) == 1 else 'are'} at "
                 f"{fmt(min(keyed[r] for r in behind))}", Kind.AHEAD)
            continue
        for value in sorted({keyed[r] for r in behind}):
            rs = [r for r in behind if keyed[r] == value]
            name(rs, f"behind in the same place ({where}): {fmt(value)} while "
                 f"{_ranks_text(front)} {'is' if len(front) == 1 else 'are'} at {fmt(ahead)}", Kind.BEHIND)
