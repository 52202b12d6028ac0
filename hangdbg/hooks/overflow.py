"""Find the first module whose inputs, outputs, weights (or gradients) hold inf/nan.

A drop-in, faster take on ``transformers.debug_utils.DebugUnderflowOverflow``: same idea and
same report format (``Detected inf/nan during batch_number=N`` / ``Last N forward frames:`` /
``abs min  abs max  metadata``), but the per-module abs min/max are kept *on the device* as 0-d
tensors and copied to the host **once per forward** (one ``torch.stack(...).tolist()`` in a
hook on the root module) instead of several ``.item()`` syncs per tensor per module. The frames
are formatted only when a report is needed (an overflow, or a traced batch).

Extras over the classic: gradient checking (``check_backward=True``, full backward hooks, one
host sync per backward pass), the rank in the report header, a per-rank report file
(``report_dir/overflow-rank{R}.txt``), DDP-wrapped models (``.module`` is unwrapped), a
dedicated exception (:class:`OverflowDetected`), and ``remove()`` / context-manager use.

This module imports torch at its top; ``hangdbg`` itself never imports it eagerly.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Iterable

import torch

from ._private import fresh_temp
from .rankinfo import rank_info

__all__ = [
    "DebugUnderflowOverflow",
    "OverflowDetected",
    "BatchLimitReached",
    "detect_overflow",
    "get_abs_min_max",
]

_PREFIX = "                 "  # 17 spaces: the module-name lines sit right of the number columns
_MAX_DEPTH = 3  # how deep nested tuples/lists/dicts/dataclasses in inputs/outputs are followed


class OverflowDetected(RuntimeError):
    """inf/nan was found; ``str(exc)`` (and ``exc.report``) is the full frames report."""

    def __init__(self, report: str, *, module_name: str | None = None, module_class: str | None = None,
                 ctx: str | None = None, batch_number: int | None = None, phase: str = "forward",
                 rank: int | None = None, report_path: str | None = None):
        super().__init__(report)
        self.report = report
        self.module_name = module_name
        self.module_class = module_class
        self.ctx = ctx
        self.batch_number = batch_number
        self.phase = phase
        self.rank = rank
        self.report_path = report_path


class BatchLimitReached(RuntimeError):
    """Raised after batch ``abort_after_batch_num`` has finished."""


def _rank() -> int | None:
    """This process's rank (torch.distributed when initialised, else the launcher's variables)."""
    return rank_info().rank


def get_abs_min_max(var, ctx: str) -> str:
    """One report line (``abs min abs max ctx``) for a tensor; syncs with the host."""
    lo, hi = torch.aminmax(_as_number_tensor(var.detach()).abs())
    return f"{lo.item():8.2e} {hi.item():8.2e} {ctx}"


def detect_overflow(var: Any, ctx: str) -> bool:
    """Whether ``var`` (a tensor) holds any nan or inf; prints ``{ctx} has nans`` / ``has infs``.

    Non-tensors (and integer/bool tensors, which cannot hold inf/nan) give ``False``. One host
    sync per call.
    """
    if not torch.is_tensor(var) or not (var.is_floating_point() or var.is_complex()) or var.numel() == 0:
        return False
    v = var.detach()
    has_nan, has_inf = torch.stack([torch.isnan(v).any(), torch.isinf(v).any()]).tolist()
    if has_nan:
        print(f"{ctx} has nans")
    if has_inf:
        print(f"{ctx} has infs")
    return bool(has_nan or has_inf)


def _as_number_tensor(t):
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    if t.is_complex():
        return t.abs()
    return t


def _fmt(x: float) -> str:
    return f"{x:8.2e}"


class _Frame:
    """One hook call: which module, and per item either a stats index or a text placeholder."""

    __slots__ = ("name", "cls", "phase", "items", "marker")

    def __init__(self, name: str, cls: str, phase: str):
        self.name = name
        self.cls = cls
        self.phase = phase
        # (ctx, index into the batch's stats list | "None" | "not a tensor" | "empty")
        self.items: list[tuple[str, Any]] = []
        self.marker: str | None = None


class _Resolved:
    """A frame whose numbers are on the host: ``items`` are (ctx, lo, hi) or (ctx, text, None)."""

    __slots__ = ("name", "cls", "phase", "items", "marker")

    def __init__(self) -> None:
        self.name = self.cls = self.phase = ""
        self.items: list[tuple[str, Any, Any]] = []
        self.marker: str | None = None

    def lines(self) -> list[str]:
        out = []
        if self.marker:
            out.append(self.marker)
        tag = "" if self.phase == "forward" else f" ({self.phase})"
        out.append(f"{_PREFIX} {self.name} {self.cls}{tag}")
        for ctx, lo, hi in self.items:
            if hi is None:
                out.append(f"{lo:>17} {ctx}")
            else:
                out.append(f"{_fmt(lo)} {_fmt(hi)} {ctx}")
        return out


def _bad(hi) -> bool:
    return hi is not None and not isinstance(hi, str) and (hi != hi or hi in (float("inf"), float("-inf")))


class DebugUnderflowOverflow:
    """Detect the first inf/nan in weights, inputs, outputs (and optionally gradients).

    Args:
        model: the ``nn.Module`` (a DDP/FSDP-style wrapper with ``.module`` is unwrapped).
        max_frames_to_save: how many frames (module calls) the report shows before the bad one.
        trace_batch_nums: batches (0-indexed) whose every frame is printed; detection is off
            for those batches, as in transformers.
        abort_after_batch_num: raise :class:`BatchLimitReached` once this batch has finished.
        check_backward: also check ``grad_input``/``grad_output`` of every module (full
            backward hooks; modules that modify their inputs in place cannot be hooked so).
        report_dir: also write the report to ``report_dir/overflow-rank{R}.txt`` (written anew,
            links not followed); when it cannot be written (read-only, no permission, full) the
            report goes to stderr with the reason and the detection is raised all the same
            (``report_path`` None): never an ``OSError`` from inside the forward pass.

    Attributes: ``batch_number`` (forward calls of the root finished), ``host_syncs``
    (device-to-host copies made so far: one per forward, one per checked backward),
    ``detected_overflow``, ``last_report``.
    """

    def __init__(self, model, max_frames_to_save: int = 21, trace_batch_nums: Iterable[int] = (),
                 abort_after_batch_num: int | None = None, check_backward: bool = False,
                 report_dir: str | os.PathLike | None = None, stream=None):
        self.wrapper = model
        while hasattr(model, "module") and isinstance(getattr(model, "module"), torch.nn.Module):
            model = model.module
        self.model = model
        self.max_frames_to_save = max_frames_to_save
        self.trace_batch_nums = set(trace_batch_nums or ())
        self.abort_after_batch_num = abort_after_batch_num
        self.check_backward = check_backward
        self.report_dir = Path(report_dir) if report_dir is not None else None
        self.stream = stream
        self.frames: collections.deque[_Resolved] = collections.deque(maxlen=max_frames_to_save)
        self.batch_number = 0
        self.host_syncs = 0
        self.detected_overflow = False
        self.last_report: str | None = None
        self.module_names = {m: name for name, m in model.named_modules()}
        self.module_names[model] = self.module_names.get(model) or ""
        self._depth = 0
        self._reset_batch()
        self._bwd_frames: list[_Frame] = []
        self._bwd_stats: list = []
        self._bwd_queued = False
        self._handles = []
        self._handles.append(model.register_forward_pre_hook(self._root_pre_hook))
        for m in model.modules():
            self._handles.append(m.register_forward_hook(self._forward_hook, with_kwargs=True))
            if check_backward:
                self._handles.append(m.register_full_backward_hook(self._backward_hook))
        # after the per-module hook of the root (registered above), so the root's frame is in
        self._handles.append(model.register_forward_hook(self._root_post_hook, always_call=True))

    # ------------------------------------------------------------------ lifecycle
    def remove(self) -> None:
        """Detach every hook."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def _reset_batch(self) -> None:
        self._frames: list[_Frame] = []
        self._stats: list = []
        self._param_idx: dict[int, int] = {}

    # ------------------------------------------------------------------ recording (device side)
    def _stat(self, t, stats: list) -> Any:
        if t.numel() == 0:
            return "empty"
        lo, hi = torch.aminmax(_as_number_tensor(t.detach()).abs())
        stats.append(lo)
        stats.append(hi)
        return len(stats) - 2

    def _collect(self, var, ctx: str, frame: _Frame, stats: list, depth: int = 0) -> None:
        if torch.is_tensor(var):
            frame.items.append((ctx, self._stat(var, stats)))
        elif var is None:
            frame.items.append((ctx, "None"))
        elif depth >= _MAX_DEPTH:
            frame.items.append((ctx, "not a tensor"))
        elif isinstance(var, (tuple, list)):
            for i, x in enumerate(var):
                self._collect(x, f"{ctx}[{i}]", frame, stats, depth + 1)
        elif isinstance(var, dict):  # includes transformers' ModelOutput (an OrderedDict)
            for k, x in var.items():
                self._collect(x, f"{ctx}[{k}]", frame, stats, depth + 1)
        elif dataclasses.is_dataclass(var) and not isinstance(var, type):
            for f in dataclasses.fields(var):
                self._collect(getattr(var, f.name), f"{ctx}.{f.name}", frame, stats, depth + 1)
        else:
            frame.items.append((ctx, "not a tensor"))

    def _root_pre_hook(self, module, args):
        if self._depth == 0:
            self._reset_batch()
        self._depth += 1

    def _forward_hook(self, module, args, kwargs, output):
        if self._depth == 0:  # a submodule called outside the root's forward: nothing to attach to
            return
        frame = _Frame(self.module_names.get(module, "?"), type(module).__name__, "forward")
        stats = self._stats
        with torch.no_grad():
            for name, p in module.named_parameters(recurse=False):
                idx = self._param_idx.get(id(p))
                if idx is None:
                    idx = self._param_idx[id(p)] = self._stat(p, stats)
                frame.items.append((name, idx))
            for i, x in enumerate(args):
                self._collect(x, f"input[{i}]", frame, stats)
            for k, x in kwargs.items():
                self._collect(x, f"input[{k}]", frame, stats)
            if isinstance(output, tuple):
                for i, x in enumerate(output):
                    self._collect(x, f"output[{i}]", frame, stats)
            elif isinstance(output, dict):
                for k, x in output.items():
                    self._collect(x, f"output[{k}]", frame, stats)
            else:
                self._collect(output, "output", frame, stats)
        self._frames.append(frame)

    def _root_post_hook(self, module, args, output):
        self._depth -= 1
        if self._depth > 0:
            return
        frames, stats = self._frames, self._stats
        self._reset_batch()
        batch = self.batch_number
        self.batch_number += 1
        resolved = self._resolve(frames, stats)
        trace = batch in self.trace_batch_nums
        if trace:
            self._emit("\n".join(
                [f"\n\n{_PREFIX} *** Starting batch number={batch} ***", f"{'abs min':8} {'abs max':8} metadata"]
                + [ln for r in resolved for ln in r.lines()]
                + [f"{_PREFIX} *** Finished batch number={batch} ***\n\n"]))
            self.frames.clear()
        else:
            self._check(resolved, batch, "forward")
        if self.abort_after_batch_num is not None and self.batch_number > self.abort_after_batch_num:
            raise BatchLimitReached(
                f"DebugUnderflowOverflow: aborting after {self.batch_number} batches due to "
                f"`abort_after_batch_num={self.abort_after_batch_num}`")

    # ------------------------------------------------------------------ backward
    def _backward_hook(self, module, grad_input, grad_output):
        if not self._bwd_queued:
            self._bwd_queued = True
            self._bwd_frames, self._bwd_stats = [], []
            torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
        frame = _Frame(self.module_names.get(module, "?"), type(module).__name__, "backward")
        with torch.no_grad():
            for i, g in enumerate(grad_output):
                self._collect(g, f"grad_output[{i}]", frame, self._bwd_stats)
            for i, g in enumerate(grad_input):
                self._collect(g, f"grad_input[{i}]", frame, self._bwd_stats)
        self._bwd_frames.append(frame)

    def _end_backward(self):
        self._bwd_queued = False
        frames, stats = self._bwd_frames, self._bwd_stats
        self._bwd_frames, self._bwd_stats = [], []
        batch = max(self.batch_number - 1, 0)
        resolved = self._resolve(frames, stats)
        if batch not in self.trace_batch_nums:
            self._check(resolved, batch, "backward")

    # ------------------------------------------------------------------ host side
    def _resolve(self, frames: list[_Frame], stats: list) -> list[_Resolved]:
        values = torch.stack(stats).tolist() if stats else []  # THE host sync of this pass
        if stats:
            self.host_syncs += 1
        out = []
        for f in frames:
            r = _Resolved()
            r.name, r.cls, r.phase, r.marker = f.name, f.cls, f.phase, f.marker
            r.items = [(ctx, v, None) if isinstance(v, str) else (ctx, values[v], values[v + 1])
                       for ctx, v in f.items]
            out.append(r)
        return out

    def _check(self, resolved: list[_Resolved], batch: int, phase: str) -> None:
        for i, r in enumerate(resolved):
            bad = next(((ctx, hi) for ctx, _lo, hi in r.items if _bad(hi)), None)
            if bad is None:
                continue
            self.frames.extend(resolved[max(0, i + 1 - self.max_frames_to_save): i + 1])
            self._report(r, bad, batch, phase)
        self.frames.extend(resolved[-self.max_frames_to_save:])

    def _report(self, frame: _Resolved, bad: tuple[str, float], batch: int, phase: str):
        self.detected_overflow = True
        rank = _rank()
        ctx, hi = bad
        kind = "nan" if hi != hi else "inf"
        where = "" if rank is None else f" on rank={rank}"
        frames = list(self.frames)
        lines = [f"Detected inf/nan during batch_number={batch}{where}",
                 f"Last {len(frames)} {phase} frames:",
                 f"{'abs min':8} {'abs max':8} metadata"]
        for r in frames:
            lines.extend(r.lines())
        tag = "" if phase == "forward" else f" ({phase})"
        lines.append("")
        lines.append(f"First inf/nan: {ctx} of {frame.name or '<root>'} {frame.cls}{tag} has {kind}s")
        report = "\n".join(lines)
        self.last_report = report
        self.frames.clear()
        path = self._save(report, rank) if self.report_dir is not None else None
        self._emit("\n" + report + "\n")
        raise OverflowDetected(report, module_name=frame.name, module_class=frame.cls, ctx=ctx,
                               batch_number=batch, phase=phase, rank=rank,
                               report_path=str(path) if path else None)

    def _save(self, report: str, rank: int | None) -> Path | None:
        """Write ``report`` to ``report_dir/overflow-rank{R}.txt`` (owner-only, a new file of a random
        name made with ``O_EXCL | O_NOFOLLOW``, renamed over the old one: nothing planted there is
        followed); None when it cannot be written: then the report goes to stderr with the reason,
        and the detection is raised all the same."""
        assert self.report_dir is not None
        path = self.report_dir / f"overflow-rank{rank if rank is not None else 0}.txt"
        tmp = ""
        try:
            self.report_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp, fd = fresh_temp(str(path))
            with os.fdopen(fd, "w") as f:
                f.write(report + "\n")
            os.replace(tmp, path)
            return path
        except OSError as exc:
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            print(f"hangdbg: the overflow report could not be written to {path} ({exc.strerror or exc}); "
                  f"it follows here:\n{report}", file=sys.stderr, flush=True)
            return None

    def _emit(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)
