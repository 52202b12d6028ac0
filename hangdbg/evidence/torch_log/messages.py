"""PyTorch messages that name a rank outright: collective-fingerprint mismatches, DDP model
mismatches, the NCCL heartbeat monitor, NCCL errors raised to Python and application lines that
name the failing rank.

Formats (PyTorch source):

* ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (``ProcessGroupWrapper.cpp``, ``verify_tensors``): 1.10-1.12
  ``Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective:
  CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[34112], ...)`` (the rank is the one that
  printed it: every rank whose fingerprint differs from any other prints this about itself);
  1.13+ ``... Rank 13 is running collective: CollectiveFingerPrint(SequenceNumber=17OpType=BARRIER),
  but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=45OpType=BARRIER).
  Collectives differ in the following aspects: \\t Sequence number: 17vs 45`` (the first rank
  the printer found different, comparing from rank 0 up; no separator before ``OpType`` when the
  fingerprint holds no tensors).
* DDP construction (``reducer.cpp``, ``verify_params_across_processes``): ``DDP expects same model
  across all ranks, but Rank 3 has 128 params, while rank 0 has inconsistent 0 params.``
* the heartbeat monitor (``ProcessGroupNCCL.cpp``, ``HeartbeatMonitor`` / ``heartbeatMonitor``):
  ``Heartbeat monitor timed out! Process will be terminated after dumping debug info.``,
  ``ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress ...``,
  ``Future for ProcessGroup abort timed out after 600000 ms``, ``... due to ProcessGroupNCCL
  watchdog hang``.
* NCCL errors raised to Python (``NCCLUtils.hpp`` ``C10D_NCCL_CHECK``): ``DistBackendError: NCCL
  error in: .../ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for
  details), NCCL version 2.20.5`` (also ``RuntimeError: NCCL error in: ...`` before 2.0), followed
  since 2.0 by the result and NCCL's last error: ``ncclSystemError: System call (e.g. socket,
  malloc) or external library call failed or device error.`` (a line starting with the result).
* ``monitored_barrier`` (``ProcessGroupGloo.cpp``), printed by the group's rank 0: ``[Rank 0]: Rank 1
  failed to pass monitoredBarrier in 2000 ms`` or, with ``wait_all_ranks=True``, ``[Rank 0]: Ranks
  1, 2 failed to pass monitoredBarrier in 5000 ms``.
* application lines naming the failing rank: InternLM's ``Raise exception from <host> with rank
  id: 3`` (followed by the Python traceback).

The rank of a message printed under a ``[rankN]:`` prefix is that global rank; the ranks *inside*
a fingerprint or DDP message are ranks of the process group that checked (the global ones for
the default group).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...model import Evidence
from ...rankset import MAX_RANKS

__all__ = ["FingerprintMismatch", "ParamMismatch", "MonitorEvent", "RankError", "TorchMessages",
           "HINT", "NEEDLES", "MARKERS", "parse_message"]

MAX_RANK = MAX_RANKS - 1  # hangdbg.rankset: the one bound on ranks read from text
"""Ranks above this are garbage (no job has four million ranks)."""

# --- regular expressions (formats in the module docstring) ---------------------------------------
_FP_NEW = re.compile(
    r"Detected mismatch between collectives on ranks\. Rank (?P<r>\d{1,9}) is running collective: "
    r"(?P<a>CollectiveFingerPrint\(.{0,4000}?\)), but Rank (?P<s>\d{1,9}) is running collective: "
    r"(?P<b>CollectiveFingerPrint\(.{0,4000}?\))(?:\.|\s*$)")
_FP_OLD = re.compile(
    r"Detected mismatch between collectives on ranks\. Rank (?P<r>\d{1,9}) is running inconsistent collective: "
    r"(?P<a>CollectiveFingerPrint\(.{0,4000})")
_FP_SEQ = re.compile(r"SequenceNumber=(\d{1,19})")
_FP_OP = re.compile(r"OpType=(\w{1,64})")
_FP_SHAPE = re.compile(r"TensorShape=\[([^\]]{0,400})\]")
_FP_DIFF = re.compile(r"Collectives differ in the following aspects:\s*(.{0,300})")
_DDP = re.compile(r"DDP expects same model across all ranks, but Rank (?P<r>\d{1,9}) has (?P<n>\d{1,12}) params, "
                  r"while rank (?P<s>\d{1,9}) has inconsistent (?P<m>\d{1,12}) params")
_HEARTBEAT = re.compile(r"Heartbeat monitor timed out")
_STUCK = re.compile(r"watchdog got stuck for (?P<s>\d{1,9}) seconds")
_ABORT_FUTURE = re.compile(r"Future for ProcessGroup abort timed out after (?P<ms>\d{1,12}) ms")
_WATCHDOG_HANG = re.compile(r"due to ProcessGroupNCCL watchdog hang")
_NCCL_ERROR = re.compile(r"(?:(?P<cls>[\w.]{0,80}(?:DistBackendError|RuntimeError|Error)): )?NCCL error in: "
                         r"(?P<where>[^,]{1,300}), (?P<what>[^(,]{1,200}?)\s*(?:\(run with NCCL_DEBUG=INFO for details\))?"
                         r"(?:, NCCL version (?P<ver>[\w.+-]{1,40}))?\s*$")
_NCCL_RESULT = re.compile(r"(?P<res>ncclSystemError|ncclUnhandledCudaError|ncclInternalError|ncclInvalidUsage"
                          r"|ncclRemoteError|ncclInvalidArgument): ")
_RESULT_TEXT = {"ncclSystemError": "unhandled system error", "ncclUnhandledCudaError": "unhandled cuda error",
                "ncclInternalError": "internal error", "ncclInvalidUsage": "invalid usage",
                "ncclInvalidArgument": "invalid argument",
                "ncclRemoteError": "remote process exited or there was a network error"}
"""``ncclGetErrorString`` of each result (NCCL ``src/init.cc``), as the ``NCCL error in:`` line words it."""
_BARRIER = re.compile(r"Ranks? (?P<ranks>[\d, ]{1,20000}) failed to pass monitoredBarrier in (?P<ms>\d{1,12}) ms")
_RANK_ID = re.compile(r"\bwith rank id: (?P<r>\d{1,9})\b")
_TAG_RANK = re.compile(r"\[(?:PG [^\]]{0,80} )?Rank (\d{1,9})\]")

HINT = re.compile(r"Detected mismatch between collectives|DDP expects same model|Heartbeat monitor timed out"
                  r"|watchdog got stuck|ProcessGroup abort timed out|ProcessGroupNCCL watchdog hang|NCCL error in: "
                  r"|with rank id: |failed to pass monitoredBarrier|nccl(?:System|UnhandledCuda|Internal|Remote)Error: |ncclInvalid(?:Usage|Argument): ")
"""A line holding one of these is handed to :func:`parse_message`."""

NEEDLES = (b"Detected mismatch", b"DDP expects", b"Heartbeat monitor", b"watchdog got stuck", b"abort timed out",
           b"watchdog hang", b"NCCL error in", b"rank id: ", b"ncclSystemError", b"ncclUnhandledCudaError",
           b"ncclInternalError", b"ncclRemoteError", b"ncclInvalid", b"monitoredBarrier")
"""Byte strings of the same messages, for the reader's skip-ahead (see ``iter_lines_where``)."""

MARKERS = (b"Detected mismatch between collectives", b"DDP expects same model across all ranks",
           b"Heartbeat monitor timed out", b"watchdog got stuck for", b"Future for ProcessGroup abort timed out",
           b"DistBackendError: NCCL error in", b"failed to pass monitoredBarrier")
"""Strings only PyTorch prints: a file whose head holds one is a torch log (``sniff``)."""


def _rank(s: str | None) -> int | None:
    if s is None:
        return None
    v = int(s)
    return v if v < MAX_RANK else None


@dataclass(frozen=True, slots=True)
class FingerprintMismatch:
    """A ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` collective mismatch.

    Attributes:
        printer: the global rank that printed it (``[rankN]:`` prefix), or None.
        rank: the group rank the message names first (the printer itself).
        op, seq, shape: that rank's collective.
        other: the group rank it found different (None in the 1.10-1.12 format).
        other_op, other_seq, other_shape: that rank's collective.
        diff: PyTorch's ``Collectives differ in the following aspects`` text, or "".
    """

    printer: int | None
    rank: int | None
    op: str
    seq: int | None
    shape: str
    other: int | None
    other_op: str
    other_seq: int | None
    other_shape: str
    diff: str
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class ParamMismatch:
    """``DDP expects same model across all ranks``: ``rank`` (the printer's group rank) has
    ``params`` parameters, ``other`` has ``other_params``."""

    printer: int | None
    rank: int | None
    params: int
    other: int | None
    other_params: int
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class MonitorEvent:
    """The NCCL heartbeat monitor: ``what`` is ``heartbeat`` (monitor fired), ``stuck`` (watchdog
    made no progress for ``seconds``), ``abort`` (abort future timed out after ``seconds``) or
    ``hang`` (the process is terminated for a watchdog hang)."""

    rank: int | None
    what: str
    seconds: float | None
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class RankError:
    """A rank's own error: ``what`` is the NCCL error text (``unhandled system error``) or the
    application's ``with rank id`` line or the monitored barrier's; ``where`` the C++ location or ""."""

    rank: int | None
    kind: str  # "nccl", "barrier" or "app"
    what: str
    where: str
    version: str
    evidence: Evidence


@dataclass
class TorchMessages:
    """What :func:`parse_message` recognised in one job's logs (mutable while scanning)."""

    fingerprints: list[FingerprintMismatch]
    params: list[ParamMismatch]
    monitor: list[MonitorEvent]
    errors: list[RankError]

    def __init__(self) -> None:
        self.fingerprints, self.params, self.monitor, self.errors = [], [], [], []

    def __len__(self) -> int:
        return len(self.fingerprints) + len(self.params) + len(self.monitor) + len(self.errors)


def _fp(text: str) -> tuple[str, int | None, str]:
    op = _FP_OP.search(text)
    seq = _FP_SEQ.search(text)
    shape = _FP_SHAPE.search(text)
    return (op.group(1) if op else "?", int(seq.group(1)) if seq else None, shape.group(1) if shape else "")


def tag_rank(text: str) -> int | None:
    """The rank of the first ``[Rank N]`` / ``[PG ... Rank N]`` tag in ``text``, or None."""
    m = _TAG_RANK.search(text)
    return _rank(m.group(1)) if m else None


def parse_message(text: str, prefix_rank: int | None, ev: Evidence, out: TorchMessages) -> bool:
    """Parse one line (launcher prefixes already stripped) into ``out``.

    Args:
        text: the line's text.
        prefix_rank: the global rank of its ``[rankN]:`` prefix, or None.
        ev: the evidence to record.
        out: where to add what is recognised.

    Returns:
        True when the line was one of the messages of the module docstring.
    """
    if "Detected mismatch" in text:
        m = _FP_NEW.search(text)
        if m:
            op, seq, shape = _fp(m.group("a"))
            oop, oseq, oshape = _fp(m.group("b"))
            d = _FP_DIFF.search(text, m.end())
            out.fingerprints.append(FingerprintMismatch(prefix_rank, _rank(m.group("r")), op, seq, shape,
                                                        _rank(m.group("s")), oop, oseq, oshape,
                                                        d.group(1).strip() if d else "", ev))
            return True
        m = _FP_OLD.search(text)
        if m:
            op, seq, shape = _fp(m.group("a"))
            out.fingerprints.append(FingerprintMismatch(prefix_rank, _rank(m.group("r")), op, seq, shape,
                                                        None, "", None, "", "", ev))
            return True
        return False
    m = _DDP.search(text)
    if m:
        out.params.append(ParamMismatch(prefix_rank, _rank(m.group("r")), int(m.group("n")), _rank(m.group("s")),
                                        int(m.group("m")), ev))
        return True
    rank = prefix_rank if prefix_rank is not None else tag_rank(text)
    for rx, what in ((_STUCK, "stuck"), (_ABORT_FUTURE, "abort"), (_HEARTBEAT, "heartbeat"), (_WATCHDOG_HANG, "hang")):
        m = rx.search(text)
        if m:
            secs = float(m.group("s")) if what == "stuck" else float(m.group("ms")) / 1000 if what == "abort" else None
            out.monitor.append(MonitorEvent(rank, what, secs, ev))
            return True
    m = _NCCL_ERROR.search(text)
    if m:
        out.errors.append(RankError(rank, "nccl", m.group("what").strip(), m.group("where").strip(),
                                    m.group("ver") or "", ev))
        return True
    m = _BARRIER.search(text)
    if m:  # printed by the group's rank 0: another printer means a sub-group, whose ranks are not global
        glob = prefix_rank in (None, 0)
        for r in {int(x) for x in re.findall(r"\d{1,9}", m.group("ranks"))}:
            if r < MAX_RANK:
                out.errors.append(RankError(r if glob else None, "barrier", f"rank {r} failed to pass monitoredBarrier "
                                            f"in {m.group('ms')} ms", "", "", ev))
        return True
    m = _NCCL_RESULT.match(text)  # the line PyTorch 2.x prints after "NCCL error in:" (also alone when that was cut)
    if m:
        out.errors.append(RankError(rank, "nccl", _RESULT_TEXT[m.group("res")], "", "", ev))
        return True
    m = _RANK_ID.search(text)
    if m and re.search(r"exception|error|fail", text, re.IGNORECASE):
        out.errors.append(RankError(_rank(m.group("r")), "app", text[:300].strip(), "", "", ev))
        return True
    return False


def complete(text: str) -> bool:
    """True when ``text`` holds a whole message of this module (for joining hard-wrapped lines)."""
    return bool(_FP_NEW.search(text) or _FP_OLD.search(text) or _DDP.search(text) or _STUCK.search(text)
                or _ABORT_FUTURE.search(text) or (nccl_error_result(text) or "") in _RESULT_TEXT.values())


def nccl_error_result(text: str) -> str | None:
    """The result text of the ``NCCL error in: FILE:LINE, RESULT`` line in ``text`` (``invalid usage``), None without one."""
    m = _NCCL_ERROR.search(text)
    return m.group("what").strip() if m else None


def nccl_error_cut(text: str) -> bool:
    """True when ``text``'s ``NCCL error in:`` line stops inside its result text, with no NCCL version after it: a
    wrap cut it (``..., invalid`` / ``usage, NCCL version 2.6.3``). The result texts are ``ncclGetErrorString``'s
    (NCCL src/init.cc), a known list, so ``invalid`` is a cut ``invalid usage`` or ``invalid argument``."""
    m = _NCCL_ERROR.search(text)
    if m is None or m.group("ver"):
        return False
    what = m.group("what").strip()
    return bool(what) and what not in _RESULT_TEXT.values() and any(v.startswith(what) for v in _RESULT_TEXT.values())
