"""Callbacks that give ``hangdbg watch --heartbeat`` / ``hangdbg run`` a heartbeat per training step
from the trainers that own the loop, calling :func:`hangdbg.hooks.heartbeat.heartbeat`:

* :class:`~hangdbg.integrations.lightning_callback.HeartbeatCallback`: PyTorch Lightning
  (``on_train_batch_end``, the step ``trainer.global_step``)::

      from hangdbg.integrations import HeartbeatCallback
      trainer = lightning.Trainer(callbacks=[HeartbeatCallback()])

* :class:`~hangdbg.integrations.hf_callback.HeartbeatTrainerCallback`: Hugging Face transformers'
  ``Trainer`` (``on_step_end``, the step ``state.global_step``)::

      from hangdbg.integrations import HeartbeatTrainerCallback
      trainer = transformers.Trainer(..., callbacks=[HeartbeatTrainerCallback()])

The files go to ``$HANGDBG_HEARTBEAT_DIR`` (``hangdbg run`` sets it to ``OUT/heartbeat``), else the
``directory`` given, else ``./hangdbg-heartbeat``. Importing this package imports neither torch nor
the trainers: each class is made on first use (``from hangdbg.integrations import ...``), as a
subclass of the library's callback base class when the library is installed (Lightning checks that
its callbacks are ``Callback`` instances; transformers' ``CallbackHandler`` calls every event
method, which ``TrainerCallback`` provides), else of ``object`` with the same methods.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["HeartbeatCallback", "HeartbeatTrainerCallback"]

_WHERE = {"HeartbeatCallback": ".lightning_callback", "HeartbeatTrainerCallback": ".hf_callback"}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'hangdbg.integrations' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
