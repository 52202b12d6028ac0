"""Reading NCCL RAS reports in JSON (``ncclras -f json``, wire command ``SET FORMAT json``; NCCL >= 2.28.7).

Format: NCCL ``src/ras/client_support.cc`` (``rasDumpCommsToJSON``, ``jsonWriteHeader``,
``jsonStartCommunicator``, ``jsonWriteRankData``, ``jsonWriteMissingRank``, ``jsonWriteFooter``)
and the "JSON Output" section of ``docs/userguide/source/troubleshooting/ras.rst``::

    {"nccl_version": "2.29.1", "cuda_runtime_version": 13000, "cuda_driver_version": 13000,
     "timestamp": "2025-12-19 13:06:53", "communicators_count": 1,
     "communicators": [{"hash": "0xae94423cfbb2ef4a", "secondary_hash": "0x...:0x...", "size": 2,
        "ranks_count": 1, "missing_ranks_count": 1,
        "ranks": [{"rank": 0, "host": "172.16.64.245", "pid": 1524344, "cuda_dev": 0, "nvml_dev": 0,
                   "status": {"init_state": 0, "async_error": 0, "finalize_called": false,
                              "destroy_flag": false, "abort_flag": false},
                   "collective_counts": {"Broadcast": 0, "Reduce": 0, "AllGather": 0, ...}}],
        "missing_ranks": [{"rank": 1, "host": ..., "pid": ..., "cuda_dev": 1, "nvml_dev": 1,
                           "status": {"unresponsive": true, "considered_dead": false}}]}],
     "ras": {"collection_time_sec": 0.000, "timeouts_count": 0}}

The JSON is "a dump of all raw data collected by RAS; the analysis and interpretation is left to
the consumer" (ras.rst). This module does the interpretation the text report does
(``rasClientRunComms``), into the same :class:`~hangdbg.evidence.nccl_ras.grammar.RasReport`, so
one analysis judges both formats:

* a rank's status: ``ABORT`` when ``abort_flag``, ``FINALIZE`` when ``finalize_called`` or
  ``destroy_flag``, ``RUNNING`` when ``init_state`` is 0 (``ncclSuccess``), else ``INIT``; a
  missing rank that answered (``unresponsive`` false) is ``NOCOMM``;
* ``init_state``/``async_error`` other than 0 and 7 (``ncclInProgress``) are errors, named as
  ``ncclErrorToString`` names them;
* per collective, ranks with different counts make an ``opcount`` topic; unlike the text, every
  group lists all its members (JSON lists every rank);
* missing ranks: ``considered_dead`` -> ``dead-processes``, else ``missing-ranks``;
  ``timeouts_count`` > 0 -> a ``TIMEOUT`` warning.

The JSON has no ``Job summary``: ``processes`` is the number of distinct (host, pid) pairs of the
ranks it lists, ``nodes`` of hosts; each communicator is its own group, ``#I-0`` in document order.
Communicator hashes are written as the text writes them (``%016lx``, no ``0x``). Line numbers
point at each rank's ``"rank":`` line of NCCL's pretty-printed output (0 when the JSON is not
laid out that way).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .grammar import MAX_RANK, RasCommGroup, RasCount, RasIssue, RasRank, RasReport, RasText, RasTopic

__all__ = ["sniff_json", "parse_json", "looks_json", "ERRORS"]

_SNIFF = re.compile(rb'^\s*\{\s*"nccl_version"\s*:.*?"communicators(?:_count)?"\s*:', re.S)
_RANK_LINE = re.compile(r'^\s*"rank"\s*:\s*-?\d+\s*,?\s*$')

ERRORS = {1: "Unhandled CUDA error", 2: "System error", 3: "Internal error", 4: "Invalid argument",
          5: "Invalid usage", 6: "Remote process error", 7: "NCCL operation in progress"}
"""``ncclResult_t`` -> the text of ``ncclErrorToString`` (``client_support.cc``)."""
_IN_PROGRESS = 7


def sniff_json(head: bytes) -> bool:
    """True when ``head`` starts a RAS JSON report (``nccl_version`` first, then ``communicators``)."""
    return _SNIFF.match(head[:65536]) is not None


def looks_json(text: str) -> bool:
    """True when ``text`` is meant to be JSON (its first non-blank character is ``{``)."""
    return text.lstrip()[:1] == "{"


def _int(v: Any, lo: int = 0, hi: int = MAX_RANK) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _hash(v: Any) -> str:
    h = _str(v).lower()
    h = h[2:] if h.startswith("0x") else h
    return h.zfill(16) if h and all(c in "0123456789abcdef" for c in h) and len(h) <= 16 else ""


def _rank(r: dict, line: int, value: str = "") -> RasRank | None:
    rank = _int(r.get("rank"))
    if rank is None:
        return None
    pid = _int(r.get("pid"), 1, 1 << 31)
    gpu = _int(r.get("cuda_dev"), 0, 1 << 16)
    nvml = _int(r.get("nvml_dev"), 0, 1 << 16)
    g = "" if gpu is None else (str(gpu) if nvml in (None, gpu) else f"{gpu} (NVML {nvml})")
    host = _str(r.get("host"))
    return RasRank(rank, g, pid, "" if host == "unknown" else host, value, line)


def _sub(d: dict, key: str) -> dict:
    """``d[key]`` when it is an object, else ``{}``."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _status(r: dict) -> str:
    s = _sub(r, "status")
    if s.get("abort_flag") is True:
        return "ABORT"
    if s.get("finalize_called") is True or s.get("destroy_flag") is True:
        return "FINALIZE"
    return "RUNNING" if s.get("init_state") == 0 else "INIT"


def _groups(what: str, members: list[tuple[str, RasRank]]) -> tuple[RasCount, ...]:
    """Ranks grouped by value, most frequent first (``rasValCountsCompareRev``), all listed."""
    by: dict[str, list[RasRank]] = {}
    for value, r in members:
        by.setdefault(value, []).append(r)
    ordered = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return tuple(RasCount(len(rs), what, v, tuple(sorted(rs, key=lambda x: x.rank or 0)), rs[0].line)
                 for v, rs in ordered)


def _comm_topics(comm: dict, ranks: list[tuple[dict, RasRank]], missing: list[tuple[dict, RasRank]],
                 line: int) -> tuple[list[RasTopic], list[RasTopic], int]:
    """(error topics, warning topics, incomplete ranks) of one communicator."""
    errors: list[RasTopic] = []
    warnings: list[RasTopic] = []
    st = [(_sub(m, "status"), r) for m, r in missing]
    nocomm = [r for s, r in st if s.get("unresponsive") is False]  # answered, but not a member
    dead = [r for s, r in st if s.get("unresponsive") is not False and s.get("considered_dead") is True]
    alive = [r for s, r in st if s.get("unresponsive") is not False and s.get("considered_dead") is not True]
    if alive:
        errors.append(RasTopic("missing-ranks", f"Missing communicator data from {len(alive)} rank"
                               f"{'s' if len(alive) > 1 else ''}", number=len(alive), members=tuple(alive), line=line))
    if dead:
        errors.append(RasTopic("dead-processes", f"{len(dead)} rank{'s are' if len(dead) > 1 else ' is'} considered "
                               "dead (unreachable via the RAS network)", number=len(dead), members=tuple(dead), line=line))
    for key, kind, phase in (("init_state", "init-error", "Initialization"), ("async_error", "async-error", "Asynchronous")):
        bad = [(ERRORS.get(v, "Unexpected error"), r) for d, r in ranks for v in [_sub(d, "status").get(key)]
               if isinstance(v, int) and not isinstance(v, bool) and v not in (0, _IN_PROGRESS)]
        if bad:
            errors.append(RasTopic(kind, f"{phase} error{'s' if len(bad) > 1 else ''} on {len(bad)} rank"
                                   f"{'s' if len(bad) > 1 else ''}", number=len(bad), groups=_groups("error", bad),
                                   line=line))
    status = [(_status(d), r) for d, r in ranks] + [("NOCOMM", r) for r in nocomm]
    if len({s for s, _ in status}) > 1:
        warnings.append(RasTopic("status", "Communicator ranks have different status", groups=_groups("status", status),
                                 line=line))
    colls: list[str] = []
    for d, _ in ranks:
        colls += [c for c in _sub(d, "collective_counts") if isinstance(c, str) and c not in colls]
    for coll in colls:
        counts = [(str(v), r) for d, r in ranks for v in [_sub(d, "collective_counts").get(coll)]
                  if _int(v, 0, 1 << 62) is not None]
        if len({v for v, _ in counts}) > 1:
            warnings.append(RasTopic("opcount", f"Communicator ranks have different {coll} operation counts",
                                     collective=coll, groups=_groups("op", counts), line=line))
    return errors, warnings, len(alive) + len(dead)


def _lines(text: str) -> list[int]:
    return [i for i, ln in enumerate(text.splitlines(), 1) if _RANK_LINE.match(ln)]


def _comm(i: int, comm: dict, lines: list[int], at: list[int]
          ) -> tuple[RasCommGroup | None, list[RasIssue], list[RasIssue], list[RasRank]]:
    """One communicator: its table row, error and warning issues, and every rank it lists."""
    h = _hash(comm.get("hash"))
    size = _int(comm.get("size"), 1, MAX_RANK + 1)
    if not h or size is None:
        return None, [], [], []

    def take(key: str) -> list[tuple[dict, RasRank]]:
        out = []
        for d in comm.get(key) or []:
            line = lines[at[0]] if at[0] < len(lines) else 0
            at[0] += 1
            r = _rank(d, line) if isinstance(d, dict) else None
            if r is not None:
                out.append((d, r))
        return out

    ranks, missing = take("ranks"), take("missing_ranks")
    first = ranks[0][1].line if ranks else 0
    errs, warns, incomplete = _comm_topics(comm, ranks, missing, first)
    label, header = f"#{i}-0", f"#{i}-0 ({h})"
    kinds = [k for k, on in (("INCOMPLETE", incomplete), ("ERROR", any(t.kind.endswith("error") for t in errs)),
                             ("MISMATCH", warns)) if on]
    st = {_status(d) for d, _ in ranks}
    status = next((s for s in ("ABORT", "FINALIZE", "RUNNING", "INIT") if s in st), "NOCOMM")
    hosts = {r.node for _, r in ranks}
    row = RasCommGroup(i, 1, len(hosts), "", size, size, status, ",".join(kinds) or "OK", first)
    err_kind = "INCOMPLETE" if incomplete else "ERROR"
    e = [RasIssue("Errors", err_kind, label, h, f"{header} {err_kind}", tuple(errs), first)] if errs else []
    w = [RasIssue("Warnings", "MISMATCH", label, h, f"{header} MISMATCH", tuple(warns), first)] if warns else []
    return row, e, w, [r for _, r in ranks] + [r for _, r in missing]


def parse_json(text: str, path: str = "") -> RasText:
    """One RAS JSON report -> the same :class:`RasText` the text grammar gives (one report, or none).

    Never raises: text that is not JSON, or JSON that is not a RAS report, gives no report and
    every line counted as skipped; communicators or ranks with unusable fields are skipped and
    counted.
    """
    n_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return RasText(path, (), n_lines, n_lines)
    comms = doc.get("communicators") if isinstance(doc, dict) else None
    if not isinstance(comms, list):
        return RasText(path, (), n_lines, n_lines)
    lines, at = _lines(text), [0]
    rows: list[RasCommGroup] = []
    errors: list[RasIssue] = []
    warnings: list[RasIssue] = []
    listed: list[RasRank] = []
    skipped = 0
    for i, c in enumerate(comms):
        row, e, w, rs = _comm(len(rows), c, lines, at) if isinstance(c, dict) else (None, [], [], [])
        if row is None:
            skipped += 1
            continue
        rows.append(row)
        errors += e
        warnings += w
        listed += rs
    ras = doc.get("ras") if isinstance(doc.get("ras"), dict) else {}
    timeouts = _int(ras.get("timeouts_count"))
    if timeouts:
        warnings.insert(0, RasIssue("Warnings", "TIMEOUT", "", "", "TIMEOUT", (RasTopic(
            "timeouts", f"Encountered {timeouts} communication timeout{'s' if timeouts > 1 else ''} while gathering "
            "communicator data", number=timeouts),)))
    procs = {(r.node, r.pid) for r in listed if r.pid is not None}
    rep = RasReport(1, _str(doc.get("nccl_version")), len({n for n, _ in procs}) or None, "", "",
                    len(procs) or None, None, tuple(rows), tuple(errors + warnings),
                    frozenset(p for _, p in procs if p is not None))
    return RasText(path, (rep,), n_lines, skipped)
