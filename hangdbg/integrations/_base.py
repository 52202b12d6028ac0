"""The base class of an integration's callback: the library's, when it is installed."""

from __future__ import annotations

import importlib


def library_class(modules: tuple[str, ...], name: str) -> type:
    """``name`` of the first of ``modules`` that imports, else :class:`object` (the library is not
    installed: the callback still works, duck-typed, with fakes or another trainer)."""
    for module in modules:
        try:
            found: type = getattr(importlib.import_module(module), name)
            return found
        except (ImportError, AttributeError):
            continue
    return object
