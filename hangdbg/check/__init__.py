"""The ``check`` diagnostics job: the rank program (``rank.py``), a node's launcher (``node.py``),
the trials and bisection (``run.py``, ``bisection.py``), blame and verdict; see docs/check.md."""
