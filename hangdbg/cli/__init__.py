"""The command line (the only layer that prints or exits)."""

from .main import main, run

__all__ = ["main", "run"]
