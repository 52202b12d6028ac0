"""NCCL RAS in ``dump``: ask the job's RAS service once, keep its answer, judge it with the RAS reader.

When (NCCL sources, 2.24.3-2.30): RAS starts in every NCCL process when ``NCCL_RAS_ENABLE`` is 1
(``NCCL_PARAM(RasEnable, "RAS_ENABLE", 1)``, checked ``== 1`` in ``src/bootstrap.cc``; the value is
read with ``strtoll(str, nullptr, 0)`` by ``ncclLoadParam`` in ``src/misc/param.cc``, an empty
value keeps the default) and listens on ``NCCL_RAS_ADDR`` (``localhost:28028``,
``rasClientInitSocket``). Any process of the job answers for all of them, so one query per dump.

Which jobs: RAS is asked only when a rank looks like an NCCL job: its ``/proc/PID/maps`` maps a
``libnccl`` library (PyTorch's CUDA wheels load ``libnccl.so.2`` from ``nvidia-nccl-cu*``), or its
start environment (``/proc/PID/environ``, proc(5)) sets an ``NCCL_*`` variable (a statically
linked NCCL maps no ``libnccl``; ``TORCH_NCCL_*`` does not count: torchrun's
``local_elastic_agent.py`` sets ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` for every worker, gloo or not).
A JSON answer lists every rank's pid: when none is a rank of the dump, the answer is another job's
(two jobs on a node share ``localhost:28028`` unless each sets its own ``NCCL_RAS_ADDR``) and is
not judged. Not such a job, RAS disabled in every rank's
environment, or a dump of other nodes: no connection at all. A setting that NCCL reads from
``nccl.conf`` is not in ``/proc/PID/environ``; a RAS disabled there shows as a refused connection.

A second query: when the answer shows differing operation counts, RAS is asked once more a
second later: NCCL's guide (``troubleshooting/ras.rst``) says counts that differ in one sample are
normal for a running job and only counts that do not advance "may indicate that the communicator is
stuck". Without that second sample the op-count suspects are demoted to warnings and the dump says
RAS cannot decide.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import replace
from typing import Callable, Sequence

import psutil

from ..evidence.nccl_ras.analysis import analyze_ras
from ..evidence.nccl_ras.facts import RasQuery
from ..evidence.nccl_ras.grammar import RasReport, RasText, parse_lines
from ..evidence.nccl_ras.json_format import looks_json, parse_json
from ..model import Evidence, Finding, Kind, Severity, SourceKind
from ..outdir import OutDir
from ..tools.ras import NOT_LISTENING, RasAddress, RasAnswer, parse_ras_addr, query_ras

__all__ = ["query_job_ras", "ras_plan", "ras_enabled", "with_ras_headline", "REMOTE", "RAS_DIR"]

RAS_DIR = "ras"
"""The answers' folder under the output directory."""

REMOTE = RasQuery("not-queried", "RAS: not queried (the ranks run on other nodes, where RAS listens on their "
                  "localhost: run ncclras there)")

_STRTOLL = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|[1-9][0-9]*|0[0-7]*)")
_NCCL_VAR = re.compile(r"NCCL_")  # not TORCH_NCCL_*: torchrun sets TORCH_NCCL_ASYNC_ERROR_HANDLING for every job


def ras_enabled(value: str | None) -> bool:
    """Whether ``NCCL_RAS_ENABLE=value`` leaves RAS on: unset or empty -> the default 1; else the
    ``strtoll(value, nullptr, 0)`` of ``ncclLoadParam`` must be exactly 1 (``"0"``, ``"no"``, ``"2"``
    turn it off; ``"0x1"`` and ``"1abc"`` keep it on)."""
    if value is None or value == "":
        return True
    m = _STRTOLL.match(value)
    if m is None:
        return False
    sign, digits = m.groups()
    n = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits.startswith("0") else int(digits)
    return (-n if sign == "-" else n) == 1


def _maps_nccl(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return any(b"/libnccl" in line for line in f)
    except OSError:
        return False


def ras_plan(pids: Sequence[int]) -> tuple[list[RasAddress], str]:
    """The RAS addresses of the ranks ``pids`` (most used first), or ``([], why not)``."""
    addrs: Counter[RasAddress] = Counter()
    nccl = disabled = bad = 0
    for pid in pids:
        try:
            env = psutil.Process(pid).environ()
        except (psutil.Error, OSError):
            continue
        if not (any(_NCCL_VAR.match(k) for k in env) or _maps_nccl(pid)):
            continue
        nccl += 1
        if not ras_enabled(env.get("NCCL_RAS_ENABLE")):
            disabled += 1
            continue
        a = parse_ras_addr(env.get("NCCL_RAS_ADDR"))
        if a is None:
            bad += 1
        else:
            addrs[a] += 1
    if addrs:
        return [a for a, _ in addrs.most_common()], ""
    if not nccl:
        return [], "no rank maps libnccl or sets an NCCL_* variable: not an NCCL job"
    if bad:
        return [], f"NCCL_RAS_ADDR of {bad} rank(s) is not HOST:PORT"
    return [], f"NCCL_RAS_ENABLE turns RAS off in the environment of {disabled} rank(s)"


def _save(out: OutDir | None, n: int, a: RasAnswer) -> str:
    if out is None or not a.text:
        return ""
    name = f"{RAS_DIR}/ras-{n}.{'json' if a.format == 'json' else 'txt'}"
    return name if out.save_text(name, a.text) else ""


def _parse(a: RasAnswer, path: str) -> RasText:
    if a.format == "json" or looks_json(a.text):
        return parse_json(a.text, path)
    return parse_lines(enumerate(a.text.splitlines(), 1), path)


def _mismatch(rep: RasReport) -> bool:
    return any(t.kind == "opcount" for i in rep.issues for t in i.topics)


def _one_sample(findings: list[Finding], path: str) -> list[Finding]:
    """Op-count suspects of a single sample -> warnings, and one ``undecided`` finding."""
    out = [replace(f, severity=Severity.WARNING) if f.kind is Kind.RAS_MISMATCH and f.is_suspect
           and "operation" in f.summary else f for f in findings]
    out.append(Finding(Kind.UNDECIDED, "NCCL RAS: the ranks' operation counts differ in one sample only (a second "
                       "query was not possible): RAS cannot tell a stuck communicator from a running one",
                       severity=Severity.WARNING, evidence=(Evidence(path, 1, "one RAS sample"),),
                       action="run ncclras twice, 10 s apart: counts that do not advance name the ranks behind"))
    return out


def _judge(texts: list[RasText], confirmed: bool) -> tuple[Finding, ...]:
    """The RAS reader's findings of the answers (one file, several reports), stamped ``nccl-ras``."""
    joined = RasText(texts[-1].path, tuple(r for t in texts for r in t.reports),
                     sum(t.lines_read for t in texts), sum(t.skipped for t in texts))
    findings, _rows, _facts = analyze_ras([joined])
    if not confirmed and joined.reports and _mismatch(joined.reports[-1]):
        findings = _one_sample(findings, joined.path)
    return tuple(f if f.source is not None else replace(f, source=SourceKind.NCCL_RAS) for f in findings)


def _line(state: str, a: RasAnswer, n: int, spent: float, findings: Sequence[Finding]) -> str:
    where = f"{a.address}, {a.format or 'no'} format via {a.via}, {n} quer{'ies' if n > 1 else 'y'}, {spent:.1f} s"
    if state == "unreadable":
        return f"RAS: answered ({where}) but nothing in it could be read"
    top = next((f for f in findings if f.severity in (Severity.SUSPECT, Severity.WARNING)), None) or \
        (findings[0] if findings else None)
    what = top.summary if top is not None else "no communicator data"
    return f"RAS: answered ({where}): {what[:200]}"


def query_job_ras(pids: Sequence[int], out: OutDir | None, timeout: float, verbose: bool = False,
                  log: Callable[[str], None] | None = None) -> tuple[RasQuery, tuple[Finding, ...]]:
    """Ask RAS about the job of the ranks ``pids`` (on this node), write ``OUT/ras/ras-N.json|txt``.

    Args:
        pids: the ranks' process ids.
        out: the output directory (None: nothing written).
        timeout: seconds for all of it (``dump --timeout``); nothing is waited for when RAS is not
            asked or refuses the connection.
        verbose: ``VERBOSE STATUS``.
        log: ``-v`` lines.

    Returns:
        What was done (:class:`RasQuery`) and the findings (source ``nccl-ras``). Never raises for
        what RAS answers.
    """
    addrs, why = ras_plan(pids)
    if not addrs:
        return RasQuery("not-queried", f"RAS: not queried ({why})"), ()
    start = time.monotonic()
    a = query_ras(addrs[0], max(1.0, timeout / 2), verbose=verbose)
    if log is not None:
        log(f"RAS {addrs[0]} via {a.via}{' (' + ' '.join(a.argv) + ')' if a.argv else ''}: "
            f"{a.error or str(len(a.text)) + ' bytes'}")
    files = [f for f in [_save(out, 1, a)] if f]
    if not a.text.strip():
        reason = f"{a.error}: {NOT_LISTENING}" if a.refused else a.error
        return RasQuery("absent", f"RAS: absent ({reason})", str(a.address), "", a.via, 1, tuple(files),
                        time.monotonic() - start), ()
    texts = [_parse(a, files[0] if files else "ras")]
    confirmed = False
    if texts[0].reports and _mismatch(texts[0].reports[-1]) and timeout - (time.monotonic() - start) > 2:
        time.sleep(1.0)
        b = query_ras(addrs[0], max(1.0, timeout - (time.monotonic() - start)), verbose=verbose)
        name = _save(out, 2, b)
        if b.text.strip():
            second = _parse(b, name or "ras")
            confirmed = bool(second.reports)
            texts.append(second)
        files += [name] if name else []
    n, spent = len(texts), time.monotonic() - start
    garbled = sum(t.skipped for t in texts)
    if not any(t.reports for t in texts):
        return RasQuery("unreadable", _line("unreadable", a, n, spent, ()), str(a.address), a.format, a.via, n,
                        tuple(files), spent, garbled), ()
    listed = frozenset(p for t in texts for r in t.reports for p in r.pids)
    if listed and not listed & set(pids):
        return RasQuery("foreign", f"RAS: answered for another job ({a.address} lists {len(listed)} processes, none of "
                        "them a rank of this dump): give each job its own NCCL_RAS_ADDR", str(a.address), a.format,
                        a.via, n, tuple(files), spent, garbled), ()
    findings = _judge(texts, confirmed)
    return RasQuery("answered", _line("answered", a, n, spent, findings), str(a.address), a.format, a.via, n,
                    tuple(files), spent, garbled), findings


def with_ras_headline(headline: str, ras: Sequence[Finding], stacks: Sequence[Finding] = ()) -> str:
    """``headline`` plus the first RAS suspect whose ranks the ``stacks`` suspects do not already
    name (a communicator-local rank counts as not named)."""
    named = {r for f in stacks if f.is_suspect for r in f.ranks}
    sus = [f for f in ras if f.is_suspect and (not f.ranks or not set(f.ranks) <= named)]
    return f"{headline}; NCCL RAS: {sus[0].summary[:160]}" if sus else headline
