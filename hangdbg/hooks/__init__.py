"""In-model helpers imported into a training script (printflock, rank logging, capture, breakpoint,
the op recorder, the heartbeat of ``hangdbg watch --heartbeat``).

None of them imports torch at import time."""

from .heartbeat import heartbeat, synced
from .recorder import record_collectives

__all__ = ["heartbeat", "synced", "record_collectives"]
