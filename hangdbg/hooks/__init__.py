"""In-model helpers imported into a training script (printflock, rank logging, capture, breakpoint,
the op recorder).

None of them imports torch at import time."""

from .recorder import record_collectives

__all__ = ["record_collectives"]
