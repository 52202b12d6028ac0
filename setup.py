"""Build the optional C trace function ``tracer._ctrace`` (CPython 3.11 only).

Everything else is declared in pyproject.toml. ``optional=True``: when the extension cannot be
built (no compiler, no Python headers) setuptools prints a warning and installs the package
without it; ``tracer`` then uses its pure-Python ``sys.settrace`` path. On 3.12+ the tracer uses
``sys.monitoring`` and needs no C, so the extension is not even attempted there.

Also the optional C scan of NCCL collective lines ``hangdbg.evidence.nccl._cscan`` (any CPython >= 3.10;
without it ``hangdbg.evidence.nccl.grammar`` uses its pure-Python scan; ``HANGDBG_PURE=1`` forces that).
"""

import platform
import sys

from setuptools import Extension, setup

ext_modules = []
if sys.version_info[:2] == (3, 11) and platform.python_implementation() == "CPython":
    ext_modules.append(Extension("tracer._ctrace", ["tracer/_ctrace.c"], optional=True))
if platform.python_implementation() == "CPython":
    ext_modules.append(Extension("hangdbg.evidence.nccl._cscan", ["hangdbg/evidence/nccl/_cscan.c"], optional=True))

setup(ext_modules=ext_modules)
