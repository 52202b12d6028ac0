"""The ``watch`` mechanics: its plan and result (``plan.py``), the stall decision (``stall.py``),
the log and heartbeat probes and the loop (``probes.py``); the use case is
:func:`hangdbg.api.watch`."""
