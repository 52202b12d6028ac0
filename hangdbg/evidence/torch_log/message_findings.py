"""Findings from the PyTorch messages that name a rank (:mod:`hangdbg.evidence.torch_log.messages`).

Heuristics (each names its evidence):

* **Collective fingerprint mismatch** (``TORCH_DISTRIBUTED_DEBUG=DETAIL``, ``ProcessGroupWrapper.cpp``).
  Every rank's fingerprint seen in the messages is collected; with three or more ranks the ones
  whose fingerprint is in the minority are the odd ones. With only a pair, PyTorch's comparison
  order decides when it can: the printer compares the gathered fingerprints from rank 0 up and
  names the first that differs, so the ranks below the named one (other than the printer) agree
  with the printer and the named one is off. Else, when the sequence numbers differ, the rank at
  the lower one is behind (as the SeqNum rule of :mod:`hangdbg.evidence.torch_log.analysis`); else the
  evidence cannot decide and both are named at warning severity. The 1.10-1.12 message names only
  the printer ("is running inconsistent collective"); one such message is taken at its word.
* **DDP model mismatch** (``reducer.cpp``): the parameter count held by fewer ranks is the odd one;
  between two ranks, the one PyTorch calls "inconsistent". 0 parameters usually means that rank
  never reached the DDP constructor's allgather (a rank stuck or failed before it). When a rank's
  own count and the count gathered for it differ, the allgather delivered wrong data: a transport
  problem, no rank blamed.
* Ranks whose watchdog timed out while another rank is named by one of the two mismatches above
  only wait for it (``waiting``).
* **Heartbeat monitor**: the watchdog thread (or the abort of a process group) itself hung, in a
  NCCL or CUDA call; the cause when nothing else in the logs is.
* **Monitored barrier**: the ranks rank 0 names did not reach ``monitored_barrier``: the cause.
* **Rank errors**: a NCCL error raised to Python names its rank and the NCCL result; an application
  line ``with rank id: N`` names the rank that raised. After watchdog timeouts they are
  consequences (warning).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from ...catalog.catalog import CatalogError, load
from ...model import Evidence, Finding, Kind, Severity
from .messages import FingerprintMismatch, ParamMismatch, TorchMessages
from ...rankset import ranks_text

__all__ = ["message_findings"]

_CONSEQUENCE = ("remote process exited", "network error", "aborted")


def _fp_text(op: str, seq: int | None, shape: str) -> str:
    return op + (f" [{shape}]" if shape else "") + (f" at sequence number {seq}" if seq is not None else "")


def _global(msgs: list) -> tuple[dict[int, int] | None, bool]:
    """Group rank -> global rank from messages printed under a ``[rankN]:`` prefix; None (identity)
    when every printer's group rank is its global rank (the default group)."""
    g = {m.rank: m.printer for m in msgs if m.printer is not None and m.rank is not None}
    local = any(r != p for r, p in g.items())
    return (g if local else None), local


def _ranks(group_ranks, g: dict[int, int] | None) -> tuple[int, ...]:
    """The global ranks of ``group_ranks`` (those a prefix named, when the group is not the default)."""
    return tuple(sorted(r if g is None else g[r] for r in group_ranks if g is None or r in g))


def _fingerprint_findings(fps: list[FingerprintMismatch]) -> tuple[list[Finding], set[int]]:
    if not fps:
        return [], set()
    g, local = _global(fps)
    of: dict[int, tuple[str, int | None, str]] = {}
    ev: dict[int, Evidence] = {}
    for f in fps:
        if f.rank is not None:
            of.setdefault(f.rank, (f.op, f.seq, f.shape))
            ev.setdefault(f.rank, f.evidence)
        if f.other is not None:
            of.setdefault(f.other, (f.other_op, f.other_seq, f.other_shape))
            ev.setdefault(f.other, f.evidence)
    where = " (ranks of the process group that checked)" if local else ""
    diff = next((f.diff for f in fps if f.diff), "")
    evid = tuple(dict.fromkeys(f.evidence for f in fps))[:3]
    action = ("find why these ranks issue another collective here (a rank-dependent branch, a skipped or extra "
              "collective, other tensor sizes); the traceback of the raising call shows where")
    counts = Counter(of.values())
    odd: list[int] = []
    why = ""
    if len(of) >= 3 and len(counts) >= 2:
        least = min(counts.values())
        minority = [fp for fp, c in counts.items() if c == least]
        if least * 2 < len(of) and len(minority) < len(counts):
            odd = sorted(r for r, fp in of.items() if fp in minority)
            why = f"{len(of) - len(odd)} other ranks agree"
    elif len(of) == 1:
        (r, fp), = of.items()
        f0 = fps[0]
        if len(fps) == 1 or f0.other is None:
            return [Finding(kind=Kind.COLLECTIVE_MISMATCH,
                            summary=(f"rank {r}{where} is running an inconsistent collective: {_fp_text(*fp)} "
                                     "(TORCH_DISTRIBUTED_DEBUG=DETAIL): the other ranks called a different collective"),
                            ranks=_ranks((r,), g), evidence=evid, action=action)], set(_ranks((r,), g))
    elif len(of) == 2:
        pairs = [f for f in fps if f.rank is not None and f.other is not None]
        for f in pairs:
            agree = set(range(f.other or 0)) - {f.rank}
            if agree:
                odd = [f.other or 0]
                why = f"ranks {ranks_text(sorted(agree)).removeprefix('ranks ').removeprefix('rank ')} agree with rank {f.rank}"
                break
        if not odd and pairs:
            f = pairs[0]
            if f.seq is not None and f.other_seq is not None and f.seq != f.other_seq:
                lo, hi = (f.rank, f.other) if f.seq < f.other_seq else (f.other, f.rank)
                assert lo is not None and hi is not None
                gap = abs(f.seq - f.other_seq)
                return [Finding(
                    kind=Kind.COLLECTIVE_MISMATCH,
                    summary=(f"rank {lo}{where} is {gap} collectives behind rank {hi} (TORCH_DISTRIBUTED_DEBUG=DETAIL): "
                             f"rank {lo} runs {_fp_text(*of[lo])} while rank {hi} runs {_fp_text(*of[hi])} "
                             f"(or rank {hi} issued {gap} collectives rank {lo} did not)"),
                    ranks=_ranks((lo,), g), evidence=evid, action=action)], set(_ranks((lo,), g))
    if odd:
        others = sorted(set(of) - set(odd))
        summary = (f"{ranks_text(odd)}{where} {'runs' if len(odd) == 1 else 'run'} another collective than "
                   f"{ranks_text(others)}: " + "; ".join(f"rank {r}: {_fp_text(*of[r])}" for r in (odd + others)[:4])
                   + f" ({why}; TORCH_DISTRIBUTED_DEBUG=DETAIL)" + (f"; PyTorch: {diff}" if diff else ""))
        return [Finding(kind=Kind.COLLECTIVE_MISMATCH, summary=summary, ranks=_ranks(odd, g), evidence=evid,
                        action=action)], set(_ranks(odd, g))
    ranks = sorted(of)
    return [Finding(
        kind=Kind.COLLECTIVE_MISMATCH,
        summary=(f"a collective mismatch (desync): {ranks_text(ranks)}{where} run different collectives ("
                 + "; ".join(f"rank {r}: {_fp_text(*of[r])}" for r in ranks[:4])
                 + "); these messages cannot tell which rank is off, so none is blamed"),
        ranks=(), evidence=evid, severity=Severity.SUSPECT,  # the cause is known, the culprit is not
        action="collect the same error from every rank: the rank every other rank names is the odd one")], set()


def _contradicting_counts(ps: list[ParamMismatch]) -> list[Finding]:
    """DDP's check allgathers every rank's parameter count (``reducer.cpp``
    ``verify_params_across_processes``): a rank's own count and the count gathered for it must
    agree. When they do not (``Rank 1 has 174 params, while rank 1 has inconsistent 0 params``, or
    two ranks each seeing 0 for the other), the allgather delivered wrong data (usually zeros): a
    transport problem (blocked P2P, IOMMU, a broken NCCL/backend), not a model difference. The same
    holds for a failed check that prints two equal counts (``Rank 0 has 0 params, while rank 1 has
    inconsistent 0 params``): TORCH_CHECK fails only on unequal ones (pytorch v2.6.0
    torch/csrc/distributed/c10d/reducer.cpp:2254)."""
    seen: dict[int, set[int]] = defaultdict(set)
    for p in ps:
        if p.rank is not None:
            seen[p.rank].add(p.params)
        if p.other is not None:
            seen[p.other].add(p.other_params)
    bad = {r: sorted(v) for r, v in seen.items() if len(v) > 1}
    equal: list[str] = []
    for p in ps:  # the check fails only on unequal counts (TORCH_CHECK(param_size_for_rank == params.size())):
        # equal printed counts mean the count it compared was not the one it printed
        if p.rank is not None and p.other is not None and p.rank != p.other and p.params == p.other_params:
            equal.append(f"rank {p.rank} failed the check on its {p.params} params against rank {p.other}'s "
                         f"{p.other_params}, an equal count")
    if not bad and not equal:
        return []
    zeros = any(0 in v for v in bad.values()) or any(p.params == 0 == p.other_params for p in ps)
    what = "; ".join([f"rank {r}: {' and '.join(map(str, v))}" for r, v in sorted(bad.items())[:4]] + equal[:2])
    return [Finding(
        kind=Kind.COLLECTIVE_DATA,
        summary=("DDP's parameter-count allgather returned counts that contradict the ranks' own (" + what
                 + f"): the collective delivered wrong data{' (zeros)' if zeros else ''}, so the models may well be the same - "
                 "a communication problem (GPU peer-to-peer / IOMMU, the NCCL or backend build), not a rank"),
        evidence=tuple(dict.fromkeys(p.evidence for p in ps))[:3],
        action=("test the collective alone (nccl-tests all_gather_perf -c 1, or a torch all_gather of known values); "
                "retry with NCCL_P2P_DISABLE=1; check `dmesg | grep -i iommu` and PCIe ACS"))]


_MAX_INFERRED = 100_000
"""Most ranks whose parameter count is inferred from one message (the ranks before the one it names)."""


def _zero_arrived(ps: list[ParamMismatch]) -> list[Finding]:
    """A count of 0 is never a rank's own: DDP refuses a module without parameters before this check
    (pytorch v2.6.0 torch/nn/parallel/distributed.py:704, "DistributedDataParallel is not needed when a module
    doesn't have any parameter that requires a gradient"). When the allgather completed (no watchdog timeout
    of the job's first collective), it delivered no data for that rank: the transport between the ranks, or
    that rank never joined; the message alone cannot tell, so no rank is blamed."""
    zero = sorted({p.other for p in ps if p.other is not None and p.other_params == 0 and p.params != 0})
    if not zero:
        return []
    return [Finding(
        kind=Kind.COLLECTIVE_DATA,
        summary=(f"DDP's parameter-count allgather returned 0 for {ranks_text(zero)}, a count no rank can have (DDP "
                 "refuses a module without parameters before this check) and no watchdog timeout of that first "
                 "collective is in these logs: the exchange between the ranks delivered no data - a "
                 f"communication problem between the nodes (NCCL network settings), or {ranks_text(zero)} never "
                 "joined it"),
        evidence=tuple(dict.fromkeys(p.evidence for p in ps))[:3],
        action=(f"test the collective alone across the nodes (a torch all_gather of known values, nccl-tests "
                "all_gather_perf) with NCCL_DEBUG=INFO; check NCCL_SOCKET_IFNAME / NCCL_IB_HCA / NCCL_IB_GID_INDEX "
                f"on every node; read {ranks_text(zero)}'s log for an earlier failure"))]


def _param_findings(ps: list[ParamMismatch], first_timed_out: bool) -> tuple[list[Finding], set[int]]:
    if not ps:
        return [], set()
    wrong = _contradicting_counts(ps) or ([] if first_timed_out else _zero_arrived(ps))
    if wrong:
        return wrong, set()
    g, local = _global(ps)
    count: dict[int, int] = {}
    for p in ps:
        if p.rank is not None:
            count.setdefault(p.rank, p.params)
        if p.other is not None:
            count.setdefault(p.other, p.other_params)
    # the check walks the ranks in order and stops at the first count unlike its own, so every rank before the
    # one it names has the printer's count (reducer.cpp verify_params_across_processes); many printers name the
    # same rank with the same count: each (rank named, count) once, in message order
    for other, params in dict.fromkeys((p.other, p.params) for p in ps if p.rank is not None and p.other is not None):
        for r in range(min(other, _MAX_INFERRED)):
            count.setdefault(r, params)
    if not count:
        return [], set()
    by = Counter(count.values())
    odd: list[int] = []
    if len(count) >= 3 and len(by) >= 2:
        least = min(by.values())
        if least * 2 < len(count):
            odd = sorted(r for r, n in count.items() if by[n] == least)
    evid = tuple(dict.fromkeys(p.evidence for p in ps))[:3]
    if not odd:  # no majority: a count that arrived as 0 while the first collective timed out: that rank never
        # put its count into the allgather (the others waited for it)
        odd = sorted({p.other for p in ps if p.other is not None and p.other_params == 0 and p.params != 0})
    if not odd:  # the printing rank and the one it names, no third: either may be the odd one
        pairs = ", ".join(f"rank {r} has {n}" for r, n in sorted(count.items())[:4])
        return [Finding(
            kind=Kind.MODEL_MISMATCH, severity=Severity.SUSPECT, evidence=evid,
            summary=("the ranks built different models: DDP expects the same model on every rank"
                     + (" of a process group (group ranks)" if local else "") + f", but {pairs} params; "
                     "the check compares the printing rank with one other, so it cannot say which of them is odd"),
            action=("compare the parameter count of every rank (the same code, config and checkpoint on every "
                    "node, no rank-dependent layers); with 3 or more ranks the odd one is the one that differs"))], set()
    others = sorted(set(count) - set(odd))
    zero = any(count[r] == 0 for r in odd)
    summary = ("the ranks built different models: DDP expects the same model on every rank"
               + (" of a process group (group ranks)" if local else "") + ", but "
               + ", ".join(f"rank {r} has {count[r]} params" for r in odd[:4])
               + (f" while {ranks_text(others)} {'has' if len(others) == 1 else 'have'} "
                  + ", ".join(sorted({str(count[r]) for r in others})) if others else "")
               + (" (0 params: that rank built no model, or never reached DDP's parameter check and its "
                  "allgather returned nothing)" if zero else ""))
    return [Finding(kind=Kind.MODEL_MISMATCH, summary=summary, ranks=_ranks(odd, g), evidence=evid,
                    action=(f"check that {ranks_text(odd)} builds the same model as the others (config, checkpoint, "
                            "rank-dependent layers) and reaches DistributedDataParallel(...); if it is still running, "
                            "py-spy dump it"))], set(_ranks(odd, g))


def _waiting(timeouts: list, culprits: set[int]) -> list[Finding]:
    by: dict[tuple[str, int | None], list] = defaultdict(list)
    for t in timeouts:
        if t.rank not in culprits:
            by[(t.op, t.seq)].append(t)
    out = []
    for (op, seq), ts in sorted(by.items(), key=lambda kv: (kv[0][1] is None, kv[0][1] or 0, kv[0][0])):
        ranks = sorted({t.rank for t in ts})
        out.append(Finding(
            kind=Kind.WAITING,
            summary=(f"{ranks_text(ranks)} only wait{'s' if len(ranks) == 1 else ''} in {op}"
                     + (f" (SeqNum {seq})" if seq is not None else "") + f" for {ranks_text(sorted(culprits))}: "
                     "the watchdog timeout is a consequence"),
            ranks=tuple(ranks), evidence=tuple(t.evidence for t in ts[:2]), severity=Severity.WAITING,
            waits_for=tuple(sorted(culprits))))
    return out


def _monitor_findings(msgs: TorchMessages, blamed: bool) -> list[Finding]:
    if not msgs.monitor:
        return []
    ranks = sorted({m.rank for m in msgs.monitor if m.rank is not None})
    parts = []
    stuck = max((m.seconds or 0 for m in msgs.monitor if m.what == "stuck"), default=0)
    if any(m.what in ("heartbeat", "stuck", "hang") for m in msgs.monitor):
        parts.append("the heartbeat monitor fired" + (f" (watchdog stuck for {stuck:g} s)" if stuck else ""))
    abort = max((m.seconds or 0 for m in msgs.monitor if m.what == "abort"), default=0)
    if abort:
        parts.append(f"the abort of the process group timed out after {abort:g} s")
    who = ranks_text(ranks) if ranks else "a rank"
    return [Finding(
        kind=Kind.WATCHDOG_HUNG,
        summary=(f"the NCCL watchdog of {who} itself hung: " + ", ".join(parts)
                 + ": a NCCL or CUDA call (ncclCommAbort, cudaEventSynchronize/Destroy) blocks the watchdog thread"
                 + (" (after the failure named above: a consequence)" if blamed else "")),
        ranks=tuple(ranks), evidence=tuple(m.evidence for m in msgs.monitor[:3]),
        severity=Severity.WARNING if blamed else Severity.SUSPECT,
        action=("dump the native stacks of these ranks (py-spy dump --native, gdb 'thread apply all bt') to see the "
                "call the watchdog waits in; TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC gives it longer, "
                "TORCH_NCCL_ENABLE_MONITORING=0 turns the monitor off; TORCH_NCCL_DUMP_ON_TIMEOUT=1 keeps the "
                "flight recorder"))]


def _nccl_result(text: str):
    """The catalog's entry for an ``ncclGetErrorString`` text PyTorch quotes (``invalid usage``), or None."""
    try:
        m = load().match(text.strip())
    except CatalogError:  # broken package data (the tests catch it)
        return None
    return m.innermost if m is not None and m.innermost.id.startswith("nccl.result-") else None


def _error_findings(msgs: TorchMessages, blamed: bool, timed_out: bool) -> list[Finding]:
    out = []
    nccl = [e for e in msgs.errors if e.kind == "nccl"]
    by: dict[str, list] = defaultdict(list)
    for e in nccl:
        by[e.what].append(e)
    for what, es in sorted(by.items()):
        ranks = sorted({e.rank for e in es if e.rank is not None})
        consequence = any(c in what for c in _CONSEQUENCE)
        ver = next((e.version for e in es if e.version), "")
        where = next((e.where for e in es if e.where), "")
        if "system error" in what:
            action = ("a socket, InfiniBand or driver call failed: rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "
                      "and read its WARN lines (hangdbg nccl summary)")
        elif "cuda error" in what:
            action = "a CUDA call failed: check the GPUs of these ranks (hangdbg gpu on the kernel log, nvidia-smi)"
        elif consequence:
            action = "a peer died or the network dropped first: find the rank that failed before these"
        else:
            action = "rerun with NCCL_DEBUG=INFO to see the NCCL call that failed"
        result = _nccl_result(what)
        if result is not None and not consequence:
            action = f"{result.action}; {action}"
        out.append(Finding(
            kind=Kind.RANK_ERROR,
            summary=(f"{ranks_text(ranks) if ranks else 'a rank'} failed in NCCL: {what}"
                     + (f" ({result.meaning})" if result is not None else "")
                     + (f" ({where}" + (f", NCCL {ver}" if ver else "") + ")" if where else "")),
            ranks=tuple(ranks), evidence=tuple(e.evidence for e in es[:3]),
            severity=Severity.WARNING if consequence or blamed else Severity.SUSPECT, action=action))
    barrier = [e for e in msgs.errors if e.kind == "barrier"]
    if barrier:
        ranks = sorted({e.rank for e in barrier if e.rank is not None})
        out.append(Finding(
            kind=Kind.BARRIER_MISSING,
            summary=(f"{ranks_text(ranks) if ranks else 'ranks of a sub-group'} did not reach monitored_barrier in time "
                     f"(named by the group's rank 0: {'; '.join(sorted({e.what for e in barrier})[:3])})"),
            ranks=tuple(ranks), evidence=tuple(e.evidence for e in barrier[:3]),
            action="see where these ranks are instead (py-spy dump, their own log): they never reached the barrier"))
    for e in (e for e in msgs.errors if e.kind == "app"):
        out.append(Finding(
            kind=Kind.RANK_ERROR,
            summary=(f"rank {e.rank} raised an exception (application log: {e.what[:160]})"
                     + (" after the watchdog timeouts: maybe their consequence" if timed_out or blamed else "")),
            ranks=(e.rank,) if e.rank is not None else (), evidence=(e.evidence,),
            severity=Severity.WARNING if timed_out or blamed else Severity.SUSPECT,
            action="read the traceback that follows this line in the log of that rank"))
    return out


def message_findings(msgs: TorchMessages, timeouts: list, blamed: bool) -> list[Finding]:
    """Findings of the messages (module docstring), suspects first.

    Args:
        msgs: the messages of one job's logs.
        timeouts: the job's watchdog timeouts (:class:`hangdbg.evidence.torch_log.grammar.Timeout`).
        blamed: another finding already names a suspect (the heartbeat and error findings then
            become warnings).
    """
    fp, fp_odd = _fingerprint_findings(msgs.fingerprints)
    pm, pm_odd = _param_findings(msgs.params, any(t.seq == 1 for t in timeouts))
    culprits = fp_odd | pm_odd
    out = fp + pm
    blamed = blamed or bool(culprits)
    out += _error_findings(msgs, blamed, bool(timeouts))
    blamed = blamed or any(f.severity is Severity.SUSPECT for f in out)
    out += _monitor_findings(msgs, blamed or bool(timeouts))
    if culprits:
        out += _waiting(timeouts, culprits)
    return sorted(out, key=lambda f: f.severity is not Severity.SUSPECT)
