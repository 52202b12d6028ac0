"""The watch clock: monotonic seconds that do not advance while the watcher itself was stopped.

``time.monotonic()`` goes on while a process is stopped (SIGSTOP, the cgroup freezer, SLURM
suspend, ``docker pause``); a watcher frozen together with its job would, once resumed, see the
job quiet for the whole pause and declare a stall. :class:`WatchClock` runs one daemon thread that
wakes every :data:`TICK` seconds: a wake-up later than :data:`TICK` + :data:`FROZEN_GAP` seconds
means the process did not run meanwhile, and that excess is taken off the clock (also when it is
read before the thread has woken up again). A watcher only starved of CPU for a while loses that
time too: a stall is then declared later, never earlier.
"""

from __future__ import annotations

import threading
import time

__all__ = ["FROZEN_GAP", "TICK", "WatchClock"]

TICK = 0.25
"""Seconds between two wake-ups of the clock's thread."""

FROZEN_GAP = 1.0
"""Seconds a wake-up may be late before the lateness counts as time the watcher was stopped."""


class WatchClock:
    """Monotonic seconds less the time this process was stopped (:meth:`now`); :meth:`close` ends
    its thread (also a context manager)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frozen = 0.0
        self._tick = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hangdbg-watch-clock", daemon=True)
        self._thread.start()

    @property
    def frozen(self) -> float:
        """Seconds this process was seen stopped so far."""
        with self._lock:
            return self._frozen + self._pending(time.monotonic())

    def now(self) -> float:
        """Monotonic seconds, less the time this process was stopped."""
        with self._lock:
            mono = time.monotonic()
            return mono - self._frozen - self._pending(mono)

    def _pending(self, mono: float) -> float:
        late = mono - self._tick - TICK
        return late if late > FROZEN_GAP else 0.0

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            with self._lock:
                mono = time.monotonic()
                self._frozen += self._pending(mono)
                self._tick = mono

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> "WatchClock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
