"""A Hugging Face transformers ``TrainerCallback`` that writes hangdbg's heartbeat after every step.

transformers' hook (``transformers.TrainerCallback.on_step_end(args, state, control, **kwargs)``,
called by ``Trainer`` on every process at the end of each optimizer step, gradient accumulation
included); the step recorded is ``state.global_step``. Importing this module imports transformers
when it is installed; the package ``hangdbg.integrations`` imports neither until this class is used.
"""

from __future__ import annotations

from typing import Any

from ..hooks.heartbeat import heartbeat
from ._base import library_class

__all__ = ["HeartbeatTrainerCallback"]

_TrainerCallback: Any = library_class(("transformers",), "TrainerCallback")


class HeartbeatTrainerCallback(_TrainerCallback):
    """Call :func:`hangdbg.hooks.heartbeat.heartbeat` at the end of every training step.

    Args:
        directory: where the heartbeat files go (default ``$HANGDBG_HEARTBEAT_DIR``, else
            ``./hangdbg-heartbeat``).
        min_interval: seconds between two writes of this rank's file.

    Returns None from the hook, which leaves the trainer's ``control`` as it was.
    """

    def __init__(self, directory: str | None = None, min_interval: float = 1.0) -> None:
        super().__init__()
        self.directory = directory
        self.min_interval = min_interval

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """transformers' hook: one heartbeat, for ``state.global_step`` (None when it has none). Never raises."""
        step = getattr(state, "global_step", None)
        heartbeat(int(step) if isinstance(step, int) else None, self.directory, self.min_interval)
