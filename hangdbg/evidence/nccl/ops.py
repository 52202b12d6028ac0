"""Cross-rank comparison of NCCL collectives at the same opCount (``nccl-op-mismatch``).

Every rank of a communicator must call the same collectives in the same order with the same
count, datatype, reduction and (Broadcast/Reduce) root; NCCL does not check it, the job hangs or
corrupts data. The ``NCCL_DEBUG_SUBSYS=COLL`` lines (NCCL 2.x ``enqueue.cc`` ``ncclEnqueueCheck``:
``Name: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p
[nranks=%d] stream %p``) give, per communicator and opCount, what each rank issued
(:attr:`~hangdbg.evidence.nccl.records.Comm.ops`). Communicators are keyed by their identity across
processes (:attr:`Comm.key`: ``commId``, else the k-th communicator of that size), never by the
per-process ``comm`` pointer. Used by :mod:`hangdbg.evidence.nccl.analysis`.
"""

from __future__ import annotations

from collections import Counter

from ...model import Evidence, Finding, Kind, Severity
from .grammar import Comm, NcclLog, Proc
from .causes import MAX_EV, _hosts, _names, _ranks

__all__ = ["op_mismatches"]


def _desc(sig: tuple) -> str:
    """One rank's operations at an opCount, for the summary."""
    parts = []
    for s in sig:
        if s == ("p2p",):
            parts.append("Send/Recv")
            continue
        name, count, dt, redop, root = s
        txt = f"{name} count {count} datatype {dt}"
        if redop is not None:
            txt += f" op {redop}"
        if root is not None:
            txt += f" root {root}"
        parts.append(txt)
    return " + ".join(parts)


def _sub(a: tuple, b: tuple) -> bool:
    """``a`` is a proper sub-multiset of ``b`` (a group of operations not logged to its end)."""
    ca, cb = Counter(a), Counter(b)
    return ca != cb and not (ca - cb)


def _first_mismatch(members: list[tuple[Proc, Comm]]) -> tuple[int, dict] | None:
    """The lowest opCount at which two ranks issued different operations, with each rank's
    operations there (``id(comm)`` -> sorted tuple of signatures). A rank whose operations at its
    own last opCount are a part of another's (the log ends inside a group) is left out."""
    ops = sorted({op for _, c in members for op in c.ops})
    top = {id(c): max(c.ops) for _, c in members if c.ops}
    for op in ops:
        sigs = {}
        for _, c in members:
            entries = c.ops.get(op)
            if entries:
                sigs[id(c)] = tuple(sorted(s for s, _, _ in entries))
        if len(set(sigs.values())) < 2:
            continue
        seen = set(sigs.values())
        sigs = {k: s for k, s in sigs.items() if not (top[k] == op and any(_sub(s, o) for o in seen))}
        if len(set(sigs.values())) >= 2:
            return op, sigs
    return None


def _merged(members: list[tuple[Proc, Comm]], nranks: int | None) -> bool:
    """A key without ``commId`` (the k-th communicator of a size in each process) that holds
    several communicators: more members than ranks, or two members with the same rank in it
    (PyTorch creates NCCL communicators lazily, so processes may create them in another order,
    and two data-parallel groups of one size share an index). Their operations are not compared."""
    if nranks is not None and len(members) > nranks:
        return True
    ranks = [c.rank for _, c in members if c.rank is not None]
    return len(ranks) != len(set(ranks))


def op_mismatches(log: NcclLog, grp: dict[str, list[tuple[Proc, Comm]]]) -> dict[str, tuple[int, Finding]]:
    """Per communicator key, the first opCount where ranks issued different collectives and the finding.

    The ranks whose operations differ from a strict majority (of at least 2 ranks) are the
    suspects; with 2 ranks or no majority the finding is a warning naming both sides (the log
    cannot say which one is wrong). Send/Recv are compared only as such (their peers and counts
    differ by design), and a communicator with Send/Recv and more than 2 ranks is not compared:
    only the ranks of an exchange advance their opCount. Without ``commId`` a key that merges
    several communicators (:func:`_merged`) is not compared. Ranks at a higher opCount than the
    others are not compared with them (the opCount lag is :func:`~hangdbg.evidence.nccl.analysis._lag_findings`).
    """
    out: dict[str, tuple[int, Finding]] = {}
    for key, members in grp.items():
        live = [(p, c) for p, c in members if c.ops]
        if len(live) < 2:
            continue
        nranks = next((c.nranks for _, c in live if c.nranks), None)
        if not all(c.comm_id for _, c in live) and _merged(live, nranks):
            continue
        if (nranks is None or nranks > 2) and any(s == ("p2p",) for _, c in live for v in c.ops.values()
                                                   for s, _, _ in v):
            continue
        hit = _first_mismatch(live)
        if hit is None:
            continue
        op, sigs = hit
        by_sig: dict[tuple, list[tuple[Proc, Comm]]] = {}
        for p, c in live:
            if id(c) in sigs:
                by_sig.setdefault(sigs[id(c)], []).append((p, c))
        ranked = sorted(by_sig.items(), key=lambda kv: -len(kv[1]))
        n = sum(len(v) for v in by_sig.values())
        name = f"communicator {key}" + (f" ({nranks} ranks)" if nranks else "")
        majority = len(ranked[0][1]) > len(ranked[1][1]) and len(ranked[0][1]) >= 2
        major_sig, major = ranked[0]
        odd = [pc for s, pcs in ranked[1:] for pc in pcs] if majority else [pc for _, pcs in ranked for pc in pcs]
        sides = "; ".join(f"{_names(p for p, _ in pcs)}: {_desc(s)}" for s, pcs in (ranked[1:] if majority else ranked))
        if majority:
            summary = (f"{name}: at opCount 0x{op:x} {sides} - while the other {len(major)} of {n} ranks issued "
                       f"{_desc(major_sig)}. Every rank must issue the same collective (type, count, datatype, "
                       "reduction, root): these ranks called another one")
            action = ("look at the code path of these ranks: they issued a different collective (or skipped one) - "
                      "a rank-dependent branch, a different model or batch shape, or another root")
        else:
            summary = (f"{name}: undecided - the ranks issued different collectives at opCount 0x{op:x} and no "
                       f"majority says which is right: {sides}")
            action = ("compare the code paths of these ranks at this collective (type, count, datatype, reduction, "
                      "root); pass the other ranks' NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL logs to find the majority")
        procs = [p for p, _ in odd]
        ev: list[Evidence] = []
        for _, c in odd[:MAX_EV - 1] + (major[:1] if majority else odd[MAX_EV - 1:MAX_EV]):
            _, (fi, line), text = c.ops[op][0]
            ev.append(Evidence(log.files[fi], line, text if text is not None else log.fetch(fi, line)))
        out[key] = (op, Finding(Kind.NCCL_OP_MISMATCH, summary, ranks=_ranks(procs), hosts=_hosts(procs),
                                severity=Severity.SUSPECT if majority else Severity.WARNING, evidence=tuple(ev),
                                action=action))
    return out
