"""In-model helpers imported into a training script (printflock, rank logging, capture, breakpoint).

None of them imports torch at import time."""
