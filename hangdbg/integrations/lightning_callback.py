"""A PyTorch Lightning callback that writes hangdbg's heartbeat after every training batch.

Lightning's hook (``lightning.pytorch.callbacks.Callback.on_train_batch_end(trainer, pl_module,
outputs, batch, batch_idx)``, the same in ``pytorch_lightning``) runs on every rank after the
batch's optimizer step; the step recorded is ``trainer.global_step`` (the optimizer steps taken so
far), else ``batch_idx``. Importing this module imports Lightning when it is installed (which imports
torch); the package ``hangdbg.integrations`` imports neither until this class is used.
"""

from __future__ import annotations

from typing import Any

from ..hooks.heartbeat import heartbeat
from ._base import library_class

__all__ = ["HeartbeatCallback"]

_Callback: Any = library_class(("lightning.pytorch", "pytorch_lightning"), "Callback")


class HeartbeatCallback(_Callback):
    """Call :func:`hangdbg.hooks.heartbeat.heartbeat` at the end of every training batch.

    Args:
        directory: where the heartbeat files go (default ``$HANGDBG_HEARTBEAT_DIR``, else
            ``./hangdbg-heartbeat``).
        min_interval: seconds between two writes of this rank's file (the steps in between are
            kept in its ring and written with the next write).

    The batch end comes after the step's collectives (DDP's all-reduce runs in backward), so the
    ring's arrival times are the steps' ends, not their sync points: enough for stalls (``watch
    --heartbeat``, ``run``); a straggler report compares the ranks' step ends.
    """

    def __init__(self, directory: str | None = None, min_interval: float = 1.0) -> None:
        super().__init__()
        self.directory = directory
        self.min_interval = min_interval

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                           *args: Any, **kwargs: Any) -> None:
        """Lightning's hook: one heartbeat, for ``trainer.global_step`` (else ``batch_idx``). Never raises."""
        step = getattr(trainer, "global_step", None)
        heartbeat(int(step) if isinstance(step, int) else int(batch_idx), self.directory, self.min_interval)
