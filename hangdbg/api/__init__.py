"""The use cases of hangdbg, as Python functions: what each command does, without the command line.

Each takes a typed plan (or paths), runs the work, writes what the command writes, and returns the
one result the command renders (its console view and its JSON document are both made from it)::

    from hangdbg.api import dump, watch, check, report
    from hangdbg.collect.plan import DumpPlan
    from hangdbg.transport.targets import TargetSpec

    result = dump(DumpPlan(target=TargetSpec(jobid="4242"), out=Path("/scratch/hang")))
    print(result.headline, [(f.kind, f.ranks, f.hosts) for f in result.suspects])

=========================================  ===================================================
function                                   returns
=========================================  ===================================================
:func:`dump` (:class:`DumpPlan`)           :class:`~hangdbg.collect.result.StacksResult`
:func:`analyze` (paths of saved dumps)     :class:`~hangdbg.collect.result.StacksResult`
:func:`watch` (:class:`WatchPlan`)         :class:`~hangdbg.watch.plan.WatchResult`
:func:`check` (:class:`CheckPlan`)         :class:`~hangdbg.check.plan.CheckResult`
:func:`report` (paths)                     :class:`~hangdbg.model.Verdict` (:func:`save_report`
                                           writes its files)
:func:`collect` (target, what to gather)   :class:`~hangdbg.collect.result.CollectResult`
=========================================  ===================================================

Every function takes an optional :class:`~hangdbg.events.Events` (progress, warnings, ``-v``
lines; the default shows nothing) and raises :class:`~hangdbg.errors.HangdbgError` (with its
remedy in ``help``) for what stops it, :class:`~hangdbg.errors.UsageError` for a plan that
cannot be carried out. (The functions live in this package, not as ``hangdbg.check`` and
``hangdbg.report``, which are the packages of the check and of the views; their modules are
private, ``_dump`` and so on, so that ``hangdbg.api.dump`` is always the function.)
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {  # loaded on first use: a command imports only its own use case (and starts faster)
    "dump": "._dump", "analyze": "._dump", "watch": "._watch", "check": "._check", "report": "._report",
    "save_report": "._report", "collect": "._collect", "CheckJob": "..check.node", "CheckPlan": "..check.plan",
    "DumpPlan": "..collect.plan", "Events": "..events", "TargetSpec": "..transport.targets", "WatchPlan": "..watch.plan",
}

_LAZY["run_and_watch"] = "._run"  # hangdbg run: start a job with the debug environment, watch it, report

__all__ = ["dump", "analyze", "watch", "check", "report", "save_report", "collect", "DumpPlan", "WatchPlan",
           "CheckPlan", "CheckJob", "TargetSpec", "Events"]
__all__ += ["run_and_watch"]


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'hangdbg.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
