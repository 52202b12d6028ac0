"""The version of hangdbg (ground floor: imports nothing)."""

__version__ = "0.2.0"
